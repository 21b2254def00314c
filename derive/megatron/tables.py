"""The parameter table as Megatron-LM's estimators read it, dense and MoE alike.

A :class:`Reading` is a record's switches: the MoE switches of
``derive.architectures.decoder.moe_layout`` (GQA or MLA, router bias, shared experts and
their gate, MTP, the last layer's type) plus Megatron's own (SwiGLU or GELU MLP, RMSNorm or
LayerNorm, untied embeddings, experts at all). A dense model is the reading with no
experts, GQA attention and no MTP module. Under Megatron's convention
(megatron/training/theoretical_memory_usage.py compute_weight_and_optimizer_memory,
core_v0.18.0): no linear bias except the router's; a norm holds a scale (``RMSNorm``)
or a scale and a shift (``LayerNorm``); no learned position embedding; the vocabulary
is ``padded_vocab_size`` and the head width ``kv_channels`` (k).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import sympy as sp

from derive.architectures.decoder import Layout, moe_layout
from derive.architectures.tables import edge_parameters, layer_parameters
from derive.inputs import choose
from derive.symbols import t
from derive.tensors import Ledger

#: Megatron's ``normalization`` argument -> whether the norm carries a shift (bias).
NORMALIZATIONS: dict[str, bool] = {"RMSNorm": False, "LayerNorm": True}

#: Megatron's default --make-vocab-size-divisible-by (megatron/training/arguments.py).
VOCAB_DIVISIBLE_BY = 128


def padded_vocab(vocab: sp.Expr, tensor_parallel: sp.Expr = t,
                 divisible_by: int = VOCAB_DIVISIBLE_BY) -> sp.Expr:
    """V rounded up to a multiple of divisible_by * t (megatron/training/tokenizer _vocab_size_with_padding)."""
    step = divisible_by * tensor_parallel
    return sp.ceiling(sp.sympify(vocab) / step) * step


@dataclass(frozen=True)
class Reading:
    """A record's switches: the MoE switches (moe_layout's) and Megatron's (MLP, norm, embeddings, experts); all off is dense."""

    attention: str = "gqa"
    shared: bool = False
    gate: bool = False
    router_bias: bool = False
    mtp: bool = False
    last_moe: bool = True
    swiglu: bool = True
    normalization: str = "RMSNorm"
    untied: bool = True
    experts: bool = False

    def __post_init__(self) -> None:
        choose("normalization", self.normalization, NORMALIZATIONS)
        moe_layout(self.attention, shared=self.shared, gate=self.gate)  # refuses an unknown attention, a lone gate

    @property
    def layout(self) -> Layout:
        """The switches' decoder layout: gated or plain MLP, tied or not, MoE blocks only with experts."""
        layout = moe_layout(self.attention, shared=self.shared, gate=self.gate, router_bias=self.router_bias,
                            mtp=self.mtp, last_moe=self.last_moe)
        return replace(layout, gated=self.swiglu, tied=not self.untied,
                       moe=layout.moe if self.experts else None)


def normalized(table: Ledger, normalization: str) -> Ledger:
    """``table`` with its norms as ``normalization`` shapes them: scale, plus a shift for LayerNorm."""
    with_shift = NORMALIZATIONS[choose("normalization", normalization, NORMALIZATIONS)]
    scales = table.where("norm").without("bias")
    shifts = scales.map(lambda w: replace(w, name=w.name.replace(".weight", ".bias"),
                                          tags=w.tags | {"bias"}))
    return table.without("norm") + scales + (shifts if with_shift else Ledger())


def layer(reading: Reading) -> Ledger:
    """One (dense) layer as Megatron counts it: derive's table at head width k, no linear biases."""
    return normalized(layer_parameters(reading.layout).without("buffer"), reading.normalization)


def edges(reading: Reading) -> Ledger:
    """Embedding, final norm and (untied) output head; no learned positions (Megatron's count)."""
    return normalized(edge_parameters(reading.layout), reading.normalization)


def moe_reading(layout: Layout) -> Reading:
    """Megatron's reading of an MoE model's layout: experts on, D MTP modules (D = 0: none)."""
    return Reading(layout.attention, shared=bool(layout.moe.shared), gate=layout.moe.shared_gate,
                   router_bias=layout.moe.router_bias == "parameter", mtp=True, last_moe=layout.last_moe,
                   experts=True)
