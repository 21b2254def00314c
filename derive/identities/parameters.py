"""Parameter counts: the article's Llama formula, the GPT 12Lh^2 form, N_GEMM."""
from __future__ import annotations

import sympy as sp

from derive.architectures.families import gemm_parameter_count, parameter_count
from derive.identities import identity
from derive.symbols import L, V, a, f, g, h, h_kv, s

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
    return parameter_count("llama")


@identity(
    "Llama N_GEMM = L(2h^2 + 2h h_kv + 3hf) + hV",
    topic=TOPIC,
    claim=L * (2 * h**2 + 2 * h * h_kv() + 3 * h * f) + h * V,
    source="the article, section 6.1: layer matrices plus the output head, not the input lookup",
    assumptions=("norm scales are element-wise, not GEMMs",),
)
def llama_n_gemm() -> sp.Expr:
    return gemm_parameter_count("llama")


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
    return parameter_count("gpt")


@identity(
    "GPT N_GEMM = 12Lh^2 + Vh",
    topic=TOPIC,
    claim=12 * L * h**2 + V * h,
    source="Kaplan et al. 2020, section 2.1 (N = 12 n_layer d_model^2) plus the tied output head",
    assumptions=("f = 4h", "the tied word embedding is the output head's GEMM"),
    where={f: 4 * h},
)
def gpt_n_gemm() -> sp.Expr:
    return gemm_parameter_count("gpt")


@identity(
    "Llama N_GEMM = 12Lh^2 + hV when g = a and f = 8h/3",
    topic=TOPIC,
    claim=12 * L * h**2 + h * V,
    source="Kaplan et al. 2020, section 2.1 (12 n_layer d_model^2); Shazeer 2020 sizes SwiGLU at 8h/3",
    assumptions=("g = a (MHA)", "f = 8h/3, so SwiGLU's three matrices hold 8h^2 like f = 4h's two"),
    where={g: a, f: sp.Rational(8, 3) * h},
)
def llama_n_gemm_12lh2() -> sp.Expr:
    return gemm_parameter_count("llama")


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
    return gemm_parameter_count("llama")
