"""The planner's candidate space: every (t, p, v, c, d, b, ZeRO, balanced) layout; an MoE model's with e, t_E.

t divides the query and kv heads, c divides s (up to ``max_context``), t p c divides the GPUs
(d = GPUs / (t p c)), p v <= L (uneven stages; balanced pipelines p v <= L + 2), b in
:data:`MICRO_BATCHES`, ZeRO every stage the placement's framework offers. A model with routed experts
(:func:`expert_layouts`) also has t dividing the dense FFN width f, the expert tensor-parallel size
t_E in {1, t} (Megatron-Core's default when --expert-tensor-parallel-size is unset) dividing f_E, e
dividing the routed experts E and t_E e dividing t c d (megatron/core/parallel_state.py
initialize_model_parallel, expert RankGenerator; :meth:`derive.parallelism.Parallelism.check`);
balanced pipelines (Llama 3's embedding and loss slots) are dense models' only.
"""
from __future__ import annotations

from functools import lru_cache
from math import gcd, isqrt
from typing import Sequence

import numpy as np

from derive.model import Model
from derive.parallelism import Parallelism
from derive.symbols import E, f_E

#: Micro-batch sizes tried, the most virtual stages per rank, the largest context-parallel size.
MICRO_BATCHES = (1, 2, 4, 8)
MAX_VIRTUAL = 8
MAX_CONTEXT = 16
#: The layer slots a balanced pipeline adds: the embedding's and the loss's (Llama 3's pipeline, Dubey et al.
#: 2024, 3.3.2): its p v <= L + BALANCED_SLOTS.
BALANCED_SLOTS = 2


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
            for pp in (k for k in divisors(gpus // (tp * cc)) if k <= entry.layers + BALANCED_SLOTS):
                for balanced in (0, 1) if pp > 1 else (0,):
                    slots = entry.layers + BALANCED_SLOTS * balanced
                    for vv in range(1, MAX_VIRTUAL + 1 if pp > 1 else 2):
                        if pp * vv > slots:
                            break
                        rows += [(tp, pp, vv, cc, gpus // (tp * pp * cc), bb, zero, balanced)
                                 for bb in MICRO_BATCHES for zero in zero_stages]
    names = ("t", "p", "v", "c", "d", "b", "zero", "balanced")
    table = np.array(rows, dtype=np.int64).reshape(-1, len(names))
    return {name: table[:, index] for index, name in enumerate(names)}


def context_sizes(seq: int, gpus: int, max_context: int) -> list[int]:
    """The context-parallel sizes tried: c dividing s, up to ``max_context`` and the GPUs."""
    return [k for k in range(1, min(max_context, gpus) + 1) if seq % k == 0]


def expert_layouts(experts: Model, entry: Model, gpus: int, zero_stages: Sequence[int],
                   contexts: Sequence[int]) -> dict[str, np.ndarray]:
    """Every candidate of an MoE model as int64 columns t, p, v, c, d, b, zero, etp, e (recompute is crossed later).

    :func:`layouts` of ``entry`` (the config's model; not balanced) with t dividing f, crossed with every
    t_E in {1, t} dividing f_E and every e dividing E (``experts``' sizes) with t_E e dividing t c d.
    """
    base = layouts(entry, gpus, zero_stages, contexts)
    keep = (base["balanced"] == 0) & (entry.ffn % base["t"] == 0)
    base = {name: column[keep] for name, column in base.items() if name != "balanced"}
    sizes = experts.values
    routed = divisors(sizes[E])

    @lru_cache(maxsize=None)
    def expert_grids(tp: int, ranks: int) -> tuple[tuple[int, int], ...]:
        return tuple((etp, ep) for etp in sorted({1, tp}) if sizes[f_E] % etp == 0
                     for ep in routed if ranks % (etp * ep) == 0)

    grids = [expert_grids(tp, tp * cc * dp) for tp, cc, dp in
             zip(base["t"].tolist(), base["c"].tolist(), base["d"].tolist())]
    counts = np.array([len(grid) for grid in grids], dtype=np.int64)
    pairs = np.array([pair for grid in grids for pair in grid], dtype=np.int64).reshape(-1, 2)
    columns = {name: np.repeat(column, counts) for name, column in base.items()}
    columns["etp"], columns["e"] = pairs[:, 0], pairs[:, 1]
    return columns


def micro_batch_columns(sequences: int, part: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(whether b d divides the step's sequences, m = sequences / (b d) there and 1 elsewhere, whether the
    schedule runs it: v = 1 or m a multiple of p, Megatron's interleaving rule) of layout columns ``part``."""
    per_step = part["b"] * part["d"]
    whole = (sequences > 0) & (sequences % per_step == 0)
    micro = np.where(whole, sequences // per_step, 1)
    return whole, micro, (part["v"] == 1) | (micro % part["p"] == 0)


def layout_parallelism(columns: dict[str, np.ndarray], row: int, tokens: int, seq: int) -> Parallelism:
    """The :class:`derive.parallelism.Parallelism` of one plan row (sequence parallelism on)."""
    return Parallelism(tp=int(columns["t"][row]), pp=int(columns["p"][row]), vp=int(columns["v"][row]),
                       cp=int(columns["c"][row]), dp=int(columns["d"][row]), micro_batch=int(columns["b"][row]),
                       global_batch=tokens // seq, recompute=str(columns["recompute"][row]),
                       zero=int(columns["zero"][row]), sequence_parallel=int(columns["t"][row]) > 1,
                       balanced=bool(columns["balanced"][row]))

