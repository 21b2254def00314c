"""A training layout: how one step's model and batch are cut over GPUs (t, p, v, c, e, d, ZeRO, m).

The rules follow Megatron-LM: world = t p c d GPUs
(megatron/core/parallel_state.py initialize_model_parallel: "world_size must be divisible by
tensor_model_parallel_size * pipeline_model_parallel_size * context_parallel_size"); expert
ranks t_E e divide t c d (the same function's expert groups: world divisible by
expert_tensor_parallel_size * expert_model_parallel_size * pipeline_model_parallel_size); the
global batch is m micro-batches of b sequences on each of d replicas
(megatron/core/num_microbatches_calculator.py: "global batch size ... is not divisible by micro
batch size ... times data parallel size"); the interleaved schedule needs p > 1 and m a multiple
of p (megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_with_interleaving);
expert parallelism with tensor parallelism needs sequence parallelism (megatron/training/
arguments.py validate_args). :meth:`Parallelism.check` says whether the layout divides a model.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from derive.accounts.activations import RECOMPUTE_POLICIES
from derive.accounts.collectives import ALGORITHMS
from derive.accounts.state import FP8_PRECISIONS, PRECISIONS
from derive.inputs import choose, flag, positive_int, zero_stage
from derive.model import Model

#: How context parallelism moves K and V: Transformer Engine's cp_comm_type names
#: (transformer_engine/pytorch/attention.py: "p2p" ring attention, "all_gather" as Llama 3 does).
CP_COMMS = ("p2p", "all_gather")


@dataclass(frozen=True)
class Parallelism:
    """One layout: tensor (t), pipeline (p, v chunks), context (c), expert (e, t_E), data (d) parallel sizes.

    ``zero``: 0 none, 1 ZeRO-1 / Megatron's distributed optimizer, 2 ZeRO-2, 3 ZeRO-3 / FSDP full
    shard. ``global_batch``: sequences per step (default: one micro-batch per replica).
    ``scatter_gather``: Narayanan et al. 2021 section 4.1 (split the stage output over t before
    the send, all-gather after). ``capacity_factor``: MoE token capacity (None: dropless).
    ``dp_shard``: HSDP, ZeRO-3 within groups of dp_shard data-parallel ranks, replicated across
    dp / dp_shard groups (torch.distributed.fsdp.fully_shard on a 2-D mesh; torchtitan's
    data_parallel_shard_degree); None shards over all of dp. ``sp_regather``: under sequence
    parallelism the linear layers keep only their sequence shard and all-gather it again in backward
    for the weight gradient (Megatron, Korthikanti et al. 2022 section 4.2.2); False: the gathered
    input is kept (torch.distributed.tensor.parallel's SequenceParallel + ColwiseParallel).
    ``balanced``: the embedding and the loss each take one layer slot of the pipeline split, so
    L + 2 slots over p v chunks and the first and last stage hold one layer fewer (Dubey et al. 2024,
    section 3.3.2; Megatron's --account-for-embedding-in-pipeline-split and
    --account-for-loss-in-pipeline-split, megatron/core/transformer/transformer_block.py
    get_num_layers_to_build); needs pp > 1. ``fp8_param_gather``: Megatron's --fp8-param-gather
    (megatron/training/arguments.py: parameters kept in FP8 and all-gathered so by the distributed
    optimizer / FSDP); needs an FP8 precision and zero >= 1.
    """

    tp: int = 1
    pp: int = 1
    vp: int = 1
    cp: int = 1
    ep: int = 1
    dp: int = 1
    etp: int | None = None
    sequence_parallel: bool = False
    zero: int = 0
    reshard_after_forward: bool = True
    micro_batch: int = 1
    global_batch: int | None = None
    recompute: str = "none"
    precision: str = "bf16"
    cp_comm: str = "p2p"
    scatter_gather: bool = False
    algorithm: str = "ring"
    capacity_factor: Fraction | None = None
    dp_shard: int | None = None
    sp_regather: bool = True
    balanced: bool = False
    fp8_param_gather: bool = False

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "vp", "cp", "ep", "dp", "micro_batch"):
            object.__setattr__(self, name, positive_int(name, getattr(self, name)))
        object.__setattr__(self, "etp", positive_int("etp", self.tp if self.etp is None else self.etp))
        if self.global_batch is None:
            object.__setattr__(self, "global_batch", self.micro_batch * self.dp)
        object.__setattr__(self, "global_batch", positive_int("global_batch", self.global_batch))
        for name in ("sequence_parallel", "reshard_after_forward", "scatter_gather", "sp_regather", "balanced",
                     "fp8_param_gather"):
            flag(name, getattr(self, name))
        object.__setattr__(self, "zero", zero_stage("zero", self.zero))
        choose("recompute", self.recompute, RECOMPUTE_POLICIES)
        choose("precision", self.precision, PRECISIONS)
        choose("cp_comm", self.cp_comm, CP_COMMS)
        choose("algorithm", self.algorithm, ALGORITHMS)
        if self.fp8_param_gather and not PRECISIONS[self.precision].fp8:
            raise ValueError(f"fp8_param_gather: needs an FP8 precision ({', '.join(FP8_PRECISIONS)}), "
                             f"got {self.precision}")
        if self.fp8_param_gather and self.zero == 0:
            raise ValueError("fp8_param_gather: gathers parameters sharded by the distributed optimizer / "
                             "ZeRO / FSDP, needs zero >= 1")
        if self.capacity_factor is not None:
            if isinstance(self.capacity_factor, bool) or not isinstance(
                    self.capacity_factor, (int, float, Fraction)) or not self.capacity_factor > 0:
                raise ValueError(f"capacity_factor: must be a positive number, got {self.capacity_factor!r}")
            object.__setattr__(self, "capacity_factor", Fraction(self.capacity_factor))
        if self.dp_shard is not None:
            object.__setattr__(self, "dp_shard", positive_int("dp_shard", self.dp_shard))
            if self.zero != 3:
                raise ValueError(f"dp_shard: hybrid sharding (HSDP) shards ZeRO-3 / FSDP, got zero = {self.zero}")
            if self.dp % self.dp_shard:
                raise ValueError(f"dp_shard: {self.dp_shard} does not divide dp = {self.dp}")
        if self.global_batch % (self.micro_batch * self.dp):
            raise ValueError(f"global_batch: {self.global_batch} is not a whole number of micro-batches of "
                             f"micro_batch x dp = {self.micro_batch} x {self.dp} sequences "
                             "(megatron/core/num_microbatches_calculator.py)")
        if self.vp > 1 and self.pp == 1:
            raise ValueError(f"vp: interleaving ({self.vp} virtual stages) needs pp > 1")
        if self.vp > 1 and self.micro_batches % self.pp:
            raise ValueError(f"vp: the interleaved schedule needs the {self.micro_batches} micro-batches "
                             f"to be a multiple of pp = {self.pp} (megatron/core/pipeline_parallel/"
                             "schedules.py)")
        if (self.tp * self.cp * self.dp) % (self.etp * self.ep):
            raise ValueError(f"ep: etp x ep = {self.etp} x {self.ep} does not divide tp x cp x dp = "
                             f"{self.tp * self.cp * self.dp} (megatron/core/parallel_state.py, expert groups)")
        if self.ep > 1 and self.tp > 1 and not self.sequence_parallel:
            raise ValueError("sequence_parallel: expert parallelism with tensor parallelism needs sequence "
                             "parallelism (megatron/training/arguments.py validate_args)")

    @property
    def gpus(self) -> int:
        """World size t p c d."""
        return self.tp * self.pp * self.cp * self.dp

    @property
    def micro_batches(self) -> int:
        """m = global_batch / (micro_batch d), whole by construction."""
        return self.global_batch // (self.micro_batch * self.dp)

    @property
    def replicas(self) -> int:
        """HSDP replica groups: dp / dp_shard (1 without HSDP)."""
        return self.dp // (self.dp_shard or self.dp)

    @property
    def expert_data_parallel(self) -> int:
        """EDP = t c d / (t_E e): the ranks an expert's gradients are reduced over (parallel_state.py)."""
        return self.tp * self.cp * self.dp // (self.etp * self.ep)

    def check(self, model: Model) -> None:
        """ValueError naming the field unless this layout divides ``model``."""
        if model.heads % self.tp:
            raise ValueError(f"tp: {self.tp} does not divide the {model.heads} attention heads of {model.name}")
        if model.kv_heads % self.tp:
            raise ValueError(f"tp: {self.tp} does not divide the {model.kv_heads} key/value heads of "
                             f"{model.name} (Megatron splits query groups over t)")
        if model.ffn % self.tp:
            raise ValueError(f"tp: {self.tp} does not divide the FFN width f = {model.ffn} of {model.name} "
                             "(ColumnParallelLinear splits it: megatron/core/utils.py divide)")
        expert_width = dict(model.sizes).get("f_E")
        if expert_width and expert_width % self.etp:
            raise ValueError(f"etp: {self.etp} does not divide the expert FFN width f_E = {expert_width} "
                             f"of {model.name}")
        if self.balanced and self.pp == 1:
            raise ValueError("balanced: the embedding and loss slots need pp > 1")
        slots = model.layers + (2 if self.balanced else 0)
        if self.pp * self.vp > slots:
            raise ValueError(f"pp: pp x vp = {self.pp} x {self.vp} exceeds the {slots} layer slots of "
                             f"{model.name}" + (" (L + 2: embedding and loss)" if self.balanced else ""))
        if self.cp > 1 and model.seq % (2 * self.cp):
            raise ValueError(f"cp: 2 x cp = {2 * self.cp} does not divide seq = {model.seq} (causal load "
                             "balancing splits the sequence into 2c chunks: megatron/core/utils.py "
                             "get_batch_on_this_cp_rank)")
        experts = dict(model.sizes).get("E")
        if self.ep > 1 and not experts:
            raise ValueError(f"ep: {model.name} has no routed experts to split over {self.ep} ranks")
        if experts and experts % self.ep:
            raise ValueError(f"ep: {self.ep} does not divide the {experts} routed experts of {model.name}")
