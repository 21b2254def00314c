"""The report of one model: the four states, activations, FLOPs, step-time bounds and GPU counts.

:class:`Request` holds what is asked (validated when made: a ValueError names
the field); :func:`figures` substitutes the model's sizes into derive's proven
expressions; :func:`render_text` and :func:`render_json` print them. The
command line (``derive`` / ``python -m derive.report``) is ``derive.cli``.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Sequence

import sympy as sp

from derive.accounts.activations import (
    ATTENTION_KERNELS,
    ATTENTION_PROFILES,
    PROFILES,
    profile_bytes,
)
from derive.accounts.budget import gpus_to_hold
from derive.accounts.flops import (
    flops_per_token,
    mfu,
    recompute_factor,
    step_time_lower_bound,
)
from derive.accounts.state import OPTIMIZERS, PRECISIONS, state_bytes
from derive.conventions import six_n
from derive.inputs import choose, finite_positive, positive_int, zero_stage
from derive.presets import Model, hardware
from derive.symbols import N, d
from derive.units import BYTE_UNITS, format_bytes, format_count, format_seconds

DEFAULT_MFU = 0.4


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
        choose("profile", self.profile, PROFILES)
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

    def as_json(self) -> dict[str, object]:
        return {"value": self.value, "unit": self.unit, "expression": self.expression}


def _finite(key: str, value: object, field: str) -> float:
    """``value`` as a finite float, else ValueError naming the request ``field`` that made it overflow."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"{field}: {key} overflows a float at this value")
    return number


def figures(m: Model, request: Request = Request()) -> list[Figure]:
    """Every number the report prints for model ``m``."""
    count = m.parameters

    def exact(expr: sp.Expr) -> sp.Expr:
        return m.at(expr, b=request.micro_batch, d=request.dp or 1)

    def fig(key: str, expr: sp.Expr, unit: str) -> Figure:
        return Figure(key, _finite(key, exact(expr), "model"), unit, sp.sstr(expr))

    held = state_bytes(request.precision, request.optimizer, zero_stage=request.zero)
    attentions = ATTENTION_KERNELS if request.profile in ATTENTION_PROFILES else ("fused",)
    per_layer = {attention: profile_bytes(request.profile, attention, m)[0]
                 for attention in attentions}
    all_layers = profile_bytes(request.profile, "fused", m)[1]
    model_flops = flops_per_token(m.architecture, "causal")
    per_token = _finite("flops.per_token_causal", exact(model_flops), "model")
    peak = request.peak_flops
    out = [
        Figure("parameters", _finite("parameters", count, "model"), "parameters", sp.sstr(N)),
        Figure("gemm_parameters", _finite("gemm_parameters", m.gemm_parameters, "model"),
                 "parameters", "N_GEMM"),
        fig("bytes_per_parameter", held.total / N, "B/parameter"),
        fig("state.params", held.params, "B"),
        fig("state.grads", held.grads, "B"),
        fig("state.optimizer", held.optimizer, "B"),
        fig("state.resident", held.total, "B"),
        *(fig(f"activations.per_layer_{attention}", expr, "B")
          for attention, expr in per_layer.items()),
        fig("activations.all_layers_and_logits", all_layers, "B"),
        fig("flops.six_n", six_n(), "FLOP/token"),
        fig("flops.per_token_causal", model_flops, "FLOP/token"),
        Figure("time.one_sequence",
                 _finite("time.one_sequence", step_time_lower_bound(m.seq, per_token, 1, peak),
                         "peak_flops"), "s", "s * F / peak"),
    ]
    if request.tokens is not None:
        out += _step_figures(m, request, per_token, exact)
    return out + _fit_figures(request, exact(held.total.subs(d, sp.oo)),
                              exact(sp.expand(held.total * d).coeff(d, 0)), exact(all_layers))


def _step_figures(m: Model, request: Request, per_token: float, exact) -> list[Figure]:
    """The step bound at 100 % and at the target MFU; with a step time, MFU and HFU."""
    bound = _finite("step.lower_bound", step_time_lower_bound(
        request.tokens, per_token, request.gpus, request.peak_flops), "peak_flops")
    out = [Figure("step.lower_bound", bound, "s", "tokens * F / (gpus * peak)"),
           Figure("step.at_target_mfu",
                  _finite("step.at_target_mfu", bound / request.target_mfu, "mfu"), "s",
                  "tokens * F / (gpus * peak * mfu)")]
    if request.step_time is None:
        return out
    if request.step_time < bound:
        raise ValueError(
            f"step_time: {request.step_time:g} s is faster than the hardware allows: "
            f"{request.tokens} tokens on {request.gpus} GPUs take >= {bound:.4g} s at 100 % MFU "
            f"(the MFU would be {bound / request.step_time:.0%})")
    rate = request.tokens / request.step_time
    observed = mfu(rate, per_token, request.gpus, request.peak_flops)
    out += [Figure("observed.tokens_per_second", rate, "tokens/s", "tokens / step_time"),
            Figure("observed.mfu", observed, "fraction", "tokens/s * F / (gpus * peak)")]
    for policy in ("selective", "full"):
        factor = recompute_factor(policy, m.architecture)
        out.append(Figure(f"observed.hfu_{policy}", observed * float(exact(factor)), "fraction",
                            f"MFU * ({sp.sstr(factor)})"))
    return out
def _fit_figures(request: Request, replicated: sp.Expr, sharded: sp.Expr,
                 activations: sp.Expr) -> list[Figure]:
    """GPUs that hold the state at the budget: the state split over GPUs, or under ZeRO the ranks.

    Without ZeRO every byte is split (the article's self-test: ceil(resident / budget));
    under ZeRO one rank holds ``replicated + sharded / ranks``, so the ranks needed are
    ceil(sharded / (budget - replicated)), and none suffice when replicated >= budget.
    """
    budget = request.budget_bytes
    out = [Figure("fit.budget", budget, "B", request.budget_label)]
    if not request.zero:
        return out + [
            Figure("fit.gpus_for_state", gpus_to_hold(replicated + sharded, budget), "GPUs",
                     "ceil(resident / budget)"),
            Figure("fit.gpus_for_state_and_activations",
                     gpus_to_hold(replicated + sharded + activations, budget), "GPUs",
                     "ceil((resident + activations) / budget)")]
    for key, kept, what in (
            ("fit.gpus_for_state", replicated, "ceil(sharded / (budget - replicated)) ranks"),
            ("fit.gpus_for_state_and_activations", replicated + activations,
             "ceil(sharded / (budget - replicated - activations)) ranks")):
        if kept < budget:
            out.append(Figure(key, max(1, gpus_to_hold(sharded, budget - kept)), "GPUs", what))
    return out


def _fit_line(request: Request, values: dict[str, Figure]) -> str:
    """The last line: how many GPUs (or ZeRO ranks) hold the state at the budget."""
    budget = values["fit.budget"].expression
    if not request.zero:
        return (f"  fit at {budget} per GPU: resident state needs >= "
                f"{values['fit.gpus_for_state'].value:.0f} GPUs; with one micro-batch of "
                f"activations >= {values['fit.gpus_for_state_and_activations'].value:.0f}")
    per_rank = values["state.resident"].value
    fits = "fits" if per_rank <= request.budget_bytes else "does not fit"
    line = (f"  fit at {budget} per GPU: ZeRO-{request.zero} over {request.dp} ranks holds "
            f"{format_bytes(per_rank)} per rank ({fits});")
    if "fit.gpus_for_state" not in values:
        return line + " the unsharded state alone exceeds the budget at any number of ranks"
    line += f" the state needs >= {values['fit.gpus_for_state'].value:.0f} ranks"
    if "fit.gpus_for_state_and_activations" not in values:
        return line + "; with one micro-batch of activations it never fits"
    return line + (f"; with one micro-batch of activations >= "
                   f"{values['fit.gpus_for_state_and_activations'].value:.0f}")


def render_text(m: Model, request: Request, values: dict[str, Figure]) -> str:
    """The article's cli.py block for one model."""
    def v(key: str) -> float:
        return values[key].value

    materialised = "activations.per_layer_materialised" in values
    lines = [
        f"== {m.name}: L={m.layers} h={m.hidden} a={m.heads} kv={m.kv_heads} f={m.ffn} "
        f"V={m.vocab} s={m.seq}",
        f"  N = {format_count(v('parameters'), 'parameters')}   ({request.precision} + "
        f"{request.optimizer}: {v('bytes_per_parameter'):.4g} B/param"
        + (f", ZeRO-{request.zero} over {request.dp} ranks" if request.zero else "") + ")",
        f"  params {format_bytes(v('state.params')):>10}  grads {format_bytes(v('state.grads')):>10}"
        f"  optim {format_bytes(v('state.optimizer')):>10}  resident "
        f"{format_bytes(v('state.resident')):>10}",
        f"  activation/layer (b={request.micro_batch}, profile {request.profile}): "
        f"{format_bytes(v('activations.per_layer_fused')):>10} "
        + ("flash | " if materialised else "per layer | ")
        + (f"{format_bytes(v('activations.per_layer_materialised')):>10} materialised scores | "
           if materialised else "")
        + f"all layers + logits {format_bytes(v('activations.all_layers_and_logits')):>10}",
        f"  FLOPs/token: 6N = {format_count(v('flops.six_n'), 'FLOP', 0, 10)}, with causal "
        f"attention = {format_count(v('flops.per_token_causal'), 'FLOP', 0, 10)};  one "
        f"{m.seq}-token sequence on one {request.peak_label} >= "
        f"{format_seconds(v('time.one_sequence'))}",
    ]
    if "step.lower_bound" in values:
        lines.append(f"  {request.tokens / 2**20:.4g} Mi tokens/step on {request.gpus} GPUs: >= "
                     f"{format_seconds(v('step.lower_bound'))} at 100%, "
                     f"{format_seconds(v('step.at_target_mfu'))} at {request.target_mfu * 100:.3g}% MFU")
    if "observed.mfu" in values:
        hfus = "  ".join(
            f"HFU({policy}) {v(f'observed.hfu_{policy}'):.1%}"
            if v(f"observed.hfu_{policy}") <= 1 else f"HFU({policy}) over 100% (not run so)"
            for policy in ("selective", "full"))
        lines.append(f"  observed {request.step_time:g} s/step = "
                     f"{format_count(v('observed.tokens_per_second'), '', 0)} tokens/s -> "
                     f"MFU {v('observed.mfu'):.1%}  {hfus}")
    lines.append(_fit_line(request, values))
    return "\n".join(lines) + "\n"


def render_json(reports: Sequence[tuple[Model, Sequence[Figure]]]) -> str:
    """Every figure of every model as ``{"value", "unit", "expression"}`` (strict JSON)."""
    data = {m.name: {fig.key: fig.as_json() for fig in values} for m, values in reports}
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"


__all__ = ["PROFILES", "Figure", "Request", "figures", "render_json", "render_text"]


def __getattr__(name: str) -> object:
    """``derive.report.main`` / ``run`` still resolve: the command line lives in ``derive.cli``."""
    if name in ("main", "run"):
        from derive import cli

        return getattr(cli, name)
    raise AttributeError(f"module 'derive.report' has no attribute {name!r}")


if __name__ == "__main__":
    import sys

    from derive.cli import main

    sys.exit(main())
