"""Model-parallel shares of an MoE parameter table and the expert data-parallel group.

A rank of a layout with tensor parallelism t, expert parallelism e and
expert tensor parallelism t_E holds: every routed expert matrix over t_E e
(e experts' groups, each expert split t_E ways), every other matrix and the
embeddings over t, and the REPLICATED rows (norms, router,
shared-expert gate, MLA's down projections and latent norms) whole
(megatron/core/transformer/moe/experts.py SequentialMLP/TEGroupedMLP;
megatron/core/parallel_state.py initialize_model_parallel, expert groups).
Expert parameters are data-parallel over EDP = world / (t_E e p) ranks, the
rest over d = world / (t p): Megatron's distributed optimizer shards each
over its own group (megatron/core/distributed/distributed_data_parallel.py,
expert_data_parallel_group).
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.state import bytes_per_parameter
from derive.expansion import expand
from derive.symbols import L, L_E, d, e, p, t, t_E
from derive.tensors import Ledger, Tensor

#: expert data-parallel ranks: world / (t_E e p) with world = t p d.
EXPERT_DATA_PARALLEL: sp.Expr = t * d / (t_E * e)


#: Rows whole on every tensor-parallel rank: norms, the router, the shared-expert gate and
#: MLA's down projections with their norms (the Transformer Engine spec duplicates them).
REPLICATED = ("norm", "router", "shared_expert_gate", "mla_down")


def replicated(w: Tensor, duplicated_latents: bool = True) -> bool:
    """Whether ``w`` is whole on every tensor-parallel rank (``duplicated_latents=False``: Megatron's count splits MLA's)."""
    if w.has("mla_down") and not duplicated_latents:
        return False
    return any(w.has(tag) for tag in REPLICATED)


def model_parallel_share(table: Ledger, duplicated_latents: bool = True) -> Ledger:
    """One rank's share: routed experts over t_E e, replicated rows whole, the rest over t."""
    def share(w: Tensor) -> Tensor:
        if w.has("routed_expert"):
            return w.divided(t_E * e)
        return w if replicated(w, duplicated_latents) else w.divided(t)
    return table.map(share)


def moe_resident_bytes(table: Ledger, precision: str = "bf16", optimizer: str = "adam",
                       zero_stage: int = 0) -> sp.Expr:
    """Resident state bytes of a rank's ``table`` share under ZeRO: experts over EDP ranks, the rest over d (none: dense)."""
    experts, others = table.where("routed_expert").numel(), table.without("routed_expert").numel()
    return expand(others * bytes_per_parameter(precision, optimizer, zero_stage, d)
                     + experts * bytes_per_parameter(precision, optimizer, zero_stage, EXPERT_DATA_PARALLEL))


def moe_layer_activations(profile: str, features, moe: bool = True, tensor_parallel: sp.Expr = t,
                          sequence_parallel: bool = True, capacity_factor: sp.Expr | None = None,
                          norm_statistics: bool = False, softmax_statistics: bool = True,
                          recipe: str | None = None, recompute: str = "none") -> Ledger:
    """One MoE (or dense) layer's saved rows on one rank: SP shards every row over t; the k_E token
    copies of width h are all-gathered over the t_E expert-TP ranks (token_dispatcher.py).

    ``recipe`` (an FP8 recipe of ``derive.recipes``) keeps the linear inputs in FP8 (saved_fp8);
    ``recompute`` drops rows as for a dense layer (derive.accounts.activations.recomputed: the
    fused table has no ``recomputed_selective`` rows, flash attention keeps no score matrices, so
    selective keeps every row; full keeps the layer input).
    """
    from derive.accounts.activations import keeping, recomputed
    from derive.architectures.saved_fp8 import quantised_saved
    from derive.architectures.saved import moe_layer_saved
    table = moe_layer_saved(profile, features, moe, capacity_factor)
    if recipe is not None:
        table = quantised_saved(table, recipe)
    table = keeping(recomputed(table, recompute), norm_statistics=norm_statistics,
                    softmax_statistics=softmax_statistics)
    return rank_share(table, tensor_parallel, sequence_parallel)


def rank_share(table: Ledger, tensor_parallel: sp.Expr = t, sequence_parallel: bool = True) -> Ledger:
    """Saved rows on one rank: SP shards them over t; the ``expert_hidden`` token copies are
    all-gathered over the t_E expert-TP ranks (megatron/core/transformer/moe/token_dispatcher.py)."""
    from derive.accounts.activations import sharded
    table = sharded(table, tensor_parallel, sequence_parallel)
    return table.map(lambda w: w.times(t_E) if w.has("expert_hidden") and tensor_parallel != 1 else w)


def moe_state_rows(placement_name: str = "megatron", sharded: bool = False, ranks: sp.Expr = d) -> Ledger:
    """The resident GPU state rows of a framework placement (derive.accounts.placement), sharded over ``ranks``:
    the rows :func:`moe_state_buffers` prices, in its order, with their tags (``params``, ``grads``, ``optimizer``)."""
    from derive.accounts.placement import placement_ledger
    return placement_ledger(placement_name, sharded, ranks).where("resident").without("host")


def moe_state_buffers(placement_name: str = "megatron", sharded: bool = False,
                      ranks: sp.Expr = d) -> tuple[tuple[sp.Expr, sp.Expr], ...]:
    """Each resident state row of a framework placement (:func:`moe_state_rows`) as (bytes per non-expert
    parameter, bytes per routed-expert parameter): the rest sharded over ``ranks``, the experts over the
    expert data-parallel group (EXPERT_DATA_PARALLEL with d -> ``ranks``: t d c / (t_E e) at ranks = d c;
    Megatron's distributed optimizer: intra_dp_cp_group and expert_data_parallel_group,
    megatron/core/optimizer/__init__.py), one buffer each (distributed_data_parallel.py keeps the
    expert-parallel parameters in buffers of their own)."""
    from derive.symbols import N

    def per_parameter(group: sp.Expr) -> list[sp.Expr]:
        return [expand(row.bytes / N) for row in moe_state_rows(placement_name, sharded, group)]
    return tuple(zip(per_parameter(ranks), per_parameter(EXPERT_DATA_PARALLEL.xreplace({d: ranks}))))


def moe_placement_bytes(table: Ledger, placement_name: str = "megatron", sharded: bool = False,
                        ranks: sp.Expr = d) -> sp.Expr:
    """Resident bytes of a rank's ``table`` share under a framework placement: :func:`moe_state_buffers` summed."""
    experts, others = table.where("routed_expert").numel(), table.without("routed_expert").numel()
    return expand(sum((rest * others + expert * experts
                          for rest, expert in moe_state_buffers(placement_name, sharded, ranks)), sp.Integer(0)))


def moe_first_stage_activation_bytes(profile: str, features, tensor_parallel: sp.Expr = t,
                                     sequence_parallel: bool = True, pipeline: sp.Expr = 1,
                                     capacity_factor: sp.Expr | None = None,
                                     norm_statistics: bool = True, recipe: str | None = None) -> sp.Expr:
    """First pipeline stage (1F1B): p micro-batches in flight of (L - L_E)/p dense and L_E/p MoE layers,
    plus the embedding edge (token ids); the MTP modules sit on the last stage."""
    from derive.accounts.activations import in_flight_micro_batches, sharded
    from derive.architectures.saved import eager_edges

    def layer_bytes(moe: bool) -> sp.Expr:
        return moe_layer_activations(profile, features, moe, tensor_parallel, sequence_parallel,
                                     capacity_factor, norm_statistics, recipe=recipe).bytes()

    per_micro_batch = ((L - L_E) * layer_bytes(False) + L_E * layer_bytes(True)) / pipeline
    ids = sharded(Ledger([eager_edges(features)["embedding: token ids"]]), tensor_parallel,
                  sequence_parallel)
    total = in_flight_micro_batches(pipeline) * (per_micro_batch + ids.bytes())
    return expand(total)


def first_stage_parameters(table: Ledger, single_stage: bool = False,
                           duplicated_latents: bool = True) -> Ledger:
    """One rank of the first pipeline stage: L/p layers and the input embedding (the whole model
    when p = 1); the final norm, the head and the MTP modules sit on the last stage
    (megatron/core/models/gpt/gpt_model.py, post_process and mtp_process)."""
    if single_stage:
        return model_parallel_share(table, duplicated_latents)
    stage = table.where("layer").without("mtp").map(lambda w: w.divided(p)) + table.where("embedding")
    return model_parallel_share(stage, duplicated_latents)


def moe_step_timeline(features, share: Ledger, profile: str = "fused",
                      precision: str = "bf16-fp32grad", optimizer: str = "adam", zero_stage: int = 1,
                      tensor_parallel: sp.Expr = t, pipeline: sp.Expr = 1):
    """The article's step timeline (section 2.2) on one MoE rank: states of ``share`` (experts over
    EDP, the rest over d), the first stage's activations at the end of forward, gradients at the end of backward."""
    from derive.accounts.activations import StepTimeline
    from derive.accounts.state import state_bytes

    experts, others = share.where("routed_expert").numel(), share.without("routed_expert").numel()
    held = [state_bytes(precision, optimizer, zero_stage, ranks, params)
            for ranks, params in ((d, others), (EXPERT_DATA_PARALLEL, experts))]
    params, grads, states = (sp.Add(*(getattr(part, name) for part in held))
                             for name in ("params", "grads", "optimizer"))
    activations = moe_first_stage_activation_bytes(profile, features, tensor_parallel,
                                                   tensor_parallel != 1, pipeline)
    return StepTimeline(end_of_forward=expand(params + states + activations),
                        end_of_backward=expand(params + states + grads),
                        simple_sum=expand(params + states + grads + activations))
