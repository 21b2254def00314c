"""Whole MoE models from the decoder tables: parameters, active parameters and the GEMMs of one token.

:class:`MoEFeatures` names the features of an MoE model that derive's accounts
read: the table features go to a ``derive.architectures.decoder.Layout``
(RMSNorm, SwiGLU, untied, GQA at head width k or MLA, router bias, shared
experts and their gate, q/k norms), the routing features (router kind, top-k
normalisation, the dtype the routing weights reach the experts in) to the
saved-for-backward tables (``derive.architectures.saved_moe``). A model is
L - L_E dense and L_E MoE layers (``decoder.model_rows``) and optionally D
multi-token-prediction modules (``derive.architectures.mtp``) whose layer has
the last layer's type. The GEMMs are those of the parameter table with the
routed experts at k_E of their E copies, router and shared-expert gate
included, the score GEMMs QK^T (width k_nope + k_rope under MLA) and PV (width
k_v) in each of the L + D layers, and the shared output head once per token
and once more per MTP module (DeepSeek-V3 report, section 2.2).
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from derive.architectures.decoder import Layout, layer_rows, parameter_rows
from derive.architectures.gemms import Gemm, attention_score_gemms, weight_gemms
from derive.architectures.mla import MLA
from derive.architectures.moe import MoE, active_rows
from derive.architectures.mtp import mtp_module
from derive.inputs import choose
from derive.symbols import D, L, a, k, k_nope, k_rope, k_v
from derive.tensors import Ledger

#: attention kinds: GQA at head width k, MLA with a query latent, MLA with a direct q_proj.
ATTENTION_KINDS = ("gqa", "mla", "mla-direct")
#: routers: softmax over E then top-k (Mixtral, Qwen3-MoE); sigmoid scores with
#: group-limited top-k (DeepSeek-V3 report, section 2.1.2).
ROUTERS = ("softmax", "sigmoid-grouped")


@dataclass(frozen=True)
class MoEFeatures:
    """The features of an MoE model: its table's (a decoder Layout) and its routing's."""

    attention: str = "gqa"
    shared: bool = False
    gate: bool = False
    router_bias: bool = False
    qk_norm: bool = False
    mtp: bool = False
    last_moe: bool = True
    router: str = "softmax"
    normalise_topk: bool = True
    weights_dtype: str = "fp32"

    def __post_init__(self) -> None:
        choose("attention", self.attention, ATTENTION_KINDS)
        choose("router", self.router, ROUTERS)
        if self.gate and not self.shared:
            raise ValueError("gate: a shared-expert gate needs shared experts")

    @property
    def layout(self) -> Layout:
        """The decoder layout of the parameter table."""
        moe = MoE(router_bias="parameter" if self.router_bias else "none",
                  shared="mlp.shared_experts" if self.shared else "", shared_gate=self.gate)
        mla = None if self.attention == "gqa" else MLA(q_lora=self.attention == "mla")
        return Layout(qk_norm="head" if self.qk_norm else "none", moe=moe, mla=mla)


def layer(features: MoEFeatures, moe: bool) -> Ledger:
    """One dense (width f) or MoE layer."""
    return layer_rows(features.layout, moe)


def model_parameters(features: MoEFeatures) -> Ledger:
    """Every parameter once: layers, untied edges, and the MTP modules (tag ``mtp``)."""
    table = parameter_rows(features.layout)
    if not features.mtp:
        return table
    return table + mtp_module(layer(features, features.last_moe).without("buffer"))


def active_parameters(features: MoEFeatures) -> Ledger:
    """The parameters one token passes through: routed experts at k_E of E."""
    return active_rows(model_parameters(features))


def score_gemms(features: MoEFeatures, attention: str = "causal") -> Ledger:
    """QK^T and PV of one layer: width k (GQA) or k_nope + k_rope and k_v (MLA)."""
    if features.attention == "gqa":
        return attention_score_gemms(attention, a, k)
    return attention_score_gemms(attention, a, k_nope + k_rope, k_v)


def mtp_logit_gemms(features: MoEFeatures) -> Ledger:
    """The shared output head run once more per MTP module (no parameter of its own)."""
    if not features.mtp:
        return Ledger()
    head = weight_gemms(parameter_rows(features.layout).where("output"))
    return head.map(lambda gemm: Gemm(f"mtp {gemm.name}", gemm.m, gemm.n, gemm.k,
                                      gemm.tags | {"mtp"}, gemm.count * D))


def layer_count(features: MoEFeatures) -> sp.Expr:
    """Layers a token passes through: L, plus one per MTP module."""
    return L + D if features.mtp else L


def model_gemms(features: MoEFeatures, attention: str = "causal") -> Ledger:
    """Every GEMM of one token: active weight GEMMs, scores in L + D layers, MTP logits."""
    scores = score_gemms(features, attention).times(layer_count(features))
    return weight_gemms(active_parameters(features)) + scores + mtp_logit_gemms(features)
