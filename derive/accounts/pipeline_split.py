"""Which transformer layers each pipeline rank builds: Megatron's split of L layers (and, balanced, the
embedding and loss slots) over p ranks of v virtual chunks.

megatron/core/transformer/transformer_block.py ``get_num_layers_to_build`` and
megatron/core/transformer/transformer_layer.py ``get_transformer_layer_offset``: with
``--account-for-embedding-in-pipeline-split`` / ``--account-for-loss-in-pipeline-split`` the
L + 2 slots are cut into p v chunks of (L + 2) / (p v) slots; chunk j of rank r is virtual stage
j p + r; the embedding's slot is the first virtual chunk of rank 0 (``is_vp_first_stage`` and
``is_first_pp_stage``), the loss's the last virtual chunk of rank p - 1 (``is_vp_last_stage`` and
``is_last_pp_stage``), each building one transformer layer fewer (Dubey et al. 2024, section 3.3.2:
"we reduce one Transformer layer each from the first and the last stages").
"""
from __future__ import annotations

import sympy as sp

from derive.inputs import choose
from derive.symbols import L, p, v

#: The model edges that take a layer slot of a balanced split -> (rank, virtual chunk) holding it.
EDGE_SLOTS: dict[str, tuple[str, str]] = {"embedding": ("first", "first"), "loss": ("last", "last")}
#: The ranks a memory or time account distinguishes: rank 0, rank 1 (a middle rank, p > 2), rank p - 1.
RANKS = ("first", "middle", "last")


def slots(balanced: bool, layers: sp.Expr = L) -> sp.Expr:
    """Layer slots of the split: L, or L + one per edge of EDGE_SLOTS when balanced."""
    return layers + (len(EDGE_SLOTS) if balanced else 0)


def chunk_slots(balanced: bool, layers: sp.Expr = L, pipeline: sp.Expr = p,
                virtual: sp.Expr = v) -> sp.Expr:
    """Slots of the most loaded chunk: ceil(slots / (p v)) (exact when p v divides them, as Megatron asserts)."""
    return sp.ceiling(slots(balanced, layers) / (pipeline * virtual))


def edge_slots_on(rank: str, balanced: bool) -> int:
    """How many of EDGE_SLOTS the chunks of ``rank`` hold (0 when not balanced)."""
    choose("rank", rank, RANKS)
    return sum(where == rank for where, _ in EDGE_SLOTS.values()) if balanced else 0


def rank_layers(rank: str, balanced: bool, layers: sp.Expr = L, pipeline: sp.Expr = p,
                virtual: sp.Expr = v) -> sp.Expr:
    """Transformer layers ``rank`` builds: v chunks of ceil(slots / (p v)) slots, less the edge slots they hold."""
    return virtual * chunk_slots(balanced, layers, pipeline, virtual) - edge_slots_on(rank, balanced)


def chunk_contents(layers: int, pipeline: int, virtual: int, balanced: bool) -> list[list[list[object]]]:
    """Per rank, per virtual chunk, the slots it holds: 'embedding', layer numbers 0 .. L - 1, 'loss'.

    Megatron's assignment (get_transformer_layer_offset): chunk j of rank r is virtual stage
    j p + r and holds slots [(j p + r) n, (j p + r + 1) n) of n = slots / (p v); ValueError where p v
    does not divide the slots (get_num_layers_to_build asserts it).
    """
    edges = EDGE_SLOTS.items() if balanced else ()
    order = ([name for name, (_, chunk) in edges if chunk == "first"] + list(range(layers))
             + [name for name, (_, chunk) in edges if chunk == "last"])
    if len(order) % (pipeline * virtual):
        raise ValueError(f"pipeline: p v = {pipeline * virtual} does not divide the {len(order)} layer slots")
    size = len(order) // (pipeline * virtual)
    return [[order[(j * pipeline + r) * size:(j * pipeline + r + 1) * size] for j in range(virtual)]
            for r in range(pipeline)]
