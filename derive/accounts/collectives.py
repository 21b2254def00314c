"""Collective algorithms as named conventions: the share of a buffer each rank sends, per collective.

A collective over n ranks on a buffer of P bytes (the whole buffer: the all-reduce's input, the
all-gather's output, the reduce-scatter's input, the all-to-all's input) makes each rank send
``factor x P`` bytes. The factors are data with a source, never typed into a ledger row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sympy as sp

from derive.inputs import choose

#: The collectives of a training step.
COLLECTIVES = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "send-recv", "broadcast")


@dataclass(frozen=True)
class Algorithm:
    """How one family of collective implementations moves bytes: collective -> factor(n)."""

    name: str
    factors: dict[str, Callable[[sp.Expr], sp.Expr]]
    source: str

    def factor(self, collective: str, ranks: sp.Expr) -> sp.Expr:
        """Bytes one rank sends per byte of the full buffer, over ``ranks`` ranks."""
        choose("collective", collective, COLLECTIVES)
        if collective not in self.factors:
            raise ValueError(f"collective: the {self.name} algorithm has no {collective} "
                             f"(it has {', '.join(self.factors)})")
        return sp.sympify(self.factors[collective](sp.sympify(ranks)))


def _shard(n: sp.Expr) -> sp.Expr:
    """(n - 1)/n: every rank's share but its own passes through it once."""
    return (n - 1) / n


def _point_to_point(n: sp.Expr) -> sp.Expr:
    """The whole buffer, once (a send to the neighbour)."""
    return sp.Integer(1)


RING = Algorithm(
    "ring",
    {
        # reduce-scatter then all-gather, each (n-1) steps of P/n
        "all-reduce": lambda n: 2 * _shard(n),
        "reduce-scatter": _shard,
        "all-gather": _shard,
        # every rank keeps 1/n of its input and sends the rest to the n-1 others
        "all-to-all": _shard,
        "send-recv": _point_to_point,
        # pipelined chain broadcast: every rank but the last forwards the whole buffer once
        "broadcast": _point_to_point,
    },
    "Patarasuk & Yuan 2009 (bandwidth-optimal ring all-reduce); NCCL's default for large "
    "buffers; NCCL docs, 'Performance reported by NCCL tests' (nccl-tests doc/PERFORMANCE.md: "
    "busBw factors 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter, all-to-all)",
)

TREE = Algorithm(
    "tree",
    {
        # double binary tree: each rank sends the (half) buffer up its two trees and down to
        # its children; an inner node of one tree is a leaf of the other, so P up and P down
        "all-reduce": lambda n: sp.Integer(2),
        "broadcast": _point_to_point,
        "send-recv": _point_to_point,
    },
    "Sanders, Speck & Traff 2009 (two-tree broadcast and reduction); NCCL 2.4 double binary "
    "trees (NVIDIA developer blog, 'Massively Scale Your Deep Learning Training with NCCL 2.4'): "
    "an upper bound per rank, independent of n",
)

NVLS = Algorithm(
    "nvls",
    {
        # NVLink SHARP: the switch reduces the buffers it receives and multicasts the result
        "all-reduce": _point_to_point,
        "reduce-scatter": _point_to_point,
        "all-gather": lambda n: 1 / n,
        "send-recv": _point_to_point,
    },
    "NVLink SHARP (NCCL 2.17+, NCCL_NVLS_ENABLE; NVIDIA Hopper NVSwitch in-network reduction): "
    "each GPU sends its buffer (all-gather: its shard) to the switch once",
)

#: Named algorithms; ring is the default (NCCL's choice for the large buffers of training).
ALGORITHMS: dict[str, Algorithm] = {algorithm.name: algorithm for algorithm in (RING, TREE, NVLS)}


def sent_factor(collective: str, ranks: sp.Expr, algorithm: str = "ring") -> sp.Expr:
    """Bytes one of ``ranks`` ranks sends per byte of the full buffer under ``algorithm``.

    A collective the algorithm does not implement runs as a ring (NCCL picks per collective:
    trees and NVLS serve all-reduce, rings the rest).
    """
    chosen = ALGORITHMS[choose("algorithm", algorithm, ALGORITHMS)]
    choose("collective", collective, COLLECTIVES)
    return (chosen if collective in chosen.factors else RING).factor(collective, ranks)
