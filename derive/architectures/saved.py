"""Tensors saved for backward, one layer, one micro-batch: every layer table (dense, MoE, MLA), walked through the operation registry.

Every activation byte count in derive is a sum over these tables. A layer is a sequence of
steps (derive.architectures.operations.registry): each operation (norm, attention, MLP,
dropout) declares once, in derive.architectures.operations, the rows it keeps under each
implementation; a profile picks the implementations. The tags are those of
derive.architectures.operations.rows; ``per_sbh`` lists each row's operation and its coefficient
of sbh (:func:`gpt_layer_steps`: the 34 of sbh(34 + 5as/h)).

f is kept a symbol: f = 4h is an assumption applied by substitution, so Megatron's
sbh(18 + 4f/h) and Korthikanti's sbh(34 + 5as/h) fall out of the same GPT table.

Measured against PyTorch 2.13 (CPU, bf16, ``torch.autograd.graph.saved_tensors_hooks``,
deduplicated by storage, parameters and buffers excluded), the GPT table and the ``eager`` Llama
profile list exactly the tensors PyTorch keeps, with two conventions to know: CPU
``native_layer_norm`` keeps mean/rstd in the input dtype (bf16), CUDA in fp32
(``statistics_dtype``); and the 1-byte dropout masks are those of ``torch.native_dropout``
(``F.dropout`` on CPU keeps a bf16 scaled noise tensor instead). The transformers tables
(hf-sdpa / hf-eager, GPT-NeoX, Gemma 2 / 3, GPT-2) are compared with transformers 5.23 by
derive.validate.hf_random.

MoE and MLA layers (a layout's router, routed and shared experts, latent attention, MTP module)
have two profiles, ``eager`` and ``fused`` (:data:`MOE_PROFILES`). A layer is a sequence of steps (derive.architectures.operations.registry): the norms, the
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

from derive.architectures.blocks import META_NAMES, MEGATRON_NAMES
from derive.architectures.decoder import Layout
from derive.architectures.operations.attention import ATTENTION_KERNELS
from derive.architectures.operations.experts import EXPERTS
from derive.architectures.operations.mlp import META_SWIGLU, hf_gated_naming
from derive.architectures.operations.norm import layer_input
from derive.architectures.operations.registry import Step, saved_table, step
from derive.architectures.operations.rows import ACTIVATION, HEAD, SEQUENCE_FIRST, STATISTICS, row
from derive.inputs import choose
from derive.symbols import L, L_w, b, f, h, k, k_rope, s
from derive.tensors import Ledger

#: The Llama layer's profiles (how a framework runs it): PyTorch eager, Megatron + TE fused kernels,
#: and transformers' own LlamaDecoderLayer with sdpa or eager attention.
LLAMA_PROFILES = ("eager", "fused", "hf-sdpa", "hf-eager")
#: Every layer profile with a saved-for-backward table: the GPT layer and the Llama profiles.
LAYER_PROFILES = ("gpt", "llama-eager", "llama-fused", "llama-hf-sdpa", "llama-hf-eager")


def _norm(name: str, kind: str, block: str) -> tuple[Step, ...]:
    """The parameters of a norm over h feeding ``block`` (derive.architectures.blocks.norm)."""
    return (step("norm", "norm", name=name, width=h, kind=kind, tags=(block,)),)


def gpt_layer_steps(attention_kernel: str = "materialised", statistics_dtype: str = STATISTICS,
                    head_dim: sp.Expr = HEAD) -> tuple[Step, ...]:
    """One GPT layer, Korthikanti et al. 2022, section 4.1: MHA, GELU, LayerNorm, three dropouts.

    The steps hold the layer's parameters too: LayerNorms with bias, fused QKV and projection with
    biases, fc1/fc2 with biases (GPT-2/3, Megatron), heads of width ``head_dim``.
    """
    choose("attention_kernel", attention_kernel, ATTENTION_KERNELS)
    ln2_input = row("post_attention_layernorm input", (*SEQUENCE_FIRST, h), ACTIVATION,
                    "replicated", "norm", note="kept by LayerNorm 2 (the residual sum)")
    return (
        step("norm", "layer_norm", prefix="input_layernorm", input_row=layer_input(),
             dtype=statistics_dtype, held=_norm("input_layernorm", "layer", "attention")),
        step("attention", "megatron", kernel=attention_kernel,
             held=(step("attention", "megatron", head_dim=head_dim),)),
        step("dropout", "residual", name="attention-output dropout mask", block="attention",
             note="kept by dropout after the output projection", held=()),
        step("norm", "layer_norm", prefix="post_attention_layernorm", input_row=ln2_input,
             dtype=statistics_dtype, held=_norm("post_attention_layernorm", "layer", "mlp")),
        step("mlp", "megatron_gelu", held=(step("mlp", "mlp", names=MEGATRON_NAMES, gated=False,
                                                width=f, bias=True),)),
        step("dropout", "residual", name="MLP dropout mask", block="mlp",
             note="kept by dropout after fc2", held=()),
    )


def gpt_layer_saved(attention_kernel: str = "materialised", statistics_dtype: str = STATISTICS) -> Ledger:
    """The GPT layer's table (:func:`gpt_layer_steps` walked)."""
    return saved_table(gpt_layer_steps(attention_kernel, statistics_dtype))


def _llama_eager(head: sp.Expr) -> tuple[Step, ...]:
    """PyTorch eager: nn.RMSNorm, q/k/v linears (GQA), RoPE, SDPA (enable_gqa), SiLU(gate) * up.

    Meta's Llama reference (llama/model.py), so the steps hold the family's parameters under Meta's
    names: RMSNorms, GQA (a query, g kv heads of width ``head``), SwiGLU, no biases (Llama 3
    paper, Table 3).
    """
    attention = step("attention", "projections", names=META_NAMES, fused=False, qkv_bias=False,
                     o_bias=False, qk_norm="none", head_dim=head, weight="")
    return (step("norm", "eager_rms_norm", prefix="attention_norm",
                 held=_norm("attention_norm", "rms", "attention")),
            step("attention", "eager_sdpa", head=head, held=(attention,)),
            step("norm", "eager_rms_norm", prefix="ffn_norm", held=_norm("ffn_norm", "rms", "mlp")),
            step("mlp", "gated", naming=META_SWIGLU,
                 held=(step("mlp", "mlp", names=META_NAMES, gated=True, weight=""),)))


def _llama_fused(head: sp.Expr) -> tuple[Step, ...]:
    """Megatron + Transformer Engine: fused RMSNorm, flash attention, fused SwiGLU (bias_swiglu)."""
    residual = row("pre_mlp_layernorm input", (*SEQUENCE_FIRST, h), ACTIVATION, "replicated",
                   "norm", note="the residual sum, kept by the fused RMSNorm")
    return (step("norm", "fused_rms_norm", prefix="input_layernorm", input_row=layer_input()),
            step("attention", "te_flash", head=head),
            step("norm", "fused_rms_norm", prefix="pre_mlp_layernorm", input_row=residual),
            step("mlp", "te_fused_swiglu"))


def _llama_hf(head: sp.Expr, attention: str, qk_norm: bool, window: bool = False,
              fused: bool = False, post_norms: bool = False) -> tuple[Step, ...]:
    """LlamaDecoderLayer (Mistral's, Qwen 3's, Phi 3's, OLMo 2's alike) as transformers 5.23 trains it.

    ``fused``: Phi3Attention's qkv_proj and Phi3MLP's gate_up_proj (modeling_phi3.py): q, k, v
    and gate, up are views of one output each; RoPE's cat keeps the query heads first.
    ``post_norms``: Olmo2DecoderLayer (modeling_olmo2.py): no norm before attention or the MLP,
    whose projections keep the residual stream; an Olmo2RMSNorm after each, and q/k norms over
    the whole projections.
    """
    qkv = "qkv_proj" if fused else "q_proj, k_proj and v_proj"
    projection_input = row(
        "q/k/v projection input", (b, s, h), ACTIVATION, "replicated", "attention",
        note=f"{'the residual stream' if post_norms else 'input_layernorm output'}, kept by {qkv}")
    norm = (lambda prefix: step("norm", "hf_rms_norm", prefix=prefix, shape=(b, s, h),
                                normalised=STATISTICS if post_norms else ACTIVATION))
    mlp_input = (("the residual sum" if post_norms else "post_attention_layernorm output")
                 + ", kept by " + ("gate_up_proj" if fused else "gate_proj and up_proj"))
    qk = "projection" if post_norms else "head" if qk_norm else None
    steps = (
        step("attention", "hf", kernel=attention, head=head,
             projection_input=projection_input, qk_norm=qk, window=window, heads_first=fused),
        *(() if post_norms else (norm("post_attention_layernorm"),)),
        step("mlp", "gated", naming=hf_gated_naming(mlp_input, fused)),
    )
    if post_norms:  # o_proj's and down_proj's outputs, normalised before each residual add
        return (*steps, norm("post_attention_layernorm"), norm("post_feedforward_layernorm"))
    return (norm("input_layernorm"), *steps)


def llama_layer_steps(profile: str, head_dim: sp.Expr = HEAD, qk_norm: bool = False,
                      window: bool = False, fused: bool = False,
                      post_norms: bool = False) -> tuple[Step, ...]:
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
        return _llama_eager(head_dim)
    if profile == "fused":
        return _llama_fused(head_dim)
    return _llama_hf(head_dim, profile.removeprefix("hf-"), qk_norm, window, fused, post_norms)


def llama_layer_saved(profile: str, head_dim: sp.Expr = HEAD, qk_norm: bool = False,
                      window: bool = False, fused: bool = False,
                      post_norms: bool = False) -> Ledger:
    """The Llama layer's table under ``profile`` (:func:`llama_layer_steps` walked)."""
    return saved_table(llama_layer_steps(profile, head_dim, qk_norm, window, fused, post_norms))


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


# ---- the other families transformers 5.23 trains (models/<family>/modeling_<family>.py) ----

def neox_layer_saved(attention: str, parallel: bool) -> Ledger:
    """GPTNeoXLayer.forward: input_layernorm, attention, post_attention_layernorm, GELU MLP.

    A LayerNorm layer (CPU ``native_layer_norm`` keeps its input and a bf16 mean and rstd per
    token), the fused query_key_value whose per-head [q, k, v] chunks are views of one output,
    RoPE over k_rope of each head's k dimensions (``rotary_pct``, derive.hf.rotary_width) ending in
    ``torch.cat``, GELU, biases everywhere (a bias keeps nothing), and the parallel residual
    (``use_parallel_residual``: both norms read the layer input, one tensor).
    """
    x = row("layer input", (b, s, h), ACTIVATION, "replicated", "norm", "layer_input",
            note="kept by input_layernorm" + (" and post_attention_layernorm (parallel)"
                                               if parallel else ""))
    projection_input = row("query_key_value input", (b, s, h), ACTIVATION, "replicated",
                           "attention", note="input_layernorm output, kept by query_key_value")
    residual = None if parallel else row(
        "post_attention_layernorm input", (b, s, h), ACTIVATION, "replicated", "norm",
        note="attention output + layer input (sequential residual)")
    return saved_table((
        step("norm", "cpu_layer_norm", prefix="input_layernorm", input_row=x),
        step("attention", "hf", kernel=attention, head=k,
             projection_input=projection_input, output_note="attention.dense's input",
             heads_first=attention == "sdpa"),
        step("norm", "cpu_layer_norm", prefix="post_attention_layernorm", input_row=residual),
        step("mlp", "neox_gelu"),
    ))


def gemma_layer_saved(attention: str, sliding: bool, qk_norm: bool = False,
                      softcap: bool = False) -> Ledger:
    """Gemma2DecoderLayer / Gemma3DecoderLayer: four norms, GQA of width k, GeGLU MLP.

    Gemma2RMSNorm / Gemma3RMSNorm scale before the cast (the gemma_rms_norm implementation);
    ``sliding``: a sliding_attention layer (sdpa's mask rows at s >= w; Gemma 3 only:
    Gemma2PreTrainedModel._supports_sdpa is False); ``qk_norm``: Gemma 3's q_norm / k_norm over
    each head; ``softcap``: Gemma 2's tanh on the eager scores (Gemma3Attention passes none).
    No row: the embedding's sqrt(h) scale (a bf16 buffer), query_pre_attn_scalar (a Python float).
    """
    def norm(prefix: str) -> Step:
        return step("norm", "gemma_rms_norm", prefix=prefix, shape=(b, s, h))
    projection_input = row("q/k/v projection input", (b, s, h), ACTIVATION, "replicated",
                           "attention",
                           note="input_layernorm output, kept by q_proj, k_proj and v_proj")
    mlp_input = "pre_feedforward_layernorm output, kept by gate_proj and up_proj"
    return saved_table((
        norm("input_layernorm"),
        step("attention", "hf", kernel=attention, head=k,
             projection_input=projection_input, qk_norm="gemma" if qk_norm else None,
             window=sliding and attention == "sdpa", softcap=softcap),
        norm("post_attention_layernorm"),
        norm("pre_feedforward_layernorm"),
        step("mlp", "gated", naming=hf_gated_naming(mlp_input, activation="GELU",
                                                    kernel="gelu_pytorch_tanh")),
        norm("post_feedforward_layernorm"),
    ))


def gemma_layers_saved(attention: str, qk_norm: bool, softcap: bool) -> Ledger:
    """The L_w sliding_attention layers and the L - L_w full_attention layers."""
    return (gemma_layer_saved(attention, True, qk_norm, softcap).times(L_w)
            + gemma_layer_saved(attention, False, qk_norm, softcap).times(L - L_w))


def gpt2_layer_saved(attention: str) -> Ledger:
    """GPT2Block.forward without dropout: ln_1, c_attn, attention, c_proj, ln_2, c_fc, gelu_new, c_proj.

    Learned positions instead of RoPE; Conv1D's ``addmm`` keeps its input as nn.Linear does.
    """
    x = row("layer input", (b, s, h), ACTIVATION, "replicated", "norm", "layer_input",
            note="kept by ln_1")
    residual = row("ln_2 input", (b, s, h), ACTIVATION, "replicated", "norm",
                   note="attention output + layer input")
    return saved_table((
        step("norm", "cpu_layer_norm", prefix="ln_1", input_row=x),
        step("attention", "gpt2", kernel=attention),
        step("norm", "cpu_layer_norm", prefix="ln_2", input_row=residual),
        step("mlp", "gpt2_gelu_new"),
    ))


#: The MoE / MLA layers' profiles: transformers (eager) and Megatron + TE (fused).
MOE_PROFILES = ("eager", "fused")


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


def moe_layer_saved(profile: str, features: Layout, moe: bool = True,
                    capacity_factor: sp.Expr | None = None) -> Ledger:
    """One layer's saved tensors under ``profile`` (eager: transformers; fused: Megatron + TE)."""
    if choose("profile", profile, MOE_PROFILES) == "eager":
        if capacity_factor is not None:
            raise ValueError("capacity_factor: transformers' experts are dropless")
        return eager_layer(features, moe)
    return saved_table(fused_layer_steps(features, moe, capacity_factor))
