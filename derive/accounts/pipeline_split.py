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

from functools import lru_cache

import sympy as sp

from derive.accounts.activations import in_flight_micro_batches
from derive.inputs import choose
from derive.symbols import L, m, p, v

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


@lru_cache(maxsize=None)
def most_layers(balanced: bool, layers: sp.Expr = L, pipeline: sp.Expr = p, virtual: sp.Expr = v) -> sp.Expr:
    """The most transformer layers one rank builds: min(v ceil(slots / (p v)), L); balanced at p = 2, one fewer."""
    most = rank_layers("middle", balanced, layers, pipeline, virtual)
    if balanced:  # at p = 2 both ranks hold an edge slot
        most = sp.Piecewise((rank_layers("last", True, layers, pipeline, virtual), sp.Eq(pipeline, 2)), (most, True))
    return sp.Min(most, layers)


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


# ---- the layers and chunks a rank's memory accounts read ----

#: The most loaded stage holds ceil(L / (p v)) layers per chunk: every stage account is read at
#: L' = p v ceil(L / (p v)) (uneven stages when p v does not divide L).
STAGE_LAYERS: dict[sp.Symbol, sp.Expr] = {L: p * v * sp.ceiling(L / (p * v))}


@lru_cache(maxsize=None)
def stage_in_flight(stage: str) -> sp.Expr:
    """Chunks ``stage`` (rank 0, 1 or p - 1) holds: its warm-up + 1, at most m v (schedules.py get_pp_rank_microbatches).

    Rank r warms up p - r - 1 micro-batches (1F1B) or 2 (p - r - 1) + (v - 1) p chunks (interleaved).
    """
    choose("stage", stage, RANKS)
    if stage == "first":
        return sp.Piecewise((in_flight_micro_batches(p, None, m), sp.Eq(v, 1)),
                            (in_flight_micro_batches(p, v, m), True))
    if stage == "last":
        interleaved = sp.Min((v - 1) * p + 1, m * v)  # 1 (1F1B), (v - 1) p + 1 interleaved, at most m v
        return sp.Piecewise((sp.Min(1, m), sp.Eq(v, 1)), (interleaved, True))
    rank = 1  # the middle rank with the most chunks in flight
    return sp.Piecewise((sp.Min(p - rank, m), sp.Eq(v, 1)),
                        (sp.Min(2 * (p - rank - 1) + (v - 1) * p + 1, m * v), True))


def _unless(expr: sp.Expr, condition: sp.Boolean) -> sp.Expr:
    """``expr`` where ``condition`` is false: a Piecewise's branch taken under ``condition`` left out.

    Beside ``condition | ...`` it is the same condition, with no Piecewise inside (SymPy would rewrite that
    into an ITE, solving the condition's sets: the bulk of building the balanced accounts).
    """
    if not isinstance(expr, sp.Piecewise) or not any(case == condition for _, case in expr.args):
        return expr
    rest = [(value, case) for value, case in expr.args if case != condition]
    return rest[0][0] if len(rest) == 1 and rest[0][1] == sp.true else sp.Piecewise(*rest)


@lru_cache(maxsize=None)
def stage_layers(stage: str, balanced: bool, activations: bool = False) -> dict[sp.Symbol, sp.Expr]:
    """L -> p x the layers ``stage`` holds (:func:`rank_layers`), for the accounts' L / p and L / (p v).

    Not balanced: STAGE_LAYERS. Balanced: the exact layers of the rank (one fewer on the ranks holding
    the embedding and the loss slot). ``activations``: its held chunks count those layers exactly where
    every held chunk is the rank's one chunk (v = 1) or every chunk of the step is held (m v in flight);
    on the last rank at m = p (one group of get_schedule_table: every forward after its warm-up is of
    its last chunk) the held chunks are one loss chunk and the rest full; otherwise each held chunk is
    counted at ceil((L + 2) / (p v)) layers (the mix of held chunks changes over the interleaved
    steady state: conservative by at most the edge slot per held chunk).
    """
    if not balanced:
        return STAGE_LAYERS
    layers = rank_layers(stage, True)
    if activations:
        held = stage_in_flight(stage)
        full = v * chunk_slots(True)
        one_chunk = sp.Eq(v, 1)
        pieces = [(layers, one_chunk | (_unless(held, one_chunk) >= m * v))]
        if stage == "last":
            pieces.append((full - v * edge_slots_on(stage, True) / held, sp.Eq(m, p)))
        layers = sp.Piecewise(*pieces, (full, True))
    return {L: p * layers}
