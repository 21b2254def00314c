"""Where each framework keeps the resident state: per-parameter placements (the article, section 2.3).

Megatron-LM, DeepSpeed and torchtitan (FSDP2) hold the same four states -
compute copy, gradients, fp32 master, Adam moments - but differ in the
gradient dtype, in whether the fp32 master is a second copy or the parameter
itself, and in what is sharded over the d data-parallel ranks. Each placement
here is the state ledger of :mod:`derive.accounts.state` for one precision
recipe (its ``resident`` rows, tags ``params``/``grads``/``optimizer`` and
``zero1``-``zero3``), partitioned with the same ZeRO mechanism
(:func:`~derive.accounts.state.partitioned`) at the placement's stage, plus the
``transient`` tensors the framework allocates and frees inside a step. Every
tensor's ``note`` is its lifetime. Byte totals are sums over these ledgers.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import sympy as sp

from derive.accounts.state import partitioned, state_ledger
from derive.inputs import choose
from derive.symbols import L, N, d
from derive.tensors import Ledger, Tensor

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


def _zero_stage(stage: int) -> Placement:
    transients = {0: (), 1: (_STEP_GRAD,), 2: (_STEP_GRAD,), 3: (_GATHERED,)}[stage]
    return Placement(
        name=f"deepspeed-zero{stage}",
        framework=f"DeepSpeed ZeRO stage {stage} (bf16, bf16 gradient accumulation)",
        recipe="bf16",
        stage=stage,
        lifetimes={"params": _WHOLE_RUN, "grads": "whole run (accumulated over micro-batches)",
                   "master": _MASTER, "moments": _MOMENTS},
        transients=transients,
        source=_ZERO_SOURCE[stage],
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

PLACEMENTS: dict[str, Placement] = {
    entry.name: entry
    for entry in (MEGATRON, DEEPSPEED_BF16, *(_zero_stage(k) for k in range(4)), FSDP2)
}


def placement(name: str) -> Placement:
    """A placement by name; ValueError naming the field if unknown."""
    return PLACEMENTS[choose("placement", name, PLACEMENTS)]


def _resident(entry: Placement) -> Ledger:
    """The placement's resident rows (the state table of its recipe), unsharded, each with its lifetime as the note."""
    held = state_ledger(entry.recipe, entry.optimizer).where("resident")
    return held.map(lambda t: replace(t, note=entry.lifetimes[_role(t)]))


def _role(tensor: Tensor) -> str:
    """The lifetime key of a state row: params, grads, master or moments."""
    if tensor.has("optimizer"):
        return "master" if "master" in tensor.name else "moments"
    return "params" if tensor.has("params") else "grads"


def _transients(entry: Placement, ranks: sp.Expr) -> Ledger:
    """The placement's transient tensors on one of ``ranks`` ranks, each with its lifetime."""
    return Ledger(
        Tensor(row.name, (sp.sympify(row.numel).subs(d, ranks),), row.dtype,
               frozenset({"transient", row.account}) | row.tags, note=row.lifetime)
        for row in entry.transients
    )


def placement_ledger(name: str, sharded: bool = False, ranks: sp.Expr = d) -> Ledger:
    """Per-rank ledger of ``name``: resident rows (sharded over ``ranks`` if asked) and transients."""
    entry = placement(name)
    ranks = ranks if sharded else sp.Integer(1)
    resident = partitioned(_resident(entry), entry.stage, ranks)
    return resident + _transients(entry, ranks)


def placement_bytes(name: str, sharded: bool = False, ranks: sp.Expr = d) -> sp.Expr:
    """Resident bytes per rank of ``name`` (N parameters)."""
    return placement_ledger(name, sharded, ranks).where("resident").bytes()


def placement_bytes_per_parameter(name: str, sharded: bool = False, ranks: sp.Expr = d) -> sp.Expr:
    """Resident bytes per parameter per rank of ``name``: 16-18 unsharded, a + b/d sharded."""
    return sp.expand(placement_bytes(name, sharded, ranks) / N)


def transient_bytes(name: str, sharded: bool = False, ranks: sp.Expr = d) -> sp.Expr:
    """Bytes of ``name``'s transient tensors (each at its own moment; their sum bounds them)."""
    return placement_ledger(name, sharded, ranks).where("transient").bytes()


def placement_table() -> list[dict[str, object]]:
    """One row per placement for the sheet: totals per parameter and a row per tensor (SymPy values)."""
    rows = []
    for name, entry in PLACEMENTS.items():
        whole, shard = placement_ledger(name), placement_ledger(name, sharded=True)
        tensors = [
            {"tensor": full.name, "dtype": full.dtype,
             "lifetime": "resident" if full.has("resident") else "transient",
             "when": full.note,
             "sharded": part.bytes.has(d),
             "bytes_per_parameter": sp.expand(full.bytes / N),
             "sharded_bytes_per_parameter": sp.expand(part.bytes / N)}
            for full, part in zip(whole, shard)
        ]
        rows.append({
            "placement": name,
            "framework": entry.framework,
            "bytes_per_parameter": placement_bytes_per_parameter(name),
            "sharded_bytes_per_parameter": placement_bytes_per_parameter(name, sharded=True),
            "transient_bytes": transient_bytes(name, sharded=True),
            "tensors": tensors,
            "source": entry.source,
        })
    return rows
