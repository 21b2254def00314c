"""Megatron-LM's conventions and constants: the CLAIM side of every Megatron identity.

What Megatron-LM (core_v0.18.0) types into its estimators: the per-batch FLOP
count of ``num_floating_point_operations`` as a literal closed form, the bytes
per parameter of its precision recipes (docs/user-guide/features/dist_optimizer.md),
and the without-SP activation estimator's 1.05 overhead. The estimators
themselves, rebuilt from derive's tables, are ``derive.megatron``; where they
depart from the derived ledger is ``derive.identities.megatron``.
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.flops import Number
from derive.accounts.state import bytes_per_parameter
from derive.expansion import expand
from derive.inputs import choose
from derive.symbols import (D, L, L_E, V, a, d, f, f_E, f_S, g, h, k, k_E, k_nope, k_rope, k_v,
                            r_kv, r_q, s)

#: megatron/training/theoretical_memory_usage.py compute_activation_memory_without_sp:
#: overhead_factor = 1.05 ("buffer for optimizer and miscellaneous temporaries").
MEGATRON_OVERHEAD = sp.Rational(21, 20)

#: Megatron's precision names in docs/user-guide/features/dist_optimizer.md -> derive's recipes.
MEGATRON_RECIPES = {"fp16": "fp16-megatron", "bf16": "bf16-fp32grad", "fp32": "fp32"}


def distributed_optimizer_bytes_per_parameter(precision: str, distributed: bool = True,
                                              ranks: sp.Expr = d) -> sp.Expr:
    """Megatron bytes/parameter with Adam, plain or with the distributed optimizer (ZeRO-1 over d)."""
    recipe = MEGATRON_RECIPES[choose("precision", precision, MEGATRON_RECIPES)]
    return bytes_per_parameter(recipe, "adam", 1 if distributed else 0, ranks)


def megatron_num_floating_point_operations(tokens: Number, seqlen_squared_sum: Number, *,
                                           swiglu: bool, query_groups: Number = g,
                                           kv_channels: Number = k, output_gate: bool = False) -> sp.Expr:
    """megatron/training/training.py num_floating_point_operations (transformer_flops, dense, core_v0.18.0), one batch."""
    passes, fma = 3, 2                                   # forward_backward_ and fma_expansion_factor
    ffn = 3 if swiglu else 2                             # ffn_expansion_factor
    q = kv_channels * a                                  # query_projection_size
    kv = kv_channels * query_groups                      # key_ and value_projection_size
    gate = q if output_gate else 0
    linear = passes * fma * (L * (h * (q + 2 * kv + gate) + q * h + h * f * ffn) + h * V)
    core = passes * fma * q / 2 * 2 * L                  # "/ 2 causal mask", "* 2 QK^T and (QK^T)V"
    return expand(tokens * linear + seqlen_squared_sum * core)


def megatron(family: str = "llama") -> sp.Expr:
    """Megatron's count per token for one unpacked sequence of s tokens (sum of s_i^2 / tokens = s)."""
    llama = choose("family", family, ("llama", "gpt")) == "llama"
    return megatron_num_floating_point_operations(1, s, swiglu=llama, query_groups=g if llama else a)


def megatron_moe_flops(shared: bool, latent: bool, mtp: bool) -> sp.Expr:
    """megatron/training/training.py num_floating_point_operations (transformer_flops, MoE, MLA, MTP, core_v0.18.0), per token."""
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
    return expand(mlp + 3 * 2 * layers_ * attention + extra + logits)
