"""Where each framework keeps the resident state, as data: per-parameter placements (the article, section 2.3).

Megatron-LM, DeepSpeed and torchtitan (FSDP2) hold the same four states -
compute copy, gradients, fp32 master, Adam moments - but differ in the
gradient dtype, in whether the fp32 master is a second copy or the parameter
itself, and in what is sharded over the d data-parallel ranks. Each placement
names the precision recipe of :mod:`derive.accounts.state` it holds, its ZeRO stage,
each state's lifetime, the ``transient`` tensors the framework allocates and frees
inside a step, and its source; :mod:`derive.accounts.placement` turns one into a ledger.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from derive.inputs import choose
from derive.symbols import LATEX_NAMES, L, N, d

#: Parameters of one layer: the unit FSDP all-gathers and Megatron's hook sees, N/L for uniform layers.
LAYER_PARAMS: sp.Expr = N / L


@dataclass(frozen=True)
class Transient:
    """A tensor allocated and freed inside a step: elements per parameter share (may use d, L)."""

    name: str
    dtype: str
    account: str
    numel: sp.Expr
    lifetime: str
    tags: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Placement:
    """One framework's placement of the resident state, with lifetimes and its source."""

    name: str
    framework: str
    recipe: str
    stage: int
    lifetimes: dict[str, str]
    transients: tuple[Transient, ...]
    source: str
    optimizer: str = "adam"
    host: frozenset[str] = frozenset()


_WHOLE_RUN = "whole run"
_MASTER = "whole run; Adam updates it at the step, then it is cast into the bf16 copy"
_MOMENTS = "whole run; read and written at the optimizer step"

MEGATRON = Placement(
    name="megatron",
    framework="Megatron-LM (bf16, distributed optimizer)",
    recipe="bf16-fp32grad",
    stage=1,
    lifetimes={
        "params": _WHOLE_RUN,
        "grads": "whole run: the contiguous fp32 grad buffer (param.main_grad), zeroed each step",
        "master": _MASTER,
        "moments": _MOMENTS,
    },
    transients=(
        Transient("bf16 param.grad of one layer", "bf16", "grads", LAYER_PARAMS,
                  "backward of one layer: added into main_grad by the grad hook, then freed "
                  "(never materialised with gradient_accumulation_fusion: wgrad GEMMs write fp32 "
                  "main_grad directly)"),
    ),
    source=("megatron/core/distributed/param_and_grad_buffer.py (fp32 grad_data buffer, "
            "accumulate_allreduce_grads_in_fp32) and distributed_data_parallel.py "
            "_make_backward_post_hook (main_grad.add_(grad); grad = None); "
            "megatron/core/optimizer/distrib_optimizer.py DistributedOptimizer "
            "(shard_fp32_from_float16_groups: fp32 master and Adam state of this rank's shard)"),
)

DEEPSPEED_BF16 = Placement(
    name="deepspeed-bf16-optimizer",
    framework="DeepSpeed BF16_Optimizer (bf16, grad_accum_dtype fp32, ZeRO stage 0 or 1)",
    recipe="bf16-fp32grad",
    stage=1,
    lifetimes={
        "params": _WHOLE_RUN + " (bf16_groups_flat)",
        "grads": "whole run: fp32_groups_gradients_flat, the full fp32 accumulation buffer "
                 "(not partitioned)",
        "master": _MASTER + " (fp32_groups_flat_partition: this rank's 1/d)",
        "moments": _MOMENTS,
    },
    transients=(
        Transient("bf16 param.grad of every parameter", "bf16", "grads", N,
                  "backward: with immediate_grad_update off (the default) every bf16 grad waits "
                  "until update_hp_grads() adds it into the fp32 buffer after backward"),
    ),
    source=("deepspeed/runtime/bf16_optimizer.py BF16_Optimizer._setup_for_real_optimizer "
            "(bf16_groups_flat; fp32_groups_flat_partition; fp32_groups_gradients_flat = "
            "zeros_like(bf16 flat, dtype=grad_acc_dtype)); deepspeed/runtime/engine.py "
            "_do_optimizer_sanity_check (bf16 + fp32 grad accumulation at stage 0 or 1 -> "
            "BFLOAT16 wrapper); deepspeed/runtime/precision_config.py "
            "(immediate_grad_update = False)"),
)

_ZERO_SOURCE = {
    0: ("deepspeed/runtime/engine.py _do_optimizer_sanity_check: bf16 with bf16 gradient "
        "accumulation and no ZeRO -> DDP_BFLOAT16, _configure_fp16_optimizer(lp_dtype=bf16): "
        "bf16 params and grads, fp32 master and moments, nothing sharded"),
    1: ("deepspeed/runtime/zero/stage_1_and_2.py DeepSpeedZeroOptimizer (stage 1): bf16 "
        "params and grads whole, single_partition_of_fp32_groups (fp32 master) and Adam "
        "state of this rank's 1/d"),
    2: ("deepspeed/runtime/zero/stage_1_and_2.py DeepSpeedZeroOptimizer (stage 2, "
        "partition_gradients): averaged_gradients keep only this rank's 1/d of the bf16 grads"),
    3: ("deepspeed/runtime/zero/stage3.py DeepSpeedZeroOptimizer_Stage3: ds_tensor bf16 "
        "param partitions, grad_partitions_flat_buffer (bf16, partition_numel), "
        "fp32_partitioned_groups_flat and Adam state of this rank's 1/d"),
}

_STEP_GRAD = Transient(
    "fp32 copy of this rank's gradient partition", "fp32", "grads", N / d,
    "optimizer step: single_grad_partition, freed after the step")
_GATHERED = Transient(
    "bf16 all-gathered parameters of one layer", "bf16", "params", LAYER_PARAMS,
    "forward and backward of one layer (re-gathered in backward), then freed",
    frozenset({"gathered"}))


# ---- DeepSpeed ZeRO-3's transients and their config knobs (deepspeed/runtime/zero/config.py) ----

def _knob(name: str, latex: str) -> sp.Symbol:
    """A positive integer config knob, printed on the sheet as ``latex``."""
    symbol = sp.Symbol(name, positive=True, integer=True)
    LATEX_NAMES[symbol] = latex
    return symbol


#: DeepSpeedZeroConfig.sub_group_size: elements of this rank's partition the optimizer steps at once.
SUB_GROUP_SIZE = _knob("sub_group_size", r"S_{\mathrm{sub}}")
#: DeepSpeedZeroConfig.max_live_parameters (stage3_max_live_parameters): gathered elements kept live.
MAX_LIVE_PARAMETERS = _knob("stage3_max_live_parameters", r"S_{\mathrm{live}}")
#: DeepSpeedZeroConfig.prefetch_bucket_size (stage3_prefetch_bucket_size): elements fetched ahead.
PREFETCH_BUCKET_SIZE = _knob("stage3_prefetch_bucket_size", r"S_{\mathrm{prefetch}}")
#: Parameters of the largest module (one nn.Module's own tensors): the unit ZeRO-3 gathers.
MODULE_PARAMS = _knob("P_module", r"P_{\mathrm{module}}")
#: The knobs' defaults in DeepSpeed 0.19.8 (pp_int(1e9), pp_int(1e9), pp_int(5e7)).
ZERO3_DEFAULTS: dict[sp.Symbol, int] = {SUB_GROUP_SIZE: 10**9, MAX_LIVE_PARAMETERS: 10**9,
                                        PREFETCH_BUCKET_SIZE: 5 * 10**7}

_ZERO3_TRANSIENTS = (
    Transient("bf16 gathered parameters: the module in use and the prefetch bucket", "bf16", "params",
              sp.Max(MODULE_PARAMS, sp.Min(MAX_LIVE_PARAMETERS, MODULE_PARAMS + PREFETCH_BUCKET_SIZE)),
              "forward and backward of one module (fetch_sub_module, re-gathered in backward), with "
              "up to stage3_prefetch_bucket_size elements fetched ahead and at most "
              "stage3_max_live_parameters kept live; released after use",
              frozenset({"gathered", "module"})),
    Transient("bf16 full gradient of the module in backward", "bf16", "grads", MODULE_PARAMS,
              "backward of one module: reduce-scattered into this rank's partition, then freed",
              frozenset({"module"})),
    Transient("fp32 gradient of one optimizer sub-group", "fp32", "grads",
              sp.Min(SUB_GROUP_SIZE, N / d),
              "optimizer step of one sub-group: _prepare_fp32_grad_for_sub_group upcasts its bf16 "
              "partition, freed when the sub-group is released (sub_group_size elements at most)"),
)
_ZERO3_SOURCE = ("; deepspeed/runtime/zero/stage3.py _prepare_fp32_grad_for_sub_group "
                 "(single_grad_partition in fp32 per sub-group) and "
                 "deepspeed/runtime/zero/partitioned_param_coordinator.py (fetch_sub_module, "
                 "prefetch bucket, max_live_parameters)")


def _zero_stage(stage: int) -> Placement:
    transients = {0: (), 1: (_STEP_GRAD,), 2: (_STEP_GRAD,), 3: _ZERO3_TRANSIENTS}[stage]
    return Placement(
        name=f"deepspeed-zero{stage}",
        framework=f"DeepSpeed ZeRO stage {stage} (bf16, bf16 gradient accumulation)",
        recipe="bf16",
        stage=stage,
        lifetimes={"params": _WHOLE_RUN, "grads": "whole run (accumulated over micro-batches)",
                   "master": _MASTER, "moments": _MOMENTS},
        transients=transients,
        source=_ZERO_SOURCE[stage] + (_ZERO3_SOURCE if stage == 3 else ""),
    )


FSDP2 = Placement(
    name="torchtitan-fsdp2",
    framework="torchtitan FSDP2, MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)",
    recipe="fp32",
    stage=3,
    lifetimes={
        "params": "whole run: the fp32 sharded DTensor parameter is the master copy",
        "grads": "whole run: fp32 sharded gradient (reduce-scatter output, cast to the "
                 "parameter dtype)",
        "moments": _MOMENTS + " (of the fp32 shard)",
    },
    transients=(
        _GATHERED,
        Transient("bf16 unsharded gradient of one layer", "bf16", "grads", LAYER_PARAMS,
                  "backward of one layer, until copied into the reduce-scatter input"),
        Transient("fp32 reduce-scatter input of one layer", "fp32", "grads", LAYER_PARAMS,
                  "reduce-scatter of one layer (allocated in reduce_dtype)"),
    ),
    source=("torchtitan/models/llama3/infra/parallelize.py apply_fsdp "
            "(MixedPrecisionPolicy(param_dtype, reduce_dtype), fully_shard per TransformerBlock, "
            "reshard_after_forward); torchtitan/config/job_config.py Training "
            "(mixed_precision_param bfloat16, mixed_precision_reduce float32); "
            "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py foreach_reduce "
            "(reduce_scatter_input in reduce_dtype; unsharded_grads freed after copy-in)"),
)

TORCH_AMP = Placement(
    name="torch-amp",
    framework="PyTorch autocast (bf16) over fp32 parameters, no sharding (accelerate's mixed precision)",
    recipe="fp32",
    stage=0,
    lifetimes={"params": "whole run: the fp32 parameters are the master copy",
               "grads": "whole run: fp32 .grad (autocast casts the weight copy, autograd returns fp32)",
               "moments": _MOMENTS},
    transients=(
        Transient("bf16 autocast copy of the weights", "bf16", "params", N,
                  "forward and backward: torch.autocast casts each weight once per forward and keeps "
                  "the copy in its cache (cache_enabled) until the autocast region exits",
                  frozenset({"autocast"})),
    ),
    source=("torch/amp/autocast_mode.py autocast (cache_enabled: cast weights cached for the region); "
            "accelerate/accelerator.py (mixed_precision='bf16' wraps forward in autocast, parameters "
            "stay fp32)"),
)

_MFSDP_SOURCE = ("megatron/core/distributed/fsdp/src/megatron_fsdp/fully_shard.py (zero_dp_strategy "
                 "optim_grads / optim_grads_params; unit: TransformerLayer); param_and_grad_buffer.py "
                 "(fp32 main_grad_buffer shard; unit buckets from main_grad_alloc)")
_UNIT_GRAD = Transient("fp32 unsharded gradient of one layer", "fp32", "grads", LAYER_PARAMS,
                       "backward of one FSDP unit (a TransformerLayer): the bucket its gradients land in, "
                       "freed after the reduce-scatter into this rank's shard")


def _megatron_fsdp(stage: int) -> Placement:
    """Megatron-FSDP at ``zero_dp_strategy`` 2 (optim_grads) or 3 (optim_grads_params)."""
    strategy = {2: "optim_grads", 3: "optim_grads_params"}[stage]
    return Placement(
        name=f"megatron-fsdp-{strategy.replace('_', '-')}",
        framework=f"Megatron-FSDP (bf16, fp32 main grads, data_parallel_sharding_strategy={strategy})",
        recipe="bf16-fp32grad",
        stage=stage,
        lifetimes={
            "params": _WHOLE_RUN + (" (this rank's shard; a unit is all-gathered for its forward and "
                                    "backward)" if stage == 3 else ""),
            "grads": "whole run: this rank's shard of the fp32 main_grad_buffer, reduce-scattered "
                     "into every micro-batch",
            "master": _MASTER,
            "moments": _MOMENTS,
        },
        transients=(_GATHERED, _UNIT_GRAD) if stage == 3 else (_UNIT_GRAD,),
        source=_MFSDP_SOURCE,
    )


PLACEMENTS: dict[str, Placement] = {
    entry.name: entry
    for entry in (MEGATRON, _megatron_fsdp(2), _megatron_fsdp(3), DEEPSPEED_BF16,
                  *(_zero_stage(k) for k in range(4)), FSDP2, TORCH_AMP)
}


#: Each framework's placement at each ZeRO stage it offers (the planner's sharding choices).
FRAMEWORK_STAGES: dict[str, dict[int, str]] = {
    "Megatron-LM": {0: "megatron", 1: "megatron", 2: "megatron-fsdp-optim-grads",
                    3: "megatron-fsdp-optim-grads-params"},
    "DeepSpeed": {k: f"deepspeed-zero{k}" for k in range(4)},
}


def stage_placements(name: str) -> dict[int, str]:
    """The placement each ZeRO stage takes in ``name``'s framework (0: unsharded; only 0 and its own stage if alone)."""
    entry = placement(name)
    for stages in FRAMEWORK_STAGES.values():
        if name in stages.values():
            return stages
    return {0: name, entry.stage: name}

# ---- ZeRO-Offload / ZeRO-Infinity: states held in host memory (a host account beside the GPU one) ----

_HOST_OPTIMIZER = frozenset({"grads", "master", "moments"})
_OFFLOAD_LIFETIMES = {
    "params": _WHOLE_RUN + " (bf16 partition on the GPU, or in host memory with offload_param)",
    "grads": "whole run, in host memory: this rank's gradient partition, copied out in fp32 as "
             "backward reduces it",
    "master": _MASTER + " (in host memory: DeepSpeedCPUAdam steps it there)",
    "moments": _MOMENTS + " (in host memory)",
}


def _offload(stage: int, params: bool) -> Placement:
    name = f"deepspeed-zero{stage}-offload" + ("-params" if params else "")
    moved = "optimizer state, fp32 gradients" + (" and bf16 parameters" if params else "")
    return Placement(
        name=name,
        framework=f"DeepSpeed ZeRO stage {stage}, offload_optimizer=cpu"
                  + (", offload_param=cpu (ZeRO-Infinity)" if params else " (ZeRO-Offload)")
                  + f": {moved} in host memory",
        recipe="bf16-fp32grad",
        stage=stage,
        lifetimes=_OFFLOAD_LIFETIMES,
        transients=_ZERO3_TRANSIENTS[:2] if stage == 3 else (),
        source=(_ZERO_SOURCE[stage] + "; deepspeed/runtime/zero/offload_config.py "
                "(offload_optimizer, offload_param: device cpu); deepspeed/ops/adam/cpu_adam.py "
                "DeepSpeedCPUAdam; Ren et al. 2021 (ZeRO-Offload), section 4.1"),
        host=_HOST_OPTIMIZER | ({"params"} if params else frozenset()),
    )


#: Offloaded placements: kept apart from PLACEMENTS, whose GPU totals all land in [16N, 18N].
OFFLOAD_PLACEMENTS: dict[str, Placement] = {
    entry.name: entry for entry in (_offload(2, False), _offload(3, False), _offload(3, True))
}
_ALL_PLACEMENTS = {**PLACEMENTS, **OFFLOAD_PLACEMENTS}


def placement(name: str) -> Placement:
    """A placement (or an offloaded one) by name; ValueError naming the field if unknown."""
    return _ALL_PLACEMENTS[choose("placement", name, _ALL_PLACEMENTS)]
