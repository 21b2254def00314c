"""Tensors saved for backward at the edges of a Llama model in PyTorch eager (CPU, bf16).

The layer tables live in ``derive.architectures.saved``; this module holds what
the rest of the model keeps, as measured through
``torch.autograd.graph.saved_tensors_hooks`` by ``derive.validate``:
``nn.Embedding`` keeps the token ids (int64), ``nn.RMSNorm`` (composite in
eager) keeps its fp32 upcast input, the fp32 inverse RMS and the fp32
normalised input that the scale multiplies, the untied head keeps its input,
and ``F.cross_entropy`` (log_softmax + nll_loss) keeps the log-probabilities,
the targets (int64) and a 0-d ``total_weight`` in the logits' dtype.
"""
from __future__ import annotations

from derive.architectures.saved import eager_rms_norm
from derive.symbols import V, b, h, s
from derive.tensors import Ledger, Tensor

DTYPE = "bf16"
INDEX_DTYPE = "int64"


def _row(name: str, shape: tuple, dtype: str, *tags: str, note: str = "") -> Tensor:
    return Tensor(name, shape, dtype, frozenset(tags), note=note)


def final_norm_saved() -> Ledger:
    """The final RMSNorm: the same eager nn.RMSNorm rows as a layer's (torch/nn/functional.py, rms_norm)."""
    return Ledger(eager_rms_norm("norm"))


def llama_edges_saved() -> Ledger:
    """Embedding ids, final norm, head input, cross-entropy's log-probabilities, targets and total weight."""
    return (
        Ledger([_row("embedding: token ids", (b, s), INDEX_DTYPE, "embedding", "replicated")])
        + final_norm_saved()
        + Ledger(
            [
                _row("output: head input", (b, s, h), DTYPE, "output", "replicated"),
                _row("loss: log-probabilities", (b, s, V), DTYPE, "loss", "tp_shardable",
                     note="log_softmax result, kept by log_softmax and nll_loss"),
                _row("loss: targets", (b, s), INDEX_DTYPE, "loss", "replicated"),
                _row("loss: total weight", (), DTYPE, "loss", "replicated",
                     note="0-d tensor nll_loss keeps for the mean reduction"),
            ]
        )
    )
