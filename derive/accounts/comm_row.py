"""One row of the communication ledger (:class:`Collective`), the sizes rows are written in (:class:`LayoutTerms`), and the builder that adds them.

The builder applies the collective algorithm's share of the payload each rank sends
(:func:`derive.accounts.collectives.sent_factor`); derive.accounts.comm_rows and
derive.accounts.comm_data_parallel fill it. Sources name the Megatron-LM / Transformer Engine
file that issues each collective.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable

import sympy as sp

from derive.accounts.collectives import sent_factor
from derive.expansion import expand
from derive.parallelism import Parallelism

MEGATRON_TP = "megatron/core/tensor_parallel/mappings.py"
MEGATRON_LINEAR = "megatron/core/tensor_parallel/layers.py"
MEGATRON_DDP = "megatron/core/distributed/param_and_grad_buffer.py"
TE_CP = "transformer_engine/pytorch/attention (AttnFuncWithCPAndKVP2P / AttnFuncWithCPAndKVAllGather)"
MOE_DISPATCH = "megatron/core/transformer/moe/token_dispatcher.py MoEAlltoAllTokenDispatcher"


@dataclass(frozen=True)
class Collective:
    """One collective of a step: what it moves, over which group, how often, in which pass."""

    name: str
    tensor: str
    collective: str
    group: str
    ranks: sp.Expr
    payload: sp.Expr
    sent: sp.Expr
    received: sp.Expr
    count: sp.Expr
    pass_: str
    overlap: str
    source: str
    algorithm: str = "ring"

    @property
    def sent_per_step(self) -> sp.Expr:
        """Bytes one rank sends through this row in one step."""
        return self.sent * self.count

    def evaluated(self, at: Callable[[sp.Expr], sp.Expr]) -> "Collective":
        """The row with ``at`` applied to every expression (a model's sizes substituted)."""
        return replace(self, **{name: sp.sympify(at(getattr(self, name))) for name in
                                ("ranks", "payload", "sent", "received", "count")})

    def record(self) -> dict[str, object]:
        """A JSON-ready row: numbers as int (or float when not whole), expressions as text."""
        def value(expr: sp.Expr) -> object:
            expr = sp.sympify(expr)
            if expr.is_Integer:
                return int(expr)
            return float(expr) if expr.is_number else sp.sstr(expr)
        return {"name": self.name, "tensor": self.tensor, "collective": self.collective,
                "group": self.group, "ranks": value(self.ranks), "payload": value(self.payload),
                "sent": value(self.sent), "received": value(self.received), "count": value(self.count),
                "sent_per_step": value(self.sent_per_step), "pass": self.pass_,
                "overlap": self.overlap, "algorithm": self.algorithm, "source": self.source}


@dataclass(frozen=True)
class LayoutTerms:
    """The sizes a row is written in: numbers (a layout on a model) or symbols (identities)."""

    t: sp.Expr
    p: sp.Expr
    v: sp.Expr
    c: sp.Expr
    d: sp.Expr
    e: sp.Expr
    t_E: sp.Expr
    m: sp.Expr
    dense_layers: sp.Expr
    moe_layers: sp.Expr
    capacity: sp.Expr | None
    symbolic: bool = False
    replicas: sp.Expr = sp.Integer(1)

    def active(self, size: sp.Expr) -> bool:
        """Whether a group of ``size`` ranks moves anything (a symbol may exceed 1)."""
        return self.symbolic or sp.sympify(size) != 1

    @property
    def layers(self) -> sp.Expr:
        """Layers on the rank."""
        return self.dense_layers + self.moe_layers


class RowBuilder:
    """Collects rows for one layout; ``add`` applies the algorithm's factor to the payload."""

    def __init__(self, terms: LayoutTerms, layout: Parallelism) -> None:
        self.terms, self.layout, self.found = terms, layout, []

    def add(self, name: str, tensor: str, collective: str, group: str, ranks: sp.Expr,
            payload: sp.Expr, count: sp.Expr, pass_: str, overlap: str, source: str) -> None:
        payload, sent = _payload_sent(sp.sympify(payload), collective, sp.sympify(ranks), self.layout.algorithm)
        self.found.append(Collective(name, tensor, collective, group, sp.sympify(ranks),
                                     payload, sent, sent, sp.sympify(count), pass_,
                                     overlap, source, self.layout.algorithm))


@lru_cache(maxsize=4096)
def _payload_sent(payload: sp.Expr, collective: str, ranks: sp.Expr, algorithm: str) -> tuple[sp.Expr, sp.Expr]:
    """(payload, bytes one rank sends) expanded, once per row shape (the planner's ledgers repeat them)."""
    return expand(payload), expand(payload * sent_factor(collective, ranks, algorithm))
