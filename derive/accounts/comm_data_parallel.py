"""The data-parallel rows of the communication ledger: gradient all-reduce, ZeRO-1/2 reduce-scatter + all-gather, ZeRO-3 / FSDP gathers, EDP for experts.

Bytes from the state ledger's gradients (derive.accounts.state) and the parameters ZeRO gathers
(derive.accounts.fp8_comm.gathered_parameters) of the rank's model-parallel share
(derive.accounts.experts.model_parallel_share).
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import sympy as sp

from derive.accounts.comm_row import MEGATRON_DDP, LayoutTerms, RowBuilder
from derive.accounts.experts import model_parallel_share
from derive.accounts.fp8_comm import fp8_tensor_count, gathered_parameters
from derive.accounts.state import state_ledger
from derive import symbols
from derive.parallelism import Parallelism
from derive.tensors import Ledger


def _last_stage_edges(edges: Ledger) -> Ledger:
    """What Megatron's last pipeline stage holds of the edges: final norm, output head (a tied copy)."""
    return edges.filter(lambda w: w.has("output") or not (w.has("embedding") or w.has("position")))


def grad_bytes(share: Ledger, layout: Parallelism) -> sp.Expr:
    """Bytes of the gradients of ``share`` as the precision keeps them (fp32 main grads for bf16-fp32grad)."""
    return _gradients(layout.precision, share.numel())


@lru_cache(maxsize=1024)
def _gradients(precision: str, numel: sp.Expr) -> sp.Expr:
    """Bytes of the gradients of ``numel`` parameters under ``precision`` (derive.accounts.state's ledger)."""
    return state_ledger(precision, "sgd", numel).where("grads", "resident").bytes()


def _param_bytes(share: Ledger, tensors: sp.Expr, layout: Parallelism) -> sp.Expr:
    """Bytes ZeRO-3 / the distributed optimizer gathers of ``share`` (``tensors`` quantised matrices on the rank).

    The compute copy; the quantised matrices' FP8 copy and scales under Parallelism.fp8_param_gather
    (derive.accounts.fp8_comm.gathered_parameters).
    """
    return _gathered_bytes(share, tensors, layout.precision, layout.fp8_param_gather)


@lru_cache(maxsize=256)
def _gathered_bytes(share: Ledger, tensors: sp.Expr, precision: str, fp8_param_gather: bool) -> sp.Expr:
    """_param_bytes once per (ledger, tensors, precision, FP8 gather); the key holds the ledger, as above."""
    return gathered_parameters(share, tensors, precision, fp8_param_gather).bytes()


@lru_cache(maxsize=64)  # once per (terms, tables, whole_model): the shares depend on no flag of the layout
def _rank_share(terms: LayoutTerms, dense_layer: Ledger, moe_layer: Ledger | None, edges: Ledger,
                whole_model: bool) -> tuple[tuple[Ledger, sp.Expr], tuple[Ledger, sp.Expr]]:
    """((non-expert parameters, their quantised matrices n_8), (routed-expert ones, theirs)): t / t_E e shares."""
    at = {symbols.t: terms.t, symbols.e: terms.e, symbols.t_E: terms.t_E}
    held = edges if whole_model else _last_stage_edges(edges)
    table = dense_layer.times(terms.dense_layers) + held
    if moe_layer is not None:
        table = table + moe_layer.times(terms.moe_layers)
    share = model_parallel_share(table).map(lambda w: replace(w, count=w.count.xreplace(at)))
    # quantised matrices per rank (one scale each under per-tensor scaling): experts over e
    dense_n, experts_n = (sp.sympify(n).xreplace(at) for n in (
        fp8_tensor_count(table.without("routed_expert")), fp8_tensor_count(table.where("routed_expert")) / symbols.e))
    return (share.without("routed_expert"), dense_n), (share.where("routed_expert"), experts_n)


@lru_cache(maxsize=64)  # once per share (kept by _rank_share), so its gradients are summed once
def _replicated(dense: Ledger) -> Ledger:
    """The rows tensor parallelism replicates on every rank: norms and the router."""
    return dense.filter(lambda w: w.has("norm") or w.has("router"))


def data_parallel(build: RowBuilder, dense_layer: Ledger, moe_layer: Ledger | None, edges: Ledger,
                   whole_model: bool) -> None:
    """Gradient all-reduce, ZeRO-1/2 reduce-scatter + all-gather, ZeRO-3 / FSDP gathers; EDP for experts."""
    terms, layout = build.terms, build.layout
    (dense, dense_n), (experts, experts_n) = _rank_share(build.terms, dense_layer, moe_layer, edges, whole_model)
    if layout.sequence_parallel and terms.active(terms.t):
        norms = _replicated(dense)
        build.add("tp.replicated-grads.all-reduce", "gradients of the replicated rows (norms, router)",
                  "all-reduce", "tp", terms.t, grad_bytes(norms, layout), 1, "backward", "none",
                  "megatron/core/distributed/finalize_model_grads.py _allreduce_layernorm_grads")
    groups = [("dp", terms.d * terms.c / terms.replicas, dense, dense_n)]
    if moe_layer is not None:
        groups.append(("edp", terms.t * terms.c * terms.d / (terms.t_E * terms.e * terms.replicas), experts, experts_n))
    for group, ranks, share, tensors in groups:
        if not terms.active(ranks) or not len(share):
            continue
        grads, params = grad_bytes(share, layout), _param_bytes(share, tensors, layout)
        what = "expert " if group == "edp" else ""
        if layout.zero == 0:
            build.add(f"{group}.grads.all-reduce", f"{what}gradients", "all-reduce", group, ranks, grads, 1,
                      "backward", "backward", f"{MEGATRON_DDP} (bucketed, overlap_grad_reduce); "
                      "torch/nn/parallel/distributed.py DDP")
        elif layout.zero in (1, 2):
            # ZeRO-2 has no whole gradient buffer to accumulate into: it reduces every micro-batch
            per_step, source = ((1, f"{MEGATRON_DDP} (distributed optimizer)") if layout.zero == 1 else (
                terms.m, "megatron/core/distributed/fsdp/mcore_fsdp_adapter.py ('optim_grads': reduce-scatter "
                         "on all micro-batches); deepspeed/runtime/zero/stage_1_and_2.py (partition_gradients: "
                         "reduced in every backward)"))
            build.add(f"{group}.grads.reduce-scatter", f"{what}gradients", "reduce-scatter", group, ranks, grads,
                      per_step, "backward", "backward", f"{source}; Rajbhandari et al. 2020, 7.2.1")
            build.add(f"{group}.params.all-gather", f"{what}parameters", "all-gather", group, ranks, params, 1,
                      "optimizer", "forward", "megatron/core/optimizer/distrib_optimizer.py (overlap_param_gather); "
                      "Rajbhandari et al. 2020, 7.2.1")
        else:
            build.add(f"{group}.params.forward.all-gather", f"{what}parameters", "all-gather", group, ranks, params,
                      terms.m, "forward", "forward",
                      "torch/distributed/fsdp/_fully_shard (FSDP2 unshard per micro-batch); ZeRO 7.2.2")
            if layout.reshard_after_forward:
                build.add(f"{group}.params.backward.all-gather", f"{what}parameters", "all-gather", group, ranks,
                          params, terms.m, "backward", "backward",
                          "FSDP2 reshard_after_forward=True: gathered again for backward; ZeRO 7.2.2")
            build.add(f"{group}.grads.reduce-scatter", f"{what}gradients", "reduce-scatter", group, ranks, grads,
                      terms.m, "backward", "backward", "FSDP2 post-backward reduce-scatter; ZeRO 7.2.2")
            if layout.dp_shard is not None and terms.active(terms.replicas):
                build.add(f"{group}.grads.replicas.all-reduce", f"{what}gradient shard", "all-reduce", group,
                          terms.replicas, grads / ranks, terms.m, "backward", "backward",
                          "FSDP2 HSDP (fully_shard on a (replicate, shard) mesh): the reduce-scattered shard "
                          "all-reduced across replicas")
