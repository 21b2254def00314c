"""The edge operations: embedding, final norm, output head and loss, and what each keeps for backward.

Megatron's GPT (Korthikanti et al. 2022, section 4.3), PyTorch eager (``nn.Embedding`` keeps the
int64 token ids, nn.RMSNorm its fp32 copies, the untied head its input, ``F.cross_entropy``
(log_softmax + nll_loss) the log-probabilities, the targets and a 0-d ``total_weight``) and
transformers 5.23 (a ``*ForCausalLM`` with labels: RoPE cos / sin, the upcast fp32 loss).
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.operations.norm import (cpu_layer_norm, eager_rms_norm, gemma_rms_norm,
                                                  hf_rms_norm)
from derive.architectures.operations.rows import (ACTIVATION, HEAD, INDEX_DTYPE, MASK,
                                                  SINGLE_SEQUENCE, STATISTICS, row, when)
from derive.symbols import L, L_w, V, b, h, k, k_rope, s
from derive.tensors import Ledger, Tensor


def embedding_saved() -> Ledger:
    """The input embedding's token ids and dropout mask (Korthikanti et al. 2022, section 4.3)."""
    return Ledger([
        row("token ids", (s, b), INDEX_DTYPE, "replicated", "token_ids", "embedding",
            note="kept by the embedding lookup (Megatron counts 8sb; the paper does not)"),
        row("embedding dropout mask", (s, b, h), MASK, "replicated", "dropout", "embedding",
            note="kept by dropout after the embedding (GPT; Llama has none)"),
    ])


def output_saved() -> Ledger:
    """Final norm and head inputs, logits, targets (Korthikanti section 4.3; the article, 4.3)."""
    return Ledger([
        row("final norm input", (s, b, h), ACTIVATION, "replicated", "output",
            note="kept by the final norm"),
        row("output projection input", (s, b, h), ACTIVATION, "replicated", "output",
            note="final norm output, kept by the output head"),
        row("logits", (s, b, V), ACTIVATION, "tp_shardable", "logits", "transient", "output",
            note="the head's output; alive while the fp32 copy is made (PyTorch eager "
                 "cross_entropy keeps only the fp32 copy for backward)"),
        row("logits (fp32, for the loss)", (s, b, V), STATISTICS, "tp_shardable", "logits",
            "output", note="fp32 log-softmax kept by cross entropy"),
        row("targets", (s, b), "int64", "replicated", "token_ids", "output",
            note="kept by the loss"),
    ])


def final_norm_saved() -> Ledger:
    """The final RMSNorm: the same eager nn.RMSNorm rows as a layer's (torch/nn/functional.py, rms_norm)."""
    return Ledger(eager_rms_norm("norm"))


def llama_edges_saved() -> Ledger:
    """PyTorch eager: embedding ids, final norm, head input, cross-entropy's log-probabilities, targets and total weight."""
    return (
        Ledger([row("embedding: token ids", (b, s), INDEX_DTYPE, "embedding", "replicated")])
        + final_norm_saved()
        + Ledger([
            row("output: head input", (b, s, h), ACTIVATION, "output", "replicated"),
            row("loss: log-probabilities", (b, s, V), ACTIVATION, "loss", "tp_shardable",
                note="log_softmax result, kept by log_softmax and nll_loss"),
            row("loss: targets", (b, s), INDEX_DTYPE, "loss", "replicated"),
            row("loss: total weight", (), ACTIVATION, "loss", "replicated",
                note="0-d tensor nll_loss keeps for the mean reduction"),
        ])
    )


def hf_edges_saved(head_dim: sp.Expr = HEAD, normalised: str = ACTIVATION, rope: str = ACTIVATION,
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
    where it is no RMSNorm (GPT-NeoX's LayerNorm, :func:`neox_edges_saved`).
    """
    return (
        Ledger([row("embedding: token ids", (b, s), INDEX_DTYPE, "embedding", "replicated"),
                row("rope: cos", (s, head_dim), rope, "embedding", "rope", "replicated",
                    note="LlamaRotaryEmbedding output, kept by q * cos and k * cos in every layer"),
                row("rope: sin", (s, head_dim), rope, "embedding", "rope", "replicated",
                    note="kept by rotate_half(q) * sin and rotate_half(k) * sin in every layer")])
        + Ledger(final_norm if final_norm is not None
                 else hf_rms_norm("norm", (b, s, h), normalised=normalised))
        + Ledger([
            row("output: head input", (b, s, h), ACTIVATION, "output", "replicated"),
            row("loss: log-probabilities (fp32)", (b, s, V), STATISTICS, "loss",
                "tp_shardable", note="log_softmax of logits.float(), kept by log_softmax "
                "and nll_loss"),
            *when(row("loss: targets", (b, s), INDEX_DTYPE, "loss", "replicated",
                      note="labels shifted left and padded with -100, copied by .contiguous()"),
                  sp.Not(SINGLE_SEQUENCE)),
            *when(row("loss: padded labels (b = 1)", (s + 1,), INDEX_DTYPE, "loss",
                      "replicated", note="at b = 1 the shifted view is contiguous: nll_loss "
                      "keeps the s + 1 padded labels"), SINGLE_SEQUENCE),
            row("loss: total weight (fp32)", (), STATISTICS, "loss", "replicated",
                note="0-d tensor nll_loss keeps for the mean reduction"),
        ])
    )


def neox_edges_saved(rotary: bool) -> Ledger:
    """GPT-NeoX's edges: :func:`hf_edges_saved` with the final LayerNorm; cos / sin k_rope wide when ``rotary``."""
    final = cpu_layer_norm("final_layer_norm", row("final_layer_norm input", (b, s, h), ACTIVATION,
                                                   "replicated", "output"))
    return hf_edges_saved(k_rope if rotary else k, final_norm=final)


def gpt2_edges_saved() -> Ledger:
    """GPT-2's edges: :func:`hf_edges_saved` without RoPE, with wpe's position ids and the final LayerNorm ln_f."""
    final = cpu_layer_norm("ln_f", row("ln_f input", (b, s, h), ACTIVATION, "replicated", "output"))
    edges = [kept for kept in hf_edges_saved(k, final_norm=final) if "rope" not in kept.tags]
    positions = row("embedding: position ids", (s,), INDEX_DTYPE, "embedding", "replicated",
                    note="arange(s)[None], kept by wpe")
    return Ledger([*edges, positions])


def gemma_edges_saved(rope_per_layer_type: bool, logit_softcap: bool) -> Ledger:
    """Gemma's edges: :func:`hf_edges_saved` with Gemma's final norm, Gemma 3's second RoPE pair and the capped logits' tanh.

    ``rope_per_layer_type``: Gemma3RotaryEmbedding runs once per layer type present, so a
    second cos / sin pair exists where 0 < L_w < L.
    """
    both = sp.And(L_w > 0, L_w < L) if rope_per_layer_type else sp.false
    extra = [
        *when(row("rope (second layer type): cos", (s, k), ACTIVATION, "embedding", "rope",
                  "replicated", note="the other layer type's cos, kept by its layers"), both),
        *when(row("rope (second layer type): sin", (s, k), ACTIVATION, "embedding", "rope",
                  "replicated", note="the other layer type's sin, kept by its layers"), both),
        *when(row("output: logits tanh (softcap)", (b, s, V), ACTIVATION, "output", "logits",
                  "tp_shardable", note="tanh(logits / final_logit_softcapping), kept by tanh"),
              sp.true if logit_softcap else sp.false),
    ]
    return hf_edges_saved(k, final_norm=gemma_rms_norm("norm", (b, s, h))) + Ledger(extra)


def hf_moe_embedding_saved(rope: sp.Expr = k) -> list[Tensor]:
    """An MoE model in transformers: token ids and the RoPE cos/sin tables ``rope`` wide (shared by every layer)."""
    return [
        row("embedding: token ids", (b, s), INDEX_DTYPE, "embedding", "replicated"),
        row("RoPE cos", (s, rope), ACTIVATION, "embedding", "replicated",
            note="kept once (one storage) by every layer's rotary multiply"),
        row("RoPE sin", (s, rope), ACTIVATION, "embedding", "replicated"),
    ]


def hf_moe_loss_saved(single_sequence: bool = False) -> list[Tensor]:
    """An MoE model in transformers: the head input, the fp32 log-probabilities, the targets and the total weight.

    ``single_sequence`` (b = 1): the shifted targets are a contiguous slice of the padded
    labels, so ``.contiguous()`` copies nothing and the loss keeps their s + 1 storage
    (transformers/loss/loss_utils.py ForCausalLMLoss).
    """
    targets = (s + 1,) if single_sequence else (b * s,)
    return [
        row("output: head input", (b * s, h), ACTIVATION, "output", "replicated"),
        row("loss: log-probabilities (fp32)", (b * s, V), STATISTICS, "output", "logits",
            "tp_shardable", note="logits.float() then log_softmax, kept by log_softmax and nll_loss"),
        row("loss: targets", targets, INDEX_DTYPE, "output", "replicated"),
        row("loss: total weight", (), STATISTICS, "output", "replicated"),
    ]
