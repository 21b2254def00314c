"""Multi-head latent attention parameter rows (DeepSeek-V2 report, section 2.1; DeepSeek-V3).

Queries are compressed to rank r_q (q_lora_rank; none when it is null:
DeepSeek-V2-Lite), keys and values to rank r_kv (kv_lora_rank) with a decoupled
RoPE key of width k_rope shared by every head; each of the a heads has a query/key
width k_nope + k_rope and a value width k_v. Names are transformers'
(modeling_deepseek_v3.py, DeepseekV3Attention); matrices are [in, out].

Tags: ``attention``; ``mla_down`` on the down-projections and their norms
(q_a_proj, q_a_layernorm, kv_a_proj_with_mqa, kv_a_layernorm), which Megatron's
Transformer Engine layer spec keeps whole on every TP rank.
"""
from __future__ import annotations

from dataclasses import dataclass

from derive.architectures.blocks import linear, norm
from derive.symbols import a, h, k_nope, k_rope, k_v, r_kv, r_q
from derive.tensors import Tensor


@dataclass(frozen=True)
class MLA:
    """What a config says about the form of MLA: query compression or not, biases."""

    q_lora: bool = True
    bias: bool = False
    prefix: str = "self_attn"


def mla_attention(mla: MLA) -> list[Tensor]:
    """One layer's MLA projections and latent norms."""
    p = mla.prefix
    qk_width = a * (k_nope + k_rope)
    if mla.q_lora:
        rows = [*linear(f"{p}.q_a_proj", h, r_q, mla.bias, "attention", "mla_down"),
                *norm(f"{p}.q_a_layernorm", r_q, "rms", "attention", "mla_down"),
                *linear(f"{p}.q_b_proj", r_q, qk_width, False, "attention")]
    else:
        rows = linear(f"{p}.q_proj", h, qk_width, False, "attention")
    return rows + [
        *linear(f"{p}.kv_a_proj_with_mqa", h, r_kv + k_rope, mla.bias, "attention", "mla_down"),
        *norm(f"{p}.kv_a_layernorm", r_kv, "rms", "attention", "mla_down"),
        *linear(f"{p}.kv_b_proj", r_kv, a * (k_nope + k_v), False, "attention"),
        *linear(f"{p}.o_proj", a * k_v, h, mla.bias, "attention"),
    ]
