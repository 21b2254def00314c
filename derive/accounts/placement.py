"""A placement's per-rank ledger: the state ledger of its recipe, partitioned at its ZeRO stage, plus its transients.

Each placement (:mod:`derive.accounts.framework_placements`) is the state ledger of
:mod:`derive.accounts.state` for one precision recipe (its ``resident`` rows, tags
``params``/``grads``/``optimizer`` and ``zero1``-``zero3``), partitioned with the same ZeRO
mechanism (:func:`~derive.accounts.state.partitioned`) at the placement's stage, plus the
``transient`` tensors the framework allocates and frees inside a step. Every tensor's ``note``
is its lifetime. Byte totals are sums over these ledgers.
"""
from __future__ import annotations

from dataclasses import replace

import sympy as sp

from derive.accounts.framework_placements import PLACEMENTS, Placement, placement
from derive.accounts.state import PRECISIONS, partitioned, state_ledger
from derive.inputs import choose, flag
from derive.symbols import N, d
from derive.tensors import Ledger, Tensor


#: The fields of a precision that say how its non-FP8 states are held (derive.accounts.state.Precision).
HELD_AS = ("compute", "grad", "master", "transient_grad", "optimizer_grad")


def fp8_precision(name: str, precision: str | None) -> str:
    """The precision of ``name``'s states: its recipe, or ``precision``, an FP8 one its recipe's states carry.

    An FP8 precision (derive.accounts.state: Megatron's bf16-fp32grad rows plus the recipe's weight copies)
    applies to the placements whose recipe keeps those bf16-fp32grad rows; ValueError naming the field otherwise.
    """
    entry = placement(name)
    if precision is None:
        return entry.recipe
    rule = PRECISIONS[choose("precision", precision, PRECISIONS)]
    if rule.fp8 is None:
        raise ValueError(f"precision: {precision} is not an FP8 precision; {name} holds its own recipe's "
                         f"states ({entry.recipe})")
    if not _holds_as(entry, precision):
        hosts = ", ".join(key for key, other in PLACEMENTS.items() if _holds_as(other, precision))
        raise ValueError(f"precision: {name} holds {entry.recipe} states; {precision} adds its weight copies "
                         f"to {_held_base(precision)}'s (placements: {hosts})")
    return precision


def _held_alike(precision: str, other: str) -> bool:
    """Whether ``precision`` and ``other`` hold the non-FP8 states alike (HELD_AS)."""
    return all(getattr(PRECISIONS[precision], field) == getattr(PRECISIONS[other], field) for field in HELD_AS)


def _holds_as(entry: Placement, precision: str) -> bool:
    """Whether ``entry``'s recipe holds the non-FP8 states as ``precision`` does."""
    return _held_alike(precision, entry.recipe)


def _held_base(precision: str) -> str:
    """The first precision without FP8 rows that holds ``precision``'s other states alike."""
    return next(key for key, other in PRECISIONS.items() if other.fp8 is None and _held_alike(precision, key))


def _resident(entry: Placement, precision: str | None = None, fp8_param_gather: bool = False) -> Ledger:
    """The placement's resident rows (the state table of its recipe, or of an FP8 ``precision`` on it), unsharded.

    Each row has its lifetime as the note (an FP8 row keeps its own) and ``host`` if offloaded (FP8 rows stay
    on the GPU: the GEMMs read them).
    """
    held = state_ledger(fp8_precision(entry.name, precision), entry.optimizer,
                        fp8_param_gather=flag("fp8_param_gather", fp8_param_gather)).where("resident")
    return held.map(lambda t: replace(t, note=t.note if t.has("fp8") else entry.lifetimes[_role(t)],
                                      tags=t.tags | ({"host"} if _role(t) in entry.host and not t.has("fp8")
                                                     else set())))


def _role(tensor: Tensor) -> str:
    """The lifetime key of a state row: params, grads, master or moments."""
    if tensor.has("optimizer"):
        return "master" if "master" in tensor.name else "moments"
    return "params" if tensor.has("params") else "grads"


def _transients(entry: Placement, ranks: sp.Expr) -> Ledger:
    """The placement's transient tensors on one of ``ranks`` ranks, each with its lifetime."""
    return Ledger(
        Tensor(row.name, (sp.sympify(row.numel).subs(d, ranks),), row.dtype,
               frozenset({"transient", row.account}) | row.tags, note=row.lifetime)
        for row in entry.transients
    )


def placement_ledger(name: str, sharded: bool = False, ranks: sp.Expr = d, precision: str | None = None,
                     fp8_param_gather: bool = False) -> Ledger:
    """Per-rank ledger of ``name``: resident rows (sharded over ``ranks`` if asked) and transients.

    ``precision``: an FP8 precision on the placement (:func:`fp8_precision`): its weight copies, scales
    and history too, in N_8 and n_8 (``fp8_param_gather``: Megatron's --fp8-param-gather).
    """
    entry = placement(name)
    ranks = ranks if sharded else sp.Integer(1)
    resident = partitioned(_resident(entry, precision, fp8_param_gather), entry.stage, ranks)
    return resident + _transients(entry, ranks)


def placement_bytes(name: str, sharded: bool = False, ranks: sp.Expr = d, precision: str | None = None,
                    fp8_param_gather: bool = False) -> sp.Expr:
    """Resident GPU bytes per rank of ``name`` (N parameters; N_8, n_8 under an FP8 ``precision``).

    Offloaded rows are in :func:`host_bytes`.
    """
    return placement_ledger(name, sharded, ranks, precision, fp8_param_gather).where("resident").without("host").bytes()


def host_bytes(name: str, sharded: bool = False, ranks: sp.Expr = d) -> sp.Expr:
    """Resident host-memory bytes per rank of ``name``: the offloaded rows (0 without offload)."""
    return placement_ledger(name, sharded, ranks).where("resident", "host").bytes()


def placement_bytes_per_parameter(name: str, sharded: bool = False, ranks: sp.Expr = d) -> sp.Expr:
    """Resident bytes per parameter per rank of ``name``: 16-18 unsharded, a + b/d sharded."""
    return sp.expand(placement_bytes(name, sharded, ranks) / N)


def transient_bytes(name: str, sharded: bool = False, ranks: sp.Expr = d) -> sp.Expr:
    """Bytes of ``name``'s transient tensors (each at its own moment; their sum bounds them)."""
    return placement_ledger(name, sharded, ranks).where("transient").bytes()


def placement_table() -> list[dict[str, object]]:
    """One row per placement for the sheet: totals per parameter and a row per tensor (SymPy values)."""
    rows = []
    for name, entry in PLACEMENTS.items():
        whole, shard = placement_ledger(name), placement_ledger(name, sharded=True)
        tensors = [
            {"tensor": full.name, "dtype": full.dtype,
             "lifetime": "resident" if full.has("resident") else "transient",
             "when": full.note,
             "sharded": part.bytes.has(d),
             "bytes_per_parameter": sp.expand(full.bytes / N),
             "sharded_bytes_per_parameter": sp.expand(part.bytes / N)}
            for full, part in zip(whole, shard)
        ]
        rows.append({
            "placement": name,
            "framework": entry.framework,
            "bytes_per_parameter": placement_bytes_per_parameter(name),
            "sharded_bytes_per_parameter": placement_bytes_per_parameter(name, sharded=True),
            "transient_bytes": transient_bytes(name, sharded=True),
            "tensors": tensors,
            "source": entry.source,
        })
    return rows
