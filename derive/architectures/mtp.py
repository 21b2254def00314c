"""Multi-token prediction modules (DeepSeek-V3 report, section 2.2), tensor by tensor.

Module k holds two RMSNorms (on the previous depth's hidden state and on the
next token's embedding), the projection M_k [2h, h] of their concatenation,
one Transformer layer and the norm before the output head; the embedding
and the output head are shared with the main model (no rows here). Tag
``mtp``; ``count`` D modules.
"""
from __future__ import annotations

from derive.architectures.blocks import norm
from derive.architectures.parameters import matrix
from derive.symbols import D, h
from derive.tensors import Ledger


def mtp_module(layer: Ledger) -> Ledger:
    """D modules: enorm, hnorm, eh_proj [2h, h], ``layer`` (one Transformer layer), final norm."""
    own = Ledger([*norm("mtp.enorm", h, "rms"), *norm("mtp.hnorm", h, "rms"),
                  matrix("mtp.eh_proj.weight", 2 * h, h), *norm("mtp.shared_head.norm", h, "rms")])
    return (own + layer).map(lambda w: w.tagged("mtp").times(D))
