"""The attention operation in its kernels: what it keeps for backward (projection input, Q, K, V, scores or statistics, output).

Kernels: Megatron's materialised scores (softmax, dropout mask and output [b, a, s, s]) and its
fused (flash) kernel (output and logsumexp; Dao et al. 2022); PyTorch eager's
scaled_dot_product_attention (GQA kept at g heads, enable_gqa); Transformer Engine's flash
attention; transformers' sdpa_attention_forward and eager_attention_forward (5.23,
integrations/sdpa_attention.py, models/llama/modeling_llama.py); GPT-2's (models/gpt2).
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.operations.norm import hf_rms_norm, qk_norms
from derive.architectures.operations.rows import (ACTIVATION, BATCH_FIRST, HEAD, KV_VIEW, MASK,
                                                  SEQUENCE_FIRST, SINGLE_SEQUENCE, STATISTICS,
                                                  row, sliding_mask, when)
from derive.symbols import a, b, g, h, k, s
from derive.tensors import Tensor

#: How attention keeps its scores for backward (memory): the [b, a, s, s] matrices, or a fused
#: (flash) kernel's output and logsumexp. The FLOP side's causal / full / none is a *mask*.
ATTENTION_KERNELS = ("materialised", "fused")
#: the tags of a per-head row and of a score matrix Korthikanti's selective recompute drops.
HEADS = ("tp_shardable", "attention")
SCORES = ("tp_shardable", "score_matrix", "recomputed_selective", "attention")
#: Eager GPT-2 attention: q (a strided view of c_attn's output) folds to [b a, s, k] without a copy
#: only at b = 1 or a = 1 (torch.matmul's reshape), so QK^T keeps c_attn's whole [b, s, 3h] storage.
Q_VIEW = sp.Or(SINGLE_SEQUENCE, sp.Eq(a, 1))


def _logsumexp(note: str) -> Tensor:
    return row("softmax logsumexp", (b, a, s), STATISTICS, "tp_shardable", "softmax_statistics",
               "attention", note=note)


def megatron_attention(kernel: str) -> list[Tensor]:
    """Megatron's GPT attention (Korthikanti et al. 2022, section 4.1): fused QKV input, Q, K, V, then the scores or the flash kernel's rows."""
    kept = "kept by QK^T" if kernel == "materialised" else "kept by the fused kernel"
    rows = [
        row("QKV projection input", (s, b, h), ACTIVATION, "replicated", "attention", "linear_input",
            note="LayerNorm 1 output, kept by the fused QKV linear"),
        row("Q", (b, a, s, HEAD), ACTIVATION, *HEADS, note=kept),
        row("K", (b, a, s, HEAD), ACTIVATION, *HEADS, note=kept),
        row("V", (b, a, s, HEAD), ACTIVATION, *HEADS, note="kept by attention over V"
            if kernel == "materialised" else "kept by the fused kernel"),
    ]
    if kernel == "materialised":
        return rows + [
            row("softmax output", (b, a, s, s), ACTIVATION, *SCORES, note="kept by softmax"),
            row("attention dropout mask", (b, a, s, s), MASK, *SCORES, "dropout",
                note="kept by dropout"),
            row("attention dropout output", (b, a, s, s), ACTIVATION, *SCORES,
                note="kept by attention over V"),
            row("output projection input", (s, b, h), ACTIVATION, *HEADS, "linear_input",
                note="the attention output, kept by the output projection"),
        ]
    return rows + [
        row("attention output", (s, b, h), ACTIVATION, *HEADS, "linear_input_shared",
            note="kept by the fused kernel; the same storage is the output projection's input"),
        _logsumexp("kept by the fused kernel to recompute the scores in backward"),
    ]


def eager_sdpa_attention(head: sp.Expr = HEAD) -> list[Tensor]:
    """PyTorch eager: q/k/v linears (GQA), RoPE, scaled_dot_product_attention (enable_gqa, the CPU flash kernel)."""
    return [
        row("q/k/v projection input", (*BATCH_FIRST, h), ACTIVATION, "replicated", "attention",
            note="attention_norm output, kept by wq, wk and wv (one tensor)"),
        row("q after RoPE", (b, a, s, head), ACTIVATION, *HEADS,
            note="kept by scaled_dot_product_attention; RoPE itself keeps only its cos/sin tables"),
        row("k after RoPE", (b, g, s, head), ACTIVATION, *HEADS,
            note="g heads (enable_gqa=True), kept by scaled_dot_product_attention"),
        row("v", (b, s, g * head), ACTIVATION, *HEADS,
            note="wv output, kept by scaled_dot_product_attention as a transposed view"),
        row("attention output", (b, s, a * head), ACTIVATION, *HEADS,
            note="kept by scaled_dot_product_attention (CPU flash kernel); "
                 "the same storage is wo's input"),
        _logsumexp("kept by scaled_dot_product_attention"),
    ]


def te_flash_attention(head: sp.Expr = HEAD) -> list[Tensor]:
    """Megatron + Transformer Engine: linear_qkv, RoPE, flash attention (g key/value heads)."""
    return [
        row("linear_qkv input", (*SEQUENCE_FIRST, h), ACTIVATION, "replicated", "attention",
            "linear_input", note="input_layernorm output, kept by linear_qkv"),
        row("q", (s, b, a, head), ACTIVATION, *HEADS, note="after RoPE, kept by flash attention"),
        row("k", (s, b, g, head), ACTIVATION, *HEADS,
            note="after RoPE, g heads, kept by flash attention"),
        row("v", (s, b, g, head), ACTIVATION, *HEADS, note="g heads, kept by flash attention"),
        row("attention output", (s, b, a * head), ACTIVATION, *HEADS, "linear_input_shared",
            note="kept by flash attention; the same tensor is linear_proj's input"),
        _logsumexp("kept by flash attention"),
    ]


def hf_sdpa_attention(head: sp.Expr, window: bool = False,
                      heads_first: bool = False) -> list[Tensor]:
    """sdpa_attention_forward: GQA kept at g heads (enable_gqa), the CPU flash kernel's logsumexp.

    ``heads_first``: the query after RoPE is contiguous as [b, a, s, head] (Phi 3's
    apply_rotary_pos_emb ends in torch.cat), so the kernel's output, in the query's layout, is kept
    by the kernel and ``transpose(1, 2).contiguous()`` copies it for o_proj unless a = 1 or s = 1.

    ``window`` (a sliding window w): at s >= w the mask exists, so use_gqa_in_sdpa is False and
    repeat_kv copies K and V to a heads (a stride-0 view when g = 1), and the CPU flash kernel
    keeps the bool mask converted to the query dtype, [b, 1, s, s] in every layer
    (aten/src/ATen/native/transformers/attention.cpp, scaled_dot_product_attention,
    convert_boolean_attn_mask).
    """
    masked = sliding_mask(window)
    repeated = sp.And(masked, sp.Ne(g, 1))
    return [
        *when(row("k after RoPE", (b, g, s, head), ACTIVATION, *HEADS,
                  note="g heads, kept by scaled_dot_product_attention"), sp.Not(repeated)),
        *when(row("k repeated to a heads (mask)", (b, a, s, head), ACTIVATION, *HEADS,
                  note="repeat_kv(k): sdpa gets a mask, so no enable_gqa"), repeated),
        row("q after RoPE", (b, a, s, head), ACTIVATION, *HEADS,
            note="kept by scaled_dot_product_attention"),
        *when(row("v", (b, g, s, head), ACTIVATION, *HEADS,
                  note="g heads, kept by scaled_dot_product_attention"), sp.Not(repeated)),
        *when(row("v repeated to a heads (mask)", (b, a, s, head), ACTIVATION, *HEADS,
                  note="repeat_kv(v): sdpa gets a mask, so no enable_gqa"), repeated),
        row("softmax logsumexp", (b, a, s), STATISTICS, *HEADS, "softmax_statistics",
            note="kept by scaled_dot_product_attention"),
        *when(row("sliding-window mask", (b, 1, s, s), ACTIVATION, "replicated", "attention",
                  "attention_mask", note="sdpa_mask's bool mask as the query dtype, kept by the "
                  "CPU flash kernel"), masked),
        *(when(row("attention output (query layout)", (b, a, s, head), ACTIVATION, *HEADS,
                   note="the kernel's output as [b, a, s, head], kept by the kernel; o_proj "
                   "keeps its transposed copy"), sp.And(sp.Ne(a, 1), sp.Ne(s, 1)))
          if heads_first else []),
    ]


def hf_eager_attention(head: sp.Expr) -> list[Tensor]:
    """eager_attention_forward: repeat_kv copies K and V to a heads; fp32 softmax, bf16 probabilities.

    Where :data:`KV_VIEW` holds (g = 1, b = 1) the copy is a view: QK^T and PV keep K and V at g heads.
    """
    copied = sp.Not(KV_VIEW)
    return [
        row("q after RoPE", (b, a, s, head), ACTIVATION, *HEADS, note="kept by QK^T"),
        *when(row("k repeated to a heads", (b, a, s, head), ACTIVATION, *HEADS,
                  note="repeat_kv(k) after RoPE, kept by QK^T (the k of g heads is not kept)"),
              copied),
        *when(row("k after RoPE (g heads, viewed)", (b, g, s, head), ACTIVATION, *HEADS,
                  note="g = 1, b = 1: repeat_kv and matmul only view it; kept by QK^T"), KV_VIEW),
        row("softmax output (fp32)", (b, a, s, s), STATISTICS, *SCORES,
            note="softmax(dtype=float32), kept by softmax"),
        row("probabilities (bf16)", (b, a, s, s), ACTIVATION, *SCORES,
            note=".to(query dtype), kept by attention over V (dropout p = 0 keeps nothing)"),
        *when(row("v repeated to a heads", (b, a, s, head), ACTIVATION, *HEADS,
                  note="repeat_kv(v), kept by attention over V"), copied),
        *when(row("v (g heads, viewed)", (b, g, s, head), ACTIVATION, *HEADS,
                  note="g = 1, b = 1: v_proj's output viewed, kept by attention over V"), KV_VIEW),
    ]


def hf_attention(kernel: str, head: sp.Expr, projection_input: Tensor,
                 output_note: str = "o_proj's input", qk_norm: str | None = None,
                 window: bool = False, heads_first: bool = False,
                 softcap: bool = False) -> list[Tensor]:
    """A transformers attention block: the projections' input, q/k norms (``qk_norm``: a kind of
      :func:`qk_norms`), the ``kernel``'s (sdpa or eager)'s rows, Gemma 2's soft-capped scores, the output."""
    rows = [projection_input, *(qk_norms(head, qk_norm) if qk_norm else [])]
    if kernel == "sdpa":
        rows += hf_sdpa_attention(head, window, heads_first)
    else:
        rows += hf_eager_attention(head)
        if softcap:
            rows.append(row("attention scores tanh (softcap)", (b, a, s, s), ACTIVATION,
                            "tp_shardable", "score_matrix", "attention",
                            note="tanh(scores / attn_logit_softcapping), kept by tanh"))
    return rows + [row("attention output", (b, s, a * head), ACTIVATION, *HEADS, note=output_note)]


def gpt2_attention(kernel: str) -> list[Tensor]:
    """GPT2Attention: Conv1D c_attn, q a view of its output, k / v copied by DynamicLayer.update's torch.cat (use_cache).

    sdpa keeps c_attn's whole [b, s, 3h] storage; eager only where torch.matmul folds it without a
    copy (:data:`Q_VIEW`), else a [b, a, s, k] copy; eager's softmax stays bf16 (no fp32 upcast: one
    [b, a, s, s] tensor kept by softmax and by PV); under eager ``reshape(...).contiguous()`` copies
    the attention output for ``c_proj`` (under sdpa it is the kernel's output).
    """
    sdpa = kernel == "sdpa"
    rows = [
        row("c_attn input", (b, s, h), ACTIVATION, "replicated", "attention",
            note="ln_1 output, kept by Conv1D's addmm"),
        *when(row("c_attn output (q viewed)", (b, s, 3 * h), ACTIVATION, *HEADS,
                  note="q is a view of it, kept by the attention: the whole storage"),
              sp.true if sdpa else Q_VIEW),
        *when(row("q (matmul's copy)", (b, a, s, k), ACTIVATION, *HEADS,
                  note="torch.matmul folds [b, a] of the strided q view by a copy"),
              sp.false if sdpa else sp.Not(Q_VIEW)),
        row("k (DynamicCache copy)", (b, a, s, k), ACTIVATION, *HEADS,
            note="torch.cat in DynamicLayer.update (use_cache), kept by the attention"),
        row("v (DynamicCache copy)", (b, a, s, k), ACTIVATION, *HEADS,
            note="torch.cat in DynamicLayer.update (use_cache), kept by the attention"),
    ]
    if sdpa:
        rows.append(_logsumexp("kept by scaled_dot_product_attention"))
    else:
        rows.append(row("softmax output (bf16)", (b, a, s, s), ACTIVATION, "tp_shardable",
                        "score_matrix", "attention",
                        note="softmax in the scores' dtype, kept by softmax and by PV"))
    return rows + [row("attention output", (b, s, a * k), ACTIVATION, *HEADS,
                       note="c_proj's input (sdpa: the kernel's output; eager: the contiguous copy)")]


def hf_layer_input() -> Tensor:
    """The [T, h] input of an MoE model's attention in transformers: input_layernorm's output, kept by the first projections."""
    return row("attention input", (b * s, h), ACTIVATION, "replicated", "attention",
               note="input_layernorm output, kept by the first projections (one tensor)")


def hf_output(width: sp.Expr) -> Tensor:
    """The attention output [T, ``width``] o_proj keeps (an MoE model's layer in transformers)."""
    return row("o_proj input", (b * s, width), ACTIVATION, *HEADS,
               note="attention output, kept by o_proj")


def hf_gqa(kernel: str = "eager", qk_norm: str = "none", window: bool = False) -> list[Tensor]:
    """GQA of an MoE model in transformers 5.23 (MixtralAttention, Qwen3MoeAttention): its input, Qwen 3's
    per-head q/k norms (``qk_norm`` "head"), ``kernel``'s rows (sdpa with ``window``'s mask, or eager), o_proj's input."""
    rows = [hf_layer_input()]
    if qk_norm == "head":
        rows += hf_rms_norm("q_norm", (b, s, a, k), "tp_shardable", "attention")
        rows += hf_rms_norm("k_norm", (b, s, g, k), "tp_shardable", "attention")
    rows += hf_eager_attention(k) if kernel == "eager" else hf_sdpa_attention(k, window)
    return rows + [hf_output(a * k)]


def te_flash(qk: sp.Expr, value: sp.Expr, kv_heads: sp.Expr) -> list[Tensor]:
    """TE DotProductAttention (flash backend): q, k, v, the output and the fp32 logsumexp (an MoE / MLA layer)."""
    return [
        row("q", (s, b, a, qk), ACTIVATION, *HEADS, note="after RoPE, kept by flash attention"),
        row("k", (s, b, kv_heads, qk), ACTIVATION, *HEADS, note="after RoPE, kept by flash attention"),
        row("v", (s, b, kv_heads, value), ACTIVATION, *HEADS, note="kept by flash attention"),
        row("attention output", (s, b, a * value), ACTIVATION, *HEADS, "linear_input_shared",
            note="kept by flash attention; the same tensor is linear_proj's input"),
        row("softmax logsumexp", (b, a, s), STATISTICS, *HEADS, "softmax_statistics",
            note="kept by flash attention"),
    ]


def te_input(twice: bool = False) -> Tensor:
    """input_layernorm's output, kept by linear_qkv or (``twice``) by MLA's two down projections."""
    return row("attention input", (s, b, h), ACTIVATION, "replicated", "attention", "linear_input",
               *(("linear_input_twice",) if twice else ()),
               note="input_layernorm output, kept by linear_qkv / the down projections")


def te_gqa(qk_norm: str = "none") -> list[Tensor]:
    """GQA of an MoE layer under Megatron + TE: linear_qkv's input, the q/k layernorms' inputs, flash attention."""
    rows = [te_input()]
    if qk_norm == "head":
        rows += [row("q_layernorm input", (s, b, a, k), ACTIVATION, *HEADS),
                 row("k_layernorm input", (s, b, g, k), ACTIVATION, *HEADS)]
    return rows + te_flash(k, k, g)
