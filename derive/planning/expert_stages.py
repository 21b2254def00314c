"""An MoE model's memory per GPU by pipeline stage and by state: derive.planning.experts' rank terms, summed unrounded.

Each stage of derive.planning.stage_memory.STAGES is a rank of :func:`derive.planning.experts.rank_terms` (``single``
the one rank of p = 1, ``first`` rank 0, ``middle`` rank 1, ``last`` rank p - 1) at the layers it builds
(:func:`derive.planning.experts.rank_layer_counts`): its resident state buffers split by their rows' tags
(``params``, ``grads``, ``optimizer``: derive.accounts.experts.moe_state_rows; routed experts over the expert
data-parallel group, the rest over d c, Megatron's placement at the ZeRO stage) and the saved tensors of its
held chunks (``activations``). ``derive predict --json`` prints them (``memory.stages.<stage>.<part>``; the most
loaded of the stages is ``memory.per_gpu``) and formulas/index.html runs the same expressions
(derive.render.page_stages).

The bytes are as requested, unrounded, as dense predict's (derive.planning.stage_memory); the planner's
:func:`derive.planning.experts.rank_memory` rounds each buffer and tensor as the caching allocator hands it out
(``rounded=True``), so its fit check is stricter than predict's by that rounding. Rank 1 can be the most loaded
(rank 0 builds the dense layers of DeepSeek-V3's first_k_dense_replace), so it is compared wherever p > 2.
A layout the rank terms do not cover (:func:`unmodelled`) has no figures: never a wrong number.
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

from derive.accounts.state import PRECISIONS
from derive.model import Model
from derive.parallelism import Parallelism
from derive.planning.experts import ONE_LAYER, rank_layer_counts, rank_terms
from derive.planning.memory import memory_per_gpu
from derive.planning.stage_memory import STATE_TAGS, evaluated_stages, layout_sizes
from derive.symbols import L, L_E, p, v

#: Each stage (derive.planning.stage_memory.STAGES) and the rank of derive.planning.experts that is it.
STAGE_RANKS: dict[str, str] = {"single": "whole", "first": "first", "middle": "middle", "last": "last"}
#: The parts of an MoE stage's bytes, in the order they stack (no FP8 copies: the rank terms count bf16 states).
PARTS = (*STATE_TAGS, "activations")
#: Where rank_layer_counts is exact: every dense layer in the first round of pipeline chunks (p ceil(L / (p v)) >= L - L_E).
FIRST_ROUND: sp.Boolean = sp.Ge(p * sp.ceiling(L / (p * v)), L - L_E)


@lru_cache(maxsize=None)
def expert_stage_parts(entry: Model, zero: int, recompute: str, kept: tuple[str, ...] = (),
                       sequence_parallel: bool = True) -> dict[str, dict[str, sp.Expr]]:
    """Stage -> part -> bytes per GPU of the MoE ``entry`` in t, p, v, c, d, e, t_E, b, m, L, L_E (and the model's sizes
    named in ``kept``): rank_terms' parameters times each buffer's bytes per parameter, by the buffer's state tag,
    and its saved tensors times the chunks held (as derive.planning.experts.rank_memory sums them, unrounded)."""
    parts = {}
    for stage, rank in STAGE_RANKS.items():
        terms = rank_terms(entry, zero, recompute, rank, kept, sequence_parallel)
        layers = dict(zip(ONE_LAYER, rank_layer_counts(rank)))
        counts = [terms.parameters["edges"][group]
                  + sp.Add(*(layers[kind] * terms.parameters[kind][group] for kind in ONE_LAYER)) for group in (0, 1)]
        found = {tag: sp.Add(*(counts[0] * rest + counts[1] * expert
                               for (rest, expert), own in zip(terms.buffers, terms.tags) if own == tag))
                 for tag in STATE_TAGS}
        saved = {kind: sp.Add(*sizes) for kind, sizes in terms.saved.items()}
        found["activations"] = (terms.held / terms.chunks
                                * (saved["held"] + sp.Add(*(layers[kind] * saved[kind] for kind in ONE_LAYER)))
                                + saved["once"])
        parts[stage] = found
    return parts


def unmodelled(entry: Model, layout: Parallelism, expert_op_fuser: bool = False,
               recompute_modules: tuple[str, ...] = ()) -> str | None:
    """Why the MoE rank terms do not cover ``layout`` (predict then prints no memory and checks none), else None."""
    sizes = {L: entry.values[L], L_E: entry.values.get(L_E, entry.values[L]), p: layout.pp, v: layout.vp}
    reasons = (
        (PRECISIONS[layout.precision].fp8 is not None,
         f"{layout.precision}: the MoE accounts count bf16 states and activations only, no FP8 recipe"),
        (layout.capacity_factor is not None, "--capacity-factor: the MoE accounts count dropless routing"),
        (layout.balanced, "--balanced: the MoE accounts split the layers unbalanced"),
        (not layout.sp_regather, "--no-sp-regather: the MoE accounts keep the sequence shard only"),
        (layout.dp_shard is not None, "--dp-shard: the MoE accounts shard over the whole data-parallel group"),
        (not layout.reshard_after_forward, "--no-reshard-after-forward: the MoE accounts hold no gathered parameters"),
        (layout.cp_comm != "p2p", f"--cp-comm {layout.cp_comm}: the MoE accounts keep s / c tokens' K and V"),
        (bool(recompute_modules), "--recompute-modules: the MoE accounts recompute whole layers only"),
        (expert_op_fuser, "--expert-op-fuser: the MoE accounts save the eager expert kernels' tensors"),
        (not bool(FIRST_ROUND.xreplace(sizes)), "dense layers past the first round of pipeline chunks"),
    )
    return next((reason for found, reason in reasons if found), None)


def expert_stage_memory(entry: Model, layout: Parallelism) -> dict[str, dict[str, float]]:
    """Stage -> part -> bytes per GPU of the stages ``layout`` has (STAGES), for an MoE model it covers."""
    values = {**{symbol.name: value for symbol, value in entry.values.items()}, **layout_sizes(entry, layout),
              "e": layout.ep, "t_E": layout.etp}
    parts = expert_stage_parts(entry, layout.zero, layout.recompute, (), layout.sequence_parallel)
    return evaluated_stages(parts, values, layout.pp)


def most_loaded_stage(stages: dict[str, dict[str, float]]) -> float:
    """The most loaded of ``stages``' ranks: the largest sum of its parts."""
    return max(sum(parts.values()) for parts in stages.values())


def layout_memory(entry: Model, layout: Parallelism, expert_op_fuser: bool = False,
                  recompute_modules: tuple[str, ...] = ()) -> float | None:
    """The most loaded rank's bytes, unrounded: dense models derive.planning.memory.memory_per_gpu, MoE models the
    largest of :func:`expert_stage_memory`'s stages; None where the MoE accounts do not cover the layout."""
    if entry.dense:
        return memory_per_gpu(entry, layout)
    if unmodelled(entry, layout, expert_op_fuser, recompute_modules) is not None:
        return None
    return most_loaded_stage(expert_stage_memory(entry, layout))
