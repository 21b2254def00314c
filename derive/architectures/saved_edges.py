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

from derive.symbols import V, b, h, s
from derive.tensors import Ledger, Tensor

DTYPE = "bf16"
#: PyTorch's RMSNorm computes in fp32 (``opmath``) whatever the input dtype.
NORM_DTYPE = "fp32"
INDEX_DTYPE = "int64"


def _row(name: str, shape: tuple, dtype: str, *tags: str, note: str = "") -> Tensor:
    return Tensor(name, shape, dtype, frozenset(tags), note=note)


def final_norm_saved() -> Ledger:
    """The final RMSNorm as torch.nn.functional.rms_norm decomposes it (torch/nn/functional.py, rms_norm)."""
    return Ledger(
        [
            _row("norm: fp32 upcast input", (b, s, h), NORM_DTYPE, "norm", "tp_shardable",
                 note="x.to(float32), kept by pow and by the multiply with rstd"),
            _row("norm: inverse RMS", (b, s), NORM_DTYPE, "norm", "norm_statistics",
                 note="rsqrt(mean(x^2) + eps), kept by rsqrt and the multiply"),
            _row("norm: normalised input", (b, s, h), NORM_DTYPE, "norm", "tp_shardable",
                 note="x * rstd, kept by the multiply with the scale"),
        ]
    )


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
