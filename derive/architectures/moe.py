"""Mixture-of-Experts layers, tensor by tensor: router, routed experts, shared experts and their gate.

Tags on top of ``derive.architectures.parameters``': ``router`` (the [h, E]
scoring matrix and its optional bias), ``expert`` (a routed expert's
matrices, ``count`` E per layer: sharded by expert parallelism e times expert
tensor parallelism t_e), ``shared_expert`` (always-on experts of total width
f_s, sharded by t like a dense MLP) and ``shared_expert_gate`` (Qwen2-MoE's
sigmoid gate [h, 1] on the shared expert). Router, gate and norms are
``tp_replicated``: whole on every tensor-parallel rank (Megatron
megatron/core/transformer/moe/router.py TopKRouter; moe_layer.py MoELayer).
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.parameters import DTYPE, llama_layer
from derive.symbols import E, K, L, L_m, f_e, f_s, h
from derive.tensors import Ledger, Tensor

#: the router's bias (DeepSeek-V3's e_score_correction_bias) is held in fp32.
ROUTER_BIAS_DTYPE = "fp32"


def _matrix(name: str, rows: sp.Expr, cols: sp.Expr, *tags: str, count: sp.Expr = 1) -> Tensor:
    return Tensor(name, (rows, cols), DTYPE, frozenset(("gemm", "mlp", "layer", *tags)), count)


def router(bias: bool = False) -> Ledger:
    """The router: token scores x W_r, W_r [h, E] (Fedus et al. 2021, section 2.1), optional bias [E]."""
    rows = [_matrix("mlp.gate.weight (router)", h, E, "router", "tp_replicated")]
    if bias:
        rows.append(Tensor("mlp.gate.bias (router)", (E,), ROUTER_BIAS_DTYPE,
                           frozenset({"router", "bias", "mlp", "layer", "tp_replicated"})))
    return Ledger(rows)


def swiglu_mlp(prefix: str, width: sp.Expr, *tags: str, count: sp.Expr = 1) -> Ledger:
    """gate, up [h, width] and down [width, h] of one SwiGLU MLP (Shazeer 2020), ``count`` copies."""
    return Ledger([
        _matrix(f"{prefix}.gate_proj", h, width, *tags, count=count),
        _matrix(f"{prefix}.up_proj", h, width, *tags, count=count),
        _matrix(f"{prefix}.down_proj", width, h, *tags, count=count),
    ])


def routed_experts() -> Ledger:
    """E SwiGLU experts of width f_e (Mixtral, Jiang et al. 2024, section 2.1)."""
    return swiglu_mlp("mlp.experts", f_e, "expert", count=E)


def shared_experts(gate: bool = False) -> Ledger:
    """Always-on experts of total width f_s (DeepSeekMoE, Dai et al. 2024, 3.2) and Qwen2-MoE's gate [h, 1]."""
    rows = swiglu_mlp("mlp.shared_experts", f_s, "shared_expert")
    if gate:
        rows = rows + Ledger([_matrix("mlp.shared_expert_gate", h, 1, "shared_expert_gate",
                                      "tp_replicated")])
    return rows


def moe_mlp(shared: bool = False, gate: bool = False, router_bias: bool = False) -> Ledger:
    """One MoE block: router, E routed experts, optional shared experts (and their gate)."""
    rows = router(router_bias) + routed_experts()
    return rows + shared_experts(gate) if shared else rows


def dense_mlp() -> Ledger:
    """The dense SwiGLU MLP of width f (a dense-first layer of DeepSeek-V3, a Llama layer)."""
    return llama_layer().where("mlp", "gemm")


def with_mlp(attention_layer: Ledger, mlp: Ledger) -> Ledger:
    """A layer: the attention half and both norms of ``attention_layer``, then ``mlp``."""
    kept = attention_layer.filter(lambda w: w.has("attention") or w.has("norm"))
    return kept.map(lambda w: w.tagged("tp_replicated") if w.has("norm") else w) + mlp


def active(table: Ledger) -> Ledger:
    """The rows one token passes through: each routed expert row at K of its E copies."""
    return table.map(lambda w: w.times(K / E) if w.has("expert") else w)


def layers(dense_layer: Ledger, moe_layer: Ledger) -> Ledger:
    """L - L_MoE dense layers and L_MoE MoE layers."""
    return dense_layer.times(L - L_m) + moe_layer.times(L_m)
