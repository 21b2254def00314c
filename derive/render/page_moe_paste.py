"""A pasted MoE config.json on the page: derive.hf's MoE readers as data, the forms they reach, the CLI's lines.

``derive report --config pasted.json`` reads a config of an MoE family the MoE report takes
(:data:`derive.model.MOE_FAMILIES`) with derive.hf_families' readers (``mixtral``, ``qwen2_moe``,
``qwen3_moe``, ``_deepseek``) and :func:`derive.presets.moe_from_config`; templates/html/config.js
applies :data:`MOE_READS` in the same order, each refusal the CLI's line (:data:`MOE_SENTINELS`,
found by running the CLI). The MoE report's expressions depend on the model's Layout only, which a
config's switches (:data:`MOE_READS` ``switches``) decide: :func:`moe_paste_forms` maps each
combination of them to the named MoE model (derive.render.page_models.moe_forms) with that Layout, or to a
form of its own where it is one switch away from one (:func:`pasted_moe_layouts`, as
derive.render.page_comm.pasted_forms adds the dense pastes' ledgers).
"""
from __future__ import annotations

import itertools
import json
import tempfile
from functools import lru_cache
from pathlib import Path

from derive.architectures.decoder import Layout
from derive.hf import published_config, published_names
from derive.hf_families import MAX_MOE_LAYERS, MOE_BASES, SPARSE_STEP
from derive.model import MOE_FAMILIES
from derive.names import moe_model
from derive.presets import moe_from_config
from derive.render.page_config import PASTED
from derive.render.page_messages import marked

#: How each MoE family's config is read beyond its dense table (derive.hf_families, derive.presets.moe_from_config).
#: ``base``: the dense table (MOE_BASES; None: DeepSeek's own reads, ``deepseek``); ``experts``: the expert-count
#: fields, the first given; ``expert_width``: f_E's field (None: the dense ffn); ``shared_width``: f_S's field;
#: ``sparse``: Qwen's decoder_sparse_step / mlp_only_layers; ``switches``: (config field, how read, default) of each
#: config value that changes the Layout: "flag" (a true/false field), "truthy" (Python's truth of the value,
#: the default when absent), "given" (not null), "positive" (a count above 0).
MOE_READS: dict[str, dict[str, object]] = {
    "mixtral": {"base": True, "experts": ["num_local_experts"], "expert_width": None, "shared_width": None,
                "sparse": False, "switches": []},
    "qwen2_moe": {"base": True, "experts": ["num_experts", "num_local_experts"],
                  "expert_width": "moe_intermediate_size", "shared_width": "shared_expert_intermediate_size",
                  "sparse": True, "switches": [["qkv_bias", "flag", True], ["norm_topk_prob", "truthy", False]]},
    "qwen3_moe": {"base": True, "experts": ["num_experts", "num_local_experts"],
                  "expert_width": "moe_intermediate_size", "shared_width": None, "sparse": True,
                  "switches": [["attention_bias", "flag", False], ["norm_topk_prob", "truthy", False]]},
    "deepseek_v3": {"base": False, "experts": ["n_routed_experts", "num_local_experts"],
                    "expert_width": "moe_intermediate_size", "shared_width": "n_shared_experts", "sparse": False,
                    "switches": [["q_lora_rank", "given", True], ["attention_bias", "flag", False],
                                 ["n_shared_experts", "positive", True], ["num_nextn_predict_layers", "positive", True],
                                 ["norm_topk_prob", "truthy", True]]},
}
#: The config fields every MoE reader names (derive.hf_families, derive.presets.moe_from_config): role -> field.
MOE_FIELDS: dict[str, str] = {
    "top_k": "num_experts_per_tok", "step": "decoder_sparse_step", "dense_layers": "mlp_only_layers",
    "tied": "tie_word_embeddings", "bias": "attention_bias", "first_moe": "first_k_dense_replace", "groups": "n_group",
    "group_top_k": "topk_group", "mtp": "num_nextn_predict_layers",
    # DeepSeek's reads (derive.hf_families._deepseek), in its order
    "hidden": "hidden_size", "heads": "num_attention_heads", "layers": "num_hidden_layers",
    "q_rank": "q_lora_rank", "r_kv": "kv_lora_rank", "k_nope": "qk_nope_head_dim", "k_rope": "qk_rope_head_dim",
    "k_v": "v_head_dim", "ffn": "intermediate_size", "vocab": "vocab_size", "seq": "max_position_embeddings",
}


def _template(model_type: str) -> dict[str, object]:
    """The first shipped config of ``model_type`` (the sentinels and forms change its fields)."""
    return next(config for config in map(published_config, published_names())
                if config.get("model_type") == model_type)


def _switched(config: dict[str, object], switches: list[list[object]], values: tuple[bool, ...]) -> dict[str, object]:
    """``config`` with each switch set to ``values`` (a given field kept or nulled, a count 1 or 0)."""
    out = dict(config)
    for (field, how, _), value in zip(switches, values):
        out[field] = (value if how in ("flag", "truthy") else out.get(field) if value
                      else None if how == "given" else int(value))
    return out


def _switch_layouts(model_type: str) -> dict[tuple[bool, ...], Layout]:
    """Each combination of ``model_type``'s switches -> the Layout moe_from_config reads from a config with them."""
    switches = MOE_READS[model_type]["switches"]
    return {values: moe_from_config(_switched(_template(model_type), switches, values)).layout
            for values in itertools.product((False, True), repeat=len(switches))}


def _key(values: tuple[bool, ...]) -> str:
    """The key config.js builds from a config's switches."""
    return json.dumps(values, separators=(",", ":"))


def pasted_moe_layouts(named: dict[str, Layout]) -> dict[str, Layout]:
    """The forms a pasted config adds (name -> Layout): every combination of switches one switch away from a
    combination whose Layout a named MoE form (``named``: form -> Layout) has. Farther ones are left out (each form
    prints the MoE report's expressions at every layout variant, ~15 KB of page): the page says so."""
    out: dict[str, Layout] = {}
    known = set(named.values())
    for model_type in MOE_FAMILIES:
        layouts = _switch_layouts(model_type)
        near = [values for values, layout in layouts.items() if layout in known]
        for values, layout in layouts.items():
            if layout not in known and any(sum(a != b for a, b in zip(values, other)) == 1 for other in near):
                known.add(layout)
                out[f"{model_type}:{''.join(str(int(value)) for value in values)}"] = layout  # its switches as bits
    return out


def moe_paste_forms(layouts: dict[str, Layout]) -> dict[str, dict[str, str]]:
    """model_type -> JSON key of the switches' values -> the MoE form with that Layout (``layouts``: form -> Layout).

    A combination whose Layout no form has is left out: the page says it does not compute it.
    """
    by_layout: dict[Layout, str] = {}
    for form, layout in layouts.items():
        by_layout.setdefault(layout, form)
    return {model_type: {_key(values): by_layout[layout] for values, layout in _switch_layouts(model_type).items()
                         if layout in by_layout}
            for model_type in MOE_FAMILIES}


#: A config of one MoE family failing one way -> (model_type, the fields it changes, the placeholders of its line).
MOE_SENTINELS: dict[str, tuple[str, dict[str, object], dict[str, str]]] = {
    "missing": ("mixtral", {"num_local_experts": None}, {"field": "num_local_experts", "model_type": "mixtral"}),
    "size": ("mixtral", {"num_local_experts": "zq"}, {"field": "num_local_experts", "value": "'zq'"}),
    "flag": ("mixtral", {"tie_word_embeddings": "zq"}, {"field": "tie_word_embeddings", "value": "'zq'"}),
    "divides": ("mixtral", {"num_key_value_heads": 7}, {"field": "num_key_value_heads", "divisor": "7",
                                                         "other": "num_attention_heads", "dividend": "32"}),
    "divides_head": ("mixtral", {"hidden_size": 4099, "head_dim": None},
                     {"field": "num_attention_heads", "divisor": "32", "other": "hidden_size", "dividend": "4099"}),
    "top_k": ("mixtral", {"num_local_experts": 7, "num_experts_per_tok": 13}, {"top_k": "13", "experts": "7"}),
    "layers": ("mixtral", {"num_hidden_layers": MAX_MOE_LAYERS + 3}, {"layers": str(MAX_MOE_LAYERS + 3)}),
    "tied": ("mixtral", {"tie_word_embeddings": True}, {}),
    "dense_layers_list": ("qwen2_moe", {"num_hidden_layers": 23, "mlp_only_layers": "zq"},
                          {"layers": "23", "value": "'zq'"}),
    "dense_layers": ("qwen2_moe", {"decoder_sparse_step": 2}, {}),
    "first_moe": ("deepseek_v3", {"num_hidden_layers": 59, "first_k_dense_replace": "zq"},
                  {"layers": "59", "value": "'zq'"}),
    "shared": ("deepseek_v3", {"n_shared_experts": "zq"}, {"value": "'zq'"}),
    "positive": ("deepseek_v3", {"n_group": "zq"}, {"field": "n_group", "value": "'zq'"}),
}


def moe_paste_messages() -> dict[str, str]:
    """The CLI's line (``derive report --config pasted.json``) for each MOE_SENTINELS failure, placeholders marked."""
    return dict(_moe_paste_messages())


@lru_cache(maxsize=1)
def _moe_paste_messages() -> dict[str, str]:
    """:func:`moe_paste_messages`, found once: the MoE report's reading of each sentinel (derive.names.moe_model), its
    ValueError as derive.cli._moe_report writes it for --config (tests/test_web_pasted_moe.py holds them to the CLI)."""
    messages = {}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / PASTED
        for failure, (model_type, changes, placeholders) in MOE_SENTINELS.items():
            config = {key: value for key, value in {**_template(model_type), **changes}.items() if value is not None}
            path.write_text(json.dumps(config), encoding="utf-8")
            try:
                moe_model(str(path))
            except ValueError as error:
                messages[failure] = marked(" ".join(f"--config: {error}".split()), placeholders)
                continue
            raise ValueError(f"config: the {failure} sentinel gave no error")
    return messages


#: The page's own line (not the CLI's) for a pasted MoE config whose Layout no form has.
NO_FORM = ("derive report --config reads this config, but the page holds the MoE report's expressions only for "
           "the layouts of its named MoE models ({names}) and of configs one switch ({switches}) away from "
           "them; run the command for its figures")


def moe_paste_data(layouts: dict[str, object]) -> dict[str, object]:
    """What config.js needs for a pasted MoE config: the reads, the forms, the CLI's lines, MAX_MOE_LAYERS."""
    return {"reads": {model_type: {**MOE_READS[model_type],
                                   "base": MOE_BASES[model_type].data() if MOE_READS[model_type]["base"] else None}
                      for model_type in MOE_FAMILIES},
            "fields": MOE_FIELDS, "forms": moe_paste_forms(layouts), "messages": moe_paste_messages(),
            "max_layers": MAX_MOE_LAYERS, "sparse_step": SPARSE_STEP,
            "no_form": NO_FORM.format(names=", ".join(form for form in layouts if ":" not in form),
                                      switches=", ".join(dict.fromkeys(field for read in MOE_READS.values()
                                                                       for field, _, _ in read["switches"])))}
