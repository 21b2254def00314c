"""The caching allocator's rounding on a plan's most loaded rank: every state buffer and held activation rounded up.

:func:`rounding_bytes` adds, over layout columns at once, what CUDACachingAllocator's rounding
(:mod:`derive.accounts.allocator`) puts on top of the exact accounts of :mod:`derive.sweep`.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import sympy as sp

from derive.accounts.activations import layer_activations
from derive.accounts.allocator import allocated_bytes
from derive.accounts.placement import placement_ledger
from derive.architectures.decoder import Layout
from derive.accounts.pipeline_split import stage_in_flight, stage_layers
from derive.evaluation.vectorised import Compiled, compile
from derive.model import Model
from derive.stage_accounts import CONTEXT, stage_counts
from derive.state_columns import STATE_COUNTS, STATE_RANKS, held_bytes, placement_sharded, state_split
from derive.symbols import L, p, t, v


def _rounded(sizes: np.ndarray) -> np.ndarray:
    """allocated_bytes of every request (CUDACachingAllocator rounding), over the column at once."""
    return np.asarray(allocated_bytes(np.asarray(np.rint(sizes)).astype(np.int64)), dtype=np.int64)


@lru_cache(maxsize=None)
def _stage_counts(architecture: Layout, balanced: bool, rank: str, fp8: bool) -> dict[sp.Symbol, sp.Expr]:
    """N (and, ``fp8``, N_8 and n_8) -> what ``rank`` holds: the whole model's at p = 1, else its layers'."""
    whole, held = stage_counts(architecture, "single", fp8), stage_counts(architecture, rank, fp8)
    return {symbol: sp.Piecewise((whole[symbol], sp.Eq(p, 1)),
                                 (count.xreplace(stage_layers(rank, balanced)), True))
            for symbol, count in held.items()}


@lru_cache(maxsize=None)
def _buffers(placement_name: str, sharded: bool, recipe: str | None) -> tuple[tuple[sp.Expr, tuple | None, int], ...]:
    """Each distinct resident buffer of the placement: its bytes, its derive.state_columns.STATE_BYTES values, how many.

    The values where the buffer is a whole multiple of one count (derive.state_columns.state_split), else None.
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
def _buffer_sizes(architecture: Layout, placement_name: str, sharded: bool, balanced: bool, rank: str,
                  recipe: str | None) -> tuple[tuple[Compiled, dict[str, int], int], ...]:
    """Each distinct resident buffer of the placement on ``rank``: its size compiled, the columns it takes, how many.

    A buffer of whole multiples of one count is the counts' :func:`derive.state_columns.held_bytes` at its own
    derive.state_columns.STATE_BYTES values (one expression for every such buffer); any other, its own expression.
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
    (first, last or middle) at the layers it holds (derive.accounts.pipeline_split.stage_layers). ``recipe``: an FP8
    recipe's weight copies are buffers too, its FP8 linear inputs held activations.
    """
    buffers, held, rows = rounding_terms(entry.architecture, recompute, zero, profile, placement_name, balanced, rank,
                                         recipe)
    shape = np.broadcast_shapes(*(np.shape(x) for x in values.values()))
    extra = np.zeros(shape, dtype=np.int64)
    for size, states, copies in buffers:
        extra = extra + copies * _rounded_up(size(**values, **states), shape)  # a scale row: a constant
    held = held(**values)
    for size in rows:
        extra = extra + held * _rounded_up(size(**values), shape)
    return extra


def rounding_terms(architecture: Layout, recompute: str, zero: int, profile: str, placement_name: str,
                   balanced: bool = False, rank: str = "first", recipe: str | None = None
                   ) -> tuple[tuple[tuple[Compiled, dict[str, int], int], ...], Compiled, tuple[Compiled, ...]]:
    """What :func:`rounding_bytes` rounds on ``rank``, compiled (each ``.expr`` its SymPy expression; the page's
    planner prints them, derive.render.page_plan): every distinct resident buffer (its size, the
    derive.state_columns.STATE_BYTES values it takes, how many), the layer-micro-batches the rank holds, and the
    size of every activation of a layer."""
    sharded = placement_sharded(zero, placement_name)
    held, rows = _held_activations(profile, recompute, balanced, rank, recipe)
    return _buffer_sizes(architecture, placement_name, sharded, balanced, rank, recipe), held, rows
