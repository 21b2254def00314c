"""Tensors saved for backward, one layer, one micro-batch: every dense layer table, walked through the operation registry.

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
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.blocks import META_NAMES, MEGATRON_NAMES
from derive.architectures.operations.attention import ATTENTION_KERNELS
from derive.architectures.operations.mlp import META_SWIGLU, hf_gated_naming
from derive.architectures.operations.norm import layer_input
from derive.architectures.operations.registry import Step, saved_table, step
from derive.architectures.operations.rows import ACTIVATION, HEAD, SEQUENCE_FIRST, STATISTICS, row
from derive.inputs import choose
from derive.symbols import L, L_w, b, f, h, k, s
from derive.tensors import Ledger

#: The Llama layer's profiles (how a framework runs it): PyTorch eager, Megatron + TE fused kernels,
#: and transformers' own LlamaDecoderLayer with sdpa or eager attention.
LLAMA_PROFILES = ("eager", "fused", "hf-sdpa", "hf-eager")
#: Every layer profile with a saved-for-backward table: the GPT layer and the Llama profiles.
LAYER_PROFILES = ("gpt", "llama-eager", "llama-fused", "llama-hf-sdpa", "llama-hf-eager")
#: Former names of :data:`ATTENTION_KERNELS` and :data:`LAYER_PROFILES`.
ATTENTIONS, ARCHITECTURES = ATTENTION_KERNELS, LAYER_PROFILES


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
