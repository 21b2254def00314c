"""PyTorch's own parallelism on a tiny Llama and a tiny MoE block, one job per rank (gloo, CPU).

Each job builds ``derive.validate.layers.LlamaModel`` (bf16, seed 0, the model
``python -m derive.validate --kind llama-model`` measures), wraps it the way a
PyTorch user does, runs three training steps and returns the collectives of the
last (steady state: DDP has rebuilt its buckets, FSDP2 has lazily initialised,
pipelining has inferred its shapes). A step is forward, backward and an SGD step with
learning rate 0 (the optimizer's reads of the gradients run their collectives):

* ``ddp``: ``torch.nn.parallel.DistributedDataParallel`` (its reducer's bucketed
  gradient all-reduce; a comm hook lists the parameters in each bucket);
* ``fsdp``: ``torch.distributed.fsdp.fully_shard`` on each layer and the root,
  ``reshard_after_forward`` on or off, bf16 parameters or fp32 parameters with
  ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` (torchtitan's), HSDP on a
  (replicate, shard) mesh, gradient accumulation over micro-batches;
* ``tp``: ``torch.distributed.tensor.parallel.parallelize_module`` with
  ColwiseParallel (q, k, v, gate, up, and the head with ``loss_parallel``),
  RowwiseParallel (o, down, and the vocabulary-parallel embedding), and with
  sequence parallelism SequenceParallel on the norms; linear by linear, or torchtitan's
  plan (PrepareModuleInput per block); optionally every layer checkpointed;
* ``pp``: ``torch.distributed.pipelining`` stages and Schedule1F1B /
  ScheduleInterleaved1F1B;
* ``ep``: a tiny MoE block (router, top-k, E SwiGLU experts split over the
  ranks) whose dispatch and combine are ``all_to_all_single_autograd``
  (torch.distributed._functional_collectives), as torchtitan's expert parallelism.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from derive.validate.comm_record import Recorder, as_dict
from derive.validate.layers import DTYPE, LlamaLayer, LlamaModel


def _model(v: Mapping[str, int], dtype: torch.dtype = DTYPE) -> LlamaModel:
    """The tiny Llama with its parameters in ``dtype`` (the RoPE tables stay bf16)."""
    torch.manual_seed(0)
    model = LlamaModel(v["L"], v["V"], v["s"], v["h"], v["a"], v["g"], v["f"])
    for parameter in model.parameters():
        parameter.data = parameter.data.to(dtype)
    return model


def _batch(v: Mapping[str, int], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, v["V"], (v["b"], v["s"]), generator=generator)
    return tokens, torch.randint(0, v["V"], (v["b"], v["s"]), generator=generator)


def _steps(recorder: Recorder, step, steps: int = 3) -> list[dict]:
    """Run ``step(recorder)`` ``steps`` times; the last step's rows."""
    for _ in range(steps):
        recorder.rows.clear()
        with recorder:
            step(recorder)
    return as_dict(recorder.rows)


def _train(recorder: Recorder, model: nn.Module, loss, optimizer: Any = None) -> None:
    """Forward, backward and an SGD step (lr 0: the weights stay put, the step's collectives run)."""
    recorder.pass_ = "forward"
    value = loss()
    recorder.pass_ = "backward"
    value.backward()
    recorder.pass_ = "optimizer"
    (optimizer or torch.optim.SGD(model.parameters(), lr=0.0, foreach=False)).step()
    model.zero_grad(set_to_none=True)


def ddp(rank: int, world: int, v: Mapping[str, int], bucket_mb: float,
        zero: bool = False, micro_batches: int = 1) -> dict[str, Any]:
    """DistributedDataParallel over all ranks: the reducer's all-reduce of each gradient bucket.

    ``zero``: the optimizer is torch.distributed.optim.ZeroRedundancyOptimizer (ZeRO-1: each
    rank steps its share of the parameters, then broadcasts them). ``micro_batches``: all but
    the last accumulate under ``no_sync`` (DDP's gradient accumulation).
    """
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel

    model = _model(v)
    names = {p: n for n, p in model.named_parameters()}
    wrapped = DistributedDataParallel(model, bucket_cap_mb=bucket_mb)
    buckets: list[list[str]] = []

    def hook(state, bucket):
        buckets.append([names[p] for p in bucket.parameters()])
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
        return allreduce_hook(None, bucket)

    wrapped.register_comm_hook(None, hook)
    batches = [_batch(v, rank * micro_batches + i) for i in range(micro_batches)]
    recorder = Recorder({dist.group.WORLD.group_name: "dp"})
    optimizer = (ZeroRedundancyOptimizer(wrapped.parameters(), optimizer_class=torch.optim.SGD, lr=0.0)
                 if zero else None)

    def step(rec: Recorder) -> None:
        buckets.clear()
        for tokens, targets in batches[:-1]:
            with wrapped.no_sync():
                rec.pass_ = "forward"
                value = wrapped(tokens, targets)
                rec.pass_ = "backward"
                value.backward()
        tokens, targets = batches[-1]
        _train(rec, wrapped, lambda: wrapped(tokens, targets), optimizer)

    return {"rows": _steps(recorder, step), "buckets": buckets}


def fsdp(rank: int, world: int, v: Mapping[str, int], reshard: bool, mixed: bool,
         micro_batches: int = 1, replicas: int = 1) -> dict[str, Any]:
    """fully_shard on each layer, then on the root; HSDP on a (replicas, world / replicas) mesh.

    ``micro_batches`` forward / backward passes accumulate before the optimizer step (FSDP2
    reduce-scatters after each one, as torchtitan's gradient accumulation does).
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = (init_device_mesh("cpu", (world,)) if replicas == 1 else
            init_device_mesh("cpu", (replicas, world // replicas), mesh_dim_names=("replicate", "shard")))
    model = _model(v, torch.float32 if mixed else DTYPE)
    policy = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
              if mixed else MixedPrecisionPolicy())
    for layer in model.layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    batches = [_batch(v, rank * micro_batches + i) for i in range(micro_batches)]
    recorder = Recorder({group.group_name: "dp" for group in mesh.get_all_groups()})

    def step(rec: Recorder) -> None:
        for tokens, targets in batches[:-1]:
            rec.pass_ = "forward"
            value = model(tokens, targets)
            rec.pass_ = "backward"
            value.backward()
        tokens, targets = batches[-1]
        _train(rec, model, lambda: model(tokens, targets))

    return {"rows": _steps(recorder, step)}


def _tp_plan(model: LlamaModel, sequence_parallel: bool) -> dict[str, Any]:
    """Megatron's split in DTensor styles (torchtitan's llama plan, without its PrepareModuleInput)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   SequenceParallel)

    stream = Shard(1) if sequence_parallel else Replicate()
    plan: dict[str, Any] = {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=stream),
        "output": ColwiseParallel(input_layouts=stream, output_layouts=Shard(-1),
                                  use_local_output=False),
    }
    if sequence_parallel:
        plan["norm"] = SequenceParallel()
    for i in range(len(model.layers)):
        for name in ("wq", "wk", "wv", "w1", "w3"):
            plan[f"layers.{i}.{name}"] = ColwiseParallel(input_layouts=stream)
        for name in ("wo", "w2"):
            plan[f"layers.{i}.{name}"] = RowwiseParallel(output_layouts=stream)
        if sequence_parallel:
            plan[f"layers.{i}.attention_norm"] = SequenceParallel()
            plan[f"layers.{i}.ffn_norm"] = SequenceParallel()
    return plan


class _Attention(nn.Module):
    """A LlamaLayer's attention as a module of its own (torchtitan's layout), sharing its linears and tables."""

    forward = LlamaLayer.attention

    def __init__(self, layer: LlamaLayer) -> None:
        super().__init__()
        self.wq, self.wk, self.wv, self.wo = layer.wq, layer.wk, layer.wv, layer.wo
        self.heads, self.kv_heads, self.head_dim = layer.heads, layer.kv_heads, layer.head_dim
        self.rope_cos, self.rope_sin = layer.rope_cos, layer.rope_sin


class _FeedForward(nn.Module):
    """A LlamaLayer's MLP as a module of its own, sharing its linears."""

    forward = LlamaLayer.mlp

    def __init__(self, layer: LlamaLayer) -> None:
        super().__init__()
        self.w1, self.w2, self.w3 = layer.w1, layer.w2, layer.w3


class TitanLayer(nn.Module):
    """A LlamaLayer regrouped as torchtitan's TransformerBlock: attention and feed_forward modules."""

    def __init__(self, layer: LlamaLayer) -> None:
        super().__init__()
        self.attention_norm, self.ffn_norm = layer.attention_norm, layer.ffn_norm
        self.attention, self.feed_forward = _Attention(layer), _FeedForward(layer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x))
        return x + self.feed_forward(self.ffn_norm(x))


def _titan_plan(model: LlamaModel, sequence_parallel: bool) -> dict[str, Any]:
    """torchtitan's llama plan (torchtitan/models/llama3/infra/parallelize.py apply_tp): one input
    conversion per block (PrepareModuleInput), then ColwiseParallel / RowwiseParallel linears."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                                   RowwiseParallel, SequenceParallel)

    stream = Shard(1) if sequence_parallel else Replicate()
    plan = {key: style for key, style in _tp_plan(model, sequence_parallel).items()
            if not key.startswith("layers.")}
    for i in range(len(model.layers)):
        for block, column, row in (("attention", ("wq", "wk", "wv"), "wo"), ("feed_forward", ("w1", "w3"), "w2")):
            plan[f"layers.{i}.{block}"] = PrepareModuleInput(
                input_layouts=(stream,), desired_input_layouts=(Replicate(),), use_local_output=False)
            plan.update({f"layers.{i}.{block}.{name}": ColwiseParallel() for name in column})
            plan[f"layers.{i}.{block}.{row}"] = RowwiseParallel(output_layouts=stream)
        if sequence_parallel:
            plan[f"layers.{i}.attention_norm"] = SequenceParallel()
            plan[f"layers.{i}.ffn_norm"] = SequenceParallel()
    return plan


def tp(rank: int, world: int, v: Mapping[str, int], sequence_parallel: bool,
       recompute: bool = False, titan: bool = False) -> dict[str, Any]:
    """parallelize_module over all ranks (one tensor-parallel group), loss_parallel on the head.

    ``recompute``: every layer under ``torch.utils.checkpoint`` (non-reentrant), whose
    forward reruns inside backward: its collectives are recorded as the ``recompute`` pass.
    ``titan``: the layers regrouped and split by torchtitan's plan (one conversion per block).
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import loss_parallel, parallelize_module

    mesh = init_device_mesh("cpu", (world,))
    model = _model(v)
    if titan:
        model.layers = nn.ModuleList(TitanLayer(layer) for layer in model.layers)
    parallelize_module(model, mesh, (_titan_plan if titan else _tp_plan)(model, sequence_parallel))
    recorder = Recorder({mesh.get_group().group_name: "tp"})
    for layer in model.layers:
        heads = layer.attention if titan else layer
        heads.heads, heads.kv_heads = heads.heads // world, heads.kv_heads // world
        if recompute:
            _checkpoint(layer, recorder)
    tokens, targets = _batch(v, 0)          # one tensor-parallel group sees one batch

    def step(rec: Recorder) -> None:
        with loss_parallel():
            _train(rec, model, lambda: model(tokens, targets))

    return {"rows": _steps(recorder, step)}


def _checkpoint(layer: nn.Module, recorder: Recorder) -> None:
    """Full recompute of ``layer`` (torch.utils.checkpoint); its rerun forward labelled ``recompute``."""
    from torch.utils.checkpoint import checkpoint

    forward = layer.forward

    def rerun_aware(x: torch.Tensor) -> torch.Tensor:
        if torch._C._current_graph_task_id() == -1:      # not inside the autograd engine: the first forward
            return forward(x)
        previous, recorder.pass_ = recorder.pass_, "recompute"
        try:
            return forward(x)
        finally:
            recorder.pass_ = previous

    layer.forward = lambda x: checkpoint(rerun_aware, x, use_reentrant=False)


class Stage(nn.Module):
    """One pipeline stage of the tiny Llama: the embedding on the first, norm and head on the last."""

    def __init__(self, model: LlamaModel, layers: range, first: bool, last: bool) -> None:
        super().__init__()
        self.tok_embeddings = model.tok_embeddings if first else None
        self.layers = nn.ModuleList(model.layers[i] for i in layers)
        self.norm, self.output = (model.norm, model.output) if last else (None, None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.tok_embeddings is not None:
            x = self.tok_embeddings(x)
        for layer in self.layers:
            x = layer(x)
        return x if self.output is None else self.output(self.norm(x))


def _cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def pp(rank: int, world: int, v: Mapping[str, int], micro_batches: int, chunks: int) -> dict[str, Any]:
    """torch.distributed.pipelining: ``chunks`` stages per rank (1: Schedule1F1B, more: interleaved)."""
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleInterleaved1F1B

    model = _model(v)
    stages_total = world * chunks
    per_stage = v["L"] // stages_total
    stages = []
    for chunk in range(chunks):
        index = rank + world * chunk
        module = Stage(model, range(index * per_stage, (index + 1) * per_stage),
                       index == 0, index == stages_total - 1)
        stages.append(PipelineStage(module, index, stages_total, torch.device("cpu")))
    schedule = (Schedule1F1B(stages[0], micro_batches, loss_fn=_cross_entropy) if chunks == 1 else
                ScheduleInterleaved1F1B(stages, micro_batches, loss_fn=_cross_entropy))
    recorder = Recorder({dist.group.WORLD.group_name: "pp"})
    for stage in stages:
        _label_pipeline_ops(stage, recorder)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, v["V"], (v["b"] * micro_batches, v["s"]), generator=generator)
    targets = torch.randint(0, v["V"], (v["b"] * micro_batches, v["s"]), generator=generator)

    def step(rec: Recorder) -> None:
        rec.pass_ = "pipeline"
        if rank == 0:
            schedule.step(tokens, target=targets if world * chunks == 1 else None)
        elif rank == world - 1:
            schedule.step(target=targets)
        else:
            schedule.step()
        model.zero_grad(set_to_none=True)

    return {"rows": _steps(recorder, step)}


def _label_pipeline_ops(stage: Any, recorder: Recorder) -> None:
    """Mark the tensors of the stage's forward and backward send/recv ops with their pass."""
    for method, pass_ in (("get_fwd_send_ops", "forward"), ("get_fwd_recv_ops", "forward"),
                          ("get_bwd_send_ops", "backward"), ("get_bwd_recv_ops", "backward")):
        original = getattr(stage, method)

        def labelled(*args, _original=original, _pass=pass_, **kwargs):
            ops = _original(*args, **kwargs)
            for op in ops:
                recorder.tensor_pass[op.tensor.data_ptr()] = _pass
            return ops

        setattr(stage, method, labelled)


class MoEBlock(nn.Module):
    """E SwiGLU experts, E / e on each rank, a softmax router; tokens routed round-robin (balanced)."""

    def __init__(self, h: int, f: int, experts: int, top_k: int, ranks: int) -> None:
        super().__init__()
        self.experts, self.top_k, self.local = experts, top_k, experts // ranks
        self.router = nn.Linear(h, experts, bias=False, dtype=DTYPE)
        self.w1 = nn.Parameter(torch.randn(self.local, h, f, dtype=DTYPE) / h ** 0.5)
        self.w3 = nn.Parameter(torch.randn(self.local, h, f, dtype=DTYPE) / h ** 0.5)
        self.w2 = nn.Parameter(torch.randn(self.local, f, h, dtype=DTYPE) / f ** 0.5)

    def forward(self, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        from torch.distributed._functional_collectives import all_to_all_single_autograd

        tokens = x.reshape(-1, x.shape[-1])
        scores = torch.softmax(self.router(tokens).float(), dim=-1)
        chosen = (torch.arange(tokens.shape[0] * self.top_k) % self.experts).view(-1, self.top_k)
        weights = scores.gather(1, chosen).to(x.dtype)
        order = chosen.flatten().argsort(stable=True)
        copies = tokens.repeat_interleave(self.top_k, 0)[order]
        per_expert = torch.bincount(chosen.flatten(), minlength=self.experts)
        received = torch.empty_like(per_expert)
        dist.all_to_all_single(received, per_expert, group=group)   # token counts first
        send = per_expert.view(-1, self.local).sum(1).tolist()
        counts = received.view(-1, self.local)                        # [source rank, local expert]
        arrived = all_to_all_single_autograd(copies, counts.sum(1).tolist(), send, group)
        outputs, start = [], 0
        for source in range(counts.shape[0]):
            for expert in range(self.local):
                rows = arrived[start:start + int(counts[source, expert])]
                start += rows.shape[0]
                outputs.append((F.silu(rows @ self.w1[expert]) * (rows @ self.w3[expert])) @ self.w2[expert])
        back = all_to_all_single_autograd(torch.cat(outputs), send, counts.sum(1).tolist(), group)
        combined = torch.empty_like(back).index_copy(0, order, back)
        return (combined.view(-1, self.top_k, x.shape[-1]) * weights.unsqueeze(-1)).sum(1).view_as(x)


def ep(rank: int, world: int, v: Mapping[str, int]) -> dict[str, Any]:
    """Expert parallelism over all ranks: dispatch and combine all-to-alls, forward and backward."""
    torch.manual_seed(rank)
    block = MoEBlock(v["h"], v["f"], v["E"], v["k"], world)
    x = torch.randn(v["b"], v["s"], v["h"], dtype=DTYPE, generator=torch.Generator().manual_seed(rank),
                    requires_grad=True)              # the layer input: its gradient flows back
    group = dist.group.WORLD
    recorder = Recorder({group.group_name: "ep"})
    rows = _steps(recorder, lambda rec: _train(rec, block, lambda: block(x, group).float().square().mean()))
    return {"rows": rows}
