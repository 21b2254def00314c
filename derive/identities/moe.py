"""Mixture-of-Experts, MLA and MTP: parameter counts, states per GPU and FLOPs, proved from the tables.

The claims are Megatron-LM's closed forms (core_v0.18.0,
megatron/training/theoretical_memory_usage.py compute_weight_and_optimizer_memory,
megatron/training/training.py num_floating_point_operations), the 16 / 18
bytes per parameter of mixed-precision Adam, and the MoE analogue of
6N + 6Lsh: 6 N_active_GEMM plus the score term. Departures (``holds=False``)
are where Megatron's numbers differ from the tables; :data:`DEPARTURES`
sizes each for DeepSeek-V3 and Mixtral 8x7B at :data:`LAYOUT`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import sympy as sp

from derive.accounts.activations import layer_activation_bytes
from derive.accounts.experts import (first_stage_parameters, model_parallel_share,
                                     moe_layer_activations, moe_resident_bytes)
from derive.architectures.gemms import flops
from derive.architectures.mla import MLA, mla_attention
from derive.architectures.moe_model import (MoEFeatures, active_parameters, layer, model_gemms,
                                            model_parameters)
from derive.identities import Sided, identity
from derive.megatron.activations import MEGATRON_LAYER
from derive.megatron.flops import flops_per_token
from derive.megatron.tables import moe_reading
from derive.megatron.weights import first_stage
from derive.symbols import (D, E, k_E, L, L_E, N, V, a, b, d, k_nope, k_rope, k_v, e, f, f_E,
                            f_S, g, h, k, p, r_kv, r_q, s, t, t_E)
from derive.tensors import Ledger

TOPIC = "Mixture of Experts"
MEMORY = "megatron/training/theoretical_memory_usage.py compute_weight_and_optimizer_memory (core_v0.18.0)"
FLOPS = "megatron/training/training.py num_floating_point_operations (transformer_flops, core_v0.18.0)"
GQA = MoEFeatures("gqa")
MLA_MTP = MoEFeatures("mla", shared=True, mtp=True)
N_active_GEMM = sp.Symbol("N_active_GEMM", positive=True, integer=True)
#: claim-side per-rank parameter shares: experts' and everything else's.
N_e, N_o = sp.symbols("N_e N_o", positive=True, integer=True)


# ---- parameters: the tables against Megatron's per-layer closed forms ----

@identity("MoE layer (GQA) = 2hak + 2hgk + 3Ehf_e + 3hf_s + 2h + hE (+ h gate)", topic=TOPIC,
          claim=2 * h * a * k + 2 * h * g * k + 3 * E * h * f_E + 3 * h * f_S + 2 * h + h * E + h,
          source=MEMORY + " (num_parameters_in_transformer_layer_moe)",
          assumptions=("RMSNorm, SwiGLU experts, no linear biases", "a shared expert of width f_S "
                       "with Qwen2-MoE's sigmoid gate [h, 1]; router [h, E] without bias"))
def moe_layer_parameters() -> sp.Expr:
    return layer(MoEFeatures("gqa", shared=True, gate=True), moe=True).numel()


@identity("MLA = r_q(h + a(k_nope + k_rope) + 1) + r_kv(h + a(k_nope + k_v) + 1) + h k_rope + a k_v h",
          topic=TOPIC,
          claim=(r_q * (h + a * (k_nope + k_rope) + 1) + r_kv * (h + a * (k_nope + k_v) + 1) + h * k_rope
                 + a * k_v * h),
          source=MEMORY + " (self_attn_term, multi_latent_attention); DeepSeek-V2 report, section 2.1",
          assumptions=("query latent r_q and key/value latent r_kv, each with an RMSNorm scale",
                       "one rotary key of width k_rope shared by the a heads"))
def mla_parameters() -> sp.Expr:
    return Ledger(mla_attention(MLA())).numel()


@identity("active parameters = N - L_E (E - k_E) 3h f_E", topic=TOPIC,
          claim=N - L_E * (E - k_E) * 3 * h * f_E, where={N: model_parameters(GQA).numel()},
          source="Fedus et al. 2021 (Switch Transformer), section 2; DeepSeek-V3 report, section 1 "
                 "(671B total, 37B activated)",
          assumptions=("a token passes through k_E of the E routed experts of each MoE layer; "
                       "everything else (router, shared experts, attention, edges) is active",))
def active_is_n_minus_idle_experts() -> sp.Expr:
    return active_parameters(GQA).numel()


# ---- states: 16 / 18 bytes per parameter survive expert sharding ----

def _rank(features: MoEFeatures) -> Ledger:
    """One rank's share of the whole model (t, t_E e)."""
    return model_parallel_share(model_parameters(features))


@identity("MoE, bf16 + Adam, no ZeRO: 16 bytes per parameter on every rank", topic=TOPIC,
          claim=16 * N, where={N: _rank(MLA_MTP).numel()},
          source="ZeRO (Rajbhandari et al. 2020), section 3.1 (2 + 2 + K = 12)",
          assumptions=("experts over t_E e, the rest over t: the share changes, not the bytes "
                       "per parameter",))
def moe_sixteen() -> sp.Expr:
    return moe_resident_bytes(_rank(MLA_MTP), "bf16", "adam")


@identity("MoE, Megatron bf16 (fp32 grads), distributed optimizer: (6 + 12/d) N_o + (6 + 12/EDP) N_e",
          topic=TOPIC,
          claim=(6 + sp.Rational(12) / d) * N_o + (6 + 12 / (t * d / (t_E * e))) * N_e,
          where={N_o: _rank(MLA_MTP).without("routed_expert").numel(), N_e: _rank(MLA_MTP).where("routed_expert").numel()},
          source=MEMORY + "; megatron/core/distributed/distributed_data_parallel.py "
                 "(expert_data_parallel_group)",
          assumptions=("EDP = world / (t_E e p) = t d / (t_E e) expert data-parallel ranks",
                       "bf16 params and grads, fp32 main grads, master and Adam moments"))
def moe_distributed_optimizer() -> sp.Expr:
    return moe_resident_bytes(_rank(MLA_MTP), "bf16-fp32grad", "adam", zero_stage=1)


@identity("MoE, Megatron bf16 (fp32 grads), plain Adam: 18 bytes per parameter", topic=TOPIC,
          claim=18 * N, where={N: _rank(GQA).numel()}, source=MEMORY,
          assumptions=("no distributed optimizer: EDP does not enter",))
def moe_eighteen() -> sp.Expr:
    return moe_resident_bytes(_rank(GQA), "bf16-fp32grad", "adam")


# ---- FLOPs: 6 N_active_GEMM + the score term ----

def _active_gemm(features: MoEFeatures) -> sp.Expr:
    return active_parameters(features).where("gemm").numel()


@identity("MoE (GQA) causal FLOPs per token = 6 N_active_GEMM + 6Lsak", topic=TOPIC,
          claim=6 * N_active_GEMM + 6 * L * s * a * k, where={N_active_GEMM: _active_gemm(GQA)},
          source="the article, section 6.2 (6N + 6Lsh), with N the active GEMM parameters",
          assumptions=("K of E experts per token; router GEMM [h, E] counted",
                       "causal mask: s/2 keys per query; heads of width k"))
def moe_gqa_flops() -> sp.Expr:
    return flops(model_gemms(GQA))


@identity("MLA + MTP causal FLOPs per token = 6 N_active_GEMM + 6DhV + 3(L + D)sa(k_nope + k_rope + k_v)",
          topic=TOPIC,
          claim=(6 * N_active_GEMM + 6 * D * h * V
                 + 3 * (L + D) * s * a * (k_nope + k_rope + k_v)),
          where={N_active_GEMM: _active_gemm(MLA_MTP)},
          source="the article, section 6.2; DeepSeek-V3 report, section 2.2 (each MTP module "
                 "runs the shared output head)",
          assumptions=("QK^T of width k_nope + k_rope, PV of width k_v per head, causal",
                       "D MTP modules: a layer each and one more h x V logit GEMM"))
def mla_mtp_flops() -> sp.Expr:
    return flops(model_gemms(MLA_MTP))


def megatron_moe_flops(shared: bool, latent: bool, mtp: bool) -> sp.Expr:
    """training.py transformer_flops per token (MoE layers, optional shared expert, MLA, MTP): the claim."""
    layers_ = L + (D if mtp else 0)
    dense, moe = L - L_E, L_E + (D if mtp else 0)             # the MTP layer is MoE (last layer's type)
    mlp = 3 * 2 * h * (3 * f * dense + 3 * f_E * k_E * moe + (3 * f_S * moe if shared else 0))
    if latent:
        attention = (r_q * (h + a * (k_nope + k_rope) + 1) + r_kv * (h + a * (k_nope + k_v) + 1)
                     + h * k_rope + a * k_v * h + s * a * (k_nope + k_rope) / 2 + s * a * k_v / 2)
    else:
        attention = 2 * h * a * k + 2 * h * g * k + a * k * s
    extra = (3 * 2 * D * (3 * h + 2 * h * h)) if mtp else 0
    logits = 3 * 2 * h * V * (1 + (D if mtp else 0))
    return sp.expand(mlp + 3 * 2 * layers_ * attention + extra + logits)


@identity("Megatron FLOPs per token, MoE + GQA: table = training.py", topic=TOPIC,
          claim=megatron_moe_flops(False, False, False), source=FLOPS, where={D: 0},
          assumptions=("top-k routed experts of width f_E, no router, no shared expert",
                       "causal scores over s/2 keys", "no MTP (D = 0)"))
def megatron_moe_gqa_flops() -> sp.Expr:
    return flops_per_token(moe_reading(GQA), False)


@identity("Megatron FLOPs per token, MoE + MLA + MTP: table = training.py", topic=TOPIC,
          claim=megatron_moe_flops(True, True, True), source=FLOPS,
          assumptions=("shared expert, query latent, D MTP modules of MoE type",
                       "latent and MTP norms priced at 6 per parameter"))
def megatron_moe_mla_flops() -> sp.Expr:
    return flops_per_token(moe_reading(MoEFeatures("mla", shared=True)), False)


# ---- departures: Megatron vs the tables ----

#: The layout departures are sized at: t = 8, e = 8, t_E = 1, p = 4, d = 32 (1024 GPUs), b = 1.
LAYOUT: dict[sp.Symbol, int] = {t: 8, e: 8, t_E: 1, p: 4, d: 32, b: 1}


def _derived_first_stage(features: MoEFeatures, duplicated_latents: bool = True) -> Ledger:
    """The first of p > 1 stages on one rank (derive.accounts.experts.first_stage_parameters)."""
    return first_stage_parameters(model_parameters(features), False, duplicated_latents)


def _megatron_first_stage(features: MoEFeatures) -> Ledger:
    return first_stage(moe_reading(features), single_stage=False)


def mla_down_projections() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) first-stage parameters per GPU: Megatron splits MLA's duplicated latents by t."""
    features = MoEFeatures("mla", shared=True)
    return (_derived_first_stage(features, duplicated_latents=False).numel(),
            _derived_first_stage(features).numel())


def mtp_projection_and_norms() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) parameters of D MTP modules: Megatron counts only their layers."""
    table = model_parameters(MLA_MTP).where("mtp")
    return table.where("layer").numel(), table.numel()


def mtp_stage() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) first-stage parameters per GPU: Megatron puts the MTP block there."""
    features = MoEFeatures("mla", shared=True, mtp=True)
    counted = _megatron_first_stage(features).where("mtp").numel()
    return counted, sp.Integer(0)


def _gemm_flops(tag: str) -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) FLOPs per token of the GEMMs tagged ``tag``: Megatron counts none."""
    gemms = model_gemms(MoEFeatures("gqa", shared=True, gate=True))
    return sp.Integer(0), flops(gemms.where(tag))


def latent_norm_flops() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) FLOPs per token Megatron gives MLA's latent norms and the MTP norms."""
    counted = flops_per_token(moe_reading(MoEFeatures("mla", shared=True)), False)
    derived = flops(model_gemms(MLA_MTP).without("router"))
    return counted, derived


def megatron_flops_vs_table(features: MoEFeatures) -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) FLOPs per token: router and gate left out, norms priced as GEMMs."""
    counted = flops_per_token(moe_reading(features), False)
    return counted, flops(model_gemms(features))


def activations_ignore_moe(features: MoEFeatures) -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) bytes per MoE layer per GPU, SP + selective: Megatron prices a dense
    GPT layer of width f (ffn_hidden_size); derived: the fused MoE/MLA layer, statistics left aside."""
    counted = layer_activation_bytes(**MEGATRON_LAYER, tensor_parallel=t,
                                     sequence_parallel=True)
    derived = moe_layer_activations("fused", features, softmax_statistics=False).bytes()
    return counted, derived


@dataclass(frozen=True)
class Departure(Sided):
    """One way Megatron's MoE numbers depart from the tables, the pair it is read from, its unit."""

    name: str
    sides: Callable[[], tuple[sp.Expr, sp.Expr]]
    unit: str
    assumptions: tuple[str, ...]
    source: str = MEMORY
    needs: str = ""

    @property
    def difference(self) -> sp.Expr:
        """derived - Megatron, exactly."""
        counted, derived = self.pair
        return sp.expand(derived - counted)


DEPARTURES: tuple[Departure, ...] = (
    Departure("MLA down projections and latent norms divided by t", mla_down_projections,
              "parameters per GPU (first stage)",
              ("Transformer Engine spec: linear_q_down_proj, linear_kv_down_proj and their norms "
               "are duplicated on every TP rank (megatron/core/models/gpt/gpt_layer_specs.py)",),
              needs="mla"),
    Departure("MTP projection and norms not counted", mtp_projection_and_norms, "parameters",
              ("each MTP module: enorm, hnorm, eh_proj [2h, h], final norm besides its layer "
               "(megatron/core/transformer/multi_token_prediction.py MultiTokenPredictionLayer)",),
              needs="mtp"),
    Departure("MTP block counted on the first stage", mtp_stage, "parameters per GPU (first stage)",
              ("the MTP block lives on the last pipeline stage (gpt_model.py, mtp_process)",),
              needs="mtp"),
    Departure("activation estimators ignore MoE (GQA layer)", lambda: activations_ignore_moe(GQA),
              "bytes per MoE layer per GPU",
              ("SP + selective recompute; Megatron: the GPT table at f = ffn_hidden_size",
               "derived: fused profile, k_E token copies (dropless), router scores, routing map, "
               "permutation map; norm statistics and logsumexp left aside"),
              source=MEMORY.replace("compute_weight_and_optimizer_memory", "compute_activation_memory"),
              needs="gqa"),
    Departure("activation estimators ignore MoE and MLA", lambda: activations_ignore_moe(
                  MoEFeatures("mla", shared=True)), "bytes per MoE layer per GPU",
              ("SP + selective recompute; Megatron: the GPT table at f = ffn_hidden_size",
               "derived: fused profile, MLA latents and their norms' inputs, q/k of width "
               "d_n + k_rope, v of width k_v, shared expert"),
              source=MEMORY.replace("compute_weight_and_optimizer_memory", "compute_activation_memory"),
              needs="mla"),
    Departure("router GEMM not counted", lambda: _gemm_flops("router"), "FLOPs per token",
              ("the router [h, E] is a GEMM of every MoE layer (router.py TopKRouter.gating)",),
              source=FLOPS),
    Departure("shared-expert gate GEMM not counted", lambda: _gemm_flops("shared_expert_gate"),
              "FLOPs per token", ("Qwen2-MoE's gate [h, 1] is a GEMM of every MoE layer "
                                  "(shared_experts.py SharedExpertMLP.gate_weight)",),
              source=FLOPS, needs="gate"),
    Departure("MLA latent and MTP norms priced as GEMMs", latent_norm_flops,
              "FLOPs per token", ("Megatron's 6 (r_q + r_kv) per layer and 6 (3h) per MTP "
                                  "module are element-wise norms, not GEMMs",), source=FLOPS,
              needs="mla"),
)


def applies(entry: Departure, features: MoEFeatures) -> bool:
    """Whether a model with ``features`` can show the departure."""
    return {"": True, "mla": features.attention != "gqa", "gqa": features.attention == "gqa",
            "mtp": features.mtp, "gate": features.gate}[entry.needs]


def sizes(values: dict[sp.Symbol, int], features: MoEFeatures) -> dict[str, sp.Expr | None]:
    """Every departure's size (derived - Megatron) for one model at :data:`LAYOUT`; None where it cannot arise."""
    at = {**values, **LAYOUT}
    return {entry.name: (entry.difference.xreplace({k_: sp.Integer(n) for k_, n in at.items()})
                         if applies(entry, features) else None) for entry in DEPARTURES}


def _register(entry: Departure) -> None:
    @identity(f"Megatron MoE: {entry.name}", topic=TOPIC, claim=entry.pair[0],
              key="moe." + re.sub(r"\W+", "_", entry.name).strip("_"),
              source=entry.source, assumptions=entry.assumptions, holds=False)
    def derived() -> sp.Expr:
        return entry.pair[1]


for _entry in DEPARTURES:
    _register(_entry)
