"""Parameter counts: the article's Llama formula, the GPT 12Lh^2 form, N_GEMM, MoE layers, MLA, active parameters."""
from __future__ import annotations

import sympy as sp

from derive.architectures.decoder import GPT, LLAMA, moe_layout
from derive.architectures.mla import MLA
from derive.architectures.operations.latent import mla_attention
from derive.architectures.tables import active_parameters, gemm_parameter_count, layer_parameters, model_parameters, parameter_count
from derive.identities import identity
from derive.identities.experts import GQA, MEMORY
from derive.identities.experts import TOPIC as EXPERTS
from derive.symbols import (E, L, L_E, N, V, a, f, f_E, f_S, g, h, h_kv, k, k_E, k_nope, k_rope, k_v, r_kv,
                            r_q, s)
from derive.tensors import Ledger

TOPIC = "parameters"


@identity(
    "Llama N = L(2h^2 + 2h h_kv + 3hf + 2h) + 2Vh + h",
    topic=TOPIC,
    claim=L * (2 * h**2 + 2 * h * h_kv() + 3 * h * f + 2 * h) + 2 * V * h + h,
    source="the article, section 1.3 (ledger/model.py); Llama 3 paper, Table 3 for the shapes",
    assumptions=("RMSNorm (scale only), GQA with g kv heads of width h/a, SwiGLU (three h x f)",
                 "no biases; untied input embedding and output head; final RMSNorm"),
)
def llama_n() -> sp.Expr:
    return parameter_count(LLAMA)


@identity(
    "Llama N_GEMM = L(2h^2 + 2h h_kv + 3hf) + hV",
    topic=TOPIC,
    claim=L * (2 * h**2 + 2 * h * h_kv() + 3 * h * f) + h * V,
    source="the article, section 6.1: layer matrices plus the output head, not the input lookup",
    assumptions=("norm scales are element-wise, not GEMMs",),
)
def llama_n_gemm() -> sp.Expr:
    return gemm_parameter_count(LLAMA)


@identity(
    "GPT N = 12Lh^2 + 13Lh + (V + s)h + 2h",
    topic=TOPIC,
    claim=12 * L * h**2 + 13 * L * h + (V + s) * h + 2 * h,
    source="Narayanan et al. 2021 (Megatron-LM at scale), section 5.1 parameter count, with biases",
    assumptions=("f = 4h", "LayerNorm with bias; fused QKV, projection, fc1, fc2 with biases",
                 "learned position embedding of s rows; output head tied to the word embedding"),
    where={f: 4 * h},
)
def gpt_n() -> sp.Expr:
    return parameter_count(GPT)


@identity(
    "GPT N_GEMM = 12Lh^2 + Vh",
    topic=TOPIC,
    claim=12 * L * h**2 + V * h,
    source="Kaplan et al. 2020, section 2.1 (N = 12 n_layer d_model^2) plus the tied output head",
    assumptions=("f = 4h", "the tied word embedding is the output head's GEMM"),
    where={f: 4 * h},
)
def gpt_n_gemm() -> sp.Expr:
    return gemm_parameter_count(GPT)


@identity(
    "Llama N_GEMM = 12Lh^2 + hV when g = a and f = 8h/3",
    topic=TOPIC,
    claim=12 * L * h**2 + h * V,
    source="Kaplan et al. 2020, section 2.1 (12 n_layer d_model^2); Shazeer 2020 sizes SwiGLU at 8h/3",
    assumptions=("g = a (MHA)", "f = 8h/3, so SwiGLU's three matrices hold 8h^2 like f = 4h's two"),
    where={g: a, f: sp.Rational(8, 3) * h},
)
def llama_n_gemm_12lh2() -> sp.Expr:
    return gemm_parameter_count(LLAMA)


@identity(
    "12Lh^2 + hV at Llama 3's shape (g = a/8, f = 7h/2)",
    topic=TOPIC,
    claim=12 * L * h**2 + h * V,
    source="Kaplan et al. 2020, section 2.1, applied outside its assumptions",
    assumptions=("g = a/8 (GQA, Llama 3 70B and 405B)", "f = 7h/2 (Llama 3 70B)"),
    where={g: a / 8, f: sp.Rational(7, 2) * h},
    holds=False,
)
def llama3_n_gemm_not_12lh2() -> sp.Expr:
    return gemm_parameter_count(LLAMA)


# ---- Mixture of Experts and MLA: the tables against Megatron's per-layer closed forms ----

@identity("MoE layer (GQA) = 2hak + 2hgk + 3Ehf_e + 3hf_s + 2h + hE (+ h gate)", topic=EXPERTS,
          claim=2 * h * a * k + 2 * h * g * k + 3 * E * h * f_E + 3 * h * f_S + 2 * h + h * E + h,
          source=MEMORY + " (num_parameters_in_transformer_layer_moe)",
          assumptions=("RMSNorm, SwiGLU experts, no linear biases", "a shared expert of width f_S "
                       "with Qwen2-MoE's sigmoid gate [h, 1]; router [h, E] without bias"))
def moe_layer_parameters() -> sp.Expr:
    return layer_parameters(moe_layout("gqa", shared=True, gate=True), True).numel()


@identity("MLA = r_q(h + a(k_nope + k_rope) + 1) + r_kv(h + a(k_nope + k_v) + 1) + h k_rope + a k_v h",
          topic=EXPERTS,
          claim=(r_q * (h + a * (k_nope + k_rope) + 1) + r_kv * (h + a * (k_nope + k_v) + 1) + h * k_rope
                 + a * k_v * h),
          source=MEMORY + " (self_attn_term, multi_latent_attention); DeepSeek-V2 report, section 2.1",
          assumptions=("query latent r_q and key/value latent r_kv, each with an RMSNorm scale",
                       "one rotary key of width k_rope shared by the a heads"))
def mla_parameters() -> sp.Expr:
    return Ledger(mla_attention(MLA())).numel()


@identity("active parameters = N - L_E (E - k_E) 3h f_E", topic=EXPERTS,
          claim=N - L_E * (E - k_E) * 3 * h * f_E, where={N: model_parameters(GQA).numel()},
          source="Fedus et al. 2021 (Switch Transformer), section 2; DeepSeek-V3 report, section 1 "
                 "(671B total, 37B activated)",
          assumptions=("a token passes through k_E of the E routed experts of each MoE layer; "
                       "everything else (router, shared experts, attention, edges) is active",))
def active_is_n_minus_idle_experts() -> sp.Expr:
    return active_parameters(GQA).numel()
