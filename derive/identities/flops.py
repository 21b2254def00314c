"""FLOPs: 6 N_GEMM, the attention s^2 term, the published conventions, recompute, HFU = 4/3 MFU, MoE and MLA."""
from __future__ import annotations

import sympy as sp

from derive.accounts.flops import (
    flops_per_token,
    hfu,
    model_flops_per_token,
    packed_flops,
    recompute_factor,
)
from derive.architectures.decoder import FAMILIES, GPT, LLAMA, Layout
from derive.architectures.tables import active_parameters, gemm_parameter_count, model_gemms, parameter_count
from derive.architectures.gemms import attention_score_gemms, flops
from derive.conventions import (
    kaplan_forward,
    megatron,
    megatron_num_floating_point_operations,
    narayanan,
    narayanan_recompute,
    palm,
    six_n,
    six_n_gemm,
)
from derive.identities import Deferred, Later, identity
from derive.identities.experts import GQA, MLA_MTP
from derive.identities.experts import TOPIC as EXPERTS
from derive.symbols import N_GEMM, B, D, F, G, L, N, P, Q, R, T, V, a, f, g, h, k, k_nope, k_rope, k_v, s
from derive.tensors import Ledger

TOPIC = "FLOPs"
ARTICLE_6 = "the article, section 6.1 (6 FLOP per parameter per token: forward 2, dgrad 2, wgrad 2)"
LLAMA_GEMMS = ("Llama layer: GQA with g kv heads (g free), SwiGLU (three h x f), untied output head",)
GPT_GEMMS = ("GPT layer: fused QKV, MHA, two MLP matrices (h x f, f x h), output head tied to the word embedding",)
F4H = ("f = 4h",)
NARAYANAN = "Narayanan et al. 2021 (Megatron-LM at scale), section 5.1 (FLOP count)"
MEGATRON = "megatron/training/training.py num_floating_point_operations (transformer_flops), core_v0.18.0"

MFU_INPUTS = ("R tokens/s, F model FLOPs per token, G GPUs, P peak FLOPS per GPU",)


def _weight_gemms(family: str) -> Ledger:
    """The weight GEMMs of a ``family`` model (no attention scores)."""
    return model_gemms(FAMILIES[family], "none")


# ---- 6 per parameter: three passes of every weight GEMM ----

def _per_family(family: str, assumptions: tuple[str, ...]) -> None:
    """Register the 6 N_GEMM, attention and HFU identities of one layer family."""
    where = {N_GEMM: gemm_parameter_count(FAMILIES[family])}

    @identity(f"{family}: weight GEMMs = 6 N_GEMM per token", topic=TOPIC, claim=6 * N_GEMM,
              key=f"flops.{family}.weight_gemms",
              source=ARTICLE_6, assumptions=assumptions + ("every gemm-tagged parameter is one GEMM",),
              where=where)
    def total() -> sp.Expr:
        return flops(_weight_gemms(family))

    for kind in ("forward", "dgrad", "wgrad"):
        @identity(f"{family}: {kind} of the weight GEMMs = 2 N_GEMM per token", topic=TOPIC,
                  key=f"flops.{family}.weight_gemms_{kind}",
                  claim=2 * N_GEMM, source=ARTICLE_6, assumptions=assumptions, where=where)
        def one_pass(kind: str = kind) -> sp.Expr:
            return flops(_weight_gemms(family), kind)

    @identity(f"{family}: causal FLOPs per token = 6 N_GEMM + 6Lsh", topic=TOPIC,
              key=f"flops.{family}.causal",
              claim=6 * N_GEMM + 6 * L * s * h, where=where,
              source="the article, section 6.2; megatron/training/training.py (causal / 2)",
              assumptions=assumptions + ("causal mask: s/2 keys per query on average",
                                         "head width h/a; GQA leaves the score work unchanged"))
    def causal() -> sp.Expr:
        return flops_per_token(FAMILIES[family], "causal")

    @identity(f"{family}: full-attention FLOPs per token = 6 N_GEMM + 12Lsh", topic=TOPIC,
              key=f"flops.{family}.full",
              claim=6 * N_GEMM + 12 * L * s * h, where=where,
              source="the article, section 6.2 (12sh per layer before causal halving)",
              assumptions=assumptions + ("no mask skipping: every query meets all s keys",))
    def full() -> sp.Expr:
        return flops_per_token(FAMILIES[family], "full")

    @identity(f"{family}: HFU = 4/3 MFU under full recompute", topic=TOPIC,
              key=f"flops.{family}.hfu_full",
              claim=sp.Rational(4, 3) * R * F / (G * P),
              source="the article, section 7.2 (2 + 2 + 4 = 8 FLOP per parameter); PaLM appendix B",
              assumptions=assumptions + MFU_INPUTS + ("full recompute re-runs the forward of every GEMM, "
                                                      "output head and attention scores included",))
    def hfu_full() -> sp.Expr:
        return hfu(R, F, G, P, recompute_factor("full", FAMILIES[family], "causal"))


_per_family("llama", LLAMA_GEMMS)
_per_family("gpt", GPT_GEMMS)


@identity("6N - 6N_GEMM = 6(Vh + 2Lh + h) (Llama: input embedding and RMSNorm scales)", topic=TOPIC,
          claim=6 * (V * h + 2 * L * h + h), source=ARTICLE_6 + "; N_GEMM excludes the input lookup",
          assumptions=LLAMA_GEMMS + ("two RMSNorm scales per layer and a final one",))
def llama_six_n_gap() -> sp.Expr:
    return six_n("llama") - six_n_gemm("llama")


@identity("6N - 6N_GEMM = 6(13Lh + sh + 2h) (GPT: biases, LayerNorms, positions)", topic=TOPIC,
          claim=6 * (13 * L * h + s * h + 2 * h), where={f: 4 * h},
          source=ARTICLE_6 + "; Narayanan et al. 2021, section 5.1 parameter count",
          assumptions=GPT_GEMMS + F4H + ("biases on QKV, projection, fc1, fc2; two LayerNorms per layer with bias",
                             "learned position embedding of s rows (a lookup, not a GEMM)"))
def gpt_six_n_gap() -> sp.Expr:
    return six_n("gpt") - six_n_gemm("gpt")


@identity("6N = causal FLOPs per token (Llama)", topic=TOPIC, claim=6 * N,
          where={N: parameter_count(LLAMA)}, holds=False,
          source="Kaplan et al. 2020, section 2.1 (C ~ 6N), applied as the article's section 7.1 warns",
          assumptions=LLAMA_GEMMS + ("6N counts the input lookup and norms, and no attention scores",))
def six_n_is_not_causal() -> sp.Expr:
    return flops_per_token(LLAMA, "causal")


# ---- the attention-score GEMMs ----

@identity("QK^T + PV forward = 4sh per layer per token (full)", topic=TOPIC, claim=4 * s * h,
          source="the article, section 6.2 (2s^2 d per head per GEMM, / s per token)",
          assumptions=("a query heads of width h/a",))
def scores_forward() -> sp.Expr:
    return flops(attention_score_gemms("full"), "forward")


@identity("QK^T + PV training = 12sh per layer per token (full)", topic=TOPIC, claim=12 * s * h,
          source="the article, section 6.2 (x3: forward and two backward GEMMs)",
          assumptions=("backward of a weight-free GEMM: two data-gradient GEMMs, no wgrad",))
def scores_full() -> sp.Expr:
    return flops(attention_score_gemms("full"))


@identity("QK^T + PV training = 6sh per layer per token (causal)", topic=TOPIC, claim=6 * s * h,
          source="the article, section 6.2; Megatron's '/ 2  # causal mask'",
          assumptions=("causal mask: s/2 keys per query on average (the diagonal dropped)",))
def scores_causal() -> sp.Expr:
    return flops(attention_score_gemms("causal"))


@identity("score GEMMs have no wgrad", topic=TOPIC, claim=sp.Integer(0),
          source="QK^T and PV multiply two activations: dQ, dK and dP, dV are all data gradients",
          assumptions=("no parameter inside the attention core",))
def scores_no_wgrad() -> sp.Expr:
    return flops(attention_score_gemms("full"), "wgrad")


@identity("score GEMMs: dgrad = 2 x forward", topic=TOPIC, claim=8 * s * h,
          source="backward of C = AB with both operands activations: dA = dC B^T, dB = A^T dC",
          assumptions=("full attention",))
def scores_dgrad() -> sp.Expr:
    return flops(attention_score_gemms("full"), "dgrad")


@identity("attention / 6N = s/(12h) when N = 12Lh^2", topic=TOPIC, claim=s / (12 * h),
          where={N: 12 * L * h**2},
          source="the article, section 6.2 (about 8% at s = h = 8192)",
          assumptions=("causal attention term 6Lsh", "N ~ 12Lh^2 (f = 4h, MHA, no embeddings)"))
def attention_ratio() -> sp.Expr:
    attention = flops_per_token(LLAMA, "causal") - flops_per_token(LLAMA, "none")
    return attention / six_n()


# ---- Kaplan et al. 2020 ----

@identity("Kaplan C_forward = 2N + 2 n_layer n_ctx d_attn", topic=TOPIC,
          claim=kaplan_forward(), where={N: 12 * L * h**2, f: 4 * h},
          source="Kaplan et al. 2020, Table 1 (N = 2 d_model n_layer (2 d_attn + d_ff) = 12 n_layer d_model^2)",
          assumptions=GPT_GEMMS + F4H + ("d_attn = h, d_ff = 4h; biases and norms neglected",
                             "Kaplan's mask term (QK^T over n_ctx) equals QK^T + PV over s/2 keys",
                             "de-embedding left out: forward of the layers only"))
def kaplan_c_forward() -> sp.Expr:
    return flops(model_gemms(GPT, "causal").where("layer"), "forward")


@identity("Kaplan C_forward = whole-model forward", topic=TOPIC,
          claim=kaplan_forward(), where={N: 12 * L * h**2, f: 4 * h}, holds=False,
          source="Kaplan et al. 2020, Table 1, against the forward with the output head",
          assumptions=GPT_GEMMS + F4H + ("the de-embedding 2 d_model n_vocab is in Table 1 but not in C_forward",))
def kaplan_without_head() -> sp.Expr:
    return flops(model_gemms(GPT, "causal"), "forward")


# ---- PaLM, appendix B ----

#: PaLM's per-token count, 6N + 12LHQT, with H Q = a k and T = s.
PALM = palm()

@identity("PaLM 6N + 12LHQT = full-attention count when N = N_GEMM", topic=TOPIC,
          claim=PALM, where={k: h / a, N: gemm_parameter_count(LLAMA)},
          source="Chowdhery et al. 2022 (PaLM), appendix B",
          assumptions=LLAMA_GEMMS + ("H heads of width Q: H Q = a k = h; T = s", "full score square",
                               "N read as the parameters in GEMMs"))
def palm_n_gemm() -> sp.Expr:
    return flops_per_token(LLAMA, "full")


@identity("PaLM 6N + 12LHQT with N = all parameters", topic=TOPIC,
          claim=PALM, where={k: h / a, N: parameter_count(LLAMA)},
          holds=False, source="Chowdhery et al. 2022 (PaLM), appendix B, N as quoted (every parameter)",
          assumptions=LLAMA_GEMMS + ("counts the input lookup and norms at 6 FLOP each",))
def palm_all_n() -> sp.Expr:
    return flops_per_token(LLAMA, "full")


@identity("PaLM 6N + 12LHQT = causal count", topic=TOPIC,
          claim=PALM, where={k: h / a, N: gemm_parameter_count(LLAMA)},
          holds=False, source="Chowdhery et al. 2022 (PaLM), appendix B, against a causal kernel",
          assumptions=LLAMA_GEMMS + ("PaLM counts the full square; a causal kernel does half",))
def palm_causal() -> sp.Expr:
    return flops_per_token(LLAMA, "causal")


# ---- Narayanan et al. 2021 ----

@identity("Narayanan 72Bslh^2(1 + s/6h + V/12lh)", topic=TOPIC,
          claim=B * s * narayanan(), where={f: 4 * h},
          source=NARAYANAN + ", without recompute",
          assumptions=GPT_GEMMS + F4H + ("B sequences of s tokens per batch", "full score square, no causal halving",
                             "logit layer counted; biases and norms neglected"))
def narayanan_batch() -> sp.Expr:
    return B * s * flops_per_token(GPT, "full")


@identity("Narayanan 96Bslh^2(1 + s/6h + V/16lh)", topic=TOPIC,
          claim=B * s * narayanan_recompute(), where={f: 4 * h},
          source=NARAYANAN + ", with activation recompute (hardware FLOPs)",
          assumptions=GPT_GEMMS + F4H + ("every layer's forward re-run once; the logit layer is not",
                             "full score square, no causal halving"))
def narayanan_recompute_batch() -> sp.Expr:
    return B * s * flops_per_token(GPT, "full", "full-layers")


@identity("Narayanan 96(...) = 4/3 x every GEMM", topic=TOPIC,
          claim=B * s * narayanan_recompute(), where={f: 4 * h},
          holds=False, source=NARAYANAN + ", against recompute of the output head too",
          assumptions=GPT_GEMMS + F4H + ("the article's 4/3 re-runs the logit GEMM as well: 2hV per token more",))
def narayanan_recompute_not_four_thirds() -> sp.Expr:
    return B * s * flops_per_token(GPT, "full", "full")


@identity("Narayanan 72(...) = causal count", topic=TOPIC,
          claim=B * s * narayanan(), where={f: 4 * h},
          holds=False, source=NARAYANAN + ", against a causal kernel",
          assumptions=GPT_GEMMS + F4H + ("Narayanan counts the full square",))
def narayanan_causal() -> sp.Expr:
    return B * s * flops_per_token(GPT, "causal")


# ---- Megatron's num_floating_point_operations ----

def _megatron_batch(family: str, swiglu: bool, query_groups: sp.Expr) -> None:
    """Register Megatron's per-batch count against the derived count of one family."""
    @identity(f"Megatron num_floating_point_operations = {family} causal count x tokens", topic=TOPIC,
              key=f"flops.megatron_batch.{family}",
              claim=Later(lambda: megatron_num_floating_point_operations(B * s, B * s**2, swiglu=swiglu,
                                                                         query_groups=query_groups)),
              where={k: h / a},
              source=MEGATRON,
              assumptions=(LLAMA_GEMMS if family == "llama" else GPT_GEMMS)
              + ("B unpacked sequences of s tokens: sum of s_i^2 = B s^2",
                 "kv_channels = h/a; no attention output gate; biases not counted"))
    def batch() -> sp.Expr:
        return B * s * model_flops_per_token(FAMILIES[family], "causal")


_megatron_batch("llama", True, g)
_megatron_batch("gpt", False, a)


@identity("Megatron packed: tokens x linear + sum s_i^2 x attention", topic=TOPIC,
          claim=Later(lambda: megatron_num_floating_point_operations(T, Q, swiglu=True, query_groups=g)),
          where={k: h / a}, source=MEGATRON + " (total_real_tokens_in_batch, seqlen_squared_sum_in_batch)",
          assumptions=LLAMA_GEMMS + ("packed (THD) sequences: score work per sequence s_i^2, padding not counted",))
def megatron_packed() -> sp.Expr:
    return packed_flops(T, Q, LLAMA, "causal")


@identity("Megatron per token = derive causal (Llama)", topic=TOPIC, claim=megatron("llama"),
          where={k: h / a}, source=MEGATRON + ", divided by the tokens of one sequence",
          assumptions=LLAMA_GEMMS + ("model FLOPs: Megatron has no recompute term",))
def megatron_per_token() -> sp.Expr:
    return flops_per_token(LLAMA, "causal")


# ---- recompute ----

#: F of the selective factor, written as the article's closed form 6 N_GEMM + 6Lsh on the parameter
#: table (not through derive's FLOP account, whose recompute_factor the identity checks).
CAUSAL_F = sp.expand(6 * gemm_parameter_count(LLAMA) + 6 * L * s * h)


@identity("selective recompute factor = 1 + 2Lsh/F (causal)", topic=TOPIC,
          claim=1 + 2 * L * s * h / F, where={F: CAUSAL_F},
          source="the article, section 7.2 (QK^T and PV re-run: 2sh per layer per token, causal)",
          assumptions=LLAMA_GEMMS + ("selective recompute re-runs only the score GEMMs' forward",))
def selective_factor() -> sp.Expr:
    return recompute_factor("selective", LLAMA, "causal")


@identity("full recompute factor = 4/3 (every GEMM)", topic=TOPIC, claim=sp.Rational(4, 3),
          source="the article, section 7.2: (2 + 2 + 4) / 6",
          assumptions=LLAMA_GEMMS + ("the forward of every GEMM runs twice, output head included",))
def full_factor() -> sp.Expr:
    return recompute_factor("full", LLAMA, "causal")


@identity("layer-only full recompute factor = 4/3", topic=TOPIC, claim=sp.Rational(4, 3), holds=False,
          source="Megatron recompute_granularity='full' (megatron/core/transformer/transformer_block.py): "
                 "layers only, not the output head",
          assumptions=LLAMA_GEMMS + ("the output head's forward is not re-run, so the factor is below 4/3",))
def full_layers_factor() -> sp.Expr:
    return recompute_factor("full-layers", LLAMA, "causal")


N_active_GEMM = sp.Symbol("N_active_GEMM", positive=True, integer=True)


# ---- Mixture of Experts: 6 N_active_GEMM + the score term ----

def _active_gemm(features: Layout) -> sp.Expr:
    return active_parameters(features).where("gemm").numel()


@identity("MoE (GQA) causal FLOPs per token = 6 N_active_GEMM + 6Lsak", topic=EXPERTS,
          claim=6 * N_active_GEMM + 6 * L * s * a * k, where=Deferred(lambda: {N_active_GEMM: _active_gemm(GQA)}),
          source="the article, section 6.2 (6N + 6Lsh), with N the active GEMM parameters",
          assumptions=("K of E experts per token; router GEMM [h, E] counted",
                       "causal mask: s/2 keys per query; heads of width k"))
def moe_gqa_flops() -> sp.Expr:
    return flops(model_gemms(GQA))


@identity("MLA + MTP causal FLOPs per token = 6 N_active_GEMM + 6DhV + 3(L + D)sa(k_nope + k_rope + k_v)",
          topic=EXPERTS,
          claim=(6 * N_active_GEMM + 6 * D * h * V
                 + 3 * (L + D) * s * a * (k_nope + k_rope + k_v)),
          where=Deferred(lambda: {N_active_GEMM: _active_gemm(MLA_MTP)}),
          source="the article, section 6.2; DeepSeek-V3 report, section 2.2 (each MTP module "
                 "runs the shared output head)",
          assumptions=("QK^T of width k_nope + k_rope, PV of width k_v per head, causal",
                       "D MTP modules: a layer each and one more h x V logit GEMM"))
def mla_mtp_flops() -> sp.Expr:
    return flops(model_gemms(MLA_MTP))
