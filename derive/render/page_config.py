"""A pasted config.json on the page: the forms a dense family's config can take and the report's lines for it.

The page reads a pasted config with derive.hf's family tables (templates/html/config.js); its
failures are the lines ``derive report --config pasted.json`` writes for the same text: derive.hf's
ValueError as MESSAGES["config"] (derive.options.models.config_model), or the report's once read.
"""
from __future__ import annotations

import itertools
import json
import tempfile
from functools import lru_cache
from pathlib import Path

from derive.hf import published_config
from derive.hf_families import DENSE
from derive.hf_fields import Family
from derive.model import Model
from derive.options.messages import UsageError, option_line
from derive.options.models import config_model
from derive.options.report import DEFAULT_SEQ, report_fields
from derive.render.page_messages import marked
from derive.report import Request, figures

#: The file a pasted config stands for: the page's messages are the CLI's for --config pasted.json.
PASTED = "pasted.json"
#: A valid config the sentinels below change one field of (llama: every size given).
SENTINEL_CONFIG: dict[str, object] = {
    "model_type": "llama", "_name_or_path": "zqname", "hidden_size": 1022117,
    "num_attention_heads": 1009, "num_key_value_heads": 1009, "num_hidden_layers": 2,
    "intermediate_size": 5, "vocab_size": 9, "max_position_embeddings": 16}
#: A pasted config that fails one way -> (its text or JSON, the request's fields, placeholders); the
#: report's line for it becomes the page's message ({path}: the file's path, but in REPORT_TIME).
CONFIG_SENTINELS: dict[str, tuple[object, dict[str, object], dict[str, str]]] = {
    "not_json": ("zq", {}, {"detail": "Expecting value: line 1 column 1 (char 0)"}),
    "not_object": ([], {}, {}),
    "model_type_missing": ({"hidden_size": 8}, {}, {}),
    "model_type_unknown": ({"model_type": "zq"}, {}, {"value": "'zq'"}),
    "missing": ({k: v for k, v in SENTINEL_CONFIG.items() if k != "vocab_size"}, {},
                {"field": "vocab_size", "model_type": "llama"}),
    "size": ({**SENTINEL_CONFIG, "vocab_size": "zq"}, {}, {"field": "vocab_size", "value": "'zq'"}),
    "flag": ({**SENTINEL_CONFIG, "mlp_bias": "zq"}, {}, {"field": "mlp_bias", "value": "'zq'"}),
    "divides": ({**SENTINEL_CONFIG, "num_key_value_heads": 1013}, {},
                {"field": "num_key_value_heads", "divisor": "1013", "other": "num_attention_heads",
                 "dividend": "1009"}),
    "divides_head": ({**SENTINEL_CONFIG, "hidden_size": 1022118}, {},
                     {"field": "num_attention_heads", "divisor": "1009", "other": "hidden_size",
                      "dividend": "1022118"}),
    # the dense report refuses MoE / MLA layers (deepseek_v2: the CLI has no MoE report for it)
    "dense_only": ({**published_config("deepseek-v2-lite"), "_name_or_path": "zqname"}, {},
                   {"name": "zqname", "model_type": "deepseek_v2"}),
    # a Llama-only profile on another layer
    "layer": ({**SENTINEL_CONFIG, "model_type": "gemma2"}, {"profile": "llama-hf-sdpa"},
              {"profile": "llama-hf-sdpa", "name": "zqname", "model_type": "gemma2"}),
}

#: Failures the report finds after reading the config: its line names no path.
REPORT_TIME = ("dense_only", "layer")


def config_line(path: str, asked: dict[str, object]) -> str:
    """The report's line for ``--config path`` asked ``asked`` (derive.report.Request's fields)."""
    try:
        figures(config_model(path), Request(**asked))
    except UsageError as error:
        return " ".join(str(error).split())
    except ValueError as error:
        return " ".join(option_line(error, report_fields(True)).split())
    raise ValueError(f"config: {path} gave no error")


def config_messages() -> dict[str, str]:
    """The report's line for each CONFIG_SENTINELS failure of ``--config pasted.json``, placeholders marked."""
    messages = {}
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / PASTED)
        for failure, (config, asked, placeholders) in CONFIG_SENTINELS.items():
            text = config if isinstance(config, str) else json.dumps(config)
            Path(path).write_text(text, encoding="utf-8")
            named = placeholders if failure in REPORT_TIME else {**placeholders, "path": path}
            messages[failure] = marked(config_line(path, asked), named)
    return messages


def python_reprs() -> dict[str, object]:
    """How Python's repr() writes what a config's JSON holds, as the page must (the CLI's messages quote it)."""
    def switch(sign: int) -> int:
        return next(power * sign for power in itertools.count() if "e" in repr(10.0 ** (power * sign)))
    return {"true": repr(True), "false": repr(False), "none": repr(None), "inf": repr(float("inf")),
            "exponent_from": switch(1), "exponent_to": switch(-1)}


def config_form(model_type: str, family: Family, flags: tuple[bool, ...], fixed: bool) -> Model:
    """A model of ``family`` at these config flag values and head width (its sizes do not matter)."""
    layout = family.layout_for(dict(zip(family.config_flags(), flags)))
    return Model(f"{model_type}:{form_key(flags, fixed)}", "llama" if layout.gated else "gpt",
                 1, 1, 1, 1, 1, 1, DEFAULT_SEQ, head_dim=1 if fixed else None, layout=layout,
                 sizes=(("s_max", 1),) if family.positions else (), model_type=model_type)


def form_key(flags: tuple[bool, ...], fixed: bool) -> str:
    """The key config.js builds for a config: its flags' values and whether it fixes the head width."""
    return json.dumps([*flags, fixed], separators=(",", ":"))


def config_forms() -> dict[str, dict[str, Model]]:
    """model_type -> form key -> a model of each form a config of a dense family can have."""
    return {model_type: dict(by_key) for model_type, by_key in _config_forms().items()}


@lru_cache(maxsize=1)
def _config_forms() -> dict[str, dict[str, Model]]:
    """:func:`config_forms`, made once (frozen Models from derive.hf's fixed tables); callers get copies."""
    return {model_type: {form_key(flags, fixed): config_form(model_type, family, flags, fixed)
                         for flags in itertools.product((False, True), repeat=len(family.config_flags()))
                         for fixed in ((False, True) if family.head_dim is not None else (False,))}
            for model_type, family in DENSE.items()}


