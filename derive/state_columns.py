"""A placement's resident states as integer columns: one compiled expression serves every placement and ZeRO stage.

Bytes per parameter held whole and sharded over d c (:data:`STATE_BYTES`, :func:`state_columns`) enter an
evaluation as numbers; a correctly rounded division makes its values those of each placement's own expression
(derive.accounts.placement's rows).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import sympy as sp

from derive.accounts.framework_placements import placement
from derive.accounts.placement import placement_bytes
from derive.symbols import N, N_8, c, d, n_8

#: The ranks ZeRO's sharded states are split over: data- and context-parallel together, as
#: Megatron's distributed optimizer takes intra_dp_cp_group (megatron/core/optimizer/__init__.py,
#: data_parallel_group=...) and the step model's optimizer reads them (d c replicas).
STATE_RANKS = d * c


#: The counts a placement's resident bytes are written in (derive.accounts.placement's rows): parameters,
#: and under an FP8 recipe the quantised elements and matrices (derive.recipes).
STATE_COUNTS = (N, N_8, n_8)
#: Per count, the bytes per unit of it a rank holds whole and the bytes sharded over STATE_RANKS: integer
#: symbols an evaluation is given as numbers (:func:`state_columns`), so the accounts of every placement
#: and ZeRO stage are one expression, compiled once (:func:`accounts` with no placement).
STATE_BYTES: dict[sp.Symbol, tuple[sp.Symbol, sp.Symbol]] = {
    count: (sp.Symbol(f"{count.name}_bytes_whole", nonnegative=True, integer=True),
            sp.Symbol(f"{count.name}_bytes_sharded", nonnegative=True, integer=True))
    for count in STATE_COUNTS}


def held_bytes(count: sp.Symbol) -> sp.Expr:
    """Bytes a rank holds per unit of ``count`` in STATE_BYTES' symbols: whole + sharded / (d c)."""
    whole, sharded = STATE_BYTES[count]
    return whole + sharded / STATE_RANKS


def state_split(expr: sp.Expr, ranks: sp.Symbol,
                counts: Sequence[sp.Symbol] = STATE_COUNTS) -> dict[str, int] | None:
    """``expr`` (bytes in ``counts``, sharded rows over ``ranks``) as the values of their STATE_BYTES symbols.

    None unless every term is a nonnegative whole multiple of one count, held whole or over ``ranks``.
    """
    found = dict.fromkeys((symbol.name for count in counts for symbol in STATE_BYTES[count]), 0)
    expr = sp.expand(expr * ranks)
    if expr == 0:
        return found
    if not expr.free_symbols <= {*counts, ranks}:
        return None
    for term in sp.Add.make_args(expr):
        coefficient, product = term.as_coeff_Mul()
        powers = product.as_powers_dict()
        held = [count for count in counts if count in powers]
        if (len(held) != 1 or powers[held[0]] != 1 or powers.get(ranks, 0) not in (0, 1) or len(powers) > 2
                or not (coefficient.is_Integer and coefficient > 0)):
            return None
        found[STATE_BYTES[held[0]][0 if ranks in powers else 1].name] += int(coefficient)
    return found


def recipe_bytes(placement_name: str, sharded: bool, ranks: sp.Expr, recipe: str,
                 fp8_param_gather: bool = False) -> sp.Expr:
    """Resident bytes ``recipe`` adds to ``placement_name``'s states (its FP8 copies: derive.accounts.placement)."""
    return (placement_bytes(placement_name, sharded, ranks, recipe, fp8_param_gather)
            - placement_bytes(placement_name, sharded, ranks))


@lru_cache(maxsize=None)
def state_columns(placement_name: str, sharded: bool, recipe: str | None = None,
                  fp8_param_gather: bool = False) -> dict[str, int] | None:
    """The resident bytes of ``placement_name`` as the values of STATE_BYTES' symbols, as :func:`accounts` counts them.

    The placement's rows in N and, under ``recipe``, the rows it adds in N_8 and n_8; None where a row is not a
    whole multiple of one count (e.g. a scale per block of elements): such placements keep their own expressions.
    """
    if fp8_param_gather and recipe is None:
        raise ValueError("fp8_param_gather: needs an FP8 recipe")
    ranks = sp.Dummy("ranks", positive=True, integer=True)
    found = state_split(placement_bytes(placement_name, sharded, ranks), ranks, (N,))
    if recipe is None or found is None:
        return found
    added = state_split(recipe_bytes(placement_name, sharded, ranks, recipe, fp8_param_gather), ranks, (N_8, n_8))
    return None if added is None else {**found, **added}


def placement_sharded(zero: int, placement_name: str) -> bool:
    """Whether ``zero`` asks for ``placement_name``'s sharding: 0 none, the placement's own stage sharded."""
    stage = placement(placement_name).stage
    if isinstance(zero, bool) or zero not in (0, stage):
        raise ValueError(f"zero: {placement_name} shards at stage {stage}; use 0 or {stage}, got {zero!r}")
    return zero == stage
