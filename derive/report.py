"""The report of one model: the four states, activations, FLOPs, step-time bounds and GPU counts.

:class:`Request` holds what is asked (validated when made: a ValueError names
the field); :func:`figures` substitutes the model's sizes into derive's proven
expressions; :func:`render_text` and :func:`render_json` print them. The
command line (``derive`` / ``derive report``) is ``derive.cli``.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Sequence

import sympy as sp

from derive.accounts.activations import PROFILES
from derive.accounts.hf_profiles import HF_PROFILES
from derive.accounts.state import OPTIMIZERS, PRECISIONS
from derive.formulas import FORMULAS, INPUTS, evaluate
from derive.inputs import choose, exact_count, finite_positive, positive_int, zero_stage
from derive.presets import Model, hardware
from derive.symbols import b, d
from derive.units import BYTE_UNITS, format_count, format_memory, format_percent, format_seconds
from derive.verdicts import BUDGET_LABELS, FIT

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
        known = {symbol: sp.sympify(value) for symbol, value in values.items()}
        out = [replace(fig, parts=tuple((part, _number(fig.key, sp.sympify(expr).xreplace(known)))
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


def _fit_line(request: Request, values: dict[str, Figure]) -> str:
    """The last line: how many GPUs (or ZeRO ranks) hold the state at the budget."""
    return "  " + fit_verdict(request, values)


def fit_verdict(request: Request, values: dict[str, Figure]) -> str:
    """The fit line's words (derive.verdicts.FIT, the table the web page fills in too)."""
    budget = values["fit.budget"].expression
    if "iB" not in budget:  # a size given in decimal units (--budget 80GB): its binary value beside it
        budget = BUDGET_LABELS["decimal"].format(text=budget, binary=format_memory(request.budget_bytes))
    counts = {name: f"{values[key].value:.0f}" for name, key in
              (("state_gpus", "fit.gpus_for_state"), ("activation_gpus", "fit.gpus_for_state_and_activations"))
              if key in values}
    if not request.zero:
        return FIT["unsharded"].format(budget=budget, **counts)
    per_rank = values["state.resident"].value
    line = FIT["sharded"].format(budget=budget, zero=request.zero, dp=request.dp, per_rank=format_memory(per_rank),
                                 fits=FIT["fits" if per_rank <= request.budget_bytes else "does_not_fit"])
    if "state_gpus" not in counts:
        return line + FIT["state_never"]
    line += FIT["state_ranks"].format(**counts)
    if "activation_gpus" not in counts:
        return line + FIT["activations_never"]
    return line + FIT["activation_ranks"].format(**counts)


#: A sequence length's origin -> the words the text header states it with (a preset's is its own).
SEQ_STATED = {"max_position_embeddings": "the config's max_position_embeddings; --seq sets it"}


def render_text(m: Model, request: Request, values: dict[str, Figure], seq_from: str = "preset") -> str:
    """The article's cli.py block for one model; a sequence length taken from a config says so."""
    def v(key: str) -> float:
        return values[key].value

    materialised = "activations.per_layer_materialised" in values
    stated = SEQ_STATED.get(seq_from, seq_from if seq_from.startswith("default") else "")
    lines = [
        f"== {m.name}: L={m.layers} h={m.hidden} a={m.heads} kv={m.kv_heads} f={m.ffn} "
        f"V={m.vocab} s={m.seq}" + (f" ({stated})" if stated else ""),
        f"  N = {format_count(v('parameters'), 'parameters')}   ({request.precision} + "
        f"{request.optimizer}: {v('bytes_per_parameter'):.4g} B/param"
        + (f", ZeRO-{request.zero} over {request.dp} ranks" if request.zero else "") + ")",
        f"  params {format_memory(v('state.params')):>11}  grads {format_memory(v('state.grads')):>11}"
        f"  optim {format_memory(v('state.optimizer')):>11}  resident "
        f"{format_memory(v('state.resident')):>11}",
        *([f"  {request.precision}: {format_count(v('fp8_parameters'), 'parameters')} in "
           f"{v('fp8_tensors'):.0f} layer matrices quantised; quantised weight copies and scales "
           f"{format_memory(v('state.fp8_copies'))} (in params, beside the bf16 copy)"]
          if "state.fp8_copies" in values else []),
        f"  activation/layer (b={request.micro_batch}, profile {request.profile}): "
        f"{format_memory(v('activations.per_layer_fused')):>11} "
        + ("flash | " if materialised else "per layer | ")
        + (f"{format_memory(v('activations.per_layer_materialised')):>11} materialised scores | "
           if materialised else "")
        + f"all layers + logits {format_memory(v('activations.all_layers_and_logits')):>11}",
        *([f"  activation/layer with {request.precision}'s quantised linear inputs: "
           f"{format_memory(v('activations.per_layer_fp8')):>11} (16-bit: "
           f"{format_memory(v('activations.per_layer_fused'))})"]
          if "activations.per_layer_fp8" in values else []),
        f"  FLOPs/token: 6N = {format_count(v('flops.six_n'), 'FLOP', 0, 10)}, with causal "
        f"attention = {format_count(v('flops.per_token_causal'), 'FLOP', 0, 10)};  one "
        f"{m.seq}-token sequence on one {request.peak_label} >= "
        f"{format_seconds(v('time.one_sequence'))}",
    ]
    if "step.lower_bound" in values:
        lines.append(f"  {request.tokens / 2**20:.4g} Mi tokens/step on {request.gpus} GPUs: >= "
                     f"{format_seconds(v('step.lower_bound'))} at 100%, "
                     f"{format_seconds(v('step.at_target_mfu'))} at {format_percent(request.target_mfu)} MFU")
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


#: The top-level key of a one-model report under a transformers profile (issue 31): the whole
#: model's bytes kept for backward, its layers and edges, beside the same figure under the model.
SAVED_KEY = "saved_for_backward_bytes"


def render_json(reports: Sequence[tuple[Model, Sequence[Figure]]],
                seq_from: dict[str, str] | None = None) -> str:
    """Every figure of every model as ``{"value", "unit", "expression"}`` (strict JSON), and ``seq``
    as ``{"value", "unit", "from"}``: --seq, preset, max_position_embeddings or the default; one
    model under an hf profile also at the top level (:data:`SAVED_KEY`, with ``"model"``)."""
    data = {m.name: {fig.key: fig.as_json() for fig in values} for m, values in reports}
    for m, _ in reports:
        data[m.name]["seq"] = {"value": m.seq, "unit": "tokens", "from": (seq_from or {}).get(m.name, "preset")}
    if len(reports) == 1:  # one model under --profile hf-sdpa / hf-eager: its whole-model figure on top
        m, values = reports[0]
        whole = next((fig for fig in values if fig.key == SAVED_KEY and fig.parts), None)
        if whole is not None:
            data[SAVED_KEY] = {**whole.as_json(), "model": m.name}
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"


__all__ = ["PROFILES", "Figure", "Request", "figures", "render_json", "render_text"]
