"""The model a front end's --model or --config names: derive.names and derive.hf, their errors as option lines."""
from __future__ import annotations

from derive.hf import from_config
from derive.names import named_model
from derive.options.messages import usage
from derive.presets import Model


def config_model(path: str) -> Model:
    """A model read from a config.json; its errors name --config and the config's field."""
    try:
        return from_config(path)
    except ValueError as error:
        raise usage("config", path=path, error=error) from None


def named(name: str, moe: bool = False) -> tuple[Model, str]:
    """A model by --model name (derive.names; ``moe``: MoE presets too) and where its s comes from."""
    try:
        return named_model(name, moe=moe)
    except ValueError as error:
        raise usage("model", why=str(error).partition(": ")[2]) from None
