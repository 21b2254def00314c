"""FP8 recipes: bytes per parameter, saved-tensor coefficients, FP8 GEMM FLOPs and traffic ratios against their closed forms.

The claim sides are the recipes' documented layouts written out (Transformer Engine's
recipe classes and tensor usages, docs/features/low_precision_training/
performance_considerations; the DeepSeek-V3 report, section 3.3); the derived sides
sum the state ledger, the re-typed saved-tensor tables and the GEMM rows.
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.activations import layer_activation_bytes
from derive.accounts.experts import moe_layer_activations
from derive.accounts.state import resident_bytes
from derive.architectures.decoder import LLAMA, Layout, moe_layout
from derive.architectures.tables import model_parameters
from derive.conventions.fp8 import dispatch_bytes_per_element, flops_by_dtype, gather_ratio
from derive.identities import identity
from derive.recipes import fp8_weight_counts
from derive.symbols import FFN_4H, E, e, N, N_8, a, b, f, f_E, f_S, g, h, k, k_E, k_v, n_8, r_kv, r_q, s

TOPIC = "FP8 training"
TE_RECIPES = ("transformer_engine/common/recipe/__init__.py (the delayed, current, MXFP8 and "
              "block scaling recipe classes)")
TE_USAGES = ("TE docs/features/low_precision_training/performance_considerations (Table 2: the "
             "forward GEMM reads the weight row-wise, dgrad column-wise; Hopper transposes "
             "physically; TE saves the column-wise quantised input for wgrad)")
DEEPSEEK = "DeepSeek-V3 technical report (arXiv 2412.19437), section 3.3"
MEGATRON_BASE = ("Megatron bf16 recipe: bf16 parameters, fp32 main gradients, fp32 master, "
                 "two fp32 Adam moments (18N)")
CACHED = "the FP8 weight and its transpose cached across micro-batches (TE is_first_microbatch)"
SBH = s * b * h


def _per_parameter(recipe: str, optimizer: str = "adam", **options: object) -> sp.Expr:
    return resident_bytes(recipe, optimizer, **options)


@identity("FP8 delayed scaling + Adam = 18N + 2N_8 + 4n_8 + 4 x 5 x (1024 + 1) n_8", topic=TOPIC,
          claim=18 * N + 2 * N_8 + 4 * n_8 + 4 * 5 * (1024 + 1) * n_8,
          source=TE_RECIPES + "; transformer_engine/pytorch/module/base.py set_meta_tensor "
                 "(3 forward + 2 backward FP8 tensors per GEMM)",
          assumptions=(MEGATRON_BASE, CACHED, "one fp32 scale_inv per weight",
                       "amax_history_len = 1024 (TE's default) and one scale per FP8 tensor"))
def delayed_adam() -> sp.Expr:
    return _per_parameter("fp8-delayed")


@identity("FP8 current scaling + Adam = 18N + 2N_8 + 4n_8", topic=TOPIC,
          claim=18 * N + 2 * N_8 + 4 * n_8, source=TE_RECIPES,
          assumptions=(MEGATRON_BASE, CACHED, "one fp32 scale_inv per weight, no history"))
def current_adam() -> sp.Expr:
    return _per_parameter("fp8-current")


@identity("MXFP8 + Adam = 18N + 2(1 + 1/32)N_8", topic=TOPIC,
          claim=18 * N + 2 * (1 + sp.Rational(1, 32)) * N_8, source=TE_RECIPES,
          assumptions=(MEGATRON_BASE, "row-wise and column-wise MXFP8 copies, each with one E8M0 "
                       "byte per 32 elements", "block sizes divide the matrix shapes"))
def mxfp8_adam() -> sp.Expr:
    return _per_parameter("mxfp8")


@identity("FP8 block-wise + Adam = 18N + 2(1 + 4/128^2)N_8", topic=TOPIC,
          claim=18 * N + 2 * (1 + sp.Rational(4, 128**2)) * N_8, source=TE_RECIPES + "; " + DEEPSEEK,
          assumptions=(MEGATRON_BASE, "row-wise and column-wise copies, one fp32 scale per "
                       "128 x 128 block each", "block sizes divide the matrix shapes"))
def blockwise_adam() -> sp.Expr:
    return _per_parameter("fp8-blockwise")


@identity("DeepSeek-V3: block-wise FP8 + BF16 moments = 14N + 2(1 + 4/128^2)N_8", topic=TOPIC,
          claim=14 * N + 2 * (1 + sp.Rational(4, 128**2)) * N_8, source=DEEPSEEK + ".3 (BF16 moments)",
          assumptions=("fp32 master weights and fp32 gradients", "AdamW moments in BF16",
                       "bf16 compute copy", "FP8 weight and transpose with 128 x 128 block scales"))
def deepseek_v3_state() -> sp.Expr:
    return _per_parameter("fp8-blockwise", "adamw-bf16")


@identity("--fp8-param-gather, per-tensor scaling: 18N + 4n_8 (the bf16 copy's 2 bytes become "
          "the FP8 weight and its transpose)", topic=TOPIC, claim=18 * N + 4 * n_8,
          source="megatron/training/arguments.py --fp8-param-gather; TE fp8_model_init",
          assumptions=(MEGATRON_BASE, "FP8 parameters replace the bf16 copy of the N_8 layer-matrix "
                       "parameters", "the transpose is still cached", "current scaling"))
def param_gather_current() -> sp.Expr:
    return _per_parameter("fp8-current", fp8_param_gather=True)


def _coefficient(profile: str, recipe: str | None, attention: str = "fused") -> sp.Expr:
    """Bytes per layer, statistics left out (the article's convention), with ``recipe``'s linear inputs in FP8."""
    return layer_activation_bytes(profile, attention, softmax_statistics=False, recipe=recipe)


PER_TENSOR_SCALES = 4 * 4   # four saved FP8 inputs, one fp32 scale_inv each (claim side)
LLAMA_FUSED = ("Megatron + TE Llama layer (llama-fused): linear_qkv, linear_fc1 and linear_fc2 keep "
               "their FP8 input; flash attention keeps the 16-bit attention output and linear_proj "
               "an FP8 copy of it; statistics left out")


@identity("llama-fused, per-tensor FP8: sbh(11 + 4h_kv/h + 5f/h) + 16", topic=TOPIC,
          claim=SBH * (11 + 4 * g / a + 5 * f / h) + PER_TENSOR_SCALES,
          source=TE_USAGES, assumptions=(LLAMA_FUSED, "one fp32 scale_inv per saved FP8 tensor"))
def llama_fused_per_tensor() -> sp.Expr:
    return _coefficient("llama-fused", "fp8-current")


@identity("llama-fused, MXFP8: sbh(11 + 3/32 + 4h_kv/h + (5 + 1/32)f/h)", topic=TOPIC,
          claim=SBH * (11 + sp.Rational(3, 32) + 4 * g / a + (5 + sp.Rational(1, 32)) * f / h),
          source=TE_USAGES + "; " + TE_RECIPES,
          assumptions=(LLAMA_FUSED, "one E8M0 byte per 32 saved FP8 elements"))
def llama_fused_mxfp8() -> sp.Expr:
    return _coefficient("llama-fused", "mxfp8")


@identity("llama-fused, block-wise FP8: sbh(11 + 3/32 + 4h_kv/h + (5 + 1/32)f/h)", topic=TOPIC,
          claim=SBH * (11 + sp.Rational(3, 32) + 4 * g / a + (5 + sp.Rational(1, 32)) * f / h),
          source=DEEPSEEK + ".2 (1 x 128 activation tiles, fp32 scales)",
          assumptions=(LLAMA_FUSED, "one fp32 scale per 128 saved FP8 elements"))
def llama_fused_blockwise() -> sp.Expr:
    return _coefficient("llama-fused", "fp8-blockwise")


@identity("GPT layer, per-tensor FP8, materialised scores: sbh(27 + 5as/h) + 16", topic=TOPIC,
          claim=SBH * (27 + 5 * a * s / h) + PER_TENSOR_SCALES, where=FFN_4H,
          source="Korthikanti et al. 2022, section 4.1 (the 34); " + TE_USAGES,
          assumptions=("QKV, output-projection, fc1 and fc2 inputs kept in FP8 (7 of the 34)",
                       "f = 4h", "one fp32 scale_inv per saved FP8 tensor"))
def gpt_per_tensor() -> sp.Expr:
    return _coefficient("gpt", "fp8-current", "materialised")


@identity("GPT layer, per-tensor FP8: the 34 of sbh(34 + 5as/h) does not stay", topic=TOPIC,
          claim=SBH * (34 + 5 * a * s / h), where=FFN_4H, holds=False,
          source="Korthikanti et al. 2022, section 4.1",
          assumptions=("the 16-bit coefficient applied to an FP8 run",))
def gpt_per_tensor_departure() -> sp.Expr:
    return _coefficient("gpt", "fp8-current", "materialised")


LLAMA_N8, LLAMA_N8_TENSORS = fp8_weight_counts(model_parameters(LLAMA))


@identity("FP8 GEMM FLOPs per token = 6 N_8 (the layer matrices, three GEMMs each)", topic=TOPIC,
          claim=6 * N_8, where={N_8: LLAMA_N8},
          source="TE Linear: forward, dgrad and wgrad GEMMs in FP8 (performance_considerations, "
                 "Table 2); " + DEEPSEEK + ".1 (Fprop, Dgrad, Wgrad in FP8)",
          assumptions=("Llama table", "attention scores and the output head stay 16-bit"))
def fp8_gemm_flops() -> sp.Expr:
    return flops_by_dtype("fp8-current", LLAMA)["fp8"]


@identity("FP8 parameter all-gather halves the bf16 gather (per-tensor scaling)", topic=TOPIC,
          claim=sp.Rational(1, 2), source="megatron --fp8-param-gather; ZeRO-3 / FSDP all-gather",
          assumptions=("per-tensor scales (O(tensors), not per element)",))
def gather_halves() -> sp.Expr:
    return gather_ratio("fp8-current")


@identity("MXFP8 parameter all-gather: 33/64 of the bf16 gather (E8M0 scales travel)", topic=TOPIC,
          claim=sp.Rational(33, 64), source=TE_RECIPES + "; MXFP8: 32-element blocks",
          assumptions=("the row-wise copy and its scales gathered",))
def gather_mxfp8() -> sp.Expr:
    return gather_ratio("mxfp8")


@identity("MXFP8 parameter all-gather does not exactly halve", topic=TOPIC, claim=sp.Rational(1, 2),
          holds=False, source="the 'FP8 halves the gather' reading",
          assumptions=("one E8M0 byte per 32 elements travels with the data",))
def gather_mxfp8_departure() -> sp.Expr:
    return gather_ratio("mxfp8")


@identity("DeepSeek-V3 FP8 dispatch: (1 + 4/128)/2 of a BF16 dispatch per element", topic=TOPIC,
          claim=(1 + sp.Rational(4, 128)) / 2, source=DEEPSEEK + ".4 (dispatch in FP8, combine in BF16)",
          assumptions=("1 x 128 activation tiles with fp32 scales travel with the data",))
def dispatch_ratio() -> sp.Expr:
    return dispatch_bytes_per_element("fp8-blockwise") / dispatch_bytes_per_element("bf16")


NVFP4 = ("transformer_engine/common/recipe/__init__.py (the NVFP4 recipe class); NVIDIA, "
         "'Pretraining Large Language Models with NVFP4' (arXiv 2509.25149)")


@identity("NVFP4 + Adam = 18N + 2(1/2 + 1/256)N_8 + 2 x 4 n_8", topic=TOPIC,
          claim=18 * N + 2 * (sp.Rational(1, 2) + sp.Rational(1, 256)) * N_8 + 2 * 4 * n_8,
          source=NVFP4,
          assumptions=(MEGATRON_BASE, "row-wise and column-wise E2M1 copies, two per byte",
                       "one E4M3 scale per 16 x 16 weight block", "one fp32 global scale per copy"))
def nvfp4_adam() -> sp.Expr:
    return _per_parameter("nvfp4")


@identity("llama-fused, NVFP4: sbh(155/16 + 4h_kv/h + 73f/16h) + 16", topic=TOPIC,
          claim=SBH * (sp.Rational(155, 16) + 4 * g / a + sp.Rational(73, 16) * f / h) + PER_TENSOR_SCALES,
          source=NVFP4 + "; " + TE_USAGES,
          assumptions=(LLAMA_FUSED, "half a byte per E2M1 element and one E4M3 byte per 16",
                       "one fp32 global scale per saved tensor"))
def llama_fused_nvfp4() -> sp.Expr:
    return _coefficient("llama-fused", "nvfp4")


@identity("NVFP4 parameter all-gather: (1/2 + 1/256)/2 of the bf16 gather", topic=TOPIC,
          claim=(sp.Rational(1, 2) + sp.Rational(1, 256)) / 2, source=NVFP4,
          assumptions=("the row-wise copy and its block scales gathered; global scales O(tensors)",))
def gather_nvfp4() -> sp.Expr:
    return gather_ratio("nvfp4")


# ---- MoE layers (Megatron + TE, the fused profile of derive.architectures.saved) ----

MOE_FUSED = ("Megatron-Core MoE layer with TE (the fused MoE profile of derive.architectures.saved): flash attention, alltoall "
             "dispatch with fused permute, TEGroupedMLP; statistics kept; one rank, t = 1, dropless")
MOE_FP8 = ("linear_qkv, linear_proj, the experts' GroupedLinear fc1 (the permuted tokens) and fc2 "
           "keep their FP8 input; flash attention keeps the 16-bit attention output; the router "
           "(megatron/core/transformer/moe/router.py TopKRouter.gating, no TE module), the fused "
           "SwiGLU's fc1 output, norms and the probabilities stay 16/32-bit")
GROUPED_SCALES = ("one fp32 scale_inv per saved FP8 tensor, E/e of them for each GroupedLinear input "
                  "(one quantizer per local expert: grouped_linear.py split_quantize)")
#: Mixtral 8x7B's form: GQA, no shared experts, softmax router.
MIXTRAL_FORM = moe_layout("gqa")
#: DeepSeek-V3's form: MLA with query compression, one shared expert.
DEEPSEEK_FORM = moe_layout("mla", shared=True)


def _moe_layer(features: Layout, recipe: str | None) -> sp.Expr:
    return moe_layer_activations("fused", features, True, 1, False, norm_statistics=True,
                                 recipe=recipe).bytes()


@identity("MoE layer (GQA, fused), per-tensor FP8: bs(7h + 5ak + 4gk + 4a + 13E + 12 + k_E h + 4k_E "
          "+ 5k_E f_E) + 4(2 + 2E/e)", topic=TOPIC,
          claim=b * s * (7 * h + 5 * a * k + 4 * g * k + 4 * a + 13 * E + 12 + k_E * h + 4 * k_E
                         + 5 * k_E * f_E) + 4 * (2 + 2 * E / e),
          source=TE_USAGES + "; transformer_engine/pytorch/module/grouped_linear.py "
                 "_GroupedLinear.forward (quantised inputs saved for wgrad)",
          assumptions=(MOE_FUSED, MOE_FP8, GROUPED_SCALES,
                       "bf16 form bs(8h + 4ak + 4gk + 4a + 13E + 12 + 2k_E h + 4k_E + 6k_E f_E): "
                       "the attention input (h), permuted tokens (k_E h) and fc2 input (k_E f_E) "
                       "lose a byte per element, linear_proj's FP8 copy adds ak"))
def moe_gqa_per_tensor() -> sp.Expr:
    return _moe_layer(MIXTRAL_FORM, "fp8-current")


@identity("MoE layer (GQA, fused), MXFP8: bs((6 + 33/32)h + (4 + 33/32)ak + 4gk + 4a + 13E + 12 "
          "+ (33/32)k_E h + 4k_E + (4 + 33/32)k_E f_E)", topic=TOPIC,
          claim=b * s * ((6 + sp.Rational(33, 32)) * h + (4 + sp.Rational(33, 32)) * a * k + 4 * g * k
                         + 4 * a + 13 * E + 12 + sp.Rational(33, 32) * k_E * h + 4 * k_E
                         + (4 + sp.Rational(33, 32)) * k_E * f_E),
          source=TE_USAGES + "; " + TE_RECIPES,
          assumptions=(MOE_FUSED, MOE_FP8, "one E8M0 byte per 32 saved FP8 elements"))
def moe_gqa_mxfp8() -> sp.Expr:
    return _moe_layer(MIXTRAL_FORM, "mxfp8")


@identity("MLA + shared-expert MoE layer, per-tensor FP8 - bf16 = -bs(r_q + r_kv - ak_v - h + k_E h "
          "+ k_E f_E + f_S) + 4(7 + 2E/e)", topic=TOPIC,
          claim=-b * s * (r_q + r_kv - a * k_v - h + k_E * h + k_E * f_E + f_S) + 4 * (7 + 2 * E / e),
          source=TE_USAGES + "; megatron/core/transformer/multi_latent_attention.py "
                 "MLASelfAttention.get_query_key_value_tensors (linear_q_down_proj and "
                 "linear_kv_down_proj each read the input norm's output)",
          assumptions=(MOE_FUSED, MOE_FP8, GROUPED_SCALES,
                       "the two down projections each keep an FP8 copy of the h-wide input "
                       "(2 bytes either way: no saving)",
                       "linear_q_up_proj and linear_kv_up_proj keep FP8 latents (r_q, r_kv)",
                       "the router keeps the 16-bit input; the shared experts' fc1 an FP8 copy (+h)",
                       "seven saved FP8 tensors outside the experts, one fp32 scale_inv each"))
def moe_mla_per_tensor_saving() -> sp.Expr:
    return _moe_layer(DEEPSEEK_FORM, "fp8-current") - _moe_layer(DEEPSEEK_FORM, None)
