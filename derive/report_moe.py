"""The report for an MoE model: total and active N, states per GPU under t / e / t_E / p / d, activations, FLOPs per token.

Every number is a substitution into the expressions of ``derive.accounts.experts``
and ``derive.architectures.moe_model``; the layout is checked the way Megatron's
argument validation checks it (t divides the heads, e divides E, t_E divides
f_E, t_E e p divides the world t p d).

``precision`` is bf16 (Megatron --bf16) or an FP8 recipe (Megatron --bf16 with --fp8-recipe,
``derive.recipes``): the fused profile's linear inputs are then saved in FP8 with their
scales (``derive.architectures.saved_fp8``) and the rank's layer matrices gain their cached
FP8 copies (``derive.accounts.fp8_state``), both printed beside the bf16 figures.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from derive.accounts.experts import (EXPERT_DATA_PARALLEL, moe_resident_bytes, moe_layer_activations,
                                     first_stage_parameters, moe_first_stage_activation_bytes)
from derive.accounts.state import FP8_PRECISIONS, PRECISIONS, fp8_resident_bytes
from derive.architectures.gemms import flops
from derive.architectures.moe_model import active_parameters, model_gemms, model_parameters
from derive.architectures.saved_moe import PROFILES
from derive.inputs import choose, positive_int
from derive.megatron.flops import flops_per_token
from derive.megatron.tables import moe_reading
from derive.moe_presets import MoEModel
from derive.recipes import fp8_weight_counts
from derive.symbols import D, E, a, b, d, e, f_E, g, p, s, t, t_E
from derive.units import format_memory


#: The MoE layout's divisibility rules, as Megatron's argument validation checks them, in order:
#: failure -> (option, divisor, what it divides, dividend); world = t p d (kv heads: a without GQA).
MOE_DIVIDES: dict[str, tuple[str, sp.Expr, str, sp.Expr]] = {
    "heads": ("--tp", t, "heads", a),
    "kv_heads": ("--tp", t, "kv heads", g),
    "experts": ("--ep", e, "experts", E),
    "expert_width": ("--etp", t_E, "expert width", f_E),
    "world": ("--ep", t_E * e * p, "world (tp pp dp)", t * p * d),
}


@dataclass(frozen=True)
class MoELayout:
    """A parallel layout: tensor t, expert e, expert-tensor t_E, pipeline p, data d; micro-batch b."""

    tp: int = 1
    ep: int = 1
    etp: int = 1
    pp: int = 1
    dp: int = 1
    micro_batch: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "ep", "etp", "pp", "dp", "micro_batch"):
            positive_int(name, getattr(self, name))

    def check(self, model: MoEModel) -> None:
        """ValueError naming the option a model's shape does not divide (:data:`MOE_DIVIDES`, in order)."""
        at = {**model.values, **self.values}
        at.setdefault(g, at[a])
        for option, divisor, field, dividend in MOE_DIVIDES.values():
            divisor, dividend = int(divisor.xreplace(at)), int(dividend.xreplace(at))
            if dividend % divisor:
                raise ValueError(f"{option}: {divisor} does not divide the {field} ({dividend})")

    @property
    def values(self) -> dict[sp.Symbol, int]:
        return {t: self.tp, e: self.ep, t_E: self.etp, p: self.pp, d: self.dp, b: self.micro_batch}


#: The MoE activation profile the report counts without --moe-profile (Megatron + Transformer Engine).
DEFAULT_PROFILE = "fused"

#: The precisions the MoE report takes: Megatron's bf16 recipe, alone or under an FP8 recipe.
MOE_PRECISIONS = ("bf16", *FP8_PRECISIONS)


def moe_recipe(precision: str, profile: str = DEFAULT_PROFILE) -> str | None:
    """The FP8 recipe of ``precision`` (None for bf16); ValueError naming the field otherwise."""
    if precision not in MOE_PRECISIONS:
        raise ValueError(f"precision: the MoE report (derive.report_moe: Megatron bf16, distributed "
                         f"optimizer) takes {', '.join(MOE_PRECISIONS)}, not {precision!r}")
    recipe = PRECISIONS[precision].fp8
    if recipe is not None and profile != DEFAULT_PROFILE:
        raise ValueError(f"precision: {precision} is counted on the fused profile (Megatron + TE); "
                         f"transformers' {profile} profile runs in bf16")
    return recipe


def moe_expressions(features, sequence_parallel: bool, single_stage: bool, profile: str = DEFAULT_PROFILE,
                    precision: str = "bf16") -> dict[str, sp.Expr]:
    """Every figure the MoE report prints, as expressions of derive's symbols (shape and layout free).

    ``sequence_parallel`` is t > 1 (Megatron turns SP on with TP), ``single_stage`` is p = 1 (the
    one stage holds both edges): the two choices of the layout that change an expression's form.
    """
    choose("profile", profile, PROFILES)
    recipe = moe_recipe(precision, profile)
    values = {**_moe_model_parts(features, single_stage),
              "activation_bytes": _moe_activations(features, profile, sequence_parallel, None)}
    if recipe is None:
        return values
    return {**values,
            "fp8_weight_bytes": _moe_fp8_states(features, single_stage, precision),
            "activation_bytes_fp8": _moe_activations(features, profile, sequence_parallel, recipe),
            "layer_saved_bytes": _moe_layer_bytes(features, sequence_parallel, None),
            "layer_saved_bytes_fp8": _moe_layer_bytes(features, sequence_parallel, recipe)}


@lru_cache(maxsize=None)
def _moe_model_parts(features, single_stage: bool) -> dict[str, sp.Expr]:
    """The figures of the parameter table: counts, the first stage's share and states, FLOPs per token."""
    table = model_parameters(features)
    stage = first_stage_parameters(table, single_stage)
    megatron = flops_per_token(moe_reading(features), False)
    if not features.mtp:
        megatron = megatron.xreplace({D: 0})
    return {
        "parameters": table.without("mtp").numel(),
        "active_parameters": active_parameters(features).without("mtp").numel(),
        "mtp_parameters": table.where("mtp").numel(),
        "stage_parameters": stage.numel(),
        "stage_expert_parameters": stage.where("routed_expert").numel(),
        "expert_data_parallel": EXPERT_DATA_PARALLEL,
        "state_bytes": moe_resident_bytes(stage, "bf16-fp32grad", "adam", zero_stage=1),
        "state_bytes_plain": moe_resident_bytes(stage, "bf16-fp32grad", "adam"),
        "flops_per_token": flops(model_gemms(features)),
        "megatron_flops_per_token": megatron,
    }


@lru_cache(maxsize=None)
def _moe_activations(features, profile: str, sequence_parallel: bool, recipe: str | None) -> sp.Expr:
    """The first stage's activation bytes per GPU, p micro-batches in flight (an FP8 recipe's linear inputs)."""
    return moe_first_stage_activation_bytes(profile, features, t, sequence_parallel, p, recipe=recipe)


@lru_cache(maxsize=None)
def _moe_fp8_states(features, single_stage: bool, precision: str) -> sp.Expr:
    """The first stage's cached FP8 weight copies and scales per GPU under ``precision``."""
    stage = first_stage_parameters(model_parameters(features), single_stage)
    n_8, tensors = fp8_weight_counts(stage)
    # t and t_E split each matrix (every rank holds a shard of each, with its own scales); e splits the experts
    tensors = tensors.xreplace({t: 1, t_E: 1})
    return fp8_resident_bytes(precision, "adam", 1, d, stage.numel(), fp8_params=n_8, fp8_tensors=tensors)


def moe_figures(model: MoEModel, layout: MoELayout, profile: str = DEFAULT_PROFILE,
                precision: str = "bf16") -> dict[str, float]:
    """Every number the MoE report prints, exact integers where they are."""
    choose("profile", profile, PROFILES)
    moe_recipe(precision, profile)
    layout.check(model)
    exprs = moe_expressions(model.features, layout.tp > 1, layout.pp == 1, profile, precision)
    at = _names(layout.values)
    return {key: model.subs(expr, **at) for key, expr in exprs.items()}


@lru_cache(maxsize=None)
def _moe_layer_bytes(features, sequence_parallel: bool, recipe: str | None) -> sp.Expr:
    """One MoE layer's saved bytes on one rank (fused profile, statistics kept, SP when t > 1)."""
    return moe_layer_activations("fused", features, True, t, sequence_parallel, norm_statistics=True,
                                 recipe=recipe).bytes()


def _names(values: dict[sp.Symbol, int]) -> dict[str, int]:
    return {symbol.name: n for symbol, n in values.items()}


def render_moe(model: MoEModel, layout: MoELayout, profile: str = DEFAULT_PROFILE, precision: str = "bf16") -> str:
    """The text report."""
    v = {key: float(value) for key, value in moe_figures(model, layout, profile, precision).items()}
    lines = [
        f"{model.name} (MoE; {model.source})",
        f"  parameters N            {v['parameters'] / 1e9:10.2f} B   active per token "
        f"{v['active_parameters'] / 1e9:.2f} B"
        + (f"   MTP modules {v['mtp_parameters'] / 1e9:.2f} B" if v["mtp_parameters"] else ""),
        f"  layout                  t = {layout.tp}, e = {layout.ep}, t_E = {layout.etp}, "
        f"p = {layout.pp}, d = {layout.dp} (EDP = {int(v['expert_data_parallel'])}), b = {layout.micro_batch}",
        f"  first stage, one GPU    {v['stage_parameters'] / 1e9:10.3f} B parameters "
        f"({v['stage_expert_parameters'] / 1e9:.3f} B routed experts)",
        f"  states per GPU          {format_memory(v['state_bytes']):>14} (Megatron bf16, distributed "
        f"optimizer: 6 + 12/d, experts 6 + 12/EDP); {format_memory(v['state_bytes_plain'])} without",
        f"  activations per GPU     {format_memory(v['activation_bytes']):>14} ({profile} profile, "
        f"first stage, {layout.pp} micro-batch(es) in flight, s = {model.values[s]})",
        f"  FLOPs per token         {v['flops_per_token'] / 1e9:10.1f} GFLOP (derived: 6 N_active_GEMM "
        f"+ scores, router included); Megatron {v['megatron_flops_per_token'] / 1e9:.1f}",
    ]
    if "fp8_weight_bytes" in v:
        lines[5:5] = [
            f"  {'FP8 weight copies':<24}{format_memory(v['fp8_weight_bytes']):>14} ({precision}: the layer "
            f"matrices' cached FP8 copies and scales, beside the bf16 states: "
            f"{format_memory(v['state_bytes'] + v['fp8_weight_bytes'])} in all)"]
        lines[7:7] = [
            f"  {'activations, FP8':<24}{format_memory(v['activation_bytes_fp8']):>14} ({precision}: linear "
            f"inputs in FP8 with their scales; router, attention core, norms 16-bit)",
            f"  saved per MoE layer     {format_memory(v['layer_saved_bytes_fp8']):>14} under {precision} "
            f"(bf16: {format_memory(v['layer_saved_bytes'])}; one rank, b = {layout.micro_batch})"]
    return "\n".join(lines)
