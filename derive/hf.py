"""``from_config``: a derive Model from a Hugging Face ``config.json``, its table generated from the config's fields.

Each family (``model_type``, derive.hf_families) says which config fields switch which rows of
``derive.architectures.decoder.Layout``, as transformers 5.23 builds the model
(``transformers/models/<family>/modeling_<family>.py``); the sizes become the
values of derive's symbols (read by derive.hf_fields), and the settings transformers
applies beyond the shape (windows, partial rotary, layer types, soft-capping, dropout)
come from derive.hf_settings. A field the config omits takes the default of
transformers' config class for that family; a missing size or an inconsistent
field is a ValueError naming the config field.

Published configs ship with the package (``derive/configs/*.json``, provenance
in ``derive/configs/SOURCES.md``): ``published_config(name)``, ``published_names()``.
"""
from __future__ import annotations

import json
import os
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from derive.hf_families import FAMILIES
from derive.hf_fields import Fields, Shape
from derive.hf_settings import (SLIDING, dropout, glu_limit, layer_types, rotary_width, sliding_window, softcapping,
                                unmodelled)
from derive.inputs import choose, read_json
from derive.model import Model


# ---- reading configs ----

def load_config(config: Mapping[str, Any] | str | os.PathLike) -> tuple[dict[str, Any], str]:
    """(parsed config, a default name): a mapping as given, or a path to a config.json."""
    if isinstance(config, Mapping):
        return dict(config), str(config.get("_name_or_path") or config.get("model_type") or "config")
    path = Path(config)
    parsed = read_json("config", path)
    if not isinstance(parsed, dict):
        raise ValueError(f"config: {str(path)!r} holds no JSON object")
    stem = path.parent.name if path.stem == "config" else path.stem
    return parsed, str(parsed.get("_name_or_path") or stem)


def read_shape(config: Mapping[str, Any]) -> Shape:
    """The layout and sizes of a parsed config; ValueError naming an unknown model_type or a bad field."""
    model_type = config.get("model_type")
    if model_type is None:
        raise ValueError(f"model_type: missing from the config (known: {', '.join(FAMILIES)})")
    return FAMILIES[choose("model_type", model_type, FAMILIES)](Fields(config))



def from_config(config: Mapping[str, Any] | str | os.PathLike, *, name: str | None = None,
                seq: int | None = None, source: str = "") -> Model:
    """A :class:`derive.model.Model` whose parameter table is generated from ``config``'s fields.

    ``seq`` overrides the context length (max_position_embeddings / n_positions).
    """
    parsed, default_name = load_config(config)
    shape = read_shape(parsed)
    if seq is not None:
        shape["seq"] = seq
    window = sliding_window(parsed)
    if window is not None:
        shape["sizes"] = {**shape.get("sizes", {}), "w": window}
    shape["layout"] = replace(shape["layout"], dropout=dropout(parsed),
                              unmodelled=unmodelled(parsed), glu_limit=glu_limit(parsed))
    types = layer_types(parsed, shape["layers"])
    if types is not None:
        shape["sizes"] = {**shape.get("sizes", {}), "L_w": types.count(SLIDING)}
        shape["layout"] = replace(shape["layout"], **softcapping(parsed))
    rotary = rotary_width(parsed, shape.get("head_dim") or shape["hidden"] // shape["heads"])
    if rotary is not None:
        shape["sizes"] = {**shape.get("sizes", {}), "k_rope": rotary}
    shape["sizes"] = tuple(sorted(shape.get("sizes", {}).items()))
    return Model(name=name or default_name, family="llama" if shape["layout"].gated else "gpt",
                 source=source or f"config.json of {default_name}",
                 model_type=parsed["model_type"], **shape)


# ---- the published configs shipped with derive ----

CONFIGS = resources.files("derive") / "configs"


def published_names() -> tuple[str, ...]:
    """The published configs shipped in derive/configs, by file stem, sorted."""
    return tuple(sorted(p.name.removesuffix(".json") for p in CONFIGS.iterdir()
                        if p.name.endswith(".json")))


def published_config(name: str) -> dict[str, Any]:
    """One shipped config.json, parsed; ValueError listing the names if unknown."""
    choose("config", name, published_names())
    return json.loads((CONFIGS / f"{name}.json").read_text())


def published_model(name: str, seq: int | None = None):
    """A shipped config as a Model named by its file stem."""
    return from_config(published_config(name), name=name, seq=seq,
                       source=f"derive/configs/{name}.json (see derive/configs/SOURCES.md)")
