"""Whole MoE models from the decoder tables: parameters, active parameters and the GEMMs of one token.

An MoE model is a ``derive.architectures.decoder.Layout`` like any other: its
``moe`` block (router, routed and shared experts, and the routing the
saved-for-backward tables read: ``derive.architectures.saved``), its
``mla`` attention, its ``mtp`` modules and ``last_moe`` are fields of the
layout; :func:`moe_layout` writes one from the switches Megatron's arguments
and the papers name. A model is L - L_E dense and L_E MoE layers
(``decoder.model_rows``) and optionally D multi-token-prediction modules
(the registry's ``mtp`` operation, derive.architectures.operations.mtp) whose layer has the last
layer's type. The
GEMMs are those of the parameter table with the routed experts at k_E of their
E copies, router and shared-expert gate included, the score GEMMs QK^T (width
k_nope + k_rope under MLA) and PV (width k_v) in each of the L + D layers, and
the shared output head once per token and once more per MTP module
(DeepSeek-V3 report, section 2.2).
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.decoder import Layout, layer_rows, parameter_rows
from derive.architectures.gemms import Gemm, attention_score_gemms, weight_gemms
from derive.architectures.mla import MLA
from derive.architectures.moe import MoE, active_rows
from derive.architectures.operations.registry import parameter_table, step
from derive.inputs import choose
from derive.symbols import D, L, a, k, k_nope, k_rope, k_v
from derive.tensors import Ledger

#: attention kinds (decoder.Layout.attention): GQA at head width k, MLA with a query latent,
#: MLA with a direct q_proj.
ATTENTION_KINDS = ("gqa", "mla", "mla-direct")
#: The shared experts' module (DeepSeek's name; the Qwen2-MoE config reader names its own).
SHARED_EXPERTS = "mlp.shared_experts"


def moe_layout(attention: str = "gqa", shared: bool = False, gate: bool = False, router_bias: bool = False,
               qk_norm: bool = False, mtp: bool = False, last_moe: bool = True, router: str = "softmax",
               normalise_topk: bool = True, weights_dtype: str = "fp32") -> Layout:
    """The Layout of an MoE model named by the switches Megatron's arguments and the papers use.

    RMSNorm, SwiGLU, untied; GQA or MLA (``attention``), shared experts and their sigmoid gate,
    a trained router bias, q/k norms, D MTP modules, the routing (derive.architectures.moe.MoE).
    """
    choose("attention", attention, ATTENTION_KINDS)
    if gate and not shared:
        raise ValueError("gate: a shared-expert gate needs shared experts")
    moe = MoE(router_bias="parameter" if router_bias else "none", shared=SHARED_EXPERTS if shared else "",
              shared_gate=gate, router=router, normalise_topk=normalise_topk, weights_dtype=weights_dtype)
    mla = None if attention == "gqa" else MLA(q_lora=attention == "mla")
    return Layout(qk_norm="head" if qk_norm else "none", moe=moe, mla=mla, mtp=mtp, last_moe=last_moe)


def layer(layout: Layout, moe: bool) -> Ledger:
    """One dense (width f) or MoE layer."""
    return layer_rows(layout, moe)


def mtp_modules(layout: Layout) -> Ledger:
    """D MTP modules (tag ``mtp``): each its own rows (enorm, hnorm, eh_proj [2h, h], final norm) and a layer of the last layer's type."""
    own = parameter_table((step("mtp", "module"),))
    return (own + layer(layout, layout.last_moe).without("buffer")).map(lambda w: w.tagged("mtp").times(D))


def model_parameters(layout: Layout) -> Ledger:
    """Every parameter once: layers, untied edges, and the MTP modules (tag ``mtp``)."""
    table = parameter_rows(layout)
    return table + mtp_modules(layout) if layout.mtp else table


def active_parameters(layout: Layout) -> Ledger:
    """The parameters one token passes through: routed experts at k_E of E."""
    return active_rows(model_parameters(layout))


def score_gemms(layout: Layout, attention: str = "causal") -> Ledger:
    """QK^T and PV of one layer: width k (GQA) or k_nope + k_rope and k_v (MLA)."""
    if layout.mla is None:
        return attention_score_gemms(attention, a, k)
    return attention_score_gemms(attention, a, k_nope + k_rope, k_v)


def mtp_logit_gemms(layout: Layout) -> Ledger:
    """The shared output head run once more per MTP module (no parameter of its own)."""
    if not layout.mtp:
        return Ledger()
    head = weight_gemms(parameter_rows(layout).where("output"))
    return head.map(lambda gemm: Gemm(f"mtp {gemm.name}", gemm.m, gemm.n, gemm.k,
                                      gemm.tags | {"mtp"}, gemm.count * D))


def layer_count(layout: Layout) -> sp.Expr:
    """Layers a token passes through: L, plus one per MTP module."""
    return L + D if layout.mtp else L


def model_gemms(layout: Layout, attention: str = "causal") -> Ledger:
    """Every GEMM of one token: active weight GEMMs, scores in L + D layers, MTP logits."""
    scores = score_gemms(layout, attention).times(layer_count(layout))
    return weight_gemms(active_parameters(layout)) + scores + mtp_logit_gemms(layout)
