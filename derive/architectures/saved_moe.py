"""Tensors saved for backward by MoE and MLA layers: the ``eager`` (transformers) and ``fused`` (Megatron + TE) profiles.

``eager`` is what transformers 5.23's own modeling code keeps on CPU in bf16
with ``attn_implementation="eager"`` and its default ``grouped_mm`` experts
(transformers/integrations/moe.py grouped_mm_experts_forward), measured with
``saved_tensors_hooks`` by ``derive.validate.moe``: its RMSNorm keeps the
fp32 upcast input, the fp32 inverse RMS and the bf16 normalised input; eager
attention keeps Q, K and V expanded to the a query heads, the fp32 softmax
and its bf16 copy; the router keeps its probabilities in fp32 and the top-k
indices; the experts keep the permutation indices, the k_E copies of each
token and every intermediate of the SwiGLU. Rows are per layer and micro-batch,
T = b s tokens; routing is dropless, so the k_E copies of the T tokens sum to
T k_E rows whatever the split between experts.

``fused`` is Megatron-Core with Transformer Engine, flash attention, the
alltoall dispatcher with permute fusion and grouped GEMM
(megatron/core/transformer/moe/moe_layer.py MoELayer.forward,
token_dispatcher.py MoEAlltoAllTokenDispatcher, moe_utils.py permute/unpermute,
experts.py TEGroupedMLP, router.py TopKRouter; multi_latent_attention.py
MLASelfAttention), each row citing the function that keeps it. Its layer matrices' inputs
carry the dense tables' tags (derive.architectures.saved): ``linear_input`` for a tensor only
a TE Linear / LayerNormLinear / GroupedLinear keeps (under fp8_autocast it keeps the FP8
data its weight-gradient GEMM reads: transformer_engine/pytorch/module/linear.py
_Linear.forward, grouped_linear.py _GroupedLinear.forward), ``linear_input_shared`` for one
another op keeps in 16 bits too (the attention output, kept by flash attention; the router
input, kept by the router's own gating linear, megatron/core/transformer/moe/router.py
TopKRouter.gating, which is no TE module and stays 16-bit), ``linear_input_twice`` where two
TE Linears read one tensor and each quantises its own copy (MLA's linear_q_down_proj and
linear_kv_down_proj, or linear_q_proj, both reading the input norm's output); ``grouped_gemm``
on the rows of the experts' GroupedLinear (one FP8 quantizer per local expert).
``derive.architectures.saved_fp8.quantised_saved`` re-types them under an FP8 recipe.
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.decoder import Layout
from derive.architectures.saved import hf_eager_attention, hf_rms_norm, hf_sdpa_attention, when
from derive.inputs import choose
from derive.symbols import E, k_E, V, a, b, k_nope, k_rope, k_v, f, f_E, f_S, g, h, k, k_g, n_g, r_kv, r_q, s
from derive.tensors import Ledger, Tensor

ACTIVATION = "bf16"
FP32 = "fp32"
INDEX = "int64"
#: tokens of one micro-batch
T = b * s
#: transformers' DeepseekV3TopkRouter ranks each group by the sum of its top 2 scores (``topk(2)``).
GROUP_SCORE_EXPERTS = 2
PROFILES = ("eager", "fused")


def _row(name: str, shape: tuple[sp.Expr, ...], dtype: str, *tags: str, note: str = "") -> Tensor:
    return Tensor(name, shape, dtype, frozenset(tags), note=note)


# ---- eager: transformers' modeling code ----

def _hf_norm(prefix: str, lead: tuple[sp.Expr, ...], width: sp.Expr, *tags: str) -> list[Tensor]:
    """transformers' *RMSNorm over ``width`` (derive.architectures.saved.hf_rms_norm's rows)."""
    return hf_rms_norm(prefix, (*lead, width), *tags)


def _eager_scores(qk: sp.Expr, value: sp.Expr, value_storage: Tensor | None = None,
                  viewed: sp.Basic = sp.false) -> list[Tensor]:
    """eager_attention_forward: Q, K (a heads), fp32 softmax, its bf16 copy, V (a heads).

    ``value_storage`` replaces V's row where ``viewed`` holds: the kept V is then a view of it.
    """
    tags = ("attention", "tp_shardable")
    v_row = _row("V (a heads)", (b, a, s, value), ACTIVATION, *tags, note="kept by matmul(P, V)")
    return [
        _row("Q (after RoPE)", (b, a, s, qk), ACTIVATION, *tags, note="kept by matmul(Q, K^T)"),
        _row("K (after RoPE, a heads)", (b, a, s, qk), ACTIVATION, *tags,
             note="repeat_kv / concatenated rope part, kept by matmul(Q, K^T)"),
        _row("softmax (fp32)", (b, a, s, s), FP32, *tags, "score_matrix",
             note="softmax(dtype=float32) result, kept by its backward"),
        _row("probabilities (bf16)", (b, a, s, s), ACTIVATION, *tags, "score_matrix",
             note=".to(query.dtype), kept by matmul(P, V)"),
        *(when(v_row, sp.Not(viewed)) if value_storage is not None else [v_row]),
        *(when(value_storage, viewed) if value_storage is not None else []),
    ]


def eager_attention(features: Layout, single_sequence: bool = False,
                    implementation: str = "eager", window: bool = False) -> list[Tensor]:
    """The attention half of a transformers layer: input norm, GQA or MLA, scores, o_proj input.

    GQA's scores are transformers' dense rows (derive.architectures.saved): ``implementation``
    "eager" (K and V repeated to a heads, viewed at g = b = 1) or "sdpa" (with ``window``'s mask);
    MLA's under sdpa are :func:`_sdpa_mla`'s.

    ``single_sequence`` (b = 1): MLA's V reshapes to (a, s, k_v) without a copy, so matmul(P, V)
    keeps a view of kv_b_proj's output and with it the storage of the keys' d_nope part
    (DeepseekV3Attention.expand_kv); at b > 1 the reshape copies V alone.
    """
    rows = _hf_norm("input_layernorm", (b, s), h, "replicated", "attention")
    rows.append(_row("attention input", (T, h), ACTIVATION, "replicated", "attention",
                     note="input_layernorm output, kept by the first projections (one tensor)"))
    if features.attention == "gqa":
        if features.qk_norm == "head":
            rows += _hf_norm("q_norm", (b, s, a), k, "tp_shardable", "attention")
            rows += _hf_norm("k_norm", (b, s, g), k, "tp_shardable", "attention")
        rows += (hf_eager_attention(k) if implementation == "eager"
                 else hf_sdpa_attention(k, window))
        width = a * k
    else:
        if features.attention == "mla":
            rows += _hf_norm("q_a_layernorm", (b, s), r_q, "replicated", "attention", "mla_down")
            rows.append(_row("q_b_proj input", (T, r_q), ACTIVATION, "replicated", "attention",
                             "mla_down", note="q_a_layernorm output"))
        rows += _hf_norm("kv_a_layernorm", (b, s), r_kv, "replicated", "attention", "mla_down")
        rows.append(_row("kv_b_proj input", (T, r_kv), ACTIVATION, "replicated", "attention",
                         "mla_down", note="kv_a_layernorm output"))
        kv_b_output = _row("kv_b_proj output (V's storage)", (T, a * (k_nope + k_v)), ACTIVATION,
                           "attention", "tp_shardable",
                           note="b = 1 or a = 1: V is a view of it, kept by matmul(P, V)")
        # matmul folds [b, a] of V (a transposed slice of kv_b_proj's output) into one batch
        # dimension without a copy when either is 1 (aten LinearAlgebra.cpp _matmul_impl)
        viewed = sp.true if single_sequence else sp.Eq(a, 1)
        rows += (_eager_scores(k_nope + k_rope, k_v, kv_b_output, viewed)
                 if implementation == "eager" else _sdpa_mla(kv_b_output))
        width = a * k_v
    rows.append(_row("o_proj input", (T, width), ACTIVATION, "tp_shardable", "attention",
                     note="attention output, kept by o_proj"))
    return rows


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
    tags = ("attention", "tp_shardable")
    return [
        *when(_row("q (flash)", (b, a, s, qk), ACTIVATION, *tags,
                   note="torch.cat((q_pass, q_rot)), kept by the CPU flash kernel"), flash),
        *when(_row("k (flash)", (b, a, s, qk), ACTIVATION, *tags,
                   note="expand_kv's key_states, kept by the CPU flash kernel"), flash),
        *when(value_storage, flash),
        *when(_row("softmax logsumexp (flash)", (b, a, s), FP32, *tags, "softmax_statistics",
                   note="kept by the CPU flash kernel"), flash),
        *when(_row("attention output (q layout, flash)", (b, a, s, k_v), ACTIVATION, *tags,
                   note="kept by the kernel; o_proj keeps its transposed copy"),
              sp.And(flash, sp.Ne(a, 1), sp.Ne(s, 1))),
        *when(_row("q scaled (fp32, math)", (b, a, s, qk), FP32, *tags,
                   note="q.float() * sqrt(scale), kept by bmm(q, k^T)"), sp.Not(flash)),
        *when(_row("k scaled (fp32, math)", (b, a, s, qk), FP32, *tags,
                   note="k.float() * sqrt(scale), kept by bmm(q, k^T)"), sp.Not(flash)),
        *when(_row("softmax (fp32, math)", (b, a, s, s), FP32, *tags, "score_matrix",
                   note="_safe_softmax's result, kept by it and by bmm(P, v)"), sp.Not(flash)),
        *when(_row("v (fp32, math)", (b, a, s, k_v), FP32, *tags,
                   note="v.float(), kept by bmm(P, v)"), sp.Not(flash)),
    ]


def eager_swiglu(prefix: str, tokens: sp.Expr, width: sp.Expr, *tags: str) -> list[Tensor]:
    """A SwiGLU MLP in eager PyTorch: gate (SiLU input), up, SiLU output, down input."""
    return [
        _row(f"{prefix} gate", (tokens, width), ACTIVATION, *tags, note="kept by SiLU"),
        _row(f"{prefix} up", (tokens, width), ACTIVATION, *tags, note="kept by the multiply"),
        _row(f"{prefix} SiLU output", (tokens, width), ACTIVATION, *tags, note="kept by the multiply"),
        _row(f"{prefix} down input", (tokens, width), ACTIVATION, *tags, note="kept by down_proj"),
    ]


def _dense(prefix: str, width: sp.Expr, *tags: str) -> list[Tensor]:
    return ([_row(f"{prefix} input", (T, h), ACTIVATION, "replicated", "mlp", *tags,
                  note="post_attention_layernorm output, kept by gate_proj and up_proj")]
            + eager_swiglu(prefix, T, width, "tp_shardable", "mlp", *tags))


def eager_router(features: Layout) -> list[Tensor]:
    """The router: its input, fp32 probabilities, top-k indices and (normalised) top-k weights."""
    tags = ("router", "mlp", "replicated")
    if features.moe.router == "softmax":
        rows = [
            _row("router input", (T, h), ACTIVATION, *tags, note="kept by the router linear"),
            _row("router probabilities (fp32)", (T, E), FP32, *tags,
                 note="softmax(logits, float32), kept by softmax"),
            _row("top-k indices", (T, k_E), INDEX, *tags, note="kept by topk"),
        ]
    else:
        rows = [
            _row("router input (fp32)", (T, h), FP32, *tags,
                 note="hidden_states.type(float32), kept by the fp32 router linear"),
            _row("router weight (fp32 copy)", (h, E), FP32, *tags,
                 note="weight.type(float32), a new tensor kept by the fp32 router linear"),
            _row("router scores (fp32 sigmoid)", (T, E), FP32, *tags,
                 note="kept by sigmoid and by gather"),
            _row("top-k indices", (T, k_E), INDEX, *tags, note="kept by gather"),
        ]
    if features.moe.normalise_topk:
        rows += [
            _row("top-k weight sum (fp32)", (T, 1), FP32, *tags, note="kept by the division"),
            _row("top-k weights (fp32)", (T, k_E), FP32, *tags, note="kept by the division"),
        ]
    return rows


def eager_experts(features: Layout) -> list[Tensor]:
    """grouped_mm_experts_forward: permutation, k_E copies of each token, SwiGLU, weighting, inverse."""
    tags = ("routed_expert", "mlp", "tp_shardable")
    copies = T * k_E
    return [
        _row("gather indices (perm // k_E)", (copies,), INDEX, *tags,
             note="hidden_states[perm // k_E], kept by index"),
        _row("weight permutation (perm)", (copies,), INDEX, *tags,
             note="sample_weights[perm], kept by index"),
        _row("expert offsets", (E,), "int32", *tags, note="cumsum of tokens per expert, kept by "
             "grouped_mm"),
        _row("permuted tokens", (copies, h), ACTIVATION, *tags,
             note="the k_E copies of each token in expert order, kept by grouped_mm (gate_up)"),
        *eager_swiglu("experts", copies, f_E, *tags),
        _row("routing weights (permuted)", (copies, 1), features.moe.weights_dtype, *tags,
             note="kept by the multiply of each expert output with its weight"),
        _row("expert outputs", (copies, h), ACTIVATION, *tags, note="kept by the same multiply"),
        _row("inverse permutation", (copies,), INDEX, *tags,
             note="weighted_out[inv_perm], kept by index"),
    ]


def loop_experts(features: Layout) -> list[Tensor]:
    """The experts' ``eager`` implementation (modeling_mixtral.py MixtralExperts.forward, alike in
    Qwen3-MoE and DeepSeek-V3): a loop over the hit experts, each keeping its tokens' rows.

    The rows of expert e are n_e long; the n_e sum to T k_E over the experts (dropless), so
    the sum is exact whatever the routing.
    """
    tags = ("routed_expert", "mlp", "tp_shardable")
    copies = T * k_E
    return [
        _row("token indices (per expert)", (copies,), INDEX, *tags,
             note="torch.where(expert_mask)'s token_idx, kept by index and index_add_"),
        _row("top-k positions (per expert)", (copies,), INDEX, *tags,
             note="top_k_pos, kept by top_k_weights[token_idx, top_k_pos]"),
        _row("expert tokens", (copies, h), ACTIVATION, *tags,
             note="hidden_states[token_idx], kept by the gate_up linear"),
        *eager_swiglu("experts", copies, f_E, *tags),
        _row("routing weights (per expert)", (copies, 1), features.moe.weights_dtype, *tags,
             note="kept by the multiply of each expert output with its weight"),
        _row("expert outputs", (copies, h), ACTIVATION, *tags, note="kept by the same multiply"),
        _row("weighted outputs", (copies, h), ACTIVATION, *tags,
             note="the multiply's result in the hidden dtype, kept by index_add_"),
    ]


#: transformers 5's experts implementations (integrations/moe.py) -> their rows.
EXPERTS: dict[str, object] = {"grouped_mm": eager_experts, "eager": loop_experts}


def eager_layer(features: Layout, moe: bool, single_sequence: bool = False,
                implementation: str = "eager", window: bool = False,
                experts: str = "grouped_mm") -> Ledger:
    """One transformers decoder layer: attention, post-attention norm, dense MLP or MoE block.

    ``experts``: transformers' experts implementation, grouped_mm (its default) or eager.
    """
    rows = eager_attention(features, single_sequence, implementation, window)
    rows += _hf_norm("post_attention_layernorm", (b, s), h, "replicated", "mlp")
    if not moe:
        return Ledger(rows + _dense("mlp", f))
    rows += eager_router(features) + EXPERTS[choose("experts", experts, EXPERTS)](features)
    if features.moe.shared:
        shared = _dense("shared_experts", f_S, "shared_expert")
        # a bf16 (softmax) router's input is the shared experts' input: one tensor, one row
        rows += shared[1:] if features.moe.router == "softmax" else shared
    if features.moe.shared_gate:
        rows += eager_shared_gate()
    return Ledger(rows)


def eager_shared_gate() -> list[Tensor]:
    """Qwen2MoeSparseMoeBlock.forward: ``sigmoid(shared_expert_gate(x)) * shared_expert(x)``.

    The gate linear keeps x (the router's input already); sigmoid keeps its [T, 1] output,
    which the multiply keeps too, with the shared expert's output (modeling_qwen2_moe.py).
    """
    tags = ("shared_expert", "mlp")
    return [
        _row("shared expert gate (sigmoid output)", (T, 1), ACTIVATION, *tags, "replicated",
             note="kept by sigmoid and by the multiply with the shared expert's output"),
        _row("shared expert output", (T, h), ACTIVATION, *tags, "replicated",
             note="down_proj's output, kept by the multiply with the gate"),
    ]


def eager_edges(features: Layout, single_sequence: bool = False) -> Ledger:
    """Token ids, the RoPE cos/sin tables (shared by every layer), final norm, head input, fp32 loss.

    ``single_sequence`` (b = 1): the shifted targets are a contiguous slice of the padded
    labels, so ``.contiguous()`` copies nothing and the loss keeps their s + 1 storage
    (transformers/loss/loss_utils.py ForCausalLMLoss).
    """
    rope = k if features.attention == "gqa" else k_rope
    targets = (s + 1,) if single_sequence else (T,)
    return Ledger([
        _row("embedding: token ids", (b, s), INDEX, "embedding", "replicated"),
        _row("RoPE cos", (s, rope), ACTIVATION, "embedding", "replicated",
             note="kept once (one storage) by every layer's rotary multiply"),
        _row("RoPE sin", (s, rope), ACTIVATION, "embedding", "replicated"),
        *_hf_norm("norm", (b, s), h, "replicated", "output"),
        _row("output: head input", (T, h), ACTIVATION, "output", "replicated"),
        _row("loss: log-probabilities (fp32)", (T, V), FP32, "output", "logits", "tp_shardable",
             note="logits.float() then log_softmax, kept by log_softmax and nll_loss"),
        _row("loss: targets", targets, INDEX, "output", "replicated"),
        _row("loss: total weight", (), FP32, "output", "replicated"),
    ])


def group_routing_rows() -> Ledger:
    """DeepSeek-V3's group-limited routing: kept only by nodes the loss does not reach (freed after forward)."""
    return Ledger([
        _row("group top-2 indices", (T, n_g, GROUP_SCORE_EXPERTS), INDEX, "unreachable"),
        _row("top groups", (T, k_g), INDEX, "unreachable"),
        _row("group mask", (T, E), "bool", "unreachable"),
    ])


# ---- fused: Megatron-Core + Transformer Engine, grouped GEMM, alltoall dispatcher ----

def _te_norm(prefix: str, width: sp.Expr, *tags: str) -> list[Tensor]:
    """TE's fused RMSNorm (transformer_engine/pytorch/module/rmsnorm.py): its input and an fp32 rstd per row."""
    return [_row(f"{prefix} input", (s, b, width), ACTIVATION, "norm", *tags,
                 note=f"kept by the fused {prefix}"),
            _row(f"{prefix} rstd", (s, b), FP32, "norm", "norm_statistics", *tags,
                 note=f"fp32 rstd, kept by the fused {prefix}")]


def _flash(qk: sp.Expr, value: sp.Expr, kv_heads: sp.Expr) -> list[Tensor]:
    """TE DotProductAttention (flash backend): q, k, v, the output and the fp32 logsumexp."""
    tags = ("attention", "tp_shardable")
    return [
        _row("q", (s, b, a, qk), ACTIVATION, *tags, note="after RoPE, kept by flash attention"),
        _row("k", (s, b, kv_heads, qk), ACTIVATION, *tags, note="after RoPE, kept by flash attention"),
        _row("v", (s, b, kv_heads, value), ACTIVATION, *tags, note="kept by flash attention"),
        _row("attention output", (s, b, a * value), ACTIVATION, *tags, "linear_input_shared",
             note="kept by flash attention; the same tensor is linear_proj's input"),
        _row("softmax logsumexp", (b, a, s), FP32, *tags, "softmax_statistics",
             note="kept by flash attention"),
    ]


def fused_attention(features: Layout) -> list[Tensor]:
    """Attention half: fused input norm, GQA (TE linear_qkv) or MLA (megatron/core/transformer/multi_latent_attention.py MLASelfAttention.get_query_key_value_tensors)."""
    rows = _te_norm("input_layernorm", h, "replicated", "attention")
    two = () if features.attention == "gqa" else ("linear_input_twice",)
    rows.append(_row("attention input", (s, b, h), ACTIVATION, "replicated", "attention",
                     "linear_input", *two,
                     note="input_layernorm output, kept by linear_qkv / the down projections"))
    if features.attention == "gqa":
        if features.qk_norm == "head":
            rows += [_row("q_layernorm input", (s, b, a, k), ACTIVATION, "tp_shardable", "attention"),
                     _row("k_layernorm input", (s, b, g, k), ACTIVATION, "tp_shardable", "attention")]
        return rows + _flash(k, k, g)
    latent = ("replicated", "attention", "mla_down")
    if features.attention == "mla":
        rows += _te_norm("q_layernorm", r_q, *latent)
        rows.append(_row("linear_q_up_proj input", (s, b, r_q), ACTIVATION, *latent, "linear_input",
                         note="q_layernorm output"))
    rows += _te_norm("kv_layernorm", r_kv, *latent)
    rows.append(_row("linear_kv_up_proj input", (s, b, r_kv), ACTIVATION, *latent, "linear_input",
                     note="kv_layernorm output"))
    return rows + _flash(k_nope + k_rope, k_v, a)


def _fused_swiglu(prefix: str, tokens: tuple[sp.Expr, ...], width: sp.Expr, *tags: str) -> list[Tensor]:
    """TE linear_fc1 output kept by the fused SwiGLU (megatron/core/fusions/fused_bias_swiglu.py), fc2 input."""
    return [_row(f"{prefix} linear_fc1 output (gate and up)", (*tokens, 2 * width), ACTIVATION, *tags,
                 note="the only tensor the fused SwiGLU keeps"),
            _row(f"{prefix} linear_fc2 input", (*tokens, width), ACTIVATION, *tags, "linear_input",
                 note="SwiGLU output, kept by linear_fc2")]


def fused_moe(features: Layout, capacity_factor: sp.Expr | None = None) -> list[Tensor]:
    """Router (router.py TopKRouter), alltoall dispatch with fused permute (moe_utils.py permute),
    TEGroupedMLP (experts.py) with probabilities applied in the SwiGLU, shared experts (shared_experts.py).

    Dropless: T k_E token copies (balanced routing, so one EP rank holds T k_E copies on average);
    ``capacity_factor`` c pads or drops each expert to c T k_E / E tokens, E of them: c T k_E rows.
    """
    router = ("router", "mlp", "replicated")
    copies = T * k_E if capacity_factor is None else capacity_factor * T * k_E
    experts = ("routed_expert", "mlp", "tp_shardable")
    # the shared experts' linear_fc1 (a TE Linear) reads the router's input and keeps its own FP8 copy
    shared_input = ("linear_input_shared",) if features.moe.shared else ()
    rows = [
        _row("router input", (s, b, h), ACTIVATION, *router, *shared_input,
             note="pre_mlp_layernorm output, kept by the router's gating linear (and shared experts)"),
        _row("router scores (fp32)", (T, E), FP32, *router,
             note="intermediate_output, kept by FusedTopkScoreFunction "
                  "(transformer_engine/pytorch/router.py)"),
        _row("routing map", (T, E), "bool", *router, note="kept by FusedTopkScoreFunction"),
        _row("permutation row_id_map", (T, 2 * E + 1), "int32", *experts,
             note="kept by _moe_permute_mask_map and _moe_unpermute_mask_map (one tensor; "
                  "transformer_engine/pytorch/permutation.py)"),
        _row("permuted tokens", (copies, h), ACTIVATION, *experts, "expert_hidden", "linear_input",
             "grouped_gemm",
             note="K copies of each token after the alltoall, kept by linear_fc1 (GroupedLinear)"),
        _row("permuted probabilities (fp32)", (copies, 1), FP32, *experts,
             note="kept by the weighted SwiGLU (weighted_bias_swiglu_impl)"),
        *_fused_swiglu("experts", (copies,), f_E, *experts, "grouped_gemm"),
    ]
    if features.moe.shared:
        rows += _fused_swiglu("shared_experts", (s, b), f_S, "shared_expert", "mlp", "tp_shardable")
        if features.moe.shared_gate:
            rows.append(_row("shared expert gate output", (s, b, 1), ACTIVATION, "shared_expert",
                             "mlp", "replicated", note="sigmoid(gate), kept by the multiply"))
    return rows


def fused_layer(features: Layout, moe: bool, capacity_factor: sp.Expr | None = None) -> Ledger:
    """One Megatron-Core layer: attention, fused pre-MLP norm, dense SwiGLU or MoE block."""
    rows = fused_attention(features) + _te_norm("pre_mlp_layernorm", h, "replicated", "mlp")
    if not moe:
        return Ledger(rows + [_row("linear_fc1 input", (s, b, h), ACTIVATION, "replicated", "mlp",
                                   "linear_input")]
                      + _fused_swiglu("mlp", (s, b), f, "tp_shardable", "mlp"))
    return Ledger(rows + fused_moe(features, capacity_factor))


def fused_mtp(features: Layout) -> Ledger:
    """One MTP module (megatron/core/transformer/multi_token_prediction.py MultiTokenPredictionLayer):
    enorm, hnorm, the concatenation eh_proj keeps, its layer, the final norm and head input."""
    rows = _te_norm("enorm", h, "replicated", "mtp") + _te_norm("hnorm", h, "replicated", "mtp")
    rows.append(_row("eh_proj input", (s, b, 2 * h), ACTIVATION, "replicated", "mtp",
                     note="[enorm(emb), hnorm(h)] concatenated, kept by eh_proj"))
    rows += list(fused_layer(features, features.last_moe).map(lambda w: w.tagged("mtp")))
    rows += _te_norm("final_layernorm", h, "replicated", "mtp")
    rows.append(_row("output_layer input", (s, b, h), ACTIVATION, "replicated", "mtp"))
    rows.append(_row("MTP logits (fp32, for the loss)", (s, b, V), FP32, "tp_shardable", "mtp",
                     "logits", note="vocab-parallel cross entropy keeps the fp32 logits"))
    return Ledger(rows)


def layer_saved_moe(profile: str, features: Layout, moe: bool = True,
                    capacity_factor: sp.Expr | None = None) -> Ledger:
    """One layer's saved tensors under ``profile`` (eager: transformers; fused: Megatron + TE)."""
    if choose("profile", profile, PROFILES) == "eager":
        if capacity_factor is not None:
            raise ValueError("capacity_factor: transformers' experts are dropless")
        return eager_layer(features, moe)
    return fused_layer(features, moe, capacity_factor)
