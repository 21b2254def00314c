"""A plan's rows judged and ranked: why a layout fails, its predicted step time, shared ranks, the text's helpers.

Memory is judged against the GPU's usable range (:mod:`derive.accounts.budget`): a layout fits at or
under the high end, and one above the low end is marked *tight*; ``fit="low"`` keeps only layouts at
or under the low end. Each layout that fits is timed by the step model
(:func:`derive.accounts.prediction.predict_columns`, EP all-to-all included where the plan has e and
t_E columns) and ranked by that predicted time; layouts the step model cannot tell apart share one rank.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np

from derive.accounts.activations import RECOMPUTE_POLICIES
from derive.accounts.comm import CONTEXT_OVER_MLA
from derive.accounts.prediction import predict_columns
from derive.model import Model
from derive.parallelism import Parallelism
from derive.planning.layouts import divisors, micro_batch_columns
from derive.systems import system
from derive.units import BYTE_UNITS, LONGEST_YEARS, YEAR_SECONDS, format_memory

GiB = BYTE_UNITS["GiB"]
#: Feasible layouts whose breakdown the text shows.
BREAKDOWNS = 3
COMMUNICATION = ("step time predicted by derive.accounts.prediction (GEMMs, element-wise work, the "
                 "communication ledger on NVLink / NIC with Megatron's overlap rules, bubble, optimizer); "
                 "equal predicted times share a rank, listed by lower memory, then smaller t, p, v, c, b")
#: derive.accounts.budget's hardware names -> the systems table's.
SYSTEM_NAMES = {"h100": "h100", "a100": "a100-80gb"}

#: Where a layout's most loaded rank must land in the usable range (derive.accounts.budget).
FITS = {"low": "at or under the usable range's low end", "high": "at or under its high end"}
#: The columns a dominated variant may differ in (the rest name the layout; :meth:`Plan.dominated`).
VARIANTS = ("recompute", "zero")
#: Predicted step times within this relative difference are one rank (the model cannot order them).
TIE = 1e-9

#: Why a layout is left out, in the order the summary lists them.
REASONS = {
    # derive comm's and derive predict's refusal (derive.accounts.comm.check_context), in its words
    "context": CONTEXT_OVER_MLA.format(model=""),
    "memory": "memory over the GPU's usable range (above its high end)",
    "memory-uncertain": "memory inside the usable range's uncertainty (above its low end)",
    "batch": "tokens per step not a whole number of s*b*d micro-batches",
    "schedule": "interleaving (v > 1) needs m a multiple of p",
}

@dataclass(frozen=True)
class Plan:
    """Every layout with its memory, step time, feasibility and reason: the question, its rows (columns of equal
    length), their order, ranks and tight mark."""

    model: Model
    gpus: int
    hardware: str
    tokens: int
    usable: tuple[int, int]
    columns: dict[str, np.ndarray]
    fit: str = "high"
    precision: str = "bf16"
    #: The layout columns that order rows of equal step time and memory, the last one first (those a plan has).
    TIEBREAK = ("balanced", "b", "etp", "e", "c", "v", "p", "t")

    def order(self) -> np.ndarray:
        """Row indices: ranked layouts by step time (then memory, then the TIEBREAK columns), then the dominated
        ones (:meth:`dominated`) in the same order, then those that do not fit."""
        c = self.columns
        time = np.where(np.isnan(c["step_time"]), np.inf, c["step_time"])
        memory = np.where(np.isnan(c["memory_per_gpu"]), np.inf, c["memory_per_gpu"])
        return np.lexsort((*(c[name] for name in self.TIEBREAK if name in c), memory, time, self.dominated(),
                           ~c["feasible"]))

    def dominated(self) -> np.ndarray:
        """:attr:`_dominated`, worked out once per plan."""
        return self._dominated

    @cached_property
    def _dominated(self) -> np.ndarray:
        """Feasible rows that another feasible variant of the same layout (only VARIANTS differ) beats: no slower
        and no more memory, strictly better in one of the two (each layout's variants side by side in a padded
        grid, one row per layout)."""
        c = self.columns
        rows = np.flatnonzero(c["feasible"] & ~np.isnan(c["step_time"]))
        beaten = np.zeros(c["feasible"].size, dtype=bool)
        if not rows.size:
            return beaten
        names = [name for name in c if name in self.TIEBREAK + ("d",) and name not in VARIANTS]
        _, layout = np.unique(np.stack([c[name][rows].astype(np.int64) for name in names]), axis=1,
                              return_inverse=True)
        layout = layout.reshape(-1)
        by_layout = np.argsort(layout, kind="stable")
        starts = np.searchsorted(layout[by_layout], layout[by_layout])
        slot = np.arange(rows.size) - starts
        grid = np.full((2, layout.max() + 1, slot.max() + 1), np.inf)
        grid[:, layout[by_layout], slot] = c["step_time"][rows[by_layout]], c["memory_per_gpu"][rows[by_layout]]
        time, memory = grid[0][:, :, None], grid[1][:, :, None]
        beats = ((time <= time.transpose(0, 2, 1)) & (memory <= memory.transpose(0, 2, 1))
                 & ((time < time.transpose(0, 2, 1)) | (memory < memory.transpose(0, 2, 1))))
        beaten[rows[by_layout]] = beats.any(axis=1)[layout[by_layout], slot]
        return beaten

    def failures(self) -> dict[str, int]:
        """How many layouts failed for each reason."""
        reasons = self.columns["reason"]
        return {key: int(np.sum(reasons == key)) for key in REASONS if np.any(reasons == key)}

    def leaders(self, top: int) -> tuple[list[int], dict[int, int]]:
        """The ranked rows of ranks 1 .. ``top`` in order, and each rank's first row."""
        ranks = self.ranks()
        shown = [row for row in self.ranked() if ranks[row] <= top]
        return shown, {int(ranks[row]): row for row in reversed(shown)}

    def ranked(self) -> np.ndarray:
        """The ranked rows (feasible, not dominated) in rank order."""
        return self.order()[:int((self.columns["feasible"] & ~self.dominated()).sum())]

    def summary_lines(self, first: dict[int, int]) -> list[str]:
        """The breakdown of the best BREAKDOWNS ranks (``first``: each rank's first row), then the failures."""
        lines = [f"  #{rank} breakdown (s): " + ", ".join(f"{name} {seconds:.2f}" for name, seconds in
                                                        self.columns["breakdown"][row].items() if seconds)
                 for rank, row in sorted(first.items())[:BREAKDOWNS]]
        dominated = int(self.dominated().sum())
        return lines + ([f"  not ranked: {dominated:6d}  variants that another recompute / ZeRO choice of the same "
                         "layout beats (no slower, no more memory)"] if dominated else []) + [
            f"  failed: {count:6d}  {REASONS[key]}" for key, count in self.failures().items()]

    def ranks(self) -> np.ndarray:
        """Each row's rank by predicted step time (:func:`shared_ranks`), 0 where it does not fit or is dominated."""
        return shared_ranks(self.columns["step_time"], self.order(), self.columns["feasible"] & ~self.dominated())

    def tight(self) -> np.ndarray:
        """Feasible rows whose most loaded rank lies above the usable range's low end."""
        return self.columns["feasible"] & (self.columns["memory_per_gpu"] > self.usable[0])

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

def judged_columns(base: dict[str, np.ndarray], sequences: int, usable: tuple[int, int], fit: str,
                   memory_of: Callable[[dict[str, np.ndarray], np.ndarray, np.ndarray],
                                       tuple[np.ndarray, dict[str, np.ndarray]]],
                   unmodelled: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Every layout of ``base`` under each recompute policy, judged: one set of columns.

    Per policy: the micro-batch columns (``m``, whole batches, schedules), the most loaded rank's
    memory and any extra columns from ``memory_of(part, whole, micro)``, then the verdict
    (:func:`reasons`). ``sequences``: T / s, or 0 when the tokens are no whole number of sequences.
    ``unmodelled``: the layouts of ``base`` the step model refuses (REASONS' "context"), judged first.
    """
    refused = np.zeros(base["t"].size, dtype=bool) if unmodelled is None else unmodelled
    parts = []
    for recompute in RECOMPUTE_POLICIES:
        part = {**base, "recompute": np.full(base["t"].size, recompute)}
        whole, micro, schedule = micro_batch_columns(sequences, part)
        memory, extra = memory_of(part, whole, micro)
        reason = reasons(memory, usable, fit, context=refused, batch=~whole, schedule=~schedule)
        parts.append({**part, "m": np.where(whole, micro, 0), "memory_per_gpu": memory, **extra,
                      "feasible": reason == "", "reason": reason})
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


#: The plan columns whose values select a ledger template (derive.accounts.prediction.FLAG_FIELDS).
TEMPLATE_FLAGS = ("recompute", "zero", "balanced")
#: The expert-parallel columns of an MoE model's plan (derive.planning.layouts.expert_layouts), timed with the rest.
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

# ---- the plan's text ----

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
