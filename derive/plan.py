"""``python -m derive.plan``: every layout of a model on N GPUs, the ones that fit, ranked by step time.

A layout is (t, p, v, c, d, b, recompute, ZeRO): t divides the query and kv
heads, c (context parallel, profiles without score matrices) divides s, t p c
divides the GPUs (d = GPUs / (t p c)), p v <= L (uneven stages: the
most loaded holds ceil(L / (p v)) layers per chunk), m = T / (s b d) whole,
and interleaving (v > 1) needs m a multiple of p (Megatron's check). Memory is
the most loaded rank's (:mod:`derive.sweep`: the framework placement's states,
the first stage's in-flight micro-batches with the interleaving factor, the
logits on the last stage) plus the caching allocator's rounding of every
state buffer and every saved activation (:mod:`derive.accounts.allocator`),
judged against the GPU's usable range (:mod:`derive.accounts.budget`): it fits
at or under the low end. Step time is the compute bound (hardware FLOPs at
``mfu`` x peak) x (1 + (p - 1)/(v m)). Communication is not modelled.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, replace
from math import gcd, isqrt
from typing import Sequence

import numpy as np
import sympy as sp

from derive.accounts.activations import (
    RECOMPUTE_POLICIES,
    in_flight_micro_batches,
    layer_activations,
)
from derive.accounts.allocator import allocated_bytes
from derive.accounts.budget import DRIVER_CAPACITY, usable_bytes
from derive.accounts.placement import PLACEMENTS, placement, placement_ledger
from derive.cli import FRACTION, POSITIVE, OneLineParser, UsageError, positive_up_to, serve
from derive.hf import from_config
from derive.presets import Model, model
from derive.sweep import CONTEXT, STAGE_LAYERS, accounts, compile, evaluate, placement_sharded
from derive.symbols import L, N, d, m, p, t, v
from derive.inputs import exact_count
from derive.units import BYTE_UNITS, LONGEST_YEARS, YEAR_SECONDS, format_seconds

GiB = BYTE_UNITS["GiB"]
#: Micro-batch sizes tried, the most virtual stages per rank, the largest context-parallel size.
MICRO_BATCHES = (1, 2, 4, 8)
MAX_VIRTUAL = 8
MAX_CONTEXT = 16
COMMUNICATION = ("Communication is not modelled: the step time is the compute bound "
                 "(hardware FLOPs at the given MFU of peak) x the pipeline bubble 1 + (p-1)/(v m)")

#: Why a layout is left out, in the order the summary lists them.
REASONS = {
    "memory": "memory over the GPU's usable range (above its high end)",
    "memory-uncertain": "memory inside the usable range's uncertainty (above its low end)",
    "batch": "tokens per step not a whole number of s*b*d micro-batches",
    "schedule": "interleaving (v > 1) needs m a multiple of p",
}


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n``, ascending."""
    small = [k for k in range(1, isqrt(n) + 1) if n % k == 0]
    return sorted(set(small) | {n // k for k in small})


def layouts(entry: Model, gpus: int, zero_stages: Sequence[int],
            contexts: Sequence[int] = (1,)) -> dict[str, np.ndarray]:
    """Every candidate layout as int64 columns t, p, v, c, d, b, zero (recompute is crossed later)."""
    rows = []
    for tp in divisors(gcd(entry.heads, entry.kv_heads, gpus)):
        for cc in (k for k in contexts if gpus % (tp * k) == 0):
            for pp in (k for k in divisors(gpus // (tp * cc)) if k <= entry.layers):
                for vv in range(1, MAX_VIRTUAL + 1 if pp > 1 else 2):
                    if pp * vv > entry.layers:
                        break
                    rows += [(tp, pp, vv, cc, gpus // (tp * pp * cc), bb, zero)
                             for bb in MICRO_BATCHES for zero in zero_stages]
    names = ("t", "p", "v", "c", "d", "b", "zero")
    table = np.array(rows, dtype=np.int64).reshape(-1, len(names))
    return {name: table[:, index] for index, name in enumerate(names)}


def _rounded(sizes: np.ndarray) -> np.ndarray:
    """allocated_bytes of every request (CUDACachingAllocator rounding), computed once per distinct size."""
    exact = np.rint(sizes).astype(np.int64)
    distinct, where = np.unique(exact, return_inverse=True)
    return np.array([allocated_bytes(int(size)) for size in distinct], dtype=np.int64)[where]


def rounding_bytes(entry: Model, recompute: str, zero: int, profile: str, placement_name: str,
                   values: dict[str, np.ndarray]) -> np.ndarray:
    """Bytes the allocator adds on the first stage: state buffers and every held activation, rounded up."""
    terms = accounts(entry.architecture, profile, recompute, placement_name, placement_sharded(zero, placement_name))
    stage = sp.Piecewise((terms.parameters["single"], sp.Eq(p, 1)),
                         (terms.parameters["first"].xreplace(STAGE_LAYERS), True))
    buffers = placement_ledger(placement_name, placement_sharded(zero, placement_name), d).where("resident")
    extra = np.zeros(np.broadcast_shapes(*(np.shape(x) for x in values.values())), dtype=np.int64)
    for row in buffers:
        size = compile(row.bytes.xreplace({N: stage}))(**values)
        extra = extra + _rounded(size) - np.rint(size).astype(np.int64)
    chunks = sp.Piecewise((in_flight_micro_batches(p, None, m), sp.Eq(v, 1)),
                          (in_flight_micro_batches(p, v, m), True))
    held = compile(chunks * sp.ceiling(L / (p * v)))(**values)
    for row in layer_activations(profile, "fused", t, True, recompute):
        size = compile(row.bytes.xreplace(CONTEXT))(**values)
        extra = extra + held * (_rounded(size) - np.rint(size).astype(np.int64))
    return extra


@dataclass(frozen=True)
class Plan:
    """Every layout with its memory, step time, feasibility and reason (columns of equal length)."""

    model: Model
    gpus: int
    hardware: str
    tokens: int
    usable: tuple[int, int]
    columns: dict[str, np.ndarray]

    def order(self) -> np.ndarray:
        """Row indices: feasible layouts by step time (then memory), then the rest."""
        c = self.columns
        time = np.where(np.isnan(c["step_time"]), np.inf, c["step_time"])
        memory = np.where(np.isnan(c["memory_per_gpu"]), np.inf, c["memory_per_gpu"])
        return np.lexsort((c["b"], c["c"], c["v"], c["p"], c["t"], memory, time, ~c["feasible"]))

    def failures(self) -> dict[str, int]:
        """How many layouts failed for each reason."""
        reasons = self.columns["reason"]
        return {key: int(np.sum(reasons == key)) for key in REASONS if np.any(reasons == key)}


def plan(entry: Model, gpus: int, tokens: int, hardware_name: str = "h100", seq: int | None = None,
         profile: str = "llama-fused", placement_name: str = "megatron", mfu: float = 1.0,
         max_context: int = MAX_CONTEXT) -> Plan:
    """Every layout of ``entry`` on ``gpus`` GPUs at ``tokens`` per step, judged and timed."""
    if seq is not None:
        entry = replace(entry, seq=seq)
    low, high = usable_bytes(hardware_name)
    stage = placement(placement_name).stage
    linear = accounts(entry.architecture, profile, "none").context_parallel
    largest = layer_activations(profile, "fused", 1, True, "none").bytes() * L
    exact_count("seq", f"the activations of one unsplit GPU at micro-batch {max(MICRO_BATCHES)}",
                entry.at(largest, b=max(MICRO_BATCHES)))
    contexts = ([k for k in range(1, min(max_context, gpus) + 1) if entry.seq % k == 0]
                if linear else [1])
    base = layouts(entry, gpus, sorted({0, stage}), contexts)
    # m = T / (s b d) in integers: T / s first (b d <= 8 * 2^20), so no int64 product overflows.
    sequences = tokens // entry.seq if tokens % entry.seq == 0 else 0
    parts = []
    for recompute in RECOMPUTE_POLICIES:
        part = {**base, "recompute": np.full(base["t"].size, recompute)}
        per_step = part["b"] * part["d"]
        whole = (sequences > 0) & (sequences % per_step == 0)
        micro = np.where(whole, sequences // per_step, 1)
        schedule = (part["v"] == 1) | (micro % part["p"] == 0)
        memory = np.full(base["t"].size, np.nan)
        time = np.full(base["t"].size, np.nan)
        for zero in np.unique(part["zero"]):
            rows = (part["zero"] == zero) & whole
            layout = {k: part[k][rows] for k in ("t", "p", "v", "c", "d", "b")}
            layout.update(s=np.full(rows.sum(), entry.seq, dtype=np.int64), m=micro[rows])
            figures = evaluate(entry, layout, recompute, int(zero), profile, tokens=tokens,
                               hardware_name=hardware_name, mfu=mfu, placement_name=placement_name,
                               names=("memory_per_gpu",))
            values = {symbol.name: number for symbol, number in entry.values.items()} | layout
            memory[rows] = figures["memory_per_gpu"] + rounding_bytes(
                entry, recompute, int(zero), profile, placement_name, values)
            time[rows] = figures["step_time"]
        reason = np.select([~whole, ~schedule, memory > high, memory > low],
                           ["batch", "schedule", "memory", "memory-uncertain"], default="")
        parts.append({**part, "m": np.where(whole, micro, 0), "memory_per_gpu": memory,
                      "step_time": time, "feasible": reason == "", "reason": reason})
    columns = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    return Plan(entry, gpus, hardware_name, tokens, (low, high), columns)


# ---- command line ----

def _gib(value: float) -> str:
    return f"{value / GiB:6.2f}"


def _seconds(value: float) -> str:
    """A step time for the table's column: two decimals, scientific past 10^5 s, a bound past 10^6 years."""
    if value >= LONGEST_YEARS * YEAR_SECONDS:
        return "> 1e6 years"
    return f"{value:6.2f}" if value < 1e5 else f"{value:.2e}"


def render_text(result: Plan, top: int = 10) -> str:
    """The plan as text: header, the top feasible layouts, failure counts per reason."""
    c, entry = result.columns, result.model
    low, high = result.usable
    order = result.order()
    feasible = int(c["feasible"].sum())
    lines = [
        f"== {entry.name} on {result.gpus} {result.hardware.upper()}: {result.tokens:,} tokens per step "
        f"(s = {entry.seq})",
        f"  usable per GPU {low / GiB:.2f}-{high / GiB:.2f} GiB (derive.accounts.budget); "
        f"a layout fits at or under {low / GiB:.2f} GiB on its most loaded rank",
        f"  {COMMUNICATION}",
        f"  {len(order)} layouts, {feasible} fit",
    ]
    if feasible:
        lines.append("  rank   t   p  v  c     d  b     m  recompute  zero  memory GiB  step s  bubble")
    for rank, row in enumerate(order[:min(top, feasible)], 1):
        bubble = (c["p"][row] - 1) / (c["v"][row] * c["m"][row])
        lines.append(f"  {rank:4d} {c['t'][row]:3d} {c['p'][row]:3d} {c['v'][row]:2d} {c['c'][row]:2d} "
                     f"{c['d'][row]:5d} "
                     f"{c['b'][row]:2d} {c['m'][row]:5d}  {c['recompute'][row]:9s}  {c['zero'][row]:4d}  "
                     f"{_gib(c['memory_per_gpu'][row]):>10s}  {_seconds(c['step_time'][row]):>6s}  {bubble:6.1%}")
    timed = np.flatnonzero(~np.isnan(c["step_time"]))
    if timed.size:
        fastest = timed[np.argmin(c["step_time"][timed])]
        state = "fits" if c["feasible"][fastest] else f"fails: {REASONS[c['reason'][fastest]]}"
        lines.append(f"  fastest layout ignoring memory: t={c['t'][fastest]} p={c['p'][fastest]} "
                     f"v={c['v'][fastest]} c={c['c'][fastest]} b={c['b'][fastest]} {c['recompute'][fastest]} "
                     f"zero={c['zero'][fastest]}: {format_seconds(c['step_time'][fastest])}, "
                     f"{c['memory_per_gpu'][fastest] / GiB:.2f} GiB ({state})")
    for key, count in result.failures().items():
        lines.append(f"  failed: {count:6d}  {REASONS[key]}")
    return "\n".join(lines) + "\n"


def render_json(result: Plan) -> str:
    """Every layout in rank order with t, p, v, d, b, m, recompute, zero, memory_per_gpu, step_time, feasible, reason."""
    c = result.columns
    layouts = []
    for row in result.order():
        timed = not np.isnan(c["step_time"][row])
        layouts.append({
            **{key: int(c[key][row]) for key in ("t", "p", "v", "c", "d", "b", "m")},
            "recompute": str(c["recompute"][row]), "zero": int(c["zero"][row]),
            "memory_per_gpu": int(round(c["memory_per_gpu"][row])) if timed else None,
            "step_time": float(c["step_time"][row]) if timed else None,
            "feasible": bool(c["feasible"][row]),
            "reason": REASONS.get(str(c["reason"][row]), ""),
        })
    return json.dumps({
        "model": result.model.name, "gpus": result.gpus, "hardware": result.hardware,
        "tokens": result.tokens, "seq": result.model.seq,
        "usable_bytes": {"low": result.usable[0], "high": result.usable[1]},
        "communication_modelled": False, "note": COMMUNICATION,
        "failures": result.failures(), "layouts": layouts,
    }, indent=1) + "\n"


#: Largest --gpus: 2^20 (the other counts take the CLI's 2^53, integers a float holds exactly).
_GPUS = positive_up_to(2**20, "a positive integer up to 2^20")


def build_parser() -> argparse.ArgumentParser:
    """The options of ``python -m derive.plan``."""
    parser = OneLineParser(prog="derive.plan", description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="preset name or alias (8b, 70b, 405b, ...)")
    which.add_argument("--config", metavar="FILE",
                       help="a Hugging Face config.json of a dense model (derive.hf.from_config)")
    parser.add_argument("--gpus", type=_GPUS, required=True)
    parser.add_argument("--gpu", default="h100", choices=sorted(DRIVER_CAPACITY),
                        help="hardware with a usable-memory budget (derive.accounts.budget)")
    parser.add_argument("--tokens", type=POSITIVE, required=True, help="tokens per step")
    parser.add_argument("--seq", type=POSITIVE, help="sequence length (default: the model's)")
    parser.add_argument("--profile", default="llama-fused", help="layer profile of the saved-for-backward table")
    parser.add_argument("--placement", default="megatron", choices=sorted(PLACEMENTS))
    parser.add_argument("--mfu", type=FRACTION, default=1.0, help="fraction of peak (default 1)")
    parser.add_argument("--max-cp", type=POSITIVE, default=MAX_CONTEXT,
                        help=f"largest context-parallel size tried (default {MAX_CONTEXT}; 1: none)")
    parser.add_argument("--top", type=POSITIVE, default=10, help="feasible layouts to show")
    parser.add_argument("--json", action="store_true", help="every layout as JSON")
    return parser


#: Field names in derive's ValueErrors -> the option to name.
FIELD_OPTIONS = {"model": "--model", "config": "--config", "profile": "--profile", "seq": "--seq", "tokens": "--tokens",
                 "peak": "--gpu", "hardware_name": "--gpu", "placement": "--placement"}


def run(argv: Sequence[str] | None = None) -> str:
    """The plan as text or JSON; UsageError (or argparse's exit 2) on bad input."""
    args = build_parser().parse_args(argv)
    try:
        entry = model(args.model) if args.model else from_config(args.config)
    except ValueError as error:
        if args.model:
            raise UsageError(f"--model: {str(error).partition(': ')[2]}") from None
        raise UsageError(f"--config: {args.config}: {error}") from None  # the config's own field
    try:
        result = plan(entry, args.gpus, args.tokens, args.gpu, args.seq,
                      args.profile, args.placement, args.mfu, args.max_cp)
    except ValueError as error:
        field, _, rest = str(error).partition(": ")
        options = {**FIELD_OPTIONS, "model": "--config"} if args.config else FIELD_OPTIONS
        raise UsageError(f"{options.get(field, field)}: {rest}") from None
    return render_json(result) if args.json else render_text(result, args.top)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: print the plan, or one error line and exit status 2."""
    return serve(run, argv, "derive.plan")


if __name__ == "__main__":
    sys.exit(main())
