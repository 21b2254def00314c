"""The multi-token prediction module (DeepSeek-V3 report, section 2.2) as an operation: its own parameters and what it keeps for backward.

Module k holds two RMSNorms (on the previous depth's hidden state and on the next token's
embedding), the projection M_k [2h, h] of their concatenation, one Transformer layer (walked
as any layer) and the norm before the output head; the embedding and the output head are shared
with the main model (no rows here). Saved rows: Megatron-Core's MultiTokenPredictionLayer with TE
(megatron/core/transformer/multi_token_prediction.py): enorm, hnorm, the concatenation eh_proj
keeps (:func:`te_mtp_input`), then after the layer the final norm, the head input and the fp32
logits (:func:`te_mtp_head`).
"""
from __future__ import annotations

from derive.architectures.blocks import norm
from derive.architectures.operations.norm import te_rms_norm
from derive.architectures.operations.rows import ACTIVATION, STATISTICS, row
from derive.architectures.parameters import matrix
from derive.symbols import V, b, h, s
from derive.tensors import Tensor

MTP = ("replicated", "mtp")


def mtp_parameters() -> list[Tensor]:
    """One module's own rows: enorm, hnorm, eh_proj [2h, h], the final norm (shared_head.norm)."""
    return [*norm("mtp.enorm", h, "rms"), *norm("mtp.hnorm", h, "rms"),
            matrix("mtp.eh_proj.weight", 2 * h, h), *norm("mtp.shared_head.norm", h, "rms")]


def te_mtp_input() -> list[Tensor]:
    """enorm, hnorm and the [enorm(emb), hnorm(h)] concatenation eh_proj keeps."""
    return [*te_rms_norm("enorm", h, MTP), *te_rms_norm("hnorm", h, MTP),
            row("eh_proj input", (s, b, 2 * h), ACTIVATION, *MTP,
                note="[enorm(emb), hnorm(h)] concatenated, kept by eh_proj")]


def te_mtp_head() -> list[Tensor]:
    """The module's final norm, the shared output layer's input and the fp32 logits vocab-parallel cross entropy keeps."""
    return [*te_rms_norm("final_layernorm", h, MTP),
            row("output_layer input", (s, b, h), ACTIVATION, *MTP),
            row("MTP logits (fp32, for the loss)", (s, b, V), STATISTICS, "tp_shardable", "mtp",
                "logits", note="vocab-parallel cross entropy keeps the fp32 logits")]
