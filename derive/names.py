"""The names ``--model`` takes in every command: the presets, the MoE presets and the shipped configs.

A name resolves in this order: a dense preset or alias (:mod:`derive.presets`),
an MoE preset (:mod:`derive.moe_presets`), a config shipped in derive/configs
(:func:`derive.hf.published_names`; an MoE family's config is an MoE model).
"""
from __future__ import annotations

from types import ModuleType

from derive.hf import CONFIGS, published_config, published_model, published_names
from derive.presets import ALIASES, MODELS, Model, model
from derive.symbols import s

#: Where a model's sequence length came from when no --seq is given.
SEQ_FROM_CONFIG = "max_position_embeddings"


def _moe_presets() -> ModuleType:
    """derive.moe_presets, loaded when a name is not a dense preset (it reads its configs on import)."""
    from derive import moe_presets

    return moe_presets


def model_names() -> dict[str, str]:
    """Every name --model takes -> what it is (preset, alias, MoE preset, shipped config)."""
    names = {name: f"preset ({entry.source or entry.family})" for name, entry in MODELS.items()}
    names.update({alias: f"alias of {target}" for alias, target in ALIASES.items()})
    names.update({name: f"MoE preset ({entry.source})" for name, entry in _moe_presets().MOE_MODELS.items()})
    for name in published_names():
        if name not in names:
            kind = "MoE config" if is_moe(name) else "config"
            names[name] = f"{kind} derive/configs/{name}.json"
    return names


def is_moe(name: str) -> bool:
    """True for an MoE preset or a shipped config of an MoE family (derive.moe_presets.MOE_FAMILIES)."""
    if name in MODELS or name in ALIASES:
        return False
    if name in _moe_presets().MOE_MODELS:
        return True
    return name in published_names() and str(published_config(name).get("model_type")) in _moe_presets().MOE_FAMILIES


def moe_source(name: str) -> str:
    """What derive.moe_presets.load_moe_model reads for ``name``: the preset's name or the config's path."""
    return name if name in _moe_presets().MOE_MODELS else str(CONFIGS / f"{name}.json")


#: The MoE presets (derive.moe_presets) by the shipped config each reads.
MOE_CONFIGS = {"mixtral-8x7b": "mixtral-8x7b-v0.1", "deepseek-v3": "deepseek-v3", "qwen3-30b-a3b": "qwen3-30b-a3b"}


def named_model(name: str, moe: bool = False) -> tuple[Model, str]:
    """A model by name and where its sequence length comes from; ValueError naming ``model`` if unknown.

    MoE names are refused unless ``moe`` (a command whose accounts take the config's experts).
    """
    if name in MODELS or name in ALIASES:
        return model(name), "preset"
    if is_moe(name):
        if not moe:
            raise ValueError(f"model: {name} is a Mixture-of-Experts model, which this command does not take")
        if name in MOE_CONFIGS:
            return published_model(MOE_CONFIGS[name], seq=_moe_presets().MOE_MODELS[name].values[s]), "preset"
        return published_model(name), SEQ_FROM_CONFIG
    if name in published_names():
        return published_model(name), SEQ_FROM_CONFIG
    raise ValueError(f"model: unknown model {name!r} (derive report --list-models prints the names)")
