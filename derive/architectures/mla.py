"""Multi-head latent attention (DeepSeek-V2 report, section 2.1; DeepSeek-V3 report, section 2.1.1), tensor by tensor.

Queries: h -> r_q latent (q_a_proj), RMSNorm, r_q -> a (d_nope + d_rope)
(q_b_proj); without a query latent (q_lora_rank null, DeepSeek-V2-Lite) one
q_proj [h, a (d_nope + d_rope)]. Keys and values: h -> r_kv latent plus ONE
shared rotary key of width d_rope (kv_a_proj_with_mqa), RMSNorm on the
latent, r_kv -> a (d_nope + d_v) (kv_b_proj); output o_proj [a d_v, h].
The down projections and latent norms (tag ``latent``) are ``tp_replicated``:
Megatron's Transformer Engine spec builds linear_q_down_proj and
linear_kv_down_proj as duplicated (not split) linears on every TP rank
(megatron/core/models/gpt/gpt_layer_specs.py get_gpt_layer_with_transformer_engine_spec,
MLASelfAttentionSubmodules).
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.parameters import DTYPE
from derive.symbols import a, d_n, d_r, d_v, h, r_kv, r_q
from derive.tensors import Ledger, Tensor


def _row(name: str, shape: tuple[sp.Expr, ...], *tags: str) -> Tensor:
    return Tensor(name, shape, DTYPE, frozenset(("attention", "layer", *tags)))


def mla_attention(query_latent: bool = True) -> Ledger:
    """One MLA block: query path (latent or direct), key/value latent with the rotary key, output."""
    if query_latent:
        query = [
            _row("self_attn.q_a_proj", (h, r_q), "gemm", "latent", "tp_replicated"),
            _row("self_attn.q_a_layernorm", (r_q,), "norm", "latent", "tp_replicated"),
            _row("self_attn.q_b_proj", (r_q, a * (d_n + d_r)), "gemm"),
        ]
    else:
        query = [_row("self_attn.q_proj", (h, a * (d_n + d_r)), "gemm")]
    return Ledger(query + [
        _row("self_attn.kv_a_proj_with_mqa", (h, r_kv + d_r), "gemm", "latent", "tp_replicated"),
        _row("self_attn.kv_a_layernorm", (r_kv,), "norm", "latent", "tp_replicated"),
        _row("self_attn.kv_b_proj", (r_kv, a * (d_n + d_v)), "gemm"),
        _row("self_attn.o_proj", (a * d_v, h), "gemm"),
    ])


def mla_layer(mlp: Ledger, query_latent: bool = True) -> Ledger:
    """An MLA layer: input norm, MLA, post-attention norm, then ``mlp``."""
    norm = lambda name, block: _row(name, (h,), "norm", "tp_replicated").tagged(block)  # noqa: E731
    return (Ledger([norm("input_layernorm.weight", "attention")]) + mla_attention(query_latent)
            + Ledger([norm("post_attention_layernorm.weight", "mlp")]) + mlp)
