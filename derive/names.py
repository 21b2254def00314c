"""The names ``--model`` takes in every command: the presets (dense and MoE) and the shipped configs.

A name resolves in this order: a preset or alias (:mod:`derive.presets`), a
config shipped in derive/configs (:func:`derive.hf.published_names`; a config
of an MoE family derive's MoE tables model is an MoE model).
"""
from __future__ import annotations

from dataclasses import replace

from derive.hf import CONFIGS, load_config, published_config, published_model, published_names
from derive.model import MOE_FAMILIES, Model
from derive.presets import ALIASES, DENSE_MODELS, MODELS, MOE_PRESETS, model, moe_from_config

#: Where a model's sequence length came from when no --seq is given.
SEQ_FROM_CONFIG = "max_position_embeddings"


def model_names() -> dict[str, str]:
    """Every name --model takes -> what it is (preset, alias, MoE preset, shipped config)."""
    names = {name: f"preset ({entry.source or entry.family})" for name, entry in DENSE_MODELS.items()}
    names.update({alias: f"alias of {target}" for alias, target in ALIASES.items()})
    names.update({name: f"MoE preset ({MODELS[name].source})" for name in MOE_PRESETS})
    for name in published_names():
        if name not in names:
            kind = "MoE config" if is_moe(name) else "config"
            names[name] = f"{kind} derive/configs/{name}.json"
    return names


def is_moe(name: str) -> bool:
    """True for an MoE preset or a shipped config of an MoE family (derive.model.MOE_FAMILIES)."""
    if name in MOE_PRESETS:
        return True
    if name in MODELS or name in ALIASES:
        return False
    return name in published_names() and str(published_config(name).get("model_type")) in MOE_FAMILIES


def moe_source(name: str) -> str:
    """What :func:`moe_model` reads for the MoE name ``name``: the preset's name or the shipped config's path."""
    return name if name in MOE_PRESETS else str(CONFIGS / f"{name}.json")


def moe_model(name_or_path: str, seq: int | None = None) -> Model:
    """An MoE model as the MoE report reads it: a preset by name or a config.json by path; ``seq`` overrides s."""
    if name_or_path in MOE_PRESETS:
        preset = MODELS[name_or_path]
        return preset if seq is None else replace(preset, seq=seq)
    if not name_or_path.endswith(".json"):
        raise ValueError(f"unknown MoE model {name_or_path!r} (known: {', '.join(MOE_PRESETS)}, "
                         "or a path to a config.json)")
    config, name = load_config(name_or_path)
    return moe_from_config(config, name, seq)


def named_model(name: str, moe: bool = False) -> tuple[Model, str]:
    """A model by name and where its sequence length comes from; ValueError naming ``model`` if unknown.

    MoE names are refused unless ``moe`` (a command whose accounts take the config's experts); an MoE
    preset is then its config as transformers reads it (no MTP modules) at the preset's s.
    """
    if is_moe(name):
        if not moe:
            raise ValueError(f"model: {name} is a Mixture-of-Experts model, which this command does not take")
        if name in MOE_PRESETS:
            config, _, seq, _ = MOE_PRESETS[name]
            return published_model(config, seq=seq), "preset"
        return published_model(name), SEQ_FROM_CONFIG
    if name in MODELS or name in ALIASES:
        return model(name), "preset"
    if name in published_names():
        return published_model(name), SEQ_FROM_CONFIG
    raise ValueError(f"model: unknown model {name!r} (derive report --list-models prints the names)")
