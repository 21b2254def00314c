"""DeepSpeed 0.19.8's ZeRO-2 / ZeRO-3 model-state estimators, read from derive's placements.

GPU bytes are the placement ledger on d = G n_nodes ranks (resident state and transients,
:func:`~derive.identities.peers.deepspeed_gpu_bytes`); host bytes are a node's host peak
(:mod:`derive.accounts.host`) times ``additional_buffer_factor``; DeepSpeed rounds both down
with ``int()``.
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.host import GPUS_PER_NODE, NODES, RANKS
from derive.accounts.framework_placements import MODULE_PARAMS
from derive.accounts.placement import placement_ledger
from derive.architectures.decoder import FAMILIES
from derive.architectures.tables import parameter_count
from derive.identities.peers import (
    BUFFER_FACTOR,
    ESTIMATOR_KNOBS,
    deepspeed_gpu_bytes,
    deepspeed_host_bytes,
)
from derive.peers import Reproduction, largest_module, model_of
from derive.symbols import N

VIEW = "DeepSpeed estimator view"


def _placement(stage: int, offload: bool, params: bool) -> str:
    return f"deepspeed-zero{stage}" + ("-offload" if offload else "") + ("-params" if params else "")


def reproduce(record: dict, models: dict[str, dict]) -> dict[str, Reproduction]:
    """Each number of one DeepSpeed record, as derive reproduces it."""
    model = model_of(record["model"], models)
    call, kw = record["call"], record["kwargs"]
    if "estimate_zero" not in call:
        counts = {"total_params": Reproduction("parameter table (N)", model.subs(parameter_count(FAMILIES[model.family]))),
                  "largest_layer_params": Reproduction("largest module of the parameter table",
                                                       sp.Integer(largest_module(model)))}
        return {key: counts[key] for key in record["result"]}
    values = ((N, kw["total_params"]), (GPUS_PER_NODE, kw["num_gpus_per_node"]), (NODES, kw["num_nodes"]),
              (BUFFER_FACTOR, sp.Rational(str(kw["additional_buffer_factor"]))),
              (MODULE_PARAMS, kw.get("largest_layer_params", 0)))
    stage = 3 if "zero3" in call else 2
    offload, params = kw["cpu_offload"], kw.get("cpu_offload_params", False)
    zero_init = kw.get("zero_init", False)
    name = _placement(stage, offload, params)
    gpu, host = [], []
    if stage == 3 and not offload:
        gpu.append(("ZeRO-3 GPU estimate leaves out the bf16 gradient partition", 1))
    if stage == 2 and offload:
        host.append(("ZeRO-2 offload host memory counted for every GPU of the world on each node", 1))
    if stage == 3 and offload and zero_init:
        what = "optimizer and parameters" if params else "optimizer"
        host.append((f"ZeRO-3 offload ({what}) with zero.Init: the fp32 module being built is left out", 1))
    out = {
        "gpu_mem": Reproduction(f"{VIEW}: {name} GPU bytes per rank", deepspeed_gpu_bytes(name),
                                tuple(gpu), values, "floor"),
        "cpu_mem": Reproduction(f"{VIEW}: {name} host peak per node x additional_buffer_factor",
                                deepspeed_host_bytes(name, zero_init), tuple(host), values, "floor"),
    }
    if stage == 3:
        module = placement_ledger(name, sharded=True, ranks=RANKS).where("transient", "module")
        layer = module.bytes().xreplace(ESTIMATOR_KNOBS)
        out["largest_layer_memory"] = Reproduction(
            f"{VIEW}: gathered bf16 module + its bf16 gradient", layer, (), values)
    return out
