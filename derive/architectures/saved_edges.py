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

import sympy as sp

from derive.architectures.saved import (HEAD, SINGLE_SEQUENCE, STATISTICS, when, eager_rms_norm,
                                        hf_rms_norm)
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


def hf_edges_saved(head_dim: sp.Expr = HEAD, normalised: str = DTYPE, rope: str = DTYPE,
                   final_norm: list[Tensor] | None = None) -> Ledger:
    """The edges as transformers 5.23 runs a LlamaForCausalLM with labels (modeling_llama.py, loss_utils.py).

    Besides the eager edges: the RoPE cos and sin, computed once per forward from
    position ids (one batch row) and kept by every layer's multiplies; LlamaRMSNorm's
    bf16 normalised input; ForCausalLMLoss upcasts the logits, so cross entropy keeps
    fp32 log-probabilities and an fp32 total weight. The targets are the labels padded to
    s + 1 and shifted (transformers/loss/loss_utils.py ForCausalLMLoss: ``pad(labels, (0, 1))``,
    ``[..., 1:].contiguous()``): at b = 1 the shifted slice is already contiguous, no copy is
    made and nll_loss keeps the padded storage, one int64 more (:data:`SINGLE_SEQUENCE`).
    ``normalised``: the final norm's kept x * rstd (fp32 for OLMo 2's Olmo2RMSNorm, hf_rms_norm);
    ``rope``: the cos / sin dtype (fp32 for OLMo 2: Olmo2RotaryEmbedding.forward returns them
    uncast and apply_rotary_pos_emb casts q and k back); ``final_norm``: the final norm's rows
    where it is no RMSNorm (GPT-NeoX's LayerNorm, derive.architectures.saved_neox).
    """
    return (
        Ledger([_row("embedding: token ids", (b, s), INDEX_DTYPE, "embedding", "replicated"),
                _row("rope: cos", (s, head_dim), rope, "embedding", "rope", "replicated",
                     note="LlamaRotaryEmbedding output, kept by q * cos and k * cos in every layer"),
                _row("rope: sin", (s, head_dim), rope, "embedding", "rope", "replicated",
                     note="kept by rotate_half(q) * sin and rotate_half(k) * sin in every layer")])
        + Ledger(final_norm if final_norm is not None
                 else hf_rms_norm("norm", (b, s, h), normalised=normalised))
        + Ledger(
            [
                _row("output: head input", (b, s, h), DTYPE, "output", "replicated"),
                _row("loss: log-probabilities (fp32)", (b, s, V), STATISTICS, "loss",
                     "tp_shardable", note="log_softmax of logits.float(), kept by log_softmax "
                     "and nll_loss"),
                *when(_row("loss: targets", (b, s), INDEX_DTYPE, "loss", "replicated",
                           note="labels shifted left and padded with -100, copied by .contiguous()"),
                      sp.Not(SINGLE_SEQUENCE)),
                *when(_row("loss: padded labels (b = 1)", (s + 1,), INDEX_DTYPE, "loss",
                           "replicated", note="at b = 1 the shifted view is contiguous: nll_loss "
                           "keeps the s + 1 padded labels"), SINGLE_SEQUENCE),
                _row("loss: total weight (fp32)", (), STATISTICS, "loss", "replicated",
                     note="0-d tensor nll_loss keeps for the mean reduction"),
            ]
        )
    )
