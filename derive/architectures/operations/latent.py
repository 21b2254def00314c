"""Multi-head latent attention (DeepSeek-V2 report, section 2.1; DeepSeek-V3) as an operation: its parameters and what it keeps for backward.

Parameters: queries compressed to rank r_q (q_lora_rank; a direct q_proj when it is null:
DeepSeek-V2-Lite), keys and values to rank r_kv (kv_lora_rank) with a decoupled RoPE key of
width k_rope shared by every head; each of the a heads has a query/key width k_nope + k_rope and
a value width k_v. Names are transformers' (modeling_deepseek_v3.py, DeepseekV3Attention);
matrices are [in, out]. Tag ``mla_down`` on the down-projections and their norms (q_a_proj,
q_a_layernorm, kv_a_proj_with_mqa, kv_a_layernorm), which Megatron's Transformer Engine layer
spec keeps whole on every TP rank.

Saved rows: transformers' DeepseekV3Attention under eager or sdpa (:func:`hf_mla`) and
Megatron-Core's MLASelfAttention with TE (:func:`te_mla`;
megatron/core/transformer/multi_latent_attention.py get_query_key_value_tensors).
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.blocks import linear, norm
from derive.architectures.mla import MLA
from derive.architectures.operations.attention import HEADS, hf_layer_input, hf_output, te_flash, te_input
from derive.architectures.operations.norm import hf_rms_norm, te_rms_norm
from derive.architectures.operations.rows import ACTIVATION, STATISTICS, row, when
from derive.symbols import a, b, h, k_nope, k_rope, k_v, r_kv, r_q, s
from derive.tensors import Tensor

#: tokens of one micro-batch
T = b * s
#: the tags of the latent rows Megatron keeps whole on every TP rank.
LATENT = ("replicated", "attention", "mla_down")


def mla_attention(mla: MLA) -> list[Tensor]:
    """One layer's MLA projections and latent norms."""
    p = mla.prefix
    qk_width = a * (k_nope + k_rope)
    if mla.q_lora:
        rows = [*linear(f"{p}.q_a_proj", h, r_q, mla.bias, "attention", "mla_down"),
                *norm(f"{p}.q_a_layernorm", r_q, "rms", "attention", "mla_down"),
                *linear(f"{p}.q_b_proj", r_q, qk_width, False, "attention")]
    else:
        rows = linear(f"{p}.q_proj", h, qk_width, False, "attention")
    return rows + [
        *linear(f"{p}.kv_a_proj_with_mqa", h, r_kv + k_rope, mla.bias, "attention", "mla_down"),
        *norm(f"{p}.kv_a_layernorm", r_kv, "rms", "attention", "mla_down"),
        *linear(f"{p}.kv_b_proj", r_kv, a * (k_nope + k_v), False, "attention"),
        *linear(f"{p}.o_proj", a * k_v, h, mla.bias, "attention"),
    ]


def _eager_scores(qk: sp.Expr, value: sp.Expr, value_storage: Tensor,
                  viewed: sp.Basic = sp.false) -> list[Tensor]:
    """eager_attention_forward: Q, K (a heads), fp32 softmax, its bf16 copy, V (a heads).

    ``value_storage`` replaces V's row where ``viewed`` holds: the kept V is then a view of it.
    """
    v_row = row("V (a heads)", (b, a, s, value), ACTIVATION, *HEADS, note="kept by matmul(P, V)")
    return [
        row("Q (after RoPE)", (b, a, s, qk), ACTIVATION, *HEADS, note="kept by matmul(Q, K^T)"),
        row("K (after RoPE, a heads)", (b, a, s, qk), ACTIVATION, *HEADS,
            note="repeat_kv / concatenated rope part, kept by matmul(Q, K^T)"),
        row("softmax (fp32)", (b, a, s, s), STATISTICS, *HEADS, "score_matrix",
            note="softmax(dtype=float32) result, kept by its backward"),
        row("probabilities (bf16)", (b, a, s, s), ACTIVATION, *HEADS, "score_matrix",
            note=".to(query.dtype), kept by matmul(P, V)"),
        *when(v_row, sp.Not(viewed)),
        *when(value_storage, viewed),
    ]


def _sdpa_mla(value_storage: Tensor) -> list[Tensor]:
    """sdpa_attention_forward on DeepseekV3Attention's q, k (k_nope + k_rope wide) and v (k_v wide).

    No mask (is_causal) and a heads each, so no repeat_kv. Where k_v = k_nope + k_rope the CPU
    flash kernel runs: it keeps q and k (both contiguous, torch.cat and expand_kv's new_empty),
    v as a view of kv_b_proj's output, its logsumexp and its output in q's [b, a, s, k_v] layout,
    of which ``transpose(1, 2).contiguous()`` makes o_proj's copy unless a = 1 or s = 1. Elsewhere
    sdp_utils_cpp.cpp check_head_dim_size_cpp refuses flash and the math fallback
    (aten/src/ATen/native/transformers/attention.cpp _scaled_dot_product_attention_math) upcasts
    bf16 to fp32 on CPU: bmm keeps scaled q and k, the fp32 softmax (kept by _safe_softmax too)
    and v, all fp32.
    """
    qk = k_nope + k_rope
    flash = sp.Eq(k_v, qk)
    return [
        *when(row("q (flash)", (b, a, s, qk), ACTIVATION, *HEADS,
                  note="torch.cat((q_pass, q_rot)), kept by the CPU flash kernel"), flash),
        *when(row("k (flash)", (b, a, s, qk), ACTIVATION, *HEADS,
                  note="expand_kv's key_states, kept by the CPU flash kernel"), flash),
        *when(value_storage, flash),
        *when(row("softmax logsumexp (flash)", (b, a, s), STATISTICS, *HEADS, "softmax_statistics",
                  note="kept by the CPU flash kernel"), flash),
        *when(row("attention output (q layout, flash)", (b, a, s, k_v), ACTIVATION, *HEADS,
                  note="kept by the kernel; o_proj keeps its transposed copy"),
              sp.And(flash, sp.Ne(a, 1), sp.Ne(s, 1))),
        *when(row("q scaled (fp32, math)", (b, a, s, qk), STATISTICS, *HEADS,
                  note="q.float() * sqrt(scale), kept by bmm(q, k^T)"), sp.Not(flash)),
        *when(row("k scaled (fp32, math)", (b, a, s, qk), STATISTICS, *HEADS,
                  note="k.float() * sqrt(scale), kept by bmm(q, k^T)"), sp.Not(flash)),
        *when(row("softmax (fp32, math)", (b, a, s, s), STATISTICS, *HEADS, "score_matrix",
                  note="_safe_softmax's result, kept by it and by bmm(P, v)"), sp.Not(flash)),
        *when(row("v (fp32, math)", (b, a, s, k_v), STATISTICS, *HEADS,
                  note="v.float(), kept by bmm(P, v)"), sp.Not(flash)),
    ]


def hf_mla(q_lora: bool = True, kernel: str = "eager", single_sequence: bool = False) -> list[Tensor]:
    """DeepseekV3Attention in transformers 5.23: its input, the latent norms and up projections' inputs, ``kernel``'s scores, o_proj's input.

    ``single_sequence`` (b = 1): V reshapes to (a, s, k_v) without a copy, so matmul(P, V) keeps
    a view of kv_b_proj's output and with it the storage of the keys' d_nope part
    (DeepseekV3Attention.expand_kv); at b > 1 the reshape copies V alone.
    """
    rows = [hf_layer_input()]
    if q_lora:
        rows += hf_rms_norm("q_a_layernorm", (b, s, r_q), *LATENT)
        rows.append(row("q_b_proj input", (T, r_q), ACTIVATION, *LATENT,
                        note="q_a_layernorm output"))
    rows += hf_rms_norm("kv_a_layernorm", (b, s, r_kv), *LATENT)
    rows.append(row("kv_b_proj input", (T, r_kv), ACTIVATION, *LATENT,
                    note="kv_a_layernorm output"))
    kv_b_output = row("kv_b_proj output (V's storage)", (T, a * (k_nope + k_v)), ACTIVATION,
                      *HEADS, note="b = 1 or a = 1: V is a view of it, kept by matmul(P, V)")
    # matmul folds [b, a] of V (a transposed slice of kv_b_proj's output) into one batch
    # dimension without a copy when either is 1 (aten LinearAlgebra.cpp _matmul_impl)
    viewed = sp.true if single_sequence else sp.Eq(a, 1)
    rows += (_eager_scores(k_nope + k_rope, k_v, kv_b_output, viewed) if kernel == "eager"
             else _sdpa_mla(kv_b_output))
    return rows + [hf_output(a * k_v)]


def te_mla(q_lora: bool = True) -> list[Tensor]:
    """MLASelfAttention with TE: the input both down projections read, the latent norms and up projections' inputs, flash attention."""
    rows = [te_input(twice=True)]
    if q_lora:
        rows += te_rms_norm("q_layernorm", r_q, LATENT)
        rows.append(row("linear_q_up_proj input", (s, b, r_q), ACTIVATION, *LATENT, "linear_input",
                        note="q_layernorm output"))
    rows += te_rms_norm("kv_layernorm", r_kv, LATENT)
    rows.append(row("linear_kv_up_proj input", (s, b, r_kv), ACTIVATION, *LATENT, "linear_input",
                    note="kv_layernorm output"))
    return rows + te_flash(k_nope + k_rope, k_v, a)
