"""The form of multi-head latent attention (DeepSeek-V2 report, section 2.1; DeepSeek-V3): what a config switches.

Its parameter rows and what it keeps for backward are a registry operation
(derive.architectures.operations.latent): queries compressed to rank r_q (none when
q_lora_rank is null: DeepSeek-V2-Lite), keys and values to rank r_kv with a decoupled RoPE
key of width k_rope.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MLA:
    """What a config says about the form of MLA: query compression or not, biases."""

    q_lora: bool = True
    bias: bool = False
    prefix: str = "self_attn"
