"""Whole MoE models from the layer tables: parameters, active parameters and the GEMMs of one token.

A model is L - L_MoE dense layers and L_MoE MoE layers (``derive.architectures.moe``)
with GQA at head width k or MLA (``derive.architectures.mla``), untied edges,
and optionally D multi-token-prediction modules (``derive.architectures.mtp``)
whose layer has the last layer's type. The GEMMs are those of the parameter
table with routed experts at K of their E copies (``active``), the router and
shared-expert gate included, the score GEMMs QK^T (width d_qk) and PV (width
d_v) in each of the L + D layers, and the shared output head once per token
and once more per MTP module (DeepSeek-V3 report, section 2.2).
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from derive.architectures.gemms import Gemm, attention_score_gemms, weight_gemms
from derive.architectures.mla import mla_layer
from derive.architectures.moe import active, dense_mlp, layers, moe_mlp, with_mlp
from derive.architectures.mtp import mtp_module
from derive.architectures.parameters import DTYPE, llama_edges, llama_layer
from derive.inputs import choose
from derive.symbols import D, L, a, d_n, d_r, d_v, k
from derive.tensors import Ledger, Tensor

#: attention kinds: GQA at head width k, MLA with a query latent, MLA with a direct q_proj.
ATTENTION_KINDS = ("gqa", "mla", "mla-direct")
#: routers: softmax over E then top-k (Mixtral, Qwen3-MoE); sigmoid scores with
#: group-limited top-k (DeepSeek-V3 report, section 2.1.2).
ROUTERS = ("softmax", "sigmoid-grouped")


@dataclass(frozen=True)
class MoEFeatures:
    """Which rows a model's tables hold (each a config feature, none special-cased in the arithmetic)."""

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


def _qk_norms() -> Ledger:
    """Qwen3's per-head RMSNorms on queries and keys, [k] each (transformers Qwen3MoeAttention)."""
    return Ledger([Tensor(name, (k,), DTYPE, frozenset({"norm", "attention", "layer",
                                                        "tp_replicated"}))
                   for name in ("attention.q_norm.weight", "attention.k_norm.weight")])


def attention_layer(features: MoEFeatures) -> Ledger:
    """The attention half of a layer (both norms included), no MLP."""
    if features.attention == "gqa":
        rows = llama_layer(head_dim=k).where("attention") + llama_layer().where("norm", "mlp")
        return rows + _qk_norms() if features.qk_norm else rows
    return mla_layer(Ledger(), query_latent=features.attention == "mla")


def layer(features: MoEFeatures, moe: bool) -> Ledger:
    """One dense (width f) or MoE layer."""
    mlp = moe_mlp(features.shared, features.gate, features.router_bias) if moe else dense_mlp()
    return with_mlp(attention_layer(features), mlp)


def model_parameters(features: MoEFeatures) -> Ledger:
    """Every parameter once: the layers, the untied edges, the MTP modules."""
    table = layers(layer(features, False), layer(features, True)) + llama_edges()
    return table + mtp_module(layer(features, features.last_moe)) if features.mtp else table


def active_parameters(features: MoEFeatures) -> Ledger:
    """The parameters one token passes through: routed experts at K of E."""
    return active(model_parameters(features))


def score_gemms(features: MoEFeatures, attention: str = "causal") -> Ledger:
    """QK^T and PV of one layer: width k (GQA) or d_nope + d_rope and d_v (MLA)."""
    if features.attention == "gqa":
        return attention_score_gemms(attention, a, k)
    return attention_score_gemms(attention, a, d_n + d_r, d_v)


def mtp_logit_gemms(features: MoEFeatures) -> Ledger:
    """The shared output head run once more per MTP module (no parameter of its own)."""
    if not features.mtp:
        return Ledger()
    head = weight_gemms(llama_edges().where("output"))
    return head.map(lambda gemm: Gemm(f"mtp {gemm.name}", gemm.m, gemm.n, gemm.k,
                                      gemm.tags | {"mtp"}, gemm.count * D))


def layer_count(features: MoEFeatures) -> sp.Expr:
    """Layers a token passes through: L, plus one per MTP module."""
    return L + D if features.mtp else L


def model_gemms(features: MoEFeatures, attention: str = "causal") -> Ledger:
    """Every GEMM of one token: active weight GEMMs, scores in L + D layers, MTP logits."""
    scores = score_gemms(features, attention).times(layer_count(features))
    return weight_gemms(active_parameters(features)) + scores + mtp_logit_gemms(features)
