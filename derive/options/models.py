"""The model a front end's options name: --model (derive.names), --config (derive.hf), a custom shape over either."""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from derive.hf import from_config
from derive.names import named_model
from derive.options.messages import usage
from derive.options.report import CUSTOM_FAMILY, DEFAULT_SEQ, SHAPE_OPTIONS
from derive.presets import Model

#: The sizes a custom shape without --model must give.
REQUIRED_SHAPE = ("layers", "hidden", "heads", "ffn", "vocab")


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


def custom_model(overrides: Mapping[str, int]) -> Model:
    """The custom shape given without --model (CUSTOM_FAMILY; kv heads = heads and s = DEFAULT_SEQ unless given)."""
    missing = [SHAPE_OPTIONS[field] for field in REQUIRED_SHAPE if field not in overrides]
    if missing:
        raise usage("required", option=missing[0])
    heads = overrides["heads"]
    return Model("custom", CUSTOM_FAMILY, overrides["layers"], overrides["hidden"], heads,
                 overrides.get("kv_heads", heads), overrides["ffn"], overrides["vocab"],
                 overrides.get("seq", DEFAULT_SEQ), "command line")


def shaped(base: Model, overrides: Mapping[str, int]) -> Model:
    """``base`` with the custom shape laid over it; a GPT keeps kv heads = heads (UsageError on --kv-heads)."""
    changes = dict(overrides)
    if base.family == "gpt":
        if changes.get("kv_heads", changes.get("heads", base.heads)) != changes.get("heads", base.heads):
            raise usage("no_gqa", name=base.name)
        changes["kv_heads"] = changes.get("heads", base.heads)
    return replace(base, name=f"{base.name} (custom)", **changes)
