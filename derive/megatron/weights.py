"""The most loaded shard and its bytes per GPU (megatron/training/theoretical_memory_usage.py
compute_weight_and_optimizer_memory, core_v0.18.0).

Megatron's most loaded shard is the first pipeline stage: (L layers + the final
norm) / p - the final norm sits in Megatron's transformer block -, the MTP block's
Transformer layers whole (not its projection nor its norms) and the input embedding;
with one stage and untied embeddings the output head is added. Routed experts are
split over t_E e; the router, the shared-expert gate and the norms are whole on every
rank; everything else is split over t (MLA's down projections and latent norms too).
Bytes per parameter are the bf16 recipe's (fp32 main gradients): 18, or 6 + 12/d with
the distributed optimizer, experts' over the expert data-parallel group EDP.
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

from derive.accounts.experts import model_parallel_share, moe_resident_bytes
from derive.architectures.tables import model_parameters
from derive.conventions.megatron import MEGATRON_RECIPES
from derive.megatron.tables import Reading, normalized
from derive.symbols import p
from derive.tensors import Ledger


@lru_cache(maxsize=None)
def first_stage(reading: Reading, single_stage: bool) -> Ledger:
    """Megatron's most loaded shard on one rank: (layers + final norm) / p, MTP layers, embedding (+ head)."""
    table = model_parameters(reading.layout)
    block = table.where("layer").without("mtp") + table.where("norm").without("layer", "mtp")
    shard = block.map(lambda w: w.divided(p)) + table.where("mtp", "layer") + table.where("embedding")
    if single_stage and reading.untied:
        shard = shard + table.where("output")
    return model_parallel_share(normalized(shard, reading.normalization), duplicated_latents=False)


@lru_cache(maxsize=None)
def weight_and_optimizer_bytes(reading: Reading, single_stage: bool, distributed: bool) -> sp.Expr:
    """Bytes per GPU of the first stage: experts at EDP's bytes/parameter, the rest at d's."""
    return moe_resident_bytes(first_stage(reading, single_stage), MEGATRON_RECIPES["bf16"], "adam",
                              1 if distributed else 0)
