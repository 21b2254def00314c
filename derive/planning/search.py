"""The planner's search: every layout of a model on N GPUs, the ones that fit, ranked by predicted step time.

The command line is ``derive plan`` (:mod:`derive.plan`); the formula sheet's layouts section runs :func:`plan` too.

A layout is (t, p, v, c, d, b, recompute, ZeRO, balanced), ZeRO every stage the placement's
framework offers (:func:`derive.accounts.framework_placements.stage_placements`: Megatron's DDP, distributed
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
weight copies and FP8 linear inputs (:func:`derive.stage_accounts.accounts`' ``recipe``) and the step model
times the FP8 GEMMs. The compute bound (hardware FLOPs at ``mfu`` x peak, x (1 + (p - 1)/(v m))) is
kept as the ``bound`` column. Dense models here; the MoE presets (``--model mixtral-8x7b``,
``qwen3-30b-a3b``, ``deepseek-v3``) go to :mod:`derive.plan_moe` (the e axis, expert accounts).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from math import gcd, isqrt
from typing import ClassVar, Sequence

import numpy as np

from derive.accounts.activations import RECOMPUTE_POLICIES, layer_activations
from derive.accounts.budget import usable_bytes
from derive.accounts.framework_placements import stage_placements
from derive.accounts.prediction import predict_columns, tensor_cores
from derive.accounts.state import PRECISIONS as STATE_PRECISIONS
from derive.accounts.step_layout import LINEAR_DTYPE
from derive.inputs import choose, exact_count
from derive.model import Model
from derive.parallelism import Parallelism
from derive.planning.rounding import rounding_bytes
from derive.stage_accounts import accounts
from derive.sweep import evaluate
from derive.symbols import L
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
#: times (derive.accounts.step_layout.LINEAR_DTYPE) whose states the accounts hold (derive.accounts.state).
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


# ---- the plan's text, shared with derive.plan_moe ----

def _gib(value: float) -> str:
    return f"{value / GiB:6.2f}"


def _seconds(value: float) -> str:
    """A step time for the table's column: two decimals, scientific past 10^5 s, a bound past 10^6 years."""
    if value >= LONGEST_YEARS * YEAR_SECONDS:
        return "> 1e6 years"
    return f"{value:6.2f}" if value < 1e5 else f"{value:.2e}"


def fit_line(usable: tuple[int, int], fit: str) -> str:
    """The text's line on how memory is judged: the usable range, the limit, what 'tight' means."""
    low, high = usable
    judged = (f"a layout fits at or under {high / GiB:.2f} GiB on its most loaded rank ('tight' above "
              f"{low / GiB:.2f} GiB: it fits only if context, NCCL buffers and fragmentation stay under their "
              f"largest estimates)"
              if fit == "high" else f"a layout fits at or under {low / GiB:.2f} GiB on its most loaded rank")
    return f"  usable per GPU {low / GiB:.2f}-{high / GiB:.2f} GiB (derive.accounts.budget); {judged}"


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
