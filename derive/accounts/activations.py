"""Activation bytes: sums over the saved-for-backward tables of ``derive.architectures.saved``.

Tensor parallelism divides the ``tp_shardable`` rows by t; sequence
parallelism divides the ``replicated`` rows too (Korthikanti et al. 2022,
sections 4.2.1-4.2.2). Selective recompute drops the ``recomputed_selective``
rows (section 5); full recompute keeps only the layer input. Pipeline terms
follow the 1F1B schedules of megatron/core/pipeline_parallel/schedules.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from derive.accounts.state import state_bytes
from derive.architectures.saved import (
    ARCHITECTURES,
    ATTENTIONS,
    embedding_saved,
    layer_input,
    layer_saved,
    output_saved,
)
from derive.inputs import choose, flag, positive_size
from derive.symbols import FFN_4H, L, N, p
from derive.tensors import Ledger

RECOMPUTE = ("none", "selective", "full")

#: megatron/training/theoretical_memory_usage.py compute_activation_memory_without_sp:
#: overhead_factor = 1.05 ("buffer for optimizer and miscellaneous temporaries").
MEGATRON_OVERHEAD = sp.Rational(21, 20)

#: The article's convention (section 4): the GPT table at f = 4h, per-row statistics ignored.


def sharded(ledger: Ledger, tensor_parallel: sp.Expr = 1,
            sequence_parallel: bool = False) -> Ledger:
    """One TP rank's share: ``tp_shardable`` rows over t, ``replicated`` rows too under SP."""
    tensor_parallel = positive_size("tensor_parallel", tensor_parallel)
    flag("sequence_parallel", sequence_parallel)

    def share(tensor):
        if tensor.has("tp_shardable") or (sequence_parallel and tensor.has("replicated")):
            return tensor.divided(tensor_parallel)
        return tensor
    return ledger.map(share)


def keeping(ledger: Ledger, **kept: bool) -> Ledger:
    """``ledger`` without the rows of every tag whose flag is False (``keeping(rows, token_ids=False)``)."""
    return ledger.without(*(tag for tag, keep in kept.items() if not flag(tag, keep)))


def layer_activations(architecture: str = "gpt", attention: str = "materialised",
                      tensor_parallel: sp.Expr = 1, sequence_parallel: bool = False,
                      recompute: str = "none", norm_statistics: bool = False, *,
                      softmax_statistics: bool = True) -> Ledger:
    """The rows one layer keeps on one TP rank under a parallel and recompute policy."""
    choose("recompute", recompute, RECOMPUTE)
    table = layer_saved(architecture, attention)
    if recompute == "full":
        table = Ledger([layer_input()])
    elif recompute == "selective":
        table = table.without("recomputed_selective")
    table = keeping(table, norm_statistics=norm_statistics, softmax_statistics=softmax_statistics)
    return sharded(table, tensor_parallel, sequence_parallel)


def layer_activation_bytes(architecture: str = "gpt", attention: str = "materialised",
                           tensor_parallel: sp.Expr = 1, sequence_parallel: bool = False,
                           recompute: str = "none", norm_statistics: bool = False, *,
                           softmax_statistics: bool = True) -> sp.Expr:
    """Bytes one layer keeps for backward per micro-batch and TP rank (Korthikanti, Table 2)."""
    return layer_activations(architecture, attention, tensor_parallel, sequence_parallel,
                             recompute, norm_statistics,
                             softmax_statistics=softmax_statistics).bytes()


def logits_bytes(tensor_parallel: sp.Expr = 1) -> sp.Expr:
    """bf16 logits [s, b, V] plus the fp32 copy for the loss (the article, section 4.3)."""
    return sharded(output_saved().where("logits"), tensor_parallel).bytes()


def model_activation_bytes(architecture: str = "gpt", attention: str = "materialised",
                           tensor_parallel: sp.Expr = 1, sequence_parallel: bool = False,
                           recompute: str = "none", norm_statistics: bool = False,
                           logits: bool = True, *, softmax_statistics: bool = True) -> sp.Expr:
    """L layers of one micro-batch, plus the logits (the article, section 4.3)."""
    flag("logits", logits)
    layers = L * layer_activation_bytes(architecture, attention, tensor_parallel,
                                        sequence_parallel, recompute, norm_statistics,
                                        softmax_statistics=softmax_statistics)
    return sp.expand(layers + (logits_bytes(tensor_parallel) if logits else 0))


def article_layer_bytes(attention: str = "fused") -> sp.Expr:
    """The article's per-layer convention: GPT table, f = 4h, statistics ignored (section 4)."""
    return layer_activation_bytes("gpt", attention, softmax_statistics=False).subs(FFN_4H)


def article_model_bytes(attention: str = "fused", logits: bool = True) -> sp.Expr:
    """The article's all layers (+ logits) convention (section 4.3, activation_bytes)."""
    return model_activation_bytes("gpt", attention, softmax_statistics=False,
                                  logits=logits).subs(FFN_4H)


def in_flight_micro_batches(pipeline: sp.Expr = p, virtual: sp.Expr | None = None,
                            micro_batches: sp.Expr | None = None) -> sp.Expr:
    """Chunks the first stage holds: warm-up + 1, at most the step's m v chunks (schedules.py get_num_warmup_microbatches)."""
    pipeline = positive_size("pipeline", pipeline)
    if virtual is not None:
        virtual = positive_size("virtual", virtual)
    if micro_batches is not None:
        micro_batches = positive_size("micro_batches", micro_batches)
    if virtual is None:
        warmup = pipeline - 1
    else:
        warmup = (pipeline - 1) * 2 + (virtual - 1) * pipeline
    if micro_batches is None:
        return warmup + 1
    return sp.Min(warmup + 1, sp.sympify(micro_batches) * (1 if virtual is None else virtual))


def interleaved_factor(pipeline: sp.Expr = p, virtual: sp.Expr | None = None) -> sp.Expr:
    """First-stage activations relative to 1F1B: chunks in flight x L/(p v) layers over L."""
    chunks = sp.Integer(1) if virtual is None else sp.sympify(virtual)
    return sp.cancel(in_flight_micro_batches(pipeline, virtual) / (pipeline * chunks)
                     / (in_flight_micro_batches(pipeline) / pipeline))


def embedding_edge(architecture: str = "gpt", tensor_parallel: sp.Expr = 1,
                   sequence_parallel: bool = False, token_ids: bool = True) -> Ledger:
    """The input embedding's rows on one TP rank (Korthikanti section 4.3; Megatron's token ids)."""
    choose("architecture", architecture, ARCHITECTURES)
    rows = keeping(embedding_saved(), dropout=architecture == "gpt", token_ids=token_ids)
    return sharded(rows, tensor_parallel, sequence_parallel)


def output_edge(tensor_parallel: sp.Expr = 1, sequence_parallel: bool = False,
                transient_logits: bool = False, token_ids: bool = False) -> Ledger:
    """The output layer's rows on one TP rank: norm/head inputs, fp32 logits (Korthikanti 4.3)."""
    rows = keeping(output_saved(), transient=transient_logits, token_ids=token_ids)
    return sharded(rows, tensor_parallel, sequence_parallel)


def first_stage_activation_bytes(architecture: str = "gpt", attention: str = "materialised",
                                 tensor_parallel: sp.Expr = 1, sequence_parallel: bool = False,
                                 recompute: str = "none", norm_statistics: bool = False, *,
                                 softmax_statistics: bool = True, pipeline: sp.Expr = p,
                                 virtual: sp.Expr | None = None, edges: bool = True,
                                 token_ids: bool = True,
                                 micro_batches: sp.Expr | None = None,
                                 output_layer: bool = True) -> sp.Expr:
    """First pipeline stage: chunks in flight x L/(p v) layers + embedding (+ output at p = 1).

    The output layer's rows count when the first stage is also the last (p = 1):
    at a symbolic p they enter as Piecewise((output, Eq(p, 1)), (0, True)), so
    substituting p = 1 later gives the same bytes as ``pipeline=1``.
    ``output_layer=False`` leaves them out at every p (Megatron adds its own).
    """
    in_flight = in_flight_micro_batches(pipeline, virtual, micro_batches)
    pipeline = positive_size("pipeline", pipeline)
    chunks = sp.Integer(1) if virtual is None else positive_size("virtual", virtual)
    per_layer = layer_activation_bytes(architecture, attention, tensor_parallel, sequence_parallel,
                                       recompute, norm_statistics,
                                       softmax_statistics=softmax_statistics)
    total = in_flight * L / (pipeline * chunks) * per_layer
    if edges:
        embedding = embedding_edge(architecture, tensor_parallel, sequence_parallel, token_ids)
        total += in_flight / chunks * embedding.bytes()
        if flag("output_layer", output_layer):
            output = output_edge(tensor_parallel, sequence_parallel).bytes()
            total = sp.expand(total) + sp.Piecewise((output, sp.Eq(pipeline, 1)), (0, True))
    return sp.expand(total)


#: Activation profiles (the report's ``--profile``): name -> what it assumes.
PROFILES: dict[str, str] = {
    "article": "GPT layer of Korthikanti et al. 2022 at f = 4h, statistics ignored (the article's 34)",
    "gpt": "GPT layer of Korthikanti et al. 2022 at the model's own f",
    "llama-eager": "Llama layer as PyTorch eager keeps it",
    "llama-fused": "Llama layer with fused norm, flash attention, fused SwiGLU",
}

#: Profiles whose attention can keep or drop the score matrices; the Llama profiles are fixed.
ATTENTION_PROFILES = ("article", "gpt")


def profile_bytes(profile: str = "article", attention: str = "fused") -> tuple[sp.Expr, sp.Expr]:
    """(one layer, all layers + logits) bytes of one micro-batch under a report profile."""
    choose("profile", profile, PROFILES)
    if profile == "article":
        return article_layer_bytes(attention), article_model_bytes(attention)
    return (layer_activation_bytes(profile, attention),
            model_activation_bytes(profile, attention))


@dataclass(frozen=True)
class StepTimeline:
    """Bytes at the two moments of a step that can be the peak (the article, section 2.2)."""

    end_of_forward: sp.Expr
    end_of_backward: sp.Expr
    simple_sum: sp.Expr

    @property
    def peak(self) -> sp.Expr:
        """max(end of forward, end of backward): the exact peak of the four states."""
        return sp.Max(self.end_of_forward, self.end_of_backward)


def step_timeline(architecture: str = "gpt", attention: str = "fused",
                  precision: str = "bf16", optimizer: str = "adam", zero_stage: int = 0,
                  tensor_parallel: sp.Expr = 1, sequence_parallel: bool = False,
                  recompute: str = "none", norm_statistics: bool = False, *,
                  softmax_statistics: bool = True, logits: bool = True,
                  accumulated_gradients: bool = False, params: sp.Expr = N) -> StepTimeline:
    """Activations peak at the end of forward, gradients at the end of backward (article 2.2).

    With ``accumulated_gradients`` (micro-batch 2 onwards of m > 1) the gradient
    buffer is already full at the end of forward.
    """
    flag("accumulated_gradients", accumulated_gradients)
    held = state_bytes(precision, optimizer, zero_stage, params=params)
    activations = model_activation_bytes(architecture, attention, tensor_parallel,
                                         sequence_parallel, recompute, norm_statistics, logits,
                                         softmax_statistics=softmax_statistics)
    resident = held.params + held.optimizer
    forward_grads = held.grads if accumulated_gradients else 0
    return StepTimeline(
        end_of_forward=sp.expand(resident + forward_grads + activations),
        end_of_backward=sp.expand(resident + held.grads),
        simple_sum=sp.expand(held.total + activations),
    )


__all__ = [
    "ARCHITECTURES", "ATTENTIONS", "ATTENTION_PROFILES", "MEGATRON_OVERHEAD", "PROFILES",
    "RECOMPUTE", "StepTimeline", "profile_bytes",
    "article_layer_bytes", "article_model_bytes", "embedding_edge", "first_stage_activation_bytes",
    "in_flight_micro_batches", "interleaved_factor", "layer_activation_bytes", "layer_activations",
    "logits_bytes", "model_activation_bytes", "output_edge", "sharded", "step_timeline",
]
