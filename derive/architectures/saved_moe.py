"""Tensors saved for backward by MoE and MLA layers: the ``eager`` (transformers) and ``fused`` (Megatron + TE) profiles, walked through the operation registry.

A layer is a sequence of steps (derive.architectures.operations.registry): the norms, the
attention (GQA or MLA: derive.architectures.operations.attention, .latent), the dense SwiGLU or
the MoE block's router, routed experts, shared experts and their gate
(derive.architectures.operations.experts), each declaring its rows once per implementation.

``eager`` is what transformers 5.23's own modeling code keeps on CPU in bf16 with
``attn_implementation="eager"`` (or sdpa) and its default ``grouped_mm`` experts, measured with
``saved_tensors_hooks`` by ``derive.validate.experts``: its RMSNorm keeps the fp32 upcast input,
the fp32 inverse RMS and the bf16 normalised input; eager attention keeps Q, K and V expanded to
the a query heads, the fp32 softmax and its bf16 copy.

``fused`` is Megatron-Core with Transformer Engine, flash attention, the alltoall dispatcher
with permute fusion and grouped GEMM (megatron/core/transformer/moe/moe_layer.py
MoELayer.forward; multi_latent_attention.py MLASelfAttention). Its layer matrices' inputs carry
the dense tables' tags (derive.architectures.saved): ``linear_input`` for a tensor only a TE
Linear / LayerNormLinear / GroupedLinear keeps (under fp8_autocast it keeps the FP8 data its
weight-gradient GEMM reads: transformer_engine/pytorch/module/linear.py _Linear.forward,
grouped_linear.py _GroupedLinear.forward), ``linear_input_shared`` for one another op keeps in
16 bits too (the attention output, kept by flash attention; the router input, kept by the
router's own gating linear, megatron/core/transformer/moe/router.py TopKRouter.gating, which is
no TE module and stays 16-bit), ``linear_input_twice`` where two TE Linears read one tensor and
each quantises its own copy (MLA's linear_q_down_proj and linear_kv_down_proj, or
linear_q_proj, both reading the input norm's output); ``grouped_gemm`` on the rows of the
experts' GroupedLinear (one FP8 quantizer per local expert).
``derive.architectures.saved_fp8.quantised_saved`` re-types them under an FP8 recipe.
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.decoder import Layout
from derive.architectures.operations.experts import EXPERTS
from derive.architectures.operations.registry import Step, saved_table, step
from derive.inputs import choose
from derive.symbols import b, h, k, k_rope, s
from derive.tensors import Ledger

PROFILES = ("eager", "fused")


def _hf_norm(prefix: str, block: str) -> Step:
    return step("norm", "hf_rms_norm", prefix=prefix, shape=(b, s, h), tags=("replicated", block))


def _te_norm(prefix: str, block: str) -> Step:
    return step("norm", "te_rms_norm", prefix=prefix, width=h, tags=("replicated", block))


def eager_attention_step(features: Layout, single_sequence: bool = False,
                         implementation: str = "eager", window: bool = False) -> Step:
    """The attention of a transformers layer: GQA (``implementation`` eager or sdpa, with ``window``'s mask) or MLA.

    ``single_sequence`` (b = 1): MLA's V is a view of kv_b_proj's output (derive.architectures.operations.latent.hf_mla).
    """
    if features.attention == "gqa":
        return step("attention", "hf_gqa", kernel=implementation, qk_norm=features.qk_norm,
                    window=window)
    return step("attention", "hf_mla", q_lora=features.attention == "mla", kernel=implementation,
                single_sequence=single_sequence)


def eager_layer_steps(features: Layout, moe: bool, single_sequence: bool = False,
                      implementation: str = "eager", window: bool = False,
                      experts: str = "grouped_mm") -> tuple[Step, ...]:
    """One transformers decoder layer: input norm, attention, post-attention norm, dense MLP or MoE block.

    ``experts``: transformers' experts implementation, grouped_mm (its default) or eager.
    """
    steps = [_hf_norm("input_layernorm", "attention"),
             eager_attention_step(features, single_sequence, implementation, window),
             _hf_norm("post_attention_layernorm", "mlp")]
    if not moe:
        return (*steps, step("mlp", "hf_swiglu"))
    routing = features.moe
    steps += [step("router", "eager", router=routing.router, normalise_topk=routing.normalise_topk),
              step("experts", choose("experts", experts, EXPERTS), weights_dtype=routing.weights_dtype)]
    if routing.shared:
        # a bf16 (softmax) router's input is the shared experts' input: one tensor, one row
        steps.append(step("shared_experts", "eager", keeps_input=routing.router != "softmax"))
    if routing.shared_gate:
        steps.append(step("shared_gate", "eager"))
    return tuple(steps)


def eager_layer(features: Layout, moe: bool, single_sequence: bool = False,
                implementation: str = "eager", window: bool = False,
                experts: str = "grouped_mm") -> Ledger:
    """One transformers decoder layer's table (:func:`eager_layer_steps` walked)."""
    return saved_table(eager_layer_steps(features, moe, single_sequence, implementation, window,
                                         experts))


def eager_edges(features: Layout, single_sequence: bool = False) -> Ledger:
    """Token ids, the RoPE cos/sin tables (shared by every layer), final norm, head input, fp32 loss."""
    return saved_table((
        step("embedding", "hf_moe", rope=k if features.attention == "gqa" else k_rope),
        step("norm", "hf_rms_norm", prefix="norm", shape=(b, s, h), tags=("replicated", "output")),
        step("output", "hf_moe", single_sequence=single_sequence)))


def fused_layer_steps(features: Layout, moe: bool,
                      capacity_factor: sp.Expr | None = None) -> tuple[Step, ...]:
    """One Megatron-Core layer: fused input norm, GQA or MLA, fused pre-MLP norm, dense SwiGLU or MoE block."""
    attention = (step("attention", "te_gqa", qk_norm=features.qk_norm) if features.attention == "gqa"
                 else step("attention", "te_mla", q_lora=features.attention == "mla"))
    steps = [_te_norm("input_layernorm", "attention"), attention, _te_norm("pre_mlp_layernorm", "mlp")]
    if not moe:
        return (*steps, step("mlp", "te_dense_swiglu"))
    routing = features.moe
    steps += [step("router", "fused", shared=bool(routing.shared)),
              step("experts", "fused", capacity_factor=capacity_factor)]
    if routing.shared:
        steps.append(step("shared_experts", "fused"))
        if routing.shared_gate:
            steps.append(step("shared_gate", "fused"))
    return tuple(steps)


def fused_mtp(features: Layout) -> Ledger:
    """One MTP module (megatron/core/transformer/multi_token_prediction.py MultiTokenPredictionLayer):
    its input rows, its layer (the last layer's type, tagged ``mtp``), its head rows."""
    layer = saved_table(fused_layer_steps(features, features.last_moe)).map(lambda w: w.tagged("mtp"))
    return saved_table((step("mtp", "te_input"),)) + layer + saved_table((step("mtp", "te_head"),))


def layer_saved_moe(profile: str, features: Layout, moe: bool = True,
                    capacity_factor: sp.Expr | None = None) -> Ledger:
    """One layer's saved tensors under ``profile`` (eager: transformers; fused: Megatron + TE)."""
    if choose("profile", profile, PROFILES) == "eager":
        if capacity_factor is not None:
            raise ValueError("capacity_factor: transformers' experts are dropless")
        return eager_layer(features, moe)
    return saved_table(fused_layer_steps(features, moe, capacity_factor))
