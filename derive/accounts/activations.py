"""Activation bytes: sums over the saved-for-backward tables of ``derive.architectures.saved``.

Tensor parallelism divides the ``tp_shardable`` rows by t; sequence
parallelism divides the ``replicated`` rows too (Korthikanti et al. 2022,
sections 4.2.1-4.2.2). Selective recompute drops the ``recomputed_selective``
rows (section 5); full recompute keeps only the layer input. Pipeline terms
follow the 1F1B schedules of megatron/core/pipeline_parallel/schedules.py.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from derive.accounts.state import state_bytes
from derive.architectures.decoder import FAMILIES, Layout, PRE_NORMS
from derive.architectures.operations.edges import embedding_saved, output_saved
from derive.architectures.operations.norm import layer_input
from derive.architectures.operations.rows import HEAD
from derive.architectures.saved import LAYER_PROFILES, layer_saved
from derive.architectures.saved_fp8 import quantised_saved
from derive.architectures.tables import edge_parameters, layer_parameters
from derive.expansion import expand
from derive.inputs import choose, flag, positive_size
from derive.model import Model
from derive.symbols import FFN_4H, L, N, k, p
from derive.tensors import Ledger

#: Recompute policies of the activation accounts: what a layer keeps (Korthikanti et al. 2022, section 5).
RECOMPUTE_POLICIES = ("none", "selective", "full")


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


def recomputed(table: Ledger, recompute: str) -> Ledger:
    """The rows of one layer's ``table`` kept under ``recompute``: selective drops the
    ``recomputed_selective`` rows, full keeps only the layer input (Korthikanti et al. 2022, section 5)."""
    choose("recompute", recompute, RECOMPUTE_POLICIES)
    if recompute == "full":
        return Ledger([layer_input()])
    return table.without("recomputed_selective") if recompute == "selective" else table


def layer_activations(profile: str = "gpt", attention_kernel: str = "materialised",
                      tensor_parallel: sp.Expr = 1, sequence_parallel: bool = False,
                      recompute: str = "none", norm_statistics: bool = False, *,
                      softmax_statistics: bool = True, head_dim: sp.Expr = HEAD,
                      qk_norm: bool = False, recipe: str | None = None) -> Ledger:
    """The rows of ``layer_saved(profile)`` (gpt_layer_saved / llama_layer_saved) one layer keeps on one TP rank.

    ``head_dim`` and ``qk_norm`` (Llama profiles) describe a model read from its config;
    ``recipe`` (an FP8 recipe of ``derive.recipes``) re-types the linear inputs (saved_fp8).
    """
    choose("recompute", recompute, RECOMPUTE_POLICIES)
    table = layer_saved(profile, attention_kernel, head_dim=head_dim, qk_norm=qk_norm)
    if recipe is not None:
        table = quantised_saved(table, recipe)
    table = recomputed(table, recompute)
    table = keeping(table, norm_statistics=norm_statistics, softmax_statistics=softmax_statistics)
    return sharded(table, tensor_parallel, sequence_parallel)


@lru_cache(maxsize=4096, typed=True)  # an immutable expression, built once per process
def layer_activation_bytes(profile: str = "gpt", attention_kernel: str = "materialised",
                           tensor_parallel: sp.Expr = 1, sequence_parallel: bool = False,
                           recompute: str = "none", norm_statistics: bool = False, *,
                           softmax_statistics: bool = True, head_dim: sp.Expr = HEAD,
                           qk_norm: bool = False, recipe: str | None = None) -> sp.Expr:
    """Sum of :func:`layer_activations`' rows: the 34 of sbh(34 + 5as/h) is gpt_layer_saved's rows at f = 4h (Korthikanti, Table 2)."""
    return layer_activations(profile, attention_kernel, tensor_parallel, sequence_parallel,
                             recompute, norm_statistics, softmax_statistics=softmax_statistics,
                             head_dim=head_dim, qk_norm=qk_norm, recipe=recipe).bytes()


def model_layer_options(model: Model, profile: str) -> dict[str, object]:
    """The head width and q/k norms a Llama profile needs for ``model`` (read from its config); {} for the GPT table.

    MoE and MLA layers have no activation table yet: a ValueError, not a wrong number.
    """
    model.require_dense("model")
    choose("profile", profile, LAYER_PROFILES)
    if not profile.startswith("llama-"):
        return {}
    options: dict[str, object] = {} if model.head_dim is None else {"head_dim": k}
    layout = model.layout
    if profile.startswith("llama-hf") and layout is not None:
        if not llama_layer_form(layout):
            raise ValueError(f"profile: {profile} is transformers' Llama / Mistral / Qwen layer "
                             f"(validated exactly); {model.name}'s {model.model_type} layer keeps "
                             "other tensors")
        options["qk_norm"] = layout.qk_norm == "head"
    return options


def llama_layer_form(layout: Layout) -> bool:
    """Whether ``layout``'s layer is the one the llama-hf profiles describe: two pre-RMSNorms, separate q/k/v, an unfused gated MLP."""
    return (layout.norm == "rms" and layout.layer_norms == PRE_NORMS and not layout.qkv_fused
            and layout.gated and not layout.gate_up_fused and layout.qk_norm in ("none", "head"))


@lru_cache(maxsize=4096, typed=True)  # an immutable expression, built once per process
def logits_bytes(tensor_parallel: sp.Expr = 1) -> sp.Expr:
    """The ``logits`` rows of output_saved(): bf16 [s, b, V] plus the fp32 copy for the loss (the article, section 4.3)."""
    return sharded(output_saved().where("logits"), tensor_parallel).bytes()


@lru_cache(maxsize=4096, typed=True)  # an immutable expression, built once per process
def model_activation_bytes(profile: str = "gpt", attention_kernel: str = "materialised",
                           tensor_parallel: sp.Expr = 1, sequence_parallel: bool = False,
                           recompute: str = "none", norm_statistics: bool = False,
                           logits: bool = True, *, softmax_statistics: bool = True,
                           head_dim: sp.Expr = HEAD, qk_norm: bool = False,
                           recipe: str | None = None) -> sp.Expr:
    """L layers of one micro-batch, plus the logits (the article, section 4.3); the head stays 16-bit under ``recipe``."""
    flag("logits", logits)
    layers = L * layer_activation_bytes(profile, attention_kernel, tensor_parallel,
                                        sequence_parallel, recompute, norm_statistics,
                                        softmax_statistics=softmax_statistics,
                                        head_dim=head_dim, qk_norm=qk_norm, recipe=recipe)
    return expand(layers + (logits_bytes(tensor_parallel) if logits else 0))


@lru_cache(maxsize=4096, typed=True)  # an immutable expression, built once per process
def article_layer_bytes(attention_kernel: str = "fused") -> sp.Expr:
    """The article's per-layer convention: GPT table, f = 4h, statistics ignored (section 4)."""
    return layer_activation_bytes("gpt", attention_kernel, softmax_statistics=False).subs(FFN_4H)


@lru_cache(maxsize=4096, typed=True)  # an immutable expression, built once per process
def article_model_bytes(attention_kernel: str = "fused", logits: bool = True) -> sp.Expr:
    """The article's all layers (+ logits) convention (section 4.3, activation_bytes)."""
    return model_activation_bytes("gpt", attention_kernel, softmax_statistics=False,
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


def embedding_edge(profile: str = "gpt", tensor_parallel: sp.Expr = 1,
                   sequence_parallel: bool = False, token_ids: bool = True) -> Ledger:
    """The rows of embedding_saved() on one TP rank (Korthikanti section 4.3; Megatron's token ids)."""
    choose("profile", profile, LAYER_PROFILES)
    rows = keeping(embedding_saved(), dropout=profile == "gpt", token_ids=token_ids)
    return sharded(rows, tensor_parallel, sequence_parallel)


def output_edge(tensor_parallel: sp.Expr = 1, sequence_parallel: bool = False,
                transient_logits: bool = False, token_ids: bool = False) -> Ledger:
    """The rows of output_saved() on one TP rank: norm/head inputs, fp32 logits (Korthikanti 4.3)."""
    rows = keeping(output_saved(), transient=transient_logits, token_ids=token_ids)
    return sharded(rows, tensor_parallel, sequence_parallel)


@lru_cache(maxsize=1024)  # an immutable sum, built once per set of arguments (the planners ask again per model)
def first_stage_activation_bytes(profile: str = "gpt", attention_kernel: str = "materialised",
                                 tensor_parallel: sp.Expr = 1, sequence_parallel: bool = False,
                                 recompute: str = "none", norm_statistics: bool = False, *,
                                 softmax_statistics: bool = True, pipeline: sp.Expr = p,
                                 virtual: sp.Expr | None = None, edges: bool = True,
                                 token_ids: bool = True,
                                 micro_batches: sp.Expr | None = None,
                                 output_layer: bool = True, recipe: str | None = None) -> sp.Expr:
    """First pipeline stage: chunks in flight x L/(p v) layers + embedding (+ output at p = 1).

    The output layer's rows count when the first stage is also the last (p = 1):
    at a symbolic p they enter as Piecewise((output, Eq(p, 1)), (0, True)), so
    substituting p = 1 later gives the same bytes as ``pipeline=1``.
    ``output_layer=False`` leaves them out at every p (Megatron adds its own). ``recipe``: the
    layers' linear inputs in FP8 (saved_fp8); the embedding and output rows stay 16-bit.
    """
    in_flight = in_flight_micro_batches(pipeline, virtual, micro_batches)
    pipeline = positive_size("pipeline", pipeline)
    chunks = sp.Integer(1) if virtual is None else positive_size("virtual", virtual)
    per_layer = layer_activation_bytes(profile, attention_kernel, tensor_parallel, sequence_parallel,
                                       recompute, norm_statistics,
                                       softmax_statistics=softmax_statistics, recipe=recipe)
    total = in_flight * L / (pipeline * chunks) * per_layer
    if edges:
        embedding = embedding_edge(profile, tensor_parallel, sequence_parallel, token_ids)
        total += in_flight / chunks * embedding.bytes()
        if flag("output_layer", output_layer):
            output = output_edge(tensor_parallel, sequence_parallel).bytes()
            total = expand(total) + sp.Piecewise((output, sp.Eq(pipeline, 1)), (0, True))
    return expand(total)


#: Activation profiles (the report's ``--profile``): name -> what it assumes.
PROFILES: dict[str, str] = {
    "article": "GPT layer of Korthikanti et al. 2022 at f = 4h, statistics ignored (the article's 34)",
    "gpt": "GPT layer of Korthikanti et al. 2022 at the model's own f",
    "llama-eager": "Llama layer as PyTorch eager keeps it",
    "llama-fused": "Llama layer with fused norm, flash attention, fused SwiGLU",
    "llama-hf-sdpa": "Llama / Mistral / Qwen 3 layer as transformers 5.23 runs it (sdpa attention)",
    "llama-hf-eager": "Llama / Mistral / Qwen 3 layer as transformers 5.23 runs it (eager attention)",
}

#: Profiles whose attention can keep or drop the score matrices; the Llama profiles are fixed.
ATTENTION_PROFILES = ("article", "gpt")


def profile_bytes(profile: str = "article", attention_kernel: str = "fused",
                  model: Model | None = None, recipe: str | None = None) -> tuple[sp.Expr, sp.Expr]:
    """(one layer, all layers + logits) bytes of one micro-batch under a report profile (at ``model``'s head width).

    ``recipe`` keeps the linear inputs in FP8 (the gpt and llama-fused tables: saved_fp8).
    """
    choose("profile", profile, PROFILES)
    if model is not None:
        model.require_dense("model")
    if profile == "article":
        if recipe is not None:
            raise ValueError("profile: the article's convention has no FP8 form; use gpt or llama-fused")
        return article_layer_bytes(attention_kernel), article_model_bytes(attention_kernel)
    options: dict[str, object] = {} if model is None else model_layer_options(model, profile)
    options["recipe"] = recipe
    return (layer_activation_bytes(profile, attention_kernel, **options),
            model_activation_bytes(profile, attention_kernel, **options))


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


def step_timeline(profile: str = "gpt", attention_kernel: str = "fused",
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
    activations = model_activation_bytes(profile, attention_kernel, tensor_parallel,
                                         sequence_parallel, recompute, norm_statistics, logits,
                                         softmax_statistics=softmax_statistics)
    resident = held.params + held.optimizer
    forward_grads = held.grads if accumulated_gradients else 0
    return StepTimeline(
        end_of_forward=expand(resident + forward_grads + activations),
        end_of_backward=expand(resident + held.grads),
        simple_sum=expand(held.total + activations),
    )


@dataclass(frozen=True)
class Moment:
    """The bytes of each band after one event of the step."""

    label: str
    bands: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.bands.values())


def step_moments(model: Model, micro_batch: int = 1) -> list[Moment]:
    """Every event of one step of ``model`` (bf16 + Adam, the article's activation convention, b = 1).

    Forward: one layer's activations per layer, then the logits. Backward: the
    output head (logits freed, its gradients made), then each layer (its
    activations freed, its gradients made), then the embedding. Then the
    optimizer step zeroes the gradients. The end of forward and the end of
    backward are checked against :func:`step_timeline`.
    """
    held = state_bytes("bf16", "adam", params=N)
    per_parameter = expand(held.grads / N)
    layer, edges = layer_parameters(FAMILIES[model.family]), edge_parameters(FAMILIES[model.family])

    def at(expr: sp.Expr) -> int:
        return int(model.at(expr, b=micro_batch))

    resident = {"optimizer": at(held.optimizer), "params": at(held.params)}
    per_layer, logits = at(article_layer_bytes("fused")), at(logits_bytes())
    layer_grads = at(per_parameter * layer.numel())
    head_grads = at(per_parameter * edges.without("embedding").numel())
    embedding_grads = at(per_parameter * edges.where("embedding").numel())
    layers = int(model.at(L))

    def moment(label: str, grads: int, activations: int) -> Moment:
        return Moment(label, {**resident, "grads": grads, "activations": activations})

    moments = [moment("start of step", 0, 0)]
    moments += [moment(f"forward, layer {i}", 0, i * per_layer) for i in range(1, layers + 1)]
    moments.append(moment("end of forward (logits)", 0, layers * per_layer + logits))
    moments.append(moment("backward, output head", head_grads, layers * per_layer))
    moments += [moment(f"backward, layer {layers + 1 - j}", head_grads + j * layer_grads,
                       (layers - j) * per_layer) for j in range(1, layers + 1)]
    moments.append(moment("end of backward (embedding)",
                          head_grads + layers * layer_grads + embedding_grads, 0))
    moments.append(moment("after the optimizer step", 0, 0))
    line = step_timeline("gpt", "fused", softmax_statistics=False)
    forward, backward = moments[layers + 1], moments[-2]
    ends = (at(line.end_of_forward.subs(FFN_4H)), at(line.end_of_backward))
    if (forward.total, backward.total) != ends:
        raise ValueError("timeline: the events do not add up to step_timeline's two moments")
    return moments


__all__ = [
    "ATTENTION_PROFILES", "LAYER_PROFILES",
    "PROFILES", "RECOMPUTE_POLICIES", "Moment", "StepTimeline", "profile_bytes",
    "article_layer_bytes", "article_model_bytes", "embedding_edge", "first_stage_activation_bytes",
    "in_flight_micro_batches", "layer_activation_bytes", "layer_activations", "recomputed",
    "logits_bytes", "model_activation_bytes", "output_edge", "sharded", "step_moments", "step_timeline",
]
