"""FLOPs of a batch under Megatron's convention (megatron/training/training.py
num_floating_point_operations, transformer_flops, core_v0.18.0).

Three passes of every weight GEMM of derive's table (``derive.architectures.gemms``):
the attention at head width k (a query heads, g groups) or MLA, Megatron's optional
output gate [h, a k], the SwiGLU or GELU MLP, the top-k routed experts and the shared
experts (neither router nor gate); MLA's latent norms and the MTP block's three norms
priced like [n, 1] weight GEMMs (6 per parameter); L + D layers, each MTP layer of the
last layer's type, with the causal scores QK^T and PV (widths k, or d_nope + d_rope and
k_v under MLA); the output head once and once more per MTP module. Token-linear terms
are times the tokens of the batch and the score terms times the sum of squared sequence
lengths (``derive.accounts.flops.packed_flops``).
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import sympy as sp

from derive.accounts.flops import packed_flops
from derive.architectures.gemms import flops, weight_gemms
from derive.architectures.moe import active_rows
from derive.architectures.parameters import DTYPE
from derive.architectures.tables import layer_count, model_parameters, mtp_logit_gemms, score_gemms
from derive.megatron.tables import Reading
from derive.symbols import Q, T, a, h, k
from derive.tensors import Ledger, Tensor

#: Tokens of a batch and the sum of its squared sequence lengths (total_real_tokens_in_batch,
#: seqlen_squared_sum_in_batch; b s and b s^2 for b unpacked sequences of s tokens).
BATCH_TOKENS, SQUARED_LENGTHS = T, Q


def output_gate() -> Tensor:
    """Megatron's --attention-output-gate: a gate [h, a k] stacked into linear_qkv (a GEMM of the layer)."""
    return Tensor("attention.output_gate", (h, a * k), DTYPE,
                  frozenset({"gemm", "layer", "attention"}))


def _as_gemm(w: Tensor) -> Tensor:
    """A norm's scale [n] priced as an [n, 1] weight GEMM (Megatron's 6 FLOPs per norm parameter)."""
    return replace(w, shape=(*w.shape, 1), tags=w.tags | {"gemm"})


def _priced_norm(w: Tensor) -> bool:
    """MLA's latent norms and an MTP module's own norms: Megatron prices them like GEMM parameters."""
    return w.has("norm") and (w.has("mla_down") or (w.has("mtp") and not w.has("layer")))


def counted(table: Ledger) -> Ledger:
    """Megatron's FLOP reading of a table: active experts, no router or gate, priced norms."""
    table = active_rows(table).without("router", "shared_expert_gate")
    return table.map(lambda w: _as_gemm(w) if _priced_norm(w) else w)


@lru_cache(maxsize=None)
def flops_per_token(reading: Reading, gated: bool) -> sp.Expr:
    """FLOPs per token of one s-token sequence: weight GEMMs, the output gate and the scores in every layer."""
    layout = reading.layout
    layers = layer_count(layout)
    gate = weight_gemms(Ledger([output_gate()] if gated else [])).times(layers)
    return flops(weight_gemms(counted(model_parameters(layout))) + gate
                 + score_gemms(layout).times(layers) + mtp_logit_gemms(layout))


@lru_cache(maxsize=None)
def batch_flops(reading: Reading, gated: bool) -> sp.Expr:
    """FLOPs of a batch in T tokens and Q = sum of squared sequence lengths (packed_flops)."""
    return packed_flops(BATCH_TOKENS, SQUARED_LENGTHS, per_token=flops_per_token(reading, gated))
