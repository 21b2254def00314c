"""``python -m derive.plan``: every layout of a model on N GPUs, the ones that fit, ranked by step time.

A layout is (t, p, v, c, d, b, recompute, ZeRO, balanced), ZeRO every stage the placement's
framework offers (:func:`derive.accounts.placement.stage_placements`: Megatron's DDP, distributed
optimizer, Megatron-FSDP optim_grads and optim_grads_params), each with its placement's states: t divides the query and kv
heads, c (context parallel, profiles without score matrices) divides s, t p c
divides the GPUs (d = GPUs / (t p c)), p v <= L (uneven stages: the
most loaded holds ceil(L / (p v)) layers per chunk); at p > 1 each layout is also tried
balanced (:attr:`derive.parallelism.Parallelism.balanced`, Llama 3's pipeline: the embedding and
the loss take one layer slot each, p v <= L + 2, each rank's layers counted exactly:
:mod:`derive.accounts.pipeline_split`, one fewer on the first and the last rank, the middle ranks
judged too), m = T / (s b d) whole,
and interleaving (v > 1) needs m a multiple of p (Megatron's check). Memory is
the most loaded rank's (:mod:`derive.sweep`: the framework placement's states,
the first stage's in-flight micro-batches with the interleaving factor, the
logits on the last stage) plus the caching allocator's rounding of every
state buffer and every saved activation (:mod:`derive.accounts.allocator`),
judged against the GPU's usable range (:mod:`derive.accounts.budget`): it fits
at or under the high end, and one above the low end is marked *tight* (it fits only if the CUDA
context, NCCL buffers and fragmentation stay under their largest estimates); ``fit="low"`` keeps only layouts at or
under the low end. Each layout that fits is timed by the step model
(:func:`derive.accounts.prediction.predict`: GEMMs, element-wise work, the
communication ledger's rows on their links with Megatron's overlap, the
pipeline bubble, the optimizer; sequence parallelism on, as the memory accounts
assume) and the layouts are ranked by that predicted step time. Layouts the step model cannot tell
apart (equal predicted times, e.g. c and b traded at equal tokens per GPU with the context ring
hidden under attention) share one rank; within it they are listed by lower memory per GPU, then
smaller t, p, v, c, b, unbalanced first.
Under an FP8 ``precision`` (a recipe of :mod:`derive.recipes`) the memory counts the recipe's
weight copies and FP8 linear inputs (:func:`derive.sweep.accounts`' ``recipe``) and the step model
times the FP8 GEMMs. The compute bound (hardware FLOPs at ``mfu`` x peak, x (1 + (p - 1)/(v m))) is
kept as the ``bound`` column. Dense models here; the MoE presets (``--model mixtral-8x7b``,
``qwen3-30b-a3b``, ``deepseek-v3``) go to :mod:`derive.plan_moe` (the e axis, expert accounts).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from math import gcd, isqrt
from typing import ClassVar, Sequence

import numpy as np
import sympy as sp

from derive.accounts.activations import (
    RECOMPUTE_POLICIES,
    layer_activations,
)
from derive.accounts.allocator import allocated_bytes
from derive.accounts.budget import DRIVER_CAPACITY, usable_bytes
from derive.accounts.framework_placements import PLACEMENTS, stage_placements
from derive.accounts.placement import placement_ledger
from derive.accounts.prediction import predict_columns, tensor_cores
from derive.accounts.state import PRECISIONS as STATE_PRECISIONS
from derive.accounts.step_layout import LINEAR_DTYPE
from derive.cli import FRACTION, POSITIVE, OneLineParser, UsageError, positive_up_to, serve
from derive.hf import from_config
from derive.inputs import choose
from derive.architectures.decoder import Layout
from derive.parallelism import Parallelism
from derive.names import named_model
from derive.presets import Model
from derive.accounts.pipeline_split import stage_in_flight, stage_layers
from derive.compiled import Compiled, compile
from derive.stage_accounts import CONTEXT, accounts, stage_counts
from derive.state_columns import STATE_COUNTS, STATE_RANKS, held_bytes, placement_sharded, state_split
from derive.sweep import evaluate
from derive.symbols import L, p, t, v
from derive.inputs import exact_count
from derive.systems import system
from derive.units import BYTE_UNITS, LONGEST_YEARS, YEAR_SECONDS, format_memory

GiB = BYTE_UNITS["GiB"]
#: Micro-batch sizes tried, the most virtual stages per rank, the largest context-parallel size.
MICRO_BATCHES = (1, 2, 4, 8)
#: Feasible layouts whose breakdown the text shows.
BREAKDOWNS = 3
MAX_VIRTUAL = 8
MAX_CONTEXT = 16
COMMUNICATION = ("step time predicted by derive.accounts.prediction (GEMMs, element-wise work, the "
                 "communication ledger on NVLink / NIC with Megatron's overlap rules, bubble, optimizer); "
                 "equal predicted times share a rank, listed by lower memory, then smaller t, p, v, c, b")
#: derive.accounts.budget's hardware names -> the systems table's.
SYSTEM_NAMES = {"h100": "h100", "a100": "a100-80gb"}

#: Where a layout's most loaded rank must land in the usable range (derive.accounts.budget).
FITS = {"low": "at or under the usable range's low end", "high": "at or under its high end"}
#: Predicted step times within this relative difference are one rank (the model cannot order them).
TIE = 1e-9

#: Precisions the planner takes: bf16 (the placement's own states) and the FP8 recipes the step model
#: times (derive.accounts.step.LINEAR_DTYPE) whose states the accounts hold (derive.accounts.state).
PRECISIONS = ("bf16", *(name for name in LINEAR_DTYPE if name in STATE_PRECISIONS and STATE_PRECISIONS[name].fp8))

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
    """Every candidate layout as int64 columns t, p, v, c, d, b, zero, balanced (recompute is crossed later)."""
    rows = []
    for tp in divisors(gcd(entry.heads, entry.kv_heads, gpus)):
        for cc in (k for k in contexts if gpus % (tp * k) == 0):
            for pp in (k for k in divisors(gpus // (tp * cc)) if k <= entry.layers + 2):
                for balanced in (0, 1) if pp > 1 else (0,):
                    slots = entry.layers + 2 * balanced
                    for vv in range(1, MAX_VIRTUAL + 1 if pp > 1 else 2):
                        if pp * vv > slots:
                            break
                        rows += [(tp, pp, vv, cc, gpus // (tp * pp * cc), bb, zero, balanced)
                                 for bb in MICRO_BATCHES for zero in zero_stages]
    names = ("t", "p", "v", "c", "d", "b", "zero", "balanced")
    table = np.array(rows, dtype=np.int64).reshape(-1, len(names))
    return {name: table[:, index] for index, name in enumerate(names)}


def _rounded(sizes: np.ndarray) -> np.ndarray:
    """allocated_bytes of every request (CUDACachingAllocator rounding), over the column at once."""
    return np.asarray(allocated_bytes(np.asarray(np.rint(sizes)).astype(np.int64)), dtype=np.int64)


@lru_cache(maxsize=None)
def _stage_counts(architecture: str | Layout, balanced: bool, rank: str, fp8: bool) -> dict[sp.Symbol, sp.Expr]:
    """N (and, ``fp8``, N_8 and n_8) -> what ``rank`` holds: the whole model's at p = 1, else its layers'."""
    whole, held = stage_counts(architecture, "single", fp8), stage_counts(architecture, rank, fp8)
    return {symbol: sp.Piecewise((whole[symbol], sp.Eq(p, 1)),
                                 (count.xreplace(stage_layers(rank, balanced)), True))
            for symbol, count in held.items()}


@lru_cache(maxsize=None)
def _buffers(placement_name: str, sharded: bool, recipe: str | None) -> tuple[tuple[sp.Expr, tuple | None, int], ...]:
    """Each distinct resident buffer of the placement: its bytes, its derive.sweep.STATE_BYTES values, how many.

    The values where the buffer is a whole multiple of one count (derive.sweep.state_split), else None.
    """
    ranks = sp.Dummy("ranks", positive=True, integer=True)
    split = placement_ledger(placement_name, sharded, ranks, recipe).where("resident")
    rows = placement_ledger(placement_name, sharded, STATE_RANKS, recipe).where("resident")
    found: dict[tuple, int] = {}
    for mine, row in zip(split, rows):
        states = state_split(mine.bytes, ranks, STATE_COUNTS if recipe is not None else STATE_COUNTS[:1])
        key = (row.bytes, None) if states is None else (sp.Integer(0), tuple(states.items()))
        found[key] = found.get(key, 0) + 1
    return tuple((size, states, copies) for (size, states), copies in found.items())


@lru_cache(maxsize=None)
def _buffer_sizes(architecture: str | Layout, placement_name: str, sharded: bool, balanced: bool, rank: str,
                  recipe: str | None) -> tuple[tuple[Compiled, dict[str, int], int], ...]:
    """Each distinct resident buffer of the placement on ``rank``: its size compiled, the columns it takes, how many.

    A buffer of whole multiples of one count is the counts' :func:`derive.sweep.held_bytes` at its own
    derive.sweep.STATE_BYTES values (one expression for every such buffer); any other, its own expression.
    """
    counts = _stage_counts(architecture, balanced, rank, recipe is not None)
    shared = compile(sum((count * held_bytes(symbol) for symbol, count in counts.items()), sp.Integer(0)))
    return tuple((shared, dict(states), copies) if states is not None else
                 (compile(size.xreplace(counts)), {}, copies)
                 for size, states, copies in _buffers(placement_name, sharded, recipe))


@lru_cache(maxsize=None)
def _held_activations(profile: str, recompute: str, balanced: bool, rank: str,
                      recipe: str | None) -> tuple[Compiled, tuple[Compiled, ...]]:
    """Layer-micro-batches ``rank`` holds, and the size of every activation of a layer, compiled."""
    layers = (L / (p * v)).xreplace(stage_layers(rank, balanced, activations=True))
    rows = layer_activations(profile, "fused", t, True, recompute, recipe=recipe)
    return compile(stage_in_flight(rank) * layers), tuple(compile(row.bytes.xreplace(CONTEXT)) for row in rows)


def _rounded_up(size: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """allocated_bytes less the request of every size (CUDACachingAllocator rounding), over ``shape``."""
    size = np.broadcast_to(size, shape)
    return _rounded(size) - np.rint(size).astype(np.int64)


def rounding_bytes(entry: Model, recompute: str, zero: int, profile: str, placement_name: str,
                   values: dict[str, np.ndarray], balanced: bool = False, rank: str = "first",
                   recipe: str | None = None) -> np.ndarray:
    """Bytes the allocator adds on ``rank``: state buffers and every held activation, rounded up.

    Not balanced, the first stage's (it holds the most layers and chunks); balanced, ``rank``'s
    (first, last or middle) at the layers it holds (derive.sweep.stage_layers). ``recipe``: an FP8
    recipe's weight copies are buffers too, its FP8 linear inputs held activations.
    """
    sharded = placement_sharded(zero, placement_name)
    shape = np.broadcast_shapes(*(np.shape(x) for x in values.values()))
    extra = np.zeros(shape, dtype=np.int64)
    for size, states, copies in _buffer_sizes(entry.architecture, placement_name, sharded, balanced, rank, recipe):
        extra = extra + copies * _rounded_up(size(**values, **states), shape)  # a scale row: a constant
    held, rows = _held_activations(profile, recompute, balanced, rank, recipe)
    held = held(**values)
    for size in rows:
        extra = extra + held * _rounded_up(size(**values), shape)
    return extra


@dataclass(frozen=True)
class Ranked:
    """A plan's question and its rows (columns of equal length), their order, ranks and tight mark."""

    model: Model
    gpus: int
    hardware: str
    tokens: int
    usable: tuple[int, int]
    columns: dict[str, np.ndarray]
    fit: str = "high"
    #: The layout columns that order rows of equal step time and memory, the last one first.
    TIEBREAK: ClassVar[tuple[str, ...]] = ("balanced", "b", "c", "v", "p", "t")

    def order(self) -> np.ndarray:
        """Row indices: feasible layouts by step time (then memory, then the TIEBREAK columns), then the rest."""
        c = self.columns
        time = np.where(np.isnan(c["step_time"]), np.inf, c["step_time"])
        memory = np.where(np.isnan(c["memory_per_gpu"]), np.inf, c["memory_per_gpu"])
        return np.lexsort((*(c[name] for name in self.TIEBREAK), memory, time, ~c["feasible"]))

    def failures(self) -> dict[str, int]:
        """How many layouts failed for each reason."""
        reasons = self.columns["reason"]
        return {key: int(np.sum(reasons == key)) for key in REASONS if np.any(reasons == key)}

    def leaders(self, top: int) -> tuple[list[int], dict[int, int]]:
        """The feasible rows of ranks 1 .. ``top`` in order, and each rank's first row."""
        order, ranks = self.order(), self.ranks()
        shown = [row for row in order[:int(self.columns["feasible"].sum())] if ranks[row] <= top]
        return shown, {int(ranks[row]): row for row in reversed(shown)}

    def summary_lines(self, first: dict[int, int]) -> list[str]:
        """The breakdown of the best BREAKDOWNS ranks (``first``: each rank's first row), then the failures."""
        lines = [f"  #{rank} breakdown (s): " + ", ".join(f"{name} {seconds:.2f}" for name, seconds in
                                                        self.columns["breakdown"][row].items() if seconds)
                 for rank, row in sorted(first.items())[:BREAKDOWNS]]
        return lines + [f"  failed: {count:6d}  {REASONS[key]}" for key, count in self.failures().items()]

    def ranks(self) -> np.ndarray:
        """Each row's rank by predicted step time (:func:`shared_ranks`)."""
        return shared_ranks(self.columns["step_time"], self.order(), self.columns["feasible"])

    def tight(self) -> np.ndarray:
        """Feasible rows whose most loaded rank lies above the usable range's low end."""
        return self.columns["feasible"] & (self.columns["memory_per_gpu"] > self.usable[0])


@dataclass(frozen=True)
class Plan(Ranked):
    """Every layout with its memory, step time, feasibility and reason."""

    precision: str = "bf16"


def micro_batch_columns(sequences: int, part: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(whether b d divides the step's sequences, m = sequences / (b d) there and 1 elsewhere, whether the
    schedule runs it: v = 1 or m a multiple of p, Megatron's interleaving rule) of layout columns ``part``."""
    per_step = part["b"] * part["d"]
    whole = (sequences > 0) & (sequences % per_step == 0)
    micro = np.where(whole, sequences // per_step, 1)
    return whole, micro, (part["v"] == 1) | (micro % part["p"] == 0)


def shared_ranks(step_time: np.ndarray, order: np.ndarray, feasible: np.ndarray) -> np.ndarray:
    """Rank of each row, 1 the fastest, 0 where it does not fit: a time within ``TIE`` of the one before shares its rank."""
    ranks = np.zeros(step_time.size, dtype=np.int64)
    timed = order[feasible[order]]
    if timed.size:
        times = step_time[timed]
        ranks[timed] = 1 + np.concatenate([[0], np.cumsum(np.diff(times) > TIE * times[1:])])
    return ranks


def reasons(memory: np.ndarray, usable: tuple[int, int], fit: str, **failed: np.ndarray) -> np.ndarray:
    """Each layout's first failure (a REASONS key; "" fits): ``failed`` checks in order, then memory.

    Memory above the usable range's high end fails outright; above the end ``fit`` names
    (low or high), it is inside the range's uncertainty.
    """
    low, high = usable
    limit = low if fit == "low" else high
    return np.select([*failed.values(), memory > high, memory > limit],
                     [*failed, "memory", "memory-uncertain"], default="")


def plan(entry: Model, gpus: int, tokens: int, hardware_name: str = "h100", seq: int | None = None,
         profile: str = "llama-fused", placement_name: str = "megatron", mfu: float = 1.0,
         max_context: int = MAX_CONTEXT, fit: str = "high", precision: str = "bf16") -> Plan:
    """Every layout of ``entry`` on ``gpus`` GPUs at ``tokens`` per step, judged and timed.

    ``fit``: a layout fits at or under the usable range's ``high`` end (default; above the low end it
    is :meth:`Plan.tight`) or, conservatively, its ``low`` end. ``precision``: ``bf16`` (the placement's
    own states) or an FP8 recipe (:data:`PRECISIONS`): its weight copies and FP8 linear inputs in the
    memory (derive.sweep's ``recipe``), its FP8 GEMMs in the step time; ValueError naming ``precision``
    where the GPU has no tensor cores for it.
    """
    choose("fit", fit, FITS)
    choose("precision", precision, PRECISIONS)
    tensor_cores(precision, system(SYSTEM_NAMES.get(hardware_name, hardware_name)))
    recipe = STATE_PRECISIONS[precision].fp8
    if seq is not None:
        entry = replace(entry, seq=seq)
    low, high = usable_bytes(hardware_name)
    stages = stage_placements(placement_name)
    linear = accounts(entry.architecture, profile, "none", None).context_parallel
    largest = layer_activations(profile, "fused", 1, True, "none").bytes() * L
    exact_count("seq", f"the activations of one unsplit GPU at micro-batch {max(MICRO_BATCHES)}",
                entry.at(largest, b=max(MICRO_BATCHES)))
    contexts = ([k for k in range(1, min(max_context, gpus) + 1) if entry.seq % k == 0]
                if linear else [1])
    base = layouts(entry, gpus, sorted(stages), contexts)
    # m = T / (s b d) in integers: T / s first (b d <= 8 * 2^20), so no int64 product overflows.
    sequences = tokens // entry.seq if tokens % entry.seq == 0 else 0
    parts = []
    for recompute in RECOMPUTE_POLICIES:
        part = {**base, "recompute": np.full(base["t"].size, recompute)}
        whole, micro, schedule = micro_batch_columns(sequences, part)
        memory = np.full(base["t"].size, np.nan)
        time = np.full(base["t"].size, np.nan)
        for zero, balanced in sorted(set(zip(part["zero"].tolist(), part["balanced"].tolist()))):
            rows = (part["zero"] == zero) & (part["balanced"] == balanced) & whole
            if not rows.any():
                continue
            layout = {k: part[k][rows] for k in ("t", "p", "v", "c", "d", "b")}
            layout.update(s=np.full(rows.sum(), entry.seq, dtype=np.int64), m=micro[rows])
            ranks = ("first", "last", "middle") if balanced else ()
            placed = stages[int(zero)]  # the framework's placement at this stage
            figures = evaluate(entry, layout, recompute, int(zero), profile, tokens=tokens,
                               hardware_name=hardware_name, mfu=mfu, placement_name=placed,
                               names=tuple(f"{rank}_rank_bytes" for rank in ranks) or ("memory_per_gpu",),
                               balanced=bool(balanced), recipe=recipe)
            values = {symbol.name: number for symbol, number in entry.values.items()} | layout
            if not balanced:
                memory[rows] = figures["memory_per_gpu"] + rounding_bytes(
                    entry, recompute, int(zero), profile, placed, values, recipe=recipe)
            else:  # the most loaded rank, each with its own rounding (rank 1 is the last rank at p = 2)
                memory[rows] = np.max([
                    np.where((rank != "middle") | (layout["p"] > 2), figures[f"{rank}_rank_bytes"]
                             + rounding_bytes(entry, recompute, int(zero), profile, placed, values, True, rank,
                                              recipe),
                             0)
                    for rank in ranks], axis=0)
            time[rows] = figures["step_time"]
        reason = reasons(memory, (low, high), fit, batch=~whole, schedule=~schedule)
        parts.append({**part, "m": np.where(whole, micro, 0), "memory_per_gpu": memory,
                      "bound": time, "feasible": reason == "", "reason": reason})
    columns = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    columns["step_time"], columns["breakdown"] = predicted_times(entry, columns, tokens, hardware_name, precision)
    return Plan(entry, gpus, hardware_name, tokens, (low, high), columns, fit, precision)


def layout_parallelism(columns: dict[str, np.ndarray], row: int, tokens: int, seq: int) -> Parallelism:
    """The :class:`derive.parallelism.Parallelism` of one plan row (sequence parallelism on)."""
    return Parallelism(tp=int(columns["t"][row]), pp=int(columns["p"][row]), vp=int(columns["v"][row]),
                       cp=int(columns["c"][row]), dp=int(columns["d"][row]), micro_batch=int(columns["b"][row]),
                       global_batch=tokens // seq, recompute=str(columns["recompute"][row]),
                       zero=int(columns["zero"][row]), sequence_parallel=int(columns["t"][row]) > 1,
                       balanced=bool(columns["balanced"][row]))


#: The plan columns whose values select a ledger template (derive.accounts.prediction.FLAG_FIELDS).
TEMPLATE_FLAGS = ("recompute", "zero", "balanced")
#: The expert-parallel columns an MoE plan adds (derive.plan_moe), timed with the rest.
EXPERT_SIZES = ("e", "etp")


def predicted_times(entry: Model, columns: dict[str, np.ndarray], tokens: int,
                    hardware_name: str, precision: str = "bf16") -> tuple[np.ndarray, np.ndarray]:
    """Predicted step time (NaN where the layout does not fit) and breakdown of every feasible row at ``precision``.

    The feasible rows are grouped by the flags that select a ledger template (recompute, ZeRO,
    balanced, sequence parallelism t > 1, and p = 1) and each group is timed at once over its
    columns (derive.accounts.prediction.predict_columns): what ``predict`` gives each row's
    :func:`layout_parallelism`.
    """
    gpu = system(SYSTEM_NAMES.get(hardware_name, hardware_name))
    times = np.full(columns["t"].size, np.nan)
    breakdowns = np.full(columns["t"].size, None, dtype=object)
    feasible = np.flatnonzero(columns["feasible"])
    keys = list(zip(*(columns[name][feasible].tolist() for name in TEMPLATE_FLAGS),
                    (columns["t"][feasible] > 1).tolist(), (columns["p"][feasible] == 1).tolist()))
    groups: dict[tuple, list[int]] = {}
    for row, key in zip(feasible.tolist(), keys):
        groups.setdefault(key, []).append(row)
    for (recompute, zero, balanced, sequence_parallel, _), rows in groups.items():
        flags = Parallelism(recompute=recompute, zero=zero, balanced=bool(balanced),
                            sequence_parallel=sequence_parallel, precision=precision)
        result = predict_columns(entry, flags, {name: columns[name][rows] for name in
                                                ("t", "p", "v", "c", "d", "b", "m", *EXPERT_SIZES)
                                                if name in columns}, gpu)
        times[rows] = result.step_time_s
        names = list(result.breakdown)
        for row, values in zip(rows, zip(*(result.breakdown[name].tolist() for name in names))):
            breakdowns[row] = dict(zip(names, values))
    return times, breakdowns


# ---- command line ----

def _gib(value: float) -> str:
    return f"{value / GiB:6.2f}"


def _seconds(value: float) -> str:
    """A step time for the table's column: two decimals, scientific past 10^5 s, a bound past 10^6 years."""
    if value >= LONGEST_YEARS * YEAR_SECONDS:
        return "> 1e6 years"
    return f"{value:6.2f}" if value < 1e5 else f"{value:.2e}"


#: The layout fields of the text table, in its column order.
FIELDS = ("t", "p", "v", "c", "d", "b", "m", "recompute", "zero", "balanced")


def fit_line(usable: tuple[int, int], fit: str) -> str:
    """The text's line on how memory is judged: the usable range, the limit, what 'tight' means."""
    low, high = usable
    judged = (f"a layout fits at or under {high / GiB:.2f} GiB on its most loaded rank ('tight' above "
              f"{low / GiB:.2f} GiB: it fits only if context, NCCL buffers and fragmentation stay under their "
              f"largest estimates)"
              if fit == "high" else f"a layout fits at or under {low / GiB:.2f} GiB on its most loaded rank")
    return f"  usable per GPU {low / GiB:.2f}-{high / GiB:.2f} GiB (derive.accounts.budget); {judged}"


def render_text(result: Plan, top: int = 10) -> str:
    """The plan as text: header, the ``top`` ranks (one line each, its alike layouts named below), failures."""
    c, entry = result.columns, result.model
    order, ranks, tight = result.order(), result.ranks(), result.tight()
    feasible = int(c["feasible"].sum())
    lines = [
        f"== {entry.name} on {result.gpus} {result.hardware.upper()}"
        + (f" in {result.precision}" if result.precision != "bf16" else "")
        + f": {result.tokens:,} tokens per step (s = {entry.seq})",
        fit_line(result.usable, result.fit),
        f"  {COMMUNICATION}",
        f"  {len(order)} layouts, {feasible} fit",
    ]
    shown, first = result.leaders(top)
    if feasible:
        lines.append("  rank   t   p  v  c     d  b     m  recompute  zero bal  memory GiB  step s  bubble")
    for rank, row in sorted(first.items()):
        bubble = (c["p"][row] - 1) / (c["v"][row] * c["m"][row])
        lines.append(f"  {rank:4d} {c['t'][row]:3d} {c['p'][row]:3d} {c['v'][row]:2d} {c['c'][row]:2d} "
                     f"{c['d'][row]:5d} "
                     f"{c['b'][row]:2d} {c['m'][row]:5d}  {c['recompute'][row]:9s}  {c['zero'][row]:4d} {c['balanced'][row]:3d}  "
                     f"{_gib(c['memory_per_gpu'][row]):>10s}  {_seconds(c['step_time'][row]):>6s}  {bubble:6.1%}"
                     + ("  tight" if tight[row] else ""))
    for rank, row in sorted(first.items()):
        alike = [other for other in shown if ranks[other] == rank and other != row]
        if alike:
            named = "; ".join(" ".join(f"{key}={c[key][other]}" for key in FIELDS if c[key][other] != c[key][row])
                              + (" tight" if tight[other] else "") for other in alike)
            lines.append(f"  rank {rank} also (the same predicted step): {named}")
    lines += result.summary_lines(first)
    return "\n".join(lines) + "\n"


def render_json(result: Plan) -> str:
    """Every layout in rank order: t, p, v, c, d, b, m, recompute, zero, memory_per_gpu, step_time, feasible, rank, tight, reason."""
    c, ranks, tight = result.columns, result.ranks(), result.tight()
    layouts = []
    for row in result.order():
        timed = not np.isnan(c["step_time"][row])
        measured = not np.isnan(c["memory_per_gpu"][row])
        layouts.append({
            **{key: int(c[key][row]) for key in ("t", "p", "v", "c", "d", "b", "m")},
            "recompute": str(c["recompute"][row]), "zero": int(c["zero"][row]),
            "balanced": bool(c["balanced"][row]),
            "memory_per_gpu": int(round(c["memory_per_gpu"][row])) if measured else None,
            "step_time": float(c["step_time"][row]) if timed else None,
            "breakdown": c["breakdown"][row] if timed else None,
            "feasible": bool(c["feasible"][row]), "rank": int(ranks[row]) or None, "tight": bool(tight[row]),
            "reason": REASONS.get(str(c["reason"][row]), ""),
        })
    return json.dumps({
        "model": result.model.name, "gpus": result.gpus, "hardware": result.hardware,
        "tokens": result.tokens, "seq": result.model.seq,
        "usable_bytes": {"low": result.usable[0], "high": result.usable[1]}, "fit": result.fit,
        "precision": result.precision,
        "communication_modelled": True, "note": COMMUNICATION,
        "failures": result.failures(), "layouts": layouts,
    }, indent=1) + "\n"


#: Largest --gpus: 2^20 (the other counts take the CLI's 2^53, integers a float holds exactly).
_GPUS = positive_up_to(2**20, "a positive integer up to 2^20")


def build_parser() -> argparse.ArgumentParser:
    """The options of ``python -m derive.plan``."""
    parser = OneLineParser(prog="derive.plan", description=__doc__.split("\n\n")[0],
                           epilog=f"ranking: {COMMUNICATION}. No layout fitting exits 1 with the reason.")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="a dense preset, alias or shipped config (derive report --list-models)")
    which.add_argument("--config", metavar="FILE",
                       help="a Hugging Face config.json of a dense model (derive.hf.from_config)")
    parser.add_argument("--gpus", type=_GPUS, required=True)
    parser.add_argument("--gpu", default="h100", choices=sorted({*SYSTEM_NAMES.values(), *DRIVER_CAPACITY}),
                        help="a derive.systems GPU with a measured usable-memory range (derive.accounts.budget)")
    parser.add_argument("--tokens", type=POSITIVE, required=True, help="tokens per step")
    parser.add_argument("--seq", type=POSITIVE, help="sequence length (default: the model's)")
    parser.add_argument("--profile", default="llama-fused", help="layer profile of the saved-for-backward table")
    parser.add_argument("--placement", default="megatron", choices=sorted(PLACEMENTS))
    parser.add_argument("--mfu", type=FRACTION,
                        help="not taken: the planner ranks by the step model's predicted time, not a target MFU")
    parser.add_argument("--max-cp", type=POSITIVE, default=MAX_CONTEXT,
                        help=f"largest context-parallel size tried (default {MAX_CONTEXT}; 1: none)")
    parser.add_argument("--fit", default="high", choices=sorted(FITS),
                        help="judge memory at the usable range's high end (default; 'tight' marks a layout "
                             "above the low end) or only at its low end")
    parser.add_argument("--precision", default="bf16", choices=PRECISIONS,
                        help="bf16 (the placement's own states) or an FP8 recipe (derive.recipes): its weight "
                             "copies and FP8 linear inputs in memory, its FP8 GEMMs in the step time; refused "
                             "on a --gpu without tensor cores for it (mxfp8: Blackwell)")
    parser.add_argument("--top", type=POSITIVE, default=10,
                        help="ranks to show (layouts with the same predicted step share one)")
    parser.add_argument("--json", action="store_true", help="every layout as JSON")
    return parser


#: Field names in derive's ValueErrors -> the option to name.
FIELD_OPTIONS = {"model": "--model", "config": "--config", "profile": "--profile", "seq": "--seq", "tokens": "--tokens",
                 "peak": "--gpu", "hardware_name": "--gpu", "placement": "--placement", "precision": "--precision"}


def planned(argv: Sequence[str] | None = None) -> tuple[Plan | str, argparse.Namespace]:
    """The plan of the parsed ``argv`` (an MoE preset's: derive.plan_moe's text); UsageError on bad input."""
    args = build_parser().parse_args(argv)
    if args.mfu is not None:
        raise UsageError("--mfu: the planner ranks layouts by the step model's predicted time "
                         "(derive.accounts.prediction), not by a target MFU; derive report takes --mfu")
    hardware_name = {name: budget for budget, name in SYSTEM_NAMES.items()}.get(args.gpu, args.gpu)
    from derive.plan_moe import CONFIGS as MOE_PRESETS, moe_json, plan_moe, render_moe_plan
    if args.model in MOE_PRESETS:  # MoE presets: derive.plan_moe (expert accounts, e axis)
        if args.precision != "bf16":
            raise UsageError(f"--precision: the MoE planner (derive.plan_moe) counts bf16 states and activations "
                             f"only; {args.precision} is planned for dense models (derive report and derive "
                             "predict take it for MoE models)")
        if args.placement != "megatron":
            raise UsageError(f"--placement: the MoE planner (derive.plan_moe) places states as Megatron-LM does "
                             f"(expert data-parallel groups); {args.placement} is planned for dense models")
        if args.profile != "llama-fused":
            raise UsageError(f"--profile: the MoE planner (derive.plan_moe) reads the fused MoE table "
                             f"(derive.architectures.saved_moe); {args.profile} is a dense layer profile")
        try:
            moe = plan_moe(args.model, args.gpus, args.tokens, hardware_name, args.seq, args.fit, args.max_cp)
        except ValueError as error:
            field, _, rest = str(error).partition(": ")
            raise UsageError(f"{FIELD_OPTIONS.get(field, field)}: {rest}") from None
        return (moe_json(moe) if args.json else render_moe_plan(moe, args.top)), args
    try:
        entry = named_model(args.model)[0] if args.model else from_config(args.config)
    except ValueError as error:
        if args.model:
            raise UsageError(f"--model: {str(error).partition(': ')[2]}") from None
        raise UsageError(f"--config: {args.config}: {error}") from None  # the config's own field
    try:
        result = plan(entry, args.gpus, args.tokens, hardware_name, args.seq,
                      args.profile, args.placement, 1.0, args.max_cp, args.fit, args.precision)
    except ValueError as error:
        field, _, rest = str(error).partition(": ")
        options = {**FIELD_OPTIONS, "model": "--config"} if args.config else FIELD_OPTIONS
        raise UsageError(f"{options.get(field, field)}: {rest}") from None
    return result, args


def run(argv: Sequence[str] | None = None) -> str:
    """The plan as text or JSON (no layout fitting: the reason and the nearest question that has an answer)."""
    result, args = planned(argv)
    if isinstance(result, str):
        return result
    empty = None if result.columns["feasible"].any() else nearest(result)
    if args.json:
        text = render_json(result)
        return text if empty is None else json.dumps({**json.loads(text), "no_layout_fits": empty}, indent=1) + "\n"
    return render_text(result, args.top) + ("" if empty is None else f"  no layout fits: {empty}\n")


def nearest(result: Plan) -> str:
    """Why no layout fits, and the nearest question that has an answer (GPUs or tokens that divide)."""
    failures = result.failures()
    reason = max(failures, key=failures.get) if failures else "batch"
    seq, gpus, tokens = result.model.seq, result.gpus, result.tokens
    if reason == "batch":
        if tokens % seq:
            below, above = tokens // seq * seq, (tokens // seq + 1) * seq
            return (f"global batch {tokens:,} tokens is not a multiple of s = {seq}; "
                    f"{below or above:,} or {above:,} tokens would divide")
        sequences = tokens // seq
        counts = sorted({d * t for d in divisors(sequences) for t in TENSOR_SIZES if d * t != gpus},
                        key=lambda n: (abs(n - gpus), -n))
        multiple = -(-tokens // (gpus * seq)) * gpus * seq
        return (f"global batch {tokens:,} tokens is not a multiple of {gpus} x {seq} (GPUs x s) for any "
                f"t p c that divides the model; {counts[0]:,} GPUs or a global batch of {multiple:,} tokens "
                "would divide")
    if reason in ("memory", "memory-uncertain"):
        smallest = np.nanmin(result.columns["memory_per_gpu"])
        return (f"no layout fits in memory: the smallest needs {format_memory(smallest)} on its most loaded rank, "
                f"over the usable low end {format_memory(result.usable[0])}; more GPUs or a larger --gpu")
    return f"no layout fits: {REASONS[reason]}"


#: Tensor-parallel sizes the nearest-question search tries (a GPU count is d x t).
TENSOR_SIZES = (1, 2, 4, 8)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: print the plan (exit 1 when no layout fits), or one error line and exit status 2."""
    printed: list[str] = []

    def keep(given: Sequence[str] | None) -> str:
        printed.append(run(given))
        return printed[0]

    code = serve(keep, argv, "derive.plan")
    return 1 if code == 0 and ("no layout fits" in printed[0] or '"no_layout_fits"' in printed[0]) else code


if __name__ == "__main__":
    sys.exit(main())
