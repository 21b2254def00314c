"""The report of one model, dense or MoE: its figures as numbers substituted into derive's proven expressions.

A dense model: :class:`Request` holds what is asked (validated when made: a
ValueError names the field); :func:`figures` substitutes the model's sizes
into the four states, activations, FLOPs, step-time bounds and GPU counts.
A model with MoE layers (``derive.model.MOE_FAMILIES``) has the MoE rows:
total and active N, states per GPU under t / e / t_E / p / d, activations and
FLOPs per token (:func:`moe_figures`), every number a substitution into the
expressions of ``derive.accounts.experts`` and ``derive.architectures.tables``;
its layout is checked the way Megatron's argument validation checks it (t
divides the heads, e divides E, t_E divides f_E, t_E e p divides the world t p d).
An MoE ``precision`` is bf16 (Megatron --bf16) or an FP8 recipe (--fp8-recipe,
``derive.recipes``): the fused profile's linear inputs are then saved in FP8
with their scales (``derive.architectures.saved_fp8``) and the rank's layer
matrices gain their cached FP8 copies (``derive.accounts.fp8_state``).
``derive.report_text`` prints both; the command line (``derive`` / ``derive
report``) is ``derive.cli``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import sympy as sp

from derive.accounts.activations import PROFILES
from derive.accounts.experts import (EXPERT_DATA_PARALLEL, first_stage_parameters, moe_first_stage_activation_bytes,
                                     moe_layer_activations, moe_resident_bytes)
from derive.accounts.hf_profiles import HF_PROFILES
from derive.accounts.state import FP8_PRECISIONS, OPTIMIZERS, PRECISIONS, fp8_resident_bytes
from derive.architectures.decoder import Layout
from derive.architectures.gemms import flops
from derive.architectures.saved import MOE_PROFILES
from derive.architectures.tables import active_parameters, model_gemms, model_parameters
from derive.evaluation import by_name, substitute
from derive.formulas import FORMULAS, INPUTS, evaluate
from derive.inputs import choose, exact_count, finite_positive, positive_int, zero_stage
from derive.model import Model
from derive.presets import hardware
from derive.recipes import fp8_weight_counts
from derive.symbols import D, E, a, b, d, e, f_E, g, p, t, t_E
from derive.units import BYTE_UNITS

DEFAULT_MFU = 0.4

#: --json key -> unit.
UNITS: dict[str, str] = {formula.key: formula.unit for formula in FORMULAS}


@dataclass(frozen=True)
class Request:
    """What the report is asked: recipe, batch, step, hardware peak, ZeRO and the per-GPU budget.

    ``tokens`` and ``gpus`` go together; ``mfu`` and ``step_time`` need both;
    ``zero`` > 0 needs ``dp`` and ``dp`` needs ``zero`` > 0: nothing given is ignored.
    """

    precision: str = "bf16"
    optimizer: str = "adam"
    profile: str = "article"
    micro_batch: int = 1
    tokens: int | None = None
    gpus: int | None = None
    mfu: float | None = None
    step_time: float | None = None
    peak_flops: float = hardware("h100").peak_flops
    peak_label: str = "H100"
    zero: int = 0
    dp: int | None = None
    budget_bytes: int = 70 * BYTE_UNITS["GiB"]
    budget_label: str = "70GiB"

    def __post_init__(self) -> None:
        choose("precision", self.precision, PRECISIONS)
        choose("optimizer", self.optimizer, OPTIMIZERS)
        choose("profile", self.profile, {**PROFILES, **HF_PROFILES})
        positive_int("micro_batch", self.micro_batch)
        for name in ("tokens", "gpus"):
            if getattr(self, name) is not None:
                positive_int(name, getattr(self, name))
        if (self.tokens is None) != (self.gpus is None):
            given, missing = ("tokens", "gpus") if self.gpus is None else ("gpus", "tokens")
            raise ValueError(f"{given}: the step bound needs {missing} too")
        for name in ("mfu", "step_time"):
            if getattr(self, name) is not None and self.tokens is None:
                raise ValueError(f"{name}: needs tokens and gpus (the step it describes)")
        if self.mfu is not None:
            finite_positive("mfu", self.mfu)
            if self.mfu > 1:
                raise ValueError(f"mfu: must be at most 1, got {self.mfu!r}")
        if self.step_time is not None:
            finite_positive("step_time", self.step_time)
        finite_positive("peak_flops", self.peak_flops)
        zero_stage("zero", self.zero)
        if self.dp is not None:
            positive_int("dp", self.dp)
            if not self.zero:
                raise ValueError("dp: only ZeRO (zero 1-3) shards over the data-parallel ranks")
        elif self.zero:
            raise ValueError(f"zero: ZeRO-{self.zero} needs dp, the ranks it shards over")
        positive_int("budget_bytes", self.budget_bytes)

    @property
    def target_mfu(self) -> float:
        """The MFU of the step bound (0.4 unless given)."""
        return DEFAULT_MFU if self.mfu is None else self.mfu


@dataclass(frozen=True)
class Figure:
    """One reported number with its unit and the expression it was substituted into."""

    key: str
    value: float
    unit: str
    expression: str
    parts: tuple[tuple[str, int | float], ...] = ()

    def as_json(self) -> dict[str, object]:
        return {"value": self.value, "unit": self.unit, "expression": self.expression,
                **dict(self.parts)}


#: How the error for a step faster than the hardware prints its numbers (Python format specs;
#: derive.render.web gives them to the web page, which formats the same way).
FASTER_FORMATS: dict[str, str] = {"step_time": ".6g", "bound": ".4g", "mfu": ".0%"}


def faster_numbers(step_time: float, bound: float) -> dict[str, str]:
    """The numbers of the error for a step faster than its bound: step time, bound and MFU, as FASTER_FORMATS prints them."""
    shown = {"step_time": step_time, "bound": bound, "mfu": bound / step_time}
    return {name: format(value, FASTER_FORMATS[name]) for name, value in shown.items()}

#: The figures that grow with s and b, kept at most 2^53 bytes (derive.inputs.exact_count), in report order.
ACTIVATION_KEYS = tuple(formula.key for formula in FORMULAS if formula.key.startswith("activations."))

#: The request field a figure's overflow is blamed on (the model's sizes otherwise).
OVERFLOW_FIELDS = {"time.one_sequence": "peak_flops", "step.lower_bound": "peak_flops",
                   "step.at_target_mfu": "mfu", "observed.tokens_per_second": "step_time",
                   "observed.mfu": "step_time", "observed.hfu_selective": "step_time",
                   "observed.hfu_full": "step_time"}


def _number(key: str, value: sp.Expr) -> int | float:
    """An exact figure as an int (an integer) or a finite float, else ValueError naming the field that made it overflow."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"{OVERFLOW_FIELDS.get(key, 'model')}: {key} is out of float range at these values")
    return int(value) if value.is_Integer else number


def figures(m: Model, request: Request = Request()) -> list[Figure]:
    """Every number the report prints for model ``m``: derive.formulas with its sizes and the request substituted."""
    m.require_dense("model")
    choices = {"model": m, "precision": request.precision, "optimizer": request.optimizer,
               "zero": request.zero, "profile": request.profile}
    inputs = {"peak": request.peak_flops, "mfu": request.target_mfu, "budget": request.budget_bytes,
              "tokens": request.tokens, "gpus": request.gpus, "step_time": request.step_time}
    given = {name for name, value in inputs.items() if value is not None}
    values = {**m.values, b: request.micro_batch, d: request.dp or 1,
              **{INPUTS[name]: inputs[name] for name in given}}
    out = [Figure(key, _number(key, value), UNITS[key],
                  request.budget_label if key == "fit.budget" else sp.sstr(expr))
           for key, (value, expr) in evaluate(choices, values, given).items()]
    if request.profile in HF_PROFILES:
        from derive.accounts.hf_saved import dense_saved  # transformers' tables load when asked

        saved = dense_saved(m, request.profile)
        out = [replace(fig, parts=tuple((part, _number(fig.key, substitute(expr, values)))
                                        for part, expr in (("layers", saved.layers),
                                                           ("edges", saved.edges))))
               if fig.key == "saved_for_backward_bytes" else fig for fig in out]
    found = {fig.key: fig.value for fig in out}
    for key in (key for key in ACTIVATION_KEYS if key in found):
        exact_count("micro_batch" if request.micro_batch > 1 else "seq", key, found[key])
    if request.step_time is not None and request.step_time < found["step.lower_bound"]:
        text = faster_numbers(request.step_time, found["step.lower_bound"])
        raise ValueError(
            f"step_time: {text['step_time']} s is faster than the hardware allows: "
            f"{request.tokens} tokens on {request.gpus} GPUs take >= {text['bound']} s at 100 % MFU "
            f"(the MFU would be {text['mfu']})")
    return out


# ---- the MoE rows ----

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

    def check(self, model: Model) -> None:
        """ValueError naming the option a model's shape does not divide (:data:`MOE_DIVIDES`, in order)."""
        at = {**model.values, **self.values}
        at.setdefault(g, at[a])
        for option, divisor, field, dividend in MOE_DIVIDES.values():
            divisor, dividend = int(substitute(divisor, at)), int(substitute(dividend, at))
            if dividend % divisor:
                raise ValueError(f"{option}: {divisor} does not divide the {field} ({dividend})")

    @property
    def values(self) -> dict[sp.Symbol, int]:
        return {t: self.tp, e: self.ep, t_E: self.etp, p: self.pp, d: self.dp, b: self.micro_batch}


#: The MoE activation profile the report counts without --moe-profile (Megatron + Transformer Engine).
MOE_DEFAULT_PROFILE = "fused"

#: The precisions the MoE report takes: Megatron's bf16 recipe, alone or under an FP8 recipe.
MOE_PRECISIONS = ("bf16", *FP8_PRECISIONS)


def moe_recipe(precision: str, profile: str = MOE_DEFAULT_PROFILE) -> str | None:
    """The FP8 recipe of ``precision`` (None for bf16); ValueError naming the field otherwise."""
    if precision not in MOE_PRECISIONS:
        raise ValueError(f"precision: the MoE report (derive.report: Megatron bf16, distributed "
                         f"optimizer) takes {', '.join(MOE_PRECISIONS)}, not {precision!r}")
    recipe = PRECISIONS[precision].fp8
    if recipe is not None and profile != MOE_DEFAULT_PROFILE:
        raise ValueError(f"precision: {precision} is counted on the fused profile (Megatron + TE); "
                         f"transformers' {profile} profile runs in bf16")
    return recipe


def moe_expressions(layout: Layout, sequence_parallel: bool, single_stage: bool, profile: str = MOE_DEFAULT_PROFILE,
                    precision: str = "bf16") -> dict[str, sp.Expr]:
    """Every figure the MoE report prints, as expressions of derive's symbols (shape and layout free).

    ``sequence_parallel`` is t > 1 (Megatron turns SP on with TP), ``single_stage`` is p = 1 (the
    one stage holds both edges): the two choices of the layout that change an expression's form.
    """
    choose("profile", profile, MOE_PROFILES)
    recipe = moe_recipe(precision, profile)
    values = {**_moe_model_parts(layout, single_stage),
              "activation_bytes": _moe_activations(layout, profile, sequence_parallel, None)}
    if recipe is None:
        return values
    return {**values,
            "fp8_weight_bytes": _moe_fp8_states(layout, single_stage, precision),
            "activation_bytes_fp8": _moe_activations(layout, profile, sequence_parallel, recipe),
            "layer_saved_bytes": _moe_layer_bytes(layout, sequence_parallel, None),
            "layer_saved_bytes_fp8": _moe_layer_bytes(layout, sequence_parallel, recipe)}


@lru_cache(maxsize=None)
def _moe_model_parts(layout: Layout, single_stage: bool) -> dict[str, sp.Expr]:
    """The figures of the parameter table: counts, the first stage's share and states, FLOPs per token."""
    from derive.megatron.flops import flops_per_token  # Megatron's estimators load for an MoE report only
    from derive.megatron.tables import moe_reading

    table = model_parameters(layout)
    stage = first_stage_parameters(table, single_stage)
    megatron = flops_per_token(moe_reading(layout), False)
    if not layout.mtp:
        megatron = megatron.xreplace({D: 0})
    return {
        "parameters": table.without("mtp").numel(),
        "active_parameters": active_parameters(layout).without("mtp").numel(),
        "mtp_parameters": table.where("mtp").numel(),
        "stage_parameters": stage.numel(),
        "stage_expert_parameters": stage.where("routed_expert").numel(),
        "expert_data_parallel": EXPERT_DATA_PARALLEL,
        "state_bytes": moe_resident_bytes(stage, "bf16-fp32grad", "adam", zero_stage=1),
        "state_bytes_plain": moe_resident_bytes(stage, "bf16-fp32grad", "adam"),
        "flops_per_token": flops(model_gemms(layout)),
        "megatron_flops_per_token": megatron,
    }


@lru_cache(maxsize=None)
def _moe_activations(layout: Layout, profile: str, sequence_parallel: bool, recipe: str | None) -> sp.Expr:
    """The first stage's activation bytes per GPU, p micro-batches in flight (an FP8 recipe's linear inputs)."""
    return moe_first_stage_activation_bytes(profile, layout, t, sequence_parallel, p, recipe=recipe)


@lru_cache(maxsize=None)
def _moe_fp8_states(layout: Layout, single_stage: bool, precision: str) -> sp.Expr:
    """The first stage's cached FP8 weight copies and scales per GPU under ``precision``."""
    stage = first_stage_parameters(model_parameters(layout), single_stage)
    n_8, tensors = fp8_weight_counts(stage)
    # t and t_E split each matrix (every rank holds a shard of each, with its own scales); e splits the experts
    tensors = tensors.xreplace({t: 1, t_E: 1})
    return fp8_resident_bytes(precision, "adam", 1, d, stage.numel(), fp8_params=n_8, fp8_tensors=tensors)


def moe_figures(model: Model, layout: MoELayout, profile: str = MOE_DEFAULT_PROFILE,
                precision: str = "bf16") -> dict[str, float]:
    """Every number the MoE report prints, exact integers where they are."""
    choose("profile", profile, MOE_PROFILES)
    moe_recipe(precision, profile)
    layout.check(model)
    exprs = moe_expressions(model.layout, layout.tp > 1, layout.pp == 1, profile, precision)
    at = by_name(layout.values)
    return {key: model.subs(expr, **at) for key, expr in exprs.items()}


@lru_cache(maxsize=None)
def _moe_layer_bytes(layout: Layout, sequence_parallel: bool, recipe: str | None) -> sp.Expr:
    """One MoE layer's saved bytes on one rank (fused profile, statistics kept, SP when t > 1)."""
    return moe_layer_activations("fused", layout, True, t, sequence_parallel, norm_statistics=True,
                                 recipe=recipe).bytes()


__all__ = ["PROFILES", "Figure", "MoELayout", "Request", "figures", "moe_figures"]

