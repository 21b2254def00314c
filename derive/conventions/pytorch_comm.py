"""Where PyTorch's own parallelism moves other bytes than Megatron's, as named conventions on the ledger's rows.

``derive.accounts.comm.collectives`` lists what Megatron-LM issues. Each convention here
rewrites those rows into what PyTorch 2.13's DDP, FSDP2 (``fully_shard``), DTensor tensor /
sequence parallelism and ``loss_parallel`` issue, from derive's own tables (the parameter
rows, the dtypes); ``python -m derive.validate --kind comm-*`` holds the rewritten rows
against the collectives PyTorch really runs. Conventions named ``excluded`` are collectives
PyTorch runs that are no part of a training step's accounts; they are listed, not compared.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import sympy as sp

from derive.accounts.collectives import sent_factor
from derive.accounts.comm import Collective
from derive.architectures.operations.rows import STATISTICS
from derive.architectures.tables import edge_parameters, layer_parameters
from derive.dtypes import dtype_bytes
from derive.evaluation import substitute
from derive.model import Model
from derive.parallelism import Parallelism
from derive.symbols import h
from derive.tensors import Ledger

Rows = list[Collective]


@dataclass(frozen=True)
class CommConvention:
    """One way PyTorch departs from Megatron's rows: a key, what it says, its source, the rewrite."""

    key: str
    statement: str
    source: str
    rewrite: Callable[[Rows, Model, Parallelism], Rows] | None = None   # None: excluded from the comparison


def _with(row: Collective, **changes) -> Collective:
    """``row`` changed, its sent / received bytes recomputed from the payload (same algorithm)."""
    new = replace(row, **changes)
    sent = sp.expand(new.payload * sent_factor(new.collective, new.ranks, new.algorithm))
    return replace(new, sent=sent, received=sent)


def column_parallel_linears(model: Model, block: str) -> int:
    """GEMM rows of ``block`` (attention / mlp) reading the block input [s, b, h]: its column-parallel linears."""
    return sum(int(w.count) for w in layer_parameters(model.layout).where("gemm", block) if w.shape[0] == h)


#: the rows (after "tp.<block>.") a column-parallel linear's input conversion issues: the
#: backward all-reduce (TP), the forward / recompute all-gather and backward reduce-scatter (SP)
CONVERSIONS = ("backward.all-reduce", "all-gather", "backward.reduce-scatter")


def _per_linear(rows: Rows, model: Model, layout: Parallelism) -> Rows:
    """Each conversion row repeated once per column-parallel linear of its block."""
    out = []
    for row in rows:
        block, _, rest = row.name.removeprefix("tp.").partition(".")
        if row.name.startswith("tp.") and block in ("attention", "mlp") and rest in CONVERSIONS:
            row = _with(row, count=row.count * column_parallel_linears(model, block))
        out.append(row)
    return out


def _keeps_gathered_input(rows: Rows, model: Model, layout: Parallelism) -> Rows:
    return [row for row in rows if not row.name.endswith("backward.regather")]


#: loss_parallel's per-token all-reduces and the dtype of each (torch/distributed/tensor/parallel/loss.py:
#: _log_softmax reduces the max and the sum of exponentials in fp32, _nll_loss_forward the target logit)
LOSS_PARALLEL = {"max": STATISTICS, "sum of exponentials": STATISTICS, "target logit": "logits"}


def _loss_parallel(rows: Rows, model: Model, layout: Parallelism) -> Rows:
    """Megatron's per-token fp32 all-reduces (one row, a statistic per ' / ' of its tensor) as loss_parallel's."""
    logits = next(iter(edge_parameters(model.layout).where("output"))).dtype    # the head's dtype is the logits'
    out = []
    for row in rows:
        if row.name != "tp.loss.all-reduce":
            out.append(row)
            continue
        per_statistic = row.count / len(row.tensor.split(" / "))
        per_token = row.payload / dtype_bytes(STATISTICS)
        for statistic, dtype in LOSS_PARALLEL.items():
            payload = per_token * dtype_bytes(logits if dtype == "logits" else dtype)
            out.append(_with(row, name=f"tp.loss.{statistic.replace(' ', '-')}.all-reduce",
                             tensor=f"per-token {statistic}", payload=payload, count=per_statistic))
    return out


def _norm_rows(model: Model) -> Ledger:
    """Every norm weight of the model (the rows sequence parallelism replicates)."""
    return layer_parameters(model.layout).where("norm").times(model.layers) + edge_parameters(model.layout).where("norm")


def _lazy_partial_grads(rows: Rows, model: Model, layout: Parallelism) -> Rows:
    """The norms' gradient all-reduce: one call per norm weight, in the optimizer pass."""
    norms = _norm_rows(model)
    calls = sum(int(w.count) for w in norms)
    if len({sp.Mul(*w.shape) for w in norms}) != 1:
        raise ValueError("model: dtensor-lazy-partial-grads splits the all-reduce evenly; "
                         "the norms differ in size")
    return [_with(row, pass_="optimizer", payload=row.payload / calls, count=row.count * calls)
            if row.name == "tp.replicated-grads.all-reduce" else row for row in rows]


def _early_stop(rows: Rows, model: Model, layout: Parallelism) -> Rows:
    """The recompute pass without the layer's last collective: the MLP's output reduction."""
    return [row for row in rows if not (row.pass_ == "recompute" and row.name in (
        "tp.mlp.all-reduce", "tp.mlp.reduce-scatter"))]


def _zero_redundancy(rows: Rows, model: Model, layout: Parallelism) -> Rows:
    """ZeRO-1 as PyTorch runs it: the gradients all-reduced whole, the stepped parameters broadcast."""
    kinds = {"dp.grads.reduce-scatter": "all-reduce", "dp.params.all-gather": "broadcast"}
    return [_with(row, collective=kinds[row.name]) if row.name in kinds else row for row in rows]


def fsdp2_padded_elements(table: Ledger, ranks: int) -> sp.Expr:
    """Elements FSDP2 moves for ``table``: each parameter's dim 0 padded to a multiple of ``ranks``.

    torch/distributed/fsdp/_fully_shard/_fsdp_param.py FSDPParam._init_sharded_param: a
    parameter is chunked on dim 0 (``torch.chunk``), each shard padded to the largest.
    nn.Linear stores [out, in] (dim 0 = derive's last); embeddings and norms derive's order.
    """
    total = sp.Integer(0)
    for w in table:
        rows = w.shape[-1] if w.has("gemm") else w.shape[0]
        total += sp.ceiling(rows / ranks) * ranks * (sp.Mul(*w.shape) / rows) * w.count
    return total


def _fsdp_padding(rows: Rows, model: Model, layout: Parallelism) -> Rows:
    out = []
    table = layer_parameters(model.layout).times(model.layers) + edge_parameters(model.layout)
    padded = fsdp2_padded_elements(table.map(lambda w: replace(
        w, shape=tuple(substitute(n, model.values) for n in w.shape))), layout.dp_shard or layout.dp)
    unpadded = substitute(table.numel(), model.values)
    for row in rows:
        if row.group == "dp" and row.name.startswith("dp.") and layout.zero == 3:
            row = _with(row, payload=row.payload * padded / unpadded)
        out.append(row)
    return out


CONVENTIONS: dict[str, CommConvention] = {c.key: c for c in (
    CommConvention(
        "dtensor-per-linear",
        "DTensor's ColwiseParallel converts the input of each column-parallel linear on its own: q, k, v "
        "(and gate, up) each add a backward all-reduce of the block input (sequence parallel: a forward "
        "all-gather and a backward reduce-scatter each), where Megatron's fused QKV / fc1 has one",
        "torch/distributed/tensor/parallel/style.py ColwiseParallel._prepare_input_fn "
        "(torchtitan wraps the block in PrepareModuleInput to gather once)",
        _per_linear),
    CommConvention(
        "pytorch-keeps-gathered-input",
        "sequence parallel: autograd saves the all-gathered block input for the weight gradient; no "
        "backward re-gather (Megatron saves the shard and re-gathers: 'megatron-regather')",
        "torch/distributed/tensor/_redistribute.py Redistribute.backward; Korthikanti et al. 2022, 4.2.2",
        _keeps_gathered_input),
    CommConvention(
        "dtensor-loss-parallel",
        "loss_parallel all-reduces the per-token max and sum of exponentials in fp32 and the target "
        "logit in the logits' dtype (Megatron: all three in fp32)",
        "torch/distributed/tensor/parallel/loss.py _log_softmax / _nll_loss_forward_handler",
        _loss_parallel),
    CommConvention(
        "dtensor-lazy-partial-grads",
        "sequence parallel: the replicated norm weights' gradients stay Partial DTensors; each is "
        "all-reduced on its own when the optimizer reads it (Megatron: one all-reduce at the end of backward)",
        "torch/distributed/tensor/_dtensor_spec.py Partial; torch/distributed/tensor/parallel/style.py "
        "SequenceParallel",
        _lazy_partial_grads),
    CommConvention(
        "checkpoint-early-stop",
        "full recompute: torch.utils.checkpoint (non-reentrant) stops the rerun forward once the last "
        "tensor saved for backward is rebuilt, so the layer's final collective (the MLP output's "
        "all-reduce, or reduce-scatter under sequence parallelism) is not repeated; Megatron's "
        "tensor_parallel.checkpoint reruns the whole layer",
        "torch/utils/checkpoint.py _checkpoint_early_stop / _StopRecomputationError; "
        "megatron/core/tensor_parallel/random.py CheckpointFunction",
        _early_stop),
    CommConvention(
        "zero-redundancy-optimizer",
        "ZeRO-1 in PyTorch (DDP + ZeroRedundancyOptimizer): DDP all-reduces every gradient (Megatron's "
        "distributed optimizer reduce-scatters them), and after its step each rank broadcasts the "
        "parameters it owns (Megatron all-gathers): the same payloads, other collectives",
        "torch/distributed/optim/zero_redundancy_optimizer.py ZeroRedundancyOptimizer._sync_params; "
        "megatron/core/optimizer/distrib_optimizer.py",
        _zero_redundancy),
    CommConvention(
        "fsdp2-dim0-padding",
        "fully_shard chunks every parameter on dim 0 and pads each shard to ceil(rows/d): the gathered and "
        "reduce-scattered buffers hold sum ceil(rows/d) d cols elements, one collective per fully_shard unit",
        "torch/distributed/fsdp/_fully_shard/_fsdp_param.py FSDPParam._init_sharded_param; "
        "_fsdp_collectives.py foreach_all_gather / foreach_reduce",
        _fsdp_padding),
    CommConvention(
        "ddp-buckets",
        "DDP all-reduces the gradients in buckets of bucket_cap_mb (the first bucket 1 MiB), in reverse "
        "parameter order: the row's bytes in several calls, the total unchanged",
        "torch/nn/parallel/distributed.py DistributedDataParallel (bucket_cap_mb); reducer.cpp",
        lambda rows, model, layout: rows),
    CommConvention(
        "ddp-broadcast-buffers",
        "DDP broadcasts the module's buffers (here the RoPE tables) from rank 0 before every forward "
        "(broadcast_buffers=True): not a training collective of Megatron; listed, not compared",
        "torch/nn/parallel/distributed.py DistributedDataParallel._sync_buffers"),
    CommConvention(
        "moe-count-exchange",
        "before dispatch each rank sends every other the number of tokens it routes to each of its "
        "experts (an all-to-all of E int64): metadata, listed, not compared",
        "torchtitan/distributed/expert_parallel.py ExpertParallel._token_dispatch; Megatron's "
        "MoEAlltoAllTokenDispatcher.preprocess"),
    CommConvention(
        "pipeline-most-loaded-rank",
        "the ledger counts the sends of a rank with both neighbours (m v per pass): compared with the "
        "rank of torch.distributed.pipelining that sends most in each pass",
        "torch/distributed/pipelining/schedules.py Schedule1F1B / ScheduleInterleaved1F1B",
        lambda rows, model, layout: rows),
)}


def pytorch_rows(rows: Rows, model: Model, layout: Parallelism, keys: tuple[str, ...]) -> Rows:
    """The ledger's rows rewritten by the conventions ``keys``, in order."""
    for key in keys:
        rewrite = CONVENTIONS[key].rewrite
        if rewrite is not None:
            rows = rewrite(rows, model, layout)
    return rows
