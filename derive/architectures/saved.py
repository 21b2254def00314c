"""Tensors saved for backward: one layer, one micro-batch, tensor by tensor.

Every activation byte count in derive is a sum over these tables. Tags on
every row:
  exactly one of ``tp_shardable`` (split over t tensor-parallel ranks: by
  heads or by the MLP's columns) or ``replicated`` (whole on every TP rank;
  sequence parallelism splits it over t instead);
  ``score_matrix`` for the [b, a, s, s] tensors; ``recomputed_selective`` for
  what Korthikanti's selective recompute drops; ``norm_statistics`` for a
  norm's per-token mean/rstd; ``softmax_statistics`` for the fused kernel's
  logsumexp; ``layer_input`` for the tensor full recompute keeps; ``dropout`` for masks;
  ``linear_input`` for a layer matrix's input kept only by that linear, ``linear_input_shared``
  for one another op keeps too (the attention output: an FP8 recipe re-types the first and adds
  an FP8 copy of the second, ``derive.architectures.saved_fp8``); the block
  (``norm``, ``attention``, ``mlp``). The op that keeps a tensor is in ``note``.

f is kept a symbol: f = 4h is an assumption applied by substitution, so
Megatron's sbh(18 + 4f/h) and Korthikanti's sbh(34 + 5as/h) fall out of the
same GPT table.

Measured against PyTorch 2.13 (CPU, bf16, ``torch.autograd.graph.saved_tensors_hooks``,
deduplicated by storage, parameters and buffers excluded), the GPT table and
the ``eager`` Llama profile list exactly the tensors PyTorch keeps, with two
conventions to know: CPU ``native_layer_norm`` keeps mean/rstd in the input
dtype (bf16), CUDA in fp32 (``statistics_dtype``); and the 1-byte dropout
masks are those of ``torch.native_dropout`` (``F.dropout`` on CPU keeps a
bf16 scaled noise tensor instead).
"""
from __future__ import annotations

import sympy as sp

from derive.inputs import choose
from derive.symbols import V, a, b, f, g, h, h_kv, s, w
from derive.tensors import Ledger, Tensor

#: 16-bit activations (Korthikanti et al. 2022, section 4.1).
ACTIVATION = "bf16"
#: dropout masks kept as one byte per element.
MASK = "bool"
#: fp32 row statistics (norm rstd on CUDA, flash attention's logsumexp).
STATISTICS = "fp32"

#: How attention keeps its scores for backward (memory): the [b, a, s, s] matrices, or a fused
#: (flash) kernel's output and logsumexp. The FLOP side's causal / full / none is a *mask*.
ATTENTION_KERNELS = ("materialised", "fused")
#: The Llama layer's profiles (how a framework runs it): PyTorch eager, Megatron + TE fused kernels,
#: and transformers' own LlamaDecoderLayer with sdpa or eager attention.
LLAMA_PROFILES = ("eager", "fused", "hf-sdpa", "hf-eager")
#: Every layer profile with a saved-for-backward table: the GPT layer and the Llama profiles.
LAYER_PROFILES = ("gpt", "llama-eager", "llama-fused", "llama-hf-sdpa", "llama-hf-eager")
#: Former names of :data:`ATTENTION_KERNELS` and :data:`LAYER_PROFILES`.
ATTENTIONS, ARCHITECTURES = ATTENTION_KERNELS, LAYER_PROFILES

#: per-head width and the key/value width under GQA.
HEAD = h / a
KV = h_kv()


def _row(name: str, shape: tuple[sp.Expr, ...], dtype: str, *tags: str, note: str = "") -> Tensor:
    return Tensor(name, shape, dtype, frozenset(tags), note=note)


def layer_input(layout: tuple[sp.Expr, ...] = (s, b, h)) -> Tensor:
    """The layer input x [s, b, h]: all full recompute keeps (Korthikanti et al. 2022, section 5)."""
    return _row("layer input", layout, ACTIVATION, "replicated", "layer_input", "norm",
                note="kept by the first norm (and by the checkpoint under full recompute)")


def _layer_norm(prefix: str, input_tensor: Tensor, dtype: str,
                statistics: tuple[str, ...]) -> list[Tensor]:
    """A norm's input and its per-token statistics rows."""
    tokens = input_tensor.shape[:-1]
    return [input_tensor] + [
        _row(f"{prefix} {stat}", tokens, dtype, "replicated", "norm_statistics", "norm",
             note=f"{stat} per token, kept by {prefix}")
        for stat in statistics
    ]


def gpt_layer_saved(attention_kernel: str = "materialised", statistics_dtype: str = STATISTICS) -> Ledger:
    """One GPT layer, Korthikanti et al. 2022, section 4.1: MHA, GELU, LayerNorm, three dropouts."""
    choose("attention_kernel", attention_kernel, ATTENTION_KERNELS)
    ln2_input = _row("post_attention_layernorm input", (s, b, h), ACTIVATION, "replicated", "norm",
                     note="kept by LayerNorm 2 (the residual sum)")
    rows = _layer_norm("input_layernorm", layer_input(), statistics_dtype, ("mean", "rstd"))
    rows += [
        _row("QKV projection input", (s, b, h), ACTIVATION, "replicated", "attention", "linear_input",
             note="LayerNorm 1 output, kept by the fused QKV linear"),
        _row("Q", (b, a, s, HEAD), ACTIVATION, "tp_shardable", "attention",
             note="kept by QK^T" if attention_kernel == "materialised" else "kept by the fused kernel"),
        _row("K", (b, a, s, HEAD), ACTIVATION, "tp_shardable", "attention",
             note="kept by QK^T" if attention_kernel == "materialised" else "kept by the fused kernel"),
        _row("V", (b, a, s, HEAD), ACTIVATION, "tp_shardable", "attention",
             note="kept by attention over V" if attention_kernel == "materialised"
             else "kept by the fused kernel"),
    ]
    if attention_kernel == "materialised":
        score = ("tp_shardable", "score_matrix", "recomputed_selective", "attention")
        rows += [
            _row("softmax output", (b, a, s, s), ACTIVATION, *score, note="kept by softmax"),
            _row("attention dropout mask", (b, a, s, s), MASK, *score, "dropout",
                 note="kept by dropout"),
            _row("attention dropout output", (b, a, s, s), ACTIVATION, *score,
                 note="kept by attention over V"),
            _row("output projection input", (s, b, h), ACTIVATION, "tp_shardable", "attention",
                 "linear_input", note="the attention output, kept by the output projection"),
        ]
    else:
        rows += [
            _row("attention output", (s, b, h), ACTIVATION, "tp_shardable", "attention",
                 "linear_input_shared", note="kept by the fused kernel; the same storage is the output "
                      "projection's input"),
            _row("softmax logsumexp", (b, a, s), STATISTICS, "tp_shardable", "softmax_statistics",
                 "attention", note="kept by the fused kernel to recompute the scores in backward"),
        ]
    rows.append(_row("attention-output dropout mask", (s, b, h), MASK, "replicated", "dropout",
                     "attention", note="kept by dropout after the output projection"))
    rows += _layer_norm("post_attention_layernorm", ln2_input, statistics_dtype, ("mean", "rstd"))
    rows += [
        _row("fc1 input", (s, b, h), ACTIVATION, "replicated", "mlp", "linear_input",
             note="LayerNorm 2 output, kept by fc1"),
        _row("GELU input", (s, b, f), ACTIVATION, "tp_shardable", "mlp",
             note="fc1 output, kept by GELU"),
        _row("fc2 input", (s, b, f), ACTIVATION, "tp_shardable", "mlp", "linear_input",
             note="GELU output, kept by fc2"),
        _row("MLP dropout mask", (s, b, h), MASK, "replicated", "dropout", "mlp",
             note="kept by dropout after fc2"),
    ]
    return Ledger(rows)


def eager_rms_norm(prefix: str) -> list[Tensor]:
    """nn.RMSNorm in eager PyTorch: the composite rms_norm upcasts, so it keeps fp32 copies."""
    return [
        _row(f"{prefix} input (fp32 upcast)", (b, s, h), STATISTICS, "replicated", "norm",
             note=f"x.float(), kept by pow and mul inside {prefix} (nn.RMSNorm)"),
        _row(f"{prefix} rstd", (b, s), STATISTICS, "replicated", "norm_statistics", "norm",
             note=f"rsqrt(mean(x^2) + eps) per token, kept by {prefix}"),
        _row(f"{prefix} normalised (fp32)", (b, s, h), STATISTICS, "replicated", "norm",
             note=f"x * rstd before the scale, kept by the multiply with {prefix}.weight"),
    ]


def _llama_eager(head: sp.Expr = HEAD) -> list[Tensor]:
    """PyTorch eager: nn.RMSNorm, q/k/v linears (GQA), RoPE, SDPA (enable_gqa), SiLU(gate) * up."""
    rows = eager_rms_norm("attention_norm")
    rows += [
        _row("q/k/v projection input", (b, s, h), ACTIVATION, "replicated", "attention",
             note="attention_norm output, kept by wq, wk and wv (one tensor)"),
        _row("q after RoPE", (b, a, s, head), ACTIVATION, "tp_shardable", "attention",
             note="kept by scaled_dot_product_attention; RoPE itself keeps only its "
                  "cos/sin tables"),
        _row("k after RoPE", (b, g, s, head), ACTIVATION, "tp_shardable", "attention",
             note="g heads (enable_gqa=True), kept by scaled_dot_product_attention"),
        _row("v", (b, s, g * head), ACTIVATION, "tp_shardable", "attention",
             note="wv output, kept by scaled_dot_product_attention as a transposed view"),
        _row("attention output", (b, s, a * head), ACTIVATION, "tp_shardable", "attention",
             note="kept by scaled_dot_product_attention (CPU flash kernel); "
                  "the same storage is wo's input"),
        _row("softmax logsumexp", (b, a, s), STATISTICS, "tp_shardable", "softmax_statistics",
             "attention", note="kept by scaled_dot_product_attention"),
    ]
    rows += eager_rms_norm("ffn_norm")
    rows += [
        _row("w1/w3 input", (b, s, h), ACTIVATION, "replicated", "mlp",
             note="ffn_norm output, kept by w1 and w3 (one tensor)"),
        _row("gate (w1 output)", (b, s, f), ACTIVATION, "tp_shardable", "mlp", note="kept by SiLU"),
        _row("SiLU output", (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="kept by the multiply with up"),
        _row("up (w3 output)", (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="kept by the multiply with SiLU(gate)"),
        _row("w2 input", (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="SiLU(gate) * up, kept by w2"),
    ]
    return rows


def _fused_rms_norm(prefix: str, input_tensor: Tensor) -> list[Tensor]:
    """A fused RMSNorm (Transformer Engine / Apex): keeps its input and an fp32 rstd per token."""
    return [input_tensor, _row(f"{prefix} rstd", (s, b), STATISTICS, "replicated",
                               "norm_statistics", "norm", note=f"fp32 rstd, kept by {prefix}")]


def _llama_fused(head: sp.Expr = HEAD) -> list[Tensor]:
    """Megatron + Transformer Engine: fused RMSNorm, flash attention, fused SwiGLU (bias_swiglu)."""
    rows = _fused_rms_norm("input_layernorm", layer_input())
    rows += [
        _row("linear_qkv input", (s, b, h), ACTIVATION, "replicated", "attention", "linear_input",
             note="input_layernorm output, kept by linear_qkv"),
        _row("q", (s, b, a, head), ACTIVATION, "tp_shardable", "attention",
             note="after RoPE, kept by flash attention"),
        _row("k", (s, b, g, head), ACTIVATION, "tp_shardable", "attention",
             note="after RoPE, g heads, kept by flash attention"),
        _row("v", (s, b, g, head), ACTIVATION, "tp_shardable", "attention",
             note="g heads, kept by flash attention"),
        _row("attention output", (s, b, a * head), ACTIVATION, "tp_shardable", "attention",
             "linear_input_shared", note="kept by flash attention; the same tensor is linear_proj's input"),
        _row("softmax logsumexp", (b, a, s), STATISTICS, "tp_shardable", "softmax_statistics",
             "attention", note="kept by flash attention"),
    ]
    rows += _fused_rms_norm("pre_mlp_layernorm",
                            _row("pre_mlp_layernorm input", (s, b, h), ACTIVATION, "replicated",
                                 "norm", note="the residual sum, kept by the fused RMSNorm"))
    rows += [
        _row("linear_fc1 input", (s, b, h), ACTIVATION, "replicated", "mlp", "linear_input",
             note="pre_mlp_layernorm output, kept by linear_fc1"),
        _row("linear_fc1 output (gate and up)", (s, b, 2 * f), ACTIVATION, "tp_shardable", "mlp",
             note="the only tensor the fused SwiGLU keeps"),
        _row("linear_fc2 input", (s, b, f), ACTIVATION, "tp_shardable", "mlp", "linear_input",
             note="SwiGLU output, kept by linear_fc2"),
    ]
    return rows


# ---- transformers' own modeling code (transformers 5.23, models/llama/modeling_llama.py) ----

def hf_rms_norm(prefix: str, shape: tuple[sp.Expr, ...], *tags: str,
                normalised: str = ACTIVATION) -> list[Tensor]:
    """LlamaRMSNorm: keeps the fp32 upcast input and rstd, and casts x * rstd back to bf16 before the scale.

    ``tags`` replace ``replicated`` (a norm over per-head widths is ``tp_shardable``);
    ``normalised="fp32"``: Olmo2RMSNorm scales before the cast (modeling_olmo2.py), so the
    multiply with the weight keeps x * rstd in fp32.
    """
    tags = tags or ("replicated",)
    cast = "(x * rstd).to(input_dtype)" if normalised == ACTIVATION else "x * rstd (fp32)"
    return [
        _row(f"{prefix} input (fp32 upcast)", shape, STATISTICS, "norm", *tags,
             note=f"hidden_states.to(float32), kept by pow and mul inside {prefix}"),
        _row(f"{prefix} rstd", shape[:-1], STATISTICS, "norm_statistics", "norm", *tags,
             note=f"rsqrt(variance + eps), kept by the mul inside {prefix}"),
        _row(f"{prefix} normalised ({normalised})", shape, normalised, "norm", *tags,
             note=f"{cast}, kept by the multiply with {prefix}.weight"),
    ]


def _hf_qk_norms(head: sp.Expr, projection: bool = False) -> list[Tensor]:
    """Qwen 3's q_norm / k_norm (modeling_qwen3.py): a LlamaRMSNorm over each head's width.

    ``projection``: OLMo 2's (modeling_olmo2.py Olmo2Attention): an Olmo2RMSNorm over the whole
    q_proj / k_proj output, one rstd per token, fp32 normalised.
    """
    if projection:
        return [*hf_rms_norm("q_norm", (b, s, a * head), "tp_shardable", "qk_norm",
                             normalised=STATISTICS),
                *hf_rms_norm("k_norm", (b, s, g * head), "tp_shardable", "qk_norm",
                             normalised=STATISTICS)]
    return [*hf_rms_norm("q_norm", (b, s, a, head), "tp_shardable", "qk_norm"),
            *hf_rms_norm("k_norm", (b, s, g, head), "tp_shardable", "qk_norm")]


def exists(condition: sp.Basic) -> sp.Expr:
    """A row's count under ``condition``: 1 where it holds, 0 elsewhere (a row that exists only there)."""
    return sp.Piecewise((1, condition), (0, True))


def when(row: Tensor, condition: sp.Basic) -> list[Tensor]:
    """``row`` held only where ``condition`` holds (none if it never does, as is if it always does)."""
    if condition == sp.true:
        return [row]
    if condition == sp.false:
        return []
    return [row.times(exists(condition))]


#: b = 1: a view that folds the batch into another dimension needs no copy (one sequence).
SINGLE_SEQUENCE = sp.Eq(b, 1, evaluate=False)  # b may be 1: nothing to decide (or import) on load
#: transformers' eager attention with one key/value head and one sequence: repeat_kv's
#: expand + reshape (transformers/integrations/sdpa_attention.py repeat_kv) merges a size-1
#: g with the stride-0 repeat, a view; torch.matmul folds [b, a] into one batch dimension
#: (aten/src/ATen/native/LinearAlgebra.cpp _matmul_impl, reshape) without a copy only at b = 1,
#: so QK^T and PV keep the g-head K and V themselves, not a copy at a heads.
KV_VIEW = sp.And(sp.Eq(g, 1, evaluate=False), SINGLE_SEQUENCE)


def sliding_mask(window: bool) -> sp.Basic:
    """Where transformers materialises the sdpa mask of a sliding-window model: s >= w.

    masking_utils._ignore_causal_mask_sdpa refuses to skip the mask when
    ``kv_length >= local_attention_size`` (create_sliding_window_causal_mask, sdpa_mask).
    """
    return s >= w if window else sp.false


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
    tags = ("tp_shardable", "attention")
    return [
        *when(_row("k after RoPE", (b, g, s, head), ACTIVATION, *tags,
                    note="g heads, kept by scaled_dot_product_attention"), sp.Not(repeated)),
        *when(_row("k repeated to a heads (mask)", (b, a, s, head), ACTIVATION, *tags,
                    note="repeat_kv(k): sdpa gets a mask, so no enable_gqa"), repeated),
        _row("q after RoPE", (b, a, s, head), ACTIVATION, *tags,
             note="kept by scaled_dot_product_attention"),
        *when(_row("v", (b, g, s, head), ACTIVATION, *tags,
                    note="g heads, kept by scaled_dot_product_attention"), sp.Not(repeated)),
        *when(_row("v repeated to a heads (mask)", (b, a, s, head), ACTIVATION, *tags,
                    note="repeat_kv(v): sdpa gets a mask, so no enable_gqa"), repeated),
        _row("softmax logsumexp", (b, a, s), STATISTICS, *tags, "softmax_statistics",
             note="kept by scaled_dot_product_attention"),
        *when(_row("sliding-window mask", (b, 1, s, s), ACTIVATION, "replicated", "attention",
                    "attention_mask", note="sdpa_mask's bool mask as the query dtype, kept by the "
                    "CPU flash kernel"), masked),
        *(when(_row("attention output (query layout)", (b, a, s, head), ACTIVATION, *tags,
                    note="the kernel's output as [b, a, s, head], kept by the kernel; o_proj "
                    "keeps its transposed copy"), sp.And(sp.Ne(a, 1), sp.Ne(s, 1)))
          if heads_first else []),
    ]


def hf_eager_attention(head: sp.Expr) -> list[Tensor]:
    """eager_attention_forward: repeat_kv copies K and V to a heads; fp32 softmax, bf16 probabilities.

    Where :data:`KV_VIEW` holds (g = 1, b = 1) the copy is a view: QK^T and PV keep K and V at g heads.
    """
    score = ("tp_shardable", "score_matrix", "recomputed_selective", "attention")
    tags = ("tp_shardable", "attention")
    copied = sp.Not(KV_VIEW)
    return [
        _row("q after RoPE", (b, a, s, head), ACTIVATION, *tags, note="kept by QK^T"),
        *when(_row("k repeated to a heads", (b, a, s, head), ACTIVATION, *tags,
                    note="repeat_kv(k) after RoPE, kept by QK^T (the k of g heads is not kept)"),
               copied),
        *when(_row("k after RoPE (g heads, viewed)", (b, g, s, head), ACTIVATION, *tags,
                    note="g = 1, b = 1: repeat_kv and matmul only view it; kept by QK^T"), KV_VIEW),
        _row("softmax output (fp32)", (b, a, s, s), STATISTICS, *score,
             note="softmax(dtype=float32), kept by softmax"),
        _row("probabilities (bf16)", (b, a, s, s), ACTIVATION, *score,
             note=".to(query dtype), kept by attention over V (dropout p = 0 keeps nothing)"),
        *when(_row("v repeated to a heads", (b, a, s, head), ACTIVATION, *tags,
                    note="repeat_kv(v), kept by attention over V"), copied),
        *when(_row("v (g heads, viewed)", (b, g, s, head), ACTIVATION, *tags,
                    note="g = 1, b = 1: v_proj's output viewed, kept by attention over V"), KV_VIEW),
    ]


def _llama_hf(head: sp.Expr, attention: str, qk_norm: bool, window: bool = False,
              fused: bool = False, post_norms: bool = False) -> list[Tensor]:
    """LlamaDecoderLayer (Mistral's, Qwen 3's, Phi 3's, OLMo 2's alike) as transformers 5.23 trains it.

    ``fused``: Phi3Attention's qkv_proj and Phi3MLP's gate_up_proj (modeling_phi3.py): q, k, v
    and gate, up are views of one output each; RoPE's cat keeps the query heads first.
    ``post_norms``: Olmo2DecoderLayer (modeling_olmo2.py): no norm before attention or the MLP,
    whose projections keep the residual stream; an Olmo2RMSNorm after each, and q/k norms over
    the whole projections.
    """
    qkv = "qkv_proj" if fused else "q_proj, k_proj and v_proj"
    norm = {"normalised": STATISTICS} if post_norms else {}
    rows = [] if post_norms else hf_rms_norm("input_layernorm", (b, s, h))
    rows.append(_row("q/k/v projection input", (b, s, h), ACTIVATION, "replicated", "attention",
                     note=f"{'the residual stream' if post_norms else 'input_layernorm output'}, "
                          f"kept by {qkv}"))
    if qk_norm or post_norms:
        rows += _hf_qk_norms(head, projection=post_norms)
    rows += (hf_sdpa_attention(head, window, heads_first=fused) if attention == "sdpa"
             else hf_eager_attention(head))
    rows.append(_row("attention output", (b, s, a * head), ACTIVATION, "tp_shardable",
                     "attention", note="o_proj's input"))
    if not post_norms:
        rows += hf_rms_norm("post_attention_layernorm", (b, s, h))
    gate, up = (("gate_up_proj output, gate half", "gate_up_proj output, up half") if fused
                else ("gate (gate_proj output)", "up (up_proj output)"))
    rows += [
        _row("gate/up input", (b, s, h), ACTIVATION, "replicated", "mlp",
             note=("the residual sum" if post_norms else "post_attention_layernorm output")
                  + ", kept by " + ("gate_up_proj" if fused else "gate_proj and up_proj")),
        _row(gate, (b, s, f), ACTIVATION, "tp_shardable", "mlp", note="kept by SiLU"),
        _row(up, (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="kept by the multiply with SiLU(gate)"),
        _row("SiLU output", (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="kept by the multiply with up"),
        _row("down_proj input", (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="SiLU(gate) * up, kept by down_proj"),
    ]
    if post_norms:  # o_proj's and down_proj's outputs, normalised before each residual add
        rows += hf_rms_norm("post_attention_layernorm", (b, s, h), **norm)
        rows += hf_rms_norm("post_feedforward_layernorm", (b, s, h), **norm)
    return rows


def llama_layer_saved(profile: str, head_dim: sp.Expr = HEAD, qk_norm: bool = False,
                      window: bool = False, fused: bool = False,
                      post_norms: bool = False) -> Ledger:
    """One Llama layer (RMSNorm, GQA, RoPE, SwiGLU, no dropout) as ``profile`` runs it, heads of width ``head_dim``.

    ``qk_norm`` adds Qwen 3's per-head q/k norms, ``window`` a sliding window w (Mistral)
    to the hf-sdpa profile's mask rows, ``fused`` Phi 3's qkv_proj / gate_up_proj and
    ``post_norms`` OLMo 2's norms (the transformers profiles only).
    """
    choose("profile", profile, LLAMA_PROFILES)
    for name, value in (("qk_norm", qk_norm), ("fused", fused), ("post_norms", post_norms)):
        if value and not profile.startswith("hf-"):
            raise ValueError(f"{name}: the {profile!r} profile is not transformers' (the hf-* "
                             "profiles take it)")
    if profile == "eager":
        return Ledger(_llama_eager(head_dim))
    if profile == "fused":
        return Ledger(_llama_fused(head_dim))
    return Ledger(_llama_hf(head_dim, profile.removeprefix("hf-"), qk_norm, window, fused,
                            post_norms))


def layer_saved(profile: str, attention_kernel: str = "materialised",
                statistics_dtype: str = STATISTICS, head_dim: sp.Expr = HEAD,
                qk_norm: bool = False) -> Ledger:
    """The saved-for-backward table of ``profile``; the Llama profiles ignore ``attention_kernel``."""
    choose("profile", profile, LAYER_PROFILES)
    choose("attention_kernel", attention_kernel, ATTENTION_KERNELS)
    if profile == "gpt":
        if head_dim != HEAD or qk_norm:
            raise ValueError("head_dim: the GPT table has heads of width h/a and no q/k norms")
        return gpt_layer_saved(attention_kernel, statistics_dtype)
    return llama_layer_saved(profile.removeprefix("llama-"), head_dim, qk_norm)


def embedding_saved() -> Ledger:
    """The input embedding's token ids and dropout mask (Korthikanti et al. 2022, section 4.3)."""
    return Ledger([
        _row("token ids", (s, b), "int64", "replicated", "token_ids", "embedding",
             note="kept by the embedding lookup (Megatron counts 8sb; the paper does not)"),
        _row("embedding dropout mask", (s, b, h), MASK, "replicated", "dropout", "embedding",
             note="kept by dropout after the embedding (GPT; Llama has none)"),
    ])


def output_saved() -> Ledger:
    """Final norm and head inputs, logits, targets (Korthikanti section 4.3; the article, 4.3)."""
    return Ledger([
        _row("final norm input", (s, b, h), ACTIVATION, "replicated", "output",
             note="kept by the final norm"),
        _row("output projection input", (s, b, h), ACTIVATION, "replicated", "output",
             note="final norm output, kept by the output head"),
        _row("logits", (s, b, V), ACTIVATION, "tp_shardable", "logits", "transient", "output",
             note="the head's output; alive while the fp32 copy is made (PyTorch eager "
                  "cross_entropy keeps only the fp32 copy for backward)"),
        _row("logits (fp32, for the loss)", (s, b, V), STATISTICS, "tp_shardable", "logits",
             "output", note="fp32 log-softmax kept by cross entropy"),
        _row("targets", (s, b), "int64", "replicated", "token_ids", "output",
             note="kept by the loss"),
    ])
