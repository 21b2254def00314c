"""Host memory beside the GPU: offloaded state per node and the model a process builds before partitioning.

ZeRO-Offload and ZeRO-Infinity (Ren et al. 2021; Rajbhandari et al. 2021) keep the
optimizer state, the fp32 gradients and optionally the bf16 parameters of each rank's
partition in host memory (:data:`~derive.accounts.framework_placements.OFFLOAD_PLACEMENTS`); a
node's host holds the partitions of its G ranks. Before ``deepspeed.initialize``
partitions anything, each process builds the model on the host in fp32 (the whole
model, or one module at a time under ``deepspeed.zero.Init``). The host peak of a
node is the larger of the two phases.
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.framework_placements import MODULE_PARAMS
from derive.accounts.placement import host_bytes
from derive.symbols import LATEX_NAMES, N
from derive.tensors import Ledger, Tensor

#: GPUs (ranks) per node and nodes: d = G n_nodes data-parallel ranks.
GPUS_PER_NODE = sp.Symbol("G", positive=True, integer=True)
NODES = sp.Symbol("n_nodes", positive=True, integer=True)
LATEX_NAMES[NODES] = r"n_{\mathrm{nodes}}"
RANKS = GPUS_PER_NODE * NODES


def init_ledger(zero_init: bool) -> Ledger:
    """What one process holds on the host before partitioning: the fp32 model, or one fp32 module under zero.Init."""
    if zero_init:
        return Ledger([Tensor("fp32 module being built under deepspeed.zero.Init", (MODULE_PARAMS,), "fp32",
                              frozenset({"host", "init", "params"}),
                              note="model construction: each module is partitioned as soon as it is built "
                                   "(deepspeed/runtime/zero/partition_parameters.py Init)")])
    return Ledger([Tensor("fp32 model built by the process", (N,), "fp32",
                          frozenset({"host", "init", "params"}),
                          note="model construction, until deepspeed.initialize partitions or moves it")])


def host_state_per_node(placement: str) -> sp.Expr:
    """Offloaded bytes on one node's host: G ranks' partitions (d = G n_nodes)."""
    return sp.expand(GPUS_PER_NODE * host_bytes(placement, sharded=True, ranks=RANKS))


def host_init_per_node(zero_init: bool) -> sp.Expr:
    """Bytes the node's G processes hold on the host while building the model."""
    return GPUS_PER_NODE * init_ledger(zero_init).bytes()


def host_peak_per_node(placement: str, zero_init: bool = False) -> sp.Expr:
    """The node's host peak: the larger of model construction and the offloaded training state."""
    return sp.Max(host_init_per_node(zero_init), host_state_per_node(placement))
