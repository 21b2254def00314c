"""The page's models by name: every preset, alias, MoE preset and shipped config ``--model`` takes.

Names resolve as :mod:`derive.names` resolves them. A dense shipped config joins the
presets (its sizes read by derive.hf); an MoE name runs the MoE report
(:mod:`derive.report`'s MoE rows), whose expressions the page gets as JavaScript printed once per
distinct expression, over every choice that changes their form (the model's layout, t > 1,
p = 1, the MoE profile, the precision); a name the report refuses gets the CLI's line.
"""
from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Callable

import sympy as sp

from derive.architectures.saved import MOE_PROFILES
from derive.evaluation import by_name
from derive.model import Model
from derive.names import is_moe, model_names, moe_model, moe_source, named_model
from derive.options.messages import template
from derive.options.report import DENSE_ONLY, FIELD_OPTIONS, MOE_PARALLEL
from derive.presets import ALIASES, MODELS
from derive.architectures.decoder import Layout
from derive.render.page_messages import dense_refusal, moe_line
from derive.render.page_moe_paste import pasted_moe_layouts
from derive.report import MOE_DEFAULT_PROFILE, MOE_DIVIDES, MOE_PRECISIONS, MoELayout, moe_expressions
from derive.symbols import E, L, L_E, a, b, d, e, g, k_E, p, s, t, t_E

#: The MoE report's figures on the page, by its --json key (derive.report.moe_figures).
MOE_LABELS: dict[str, str] = {
    "parameters": "Parameters",
    "active_parameters": "Parameters active per token",
    "mtp_parameters": "Multi-token prediction modules",
    "stage_parameters": "Parameters per GPU, first pipeline stage",
    "stage_expert_parameters": "Routed-expert parameters per GPU",
    "expert_data_parallel": "Expert data-parallel ranks (EDP)",
    "state_bytes": "States per GPU (distributed optimizer)",
    "state_bytes_plain": "States per GPU without sharding",
    "fp8_weight_bytes": "FP8 weight copies and scales per GPU",
    "activation_bytes": "Activations per GPU, first stage",
    "activation_bytes_fp8": "Activations per GPU, linear inputs in FP8",
    "layer_saved_bytes": "Saved per MoE layer (bf16)",
    "layer_saved_bytes_fp8": "Saved per MoE layer (FP8)",
    "flops_per_token": "FLOPs per token",
    "megatron_flops_per_token": "FLOPs per token, Megatron's count",
}
#: Each MoE figure's unit (the page's formats).
MOE_UNITS: dict[str, str] = {
    **{key: "parameters" for key in MOE_LABELS if key.endswith("parameters")},
    **{key: "B" for key in MOE_LABELS if "bytes" in key},
    "expert_data_parallel": "GPUs", "flops_per_token": "FLOP/token", "megatron_flops_per_token": "FLOP/token",
}
#: The layout symbols the MoE report takes, by the CLI option that sets them (defaults 1).
MOE_LAYOUT: dict[str, sp.Symbol] = {"tp": t, "ep": e, "etp": t_E, "pp": p, "dp": d, "micro-batch": b}
#: The model's facts shown at the top: what it counts -> its symbol.
FACTS: dict[str, sp.Symbol] = {"layers": L, "moe_layers": L_E, "experts": E, "active_experts": k_E}
#: The MoE profile's option.
MOE_PROFILE = "moe-profile"



def page_names() -> dict[str, str]:
    """Every name --model takes -> 'dense', 'moe' or 'refused' (the dense report's refusal)."""
    return dict(_page_names())


@lru_cache(maxsize=1)
def _page_names() -> dict[str, str]:
    """:func:`page_names`, found once (the names and configs ship with the package)."""
    kinds = {}
    for name in model_names():
        if is_moe(name):
            kinds[name] = "moe"
        elif name in MODELS or name in ALIASES or named_model(name)[0].layout.dense:
            kinds[name] = "dense"
        else:
            kinds[name] = "refused"
    return kinds


def dense_configs() -> dict[str, Model]:
    """The dense shipped configs by name, read as ``--model NAME`` reads them (s from the config)."""
    return dict(_dense_configs())


@lru_cache(maxsize=1)
def _dense_configs() -> dict[str, Model]:
    """:func:`dense_configs`, read once (frozen Models)."""
    return {name: named_model(name)[0] for name, kind in _page_names().items()
            if kind == "dense" and name not in MODELS and name not in ALIASES}


@lru_cache(maxsize=1)
def moe_models() -> dict[str, Model]:
    """The MoE names by name, each as the MoE report loads it."""
    return {name: moe_model(moe_source(name)) for name, kind in page_names().items() if kind == "moe"}


def moe_forms() -> dict[str, str]:
    """MoE name -> the name of its form: the first name with the same layout."""
    first: dict[object, str] = {}
    return {name: first.setdefault(m.layout, name) for name, m in moe_models().items()}


@lru_cache(maxsize=1)
def moe_layouts() -> dict[str, Layout]:
    """Each MoE form's Layout: the named forms', then those a pasted config one switch away from one reaches
    (derive.render.page_moe_paste.pasted_moe_layouts)."""
    named = {form: moe_models()[form].layout for form in dict.fromkeys(moe_forms().values())}
    return {**named, **pasted_moe_layouts(named)}


def moe_variants() -> list[tuple[str, bool, bool, str, str]]:
    """(form, t > 1, p = 1, MoE profile, precision) of every combination the MoE report takes."""
    forms = moe_layouts()
    return [(form, parallel, single, profile, precision)
            for form, parallel, single, profile, precision
            in itertools.product(forms, (False, True), (False, True), MOE_PROFILES, MOE_PRECISIONS)
            if precision == "bf16" or profile == MOE_DEFAULT_PROFILE]


def moe_choices() -> list[str]:
    """The choices besides the form that change an MoE expression (t > 1, p = 1, profile, precision), in
    moe_variants' order: each form's variants of a formula are a list in this order."""
    first = next(iter(moe_layouts()))
    return ["|".join((str(parallel).lower(), str(single).lower(), profile, precision))
            for form, parallel, single, profile, precision in moe_variants() if form == first]


def moe_formulas(printed: Callable[[sp.Expr], dict[str, object]]) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """(the MoE report's figures, the printed expressions (function, TeX, args)): each figure's variants by form, a
    list in moe_choices' order of indices into the second (null where the report has no such figure)."""
    layouts, choices = moe_layouts(), moe_choices()
    formulas = {key: {"key": key, "row": "moe:" + key, "unit": MOE_UNITS[key], "label": label,
                      "symbol": None, "variants": {}} for key, label in MOE_LABELS.items()}
    shared: dict[sp.Expr, int] = {}  # variants name an expression by its index in ``expressions``
    expressions: list[dict[str, object]] = []
    for form, parallel, single, profile, precision in moe_variants():
        exprs = moe_expressions(layouts[form], parallel, single, profile, precision)
        choice = choices.index("|".join((str(parallel).lower(), str(single).lower(), profile, precision)))
        for key, expr in exprs.items():
            if expr not in shared:
                shared[expr] = len(expressions)
                expressions.append(printed(expr))
            formulas[key]["variants"].setdefault(form, [None] * len(choices))[choice] = shared[expr]
    return [formula for formula in formulas.values() if formula["variants"]], expressions


def moe_divides(printed: Callable[[sp.Expr], dict[str, object]]) -> list[dict[str, object]]:
    """The MoE layout's divisibility rules in the report's order: option, divisor and dividend as functions."""
    return [{"failure": failure, "option": option[2:], "divisor": printed(divisor), "dividend": printed(dividend)}
            for failure, (option, divisor, _, dividend) in MOE_DIVIDES.items()]


def moe_data(printed: Callable[[sp.Expr], dict[str, object]]) -> dict[str, object]:
    """What the page needs for the MoE report: models, forms, formulas, rules and the report's lines."""
    models, forms = moe_models(), moe_forms()
    formulas, expressions = moe_formulas(printed)
    first = next(iter(models))
    refused = {field: FIELD_OPTIONS.get(field, "--" + field.replace("_", "-"))[2:] for field in DENSE_ONLY}
    refusals = {option: template("dense_only", option=f"--{option}") for option in refused.values()}
    divides = {failure: moe_line(name, layout, {"divisor": divisor, "dividend": dividend})
               for failure, (name, layout, divisor, dividend) in MOE_SENTINELS.items()}
    dense_only = {option[2:]: template("moe_only", option=option) for option in MOE_PARALLEL}
    dense_only[MOE_PROFILE] = template("moe_only", option=f"--{MOE_PROFILE}")
    return {
        "models": {name: {"form": forms[name], "name": m.name,
                          "values": by_name(_with_kv_heads(m.values))}
                   for name, m in models.items()},
        "refused_models": {name: dense_refusal(name) for name, kind in page_names().items()
                           if kind == "refused"},
        "formulas": formulas,
        "expressions": expressions,
        "choices": moe_choices(),
        "divides": moe_divides(printed),
        "layout": {option: symbol.name for option, symbol in MOE_LAYOUT.items()},
        "layout_default": MoELayout().tp,
        "profile_option": MOE_PROFILE,
        "seq": s.name,
        "facts": {fact: symbol.name for fact, symbol in FACTS.items()},
        "precisions": list(MOE_PRECISIONS),
        "default_profile": MOE_DEFAULT_PROFILE,
        "messages": {
            "refused": refusals,
            "divides": divides,
            "precision": moe_line(first, {}, {"text": "'zq'"}, precision="zq"),
            "fp8_profile": moe_line(first, {}, {"precision": "mxfp8", "profile": "eager"}, "eager", "mxfp8"),
            "dense_only": dense_only,
        },
    }


def _with_kv_heads(values: dict[sp.Symbol, int]) -> dict[sp.Symbol, int]:
    """A model's sizes with g = a where it has no grouped-query attention (MoELayout.check reads it so)."""
    return {g: values[a], **values}


#: A model and layout breaking one MoE divisibility rule, with the divisor and dividend the report shows.
MOE_SENTINELS: dict[str, tuple[str, dict[str, int], str, str]] = {
    "heads": ("deepseek-v3", {"tp": 3}, "3", "128"),
    "kv_heads": ("mixtral-8x7b", {"tp": 16}, "16", "8"),
    "experts": ("deepseek-v3", {"ep": 3}, "3", "256"),
    "expert_width": ("deepseek-v3", {"etp": 3}, "3", "2048"),
    "world": ("deepseek-v3", {"ep": 4, "dp": 3}, "4", "3"),
}
