"""Where Megatron-LM's estimators depart from the derived ledger, each as an exact difference.

The claim side of every entry is Megatron's convention (``derive.megatron``,
which reproduces megatron/training/theoretical_memory_usage.py record for
record); the derived side is derive's own table with one convention switched
back. Each is a departure (``holds=False``): the difference is what Megatron's
number leaves out (+) or adds (-). :data:`DEPARTURES` sizes each one at the
Llama 3 presets (weights, then activations). The identities at the end prove
that the Megatron-convention sums are Megatron's closed forms.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sympy as sp

from derive.accounts.activations import (
    layer_activation_bytes,
    logits_bytes,
    output_edge,
    sharded,
)
from derive.accounts.experts import model_parallel_share
from derive.architectures.decoder import GPT, LLAMA, moe_layout
from derive.architectures.tables import edge_parameters, layer_parameters
from derive.architectures.saved import llama_layer_saved
from derive.conventions.megatron import (
    distributed_optimizer_bytes_per_parameter,
    megatron_moe_flops,
    megatron_num_floating_point_operations,
)
from derive.evaluation import substitute
from derive.identities import Later, Sided, identity
from derive.identities.experts import FLOPS as EXPERT_FLOPS
from derive.identities.experts import GQA
from derive.identities.experts import TOPIC as EXPERTS
from derive.megatron.activations import MEGATRON_LAYER, activation_bytes, output_rows
from derive.megatron.flops import BATCH_TOKENS, SQUARED_LENGTHS, batch_flops, flops_per_token
from derive.megatron.tables import Reading, edges, layer, moe_reading, padded_vocab
from derive.megatron.weights import first_stage
from derive.symbols import D, FFN_4H, L, V, a, b, d, f, g, h, k, m, p, s, t, v
from derive.tensors import Ledger

TOPIC = "Megatron departures (weights)"
ACTIVATION_TOPIC = "Megatron departures (activations)"
SOURCE = "megatron/training/theoretical_memory_usage.py compute_weight_and_optimizer_memory (core_v0.18.0)"
MEMORY = "megatron/training/theoretical_memory_usage.py (core_v0.18.0)"
GPT_SHAPE = {k: h / a, f: 4 * h}


def _first_stage(layer: Ledger, embedding: Ledger) -> Ledger:
    """The derived first of p > 1 stages on one TP rank: L/p layers and the input embedding."""
    return model_parallel_share(layer.times(L / p) + embedding, duplicated_latents=False)


def megatron_linear_biases() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) parameters of one GPT layer: Megatron counts no linear bias (MHA: g = a)."""
    counted = layer(Reading(swiglu=False, normalization="LayerNorm")).numel().subs(g, a)
    return counted, layer_parameters(GPT, head_dim=k).numel()


def megatron_positions() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) tied GPT edges: Megatron counts no learned position embedding."""
    return edges(Reading(untied=False, normalization="LayerNorm")).numel(), edge_parameters(GPT).numel()


def megatron_padded_vocabulary() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) untied Llama edges: Megatron's V is padded to a multiple of 128 t."""
    counted = edges(Reading()).numel()
    return counted.subs(V, padded_vocab(V)), edge_parameters(LLAMA).numel()


def megatron_final_norm() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) first of p > 1 Llama stages: Megatron adds 1/p of the final norm."""
    counted = first_stage(Reading(), single_stage=False).numel()
    derived = _first_stage(layer(Reading()), edges(Reading()).where("embedding")).numel()
    return counted, derived


def megatron_fp16_bytes() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) bytes/parameter of fp16 training: the estimator only knows bf16's 18."""
    counted = distributed_optimizer_bytes_per_parameter("bf16", distributed=False)
    return counted, distributed_optimizer_bytes_per_parameter("fp16", distributed=False)


def megatron_fp16_distributed_bytes() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) bytes/parameter of fp16 with the distributed optimizer."""
    counted = distributed_optimizer_bytes_per_parameter("bf16", distributed=True)
    return counted, distributed_optimizer_bytes_per_parameter("fp16", distributed=True)


# ---- activations: (Megatron, derived) per layer and per GPU, Megatron's layer at t ranks ----

def _megatron_layer(sequence_parallel: bool) -> sp.Expr:
    """Megatron's per-layer bytes on one TP rank: the GPT table, scores dropped (selective)."""
    return layer_activation_bytes(**MEGATRON_LAYER, tensor_parallel=t,
                                  sequence_parallel=sequence_parallel)


def megatron_no_score_term() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) GPT layer with materialised attention, no recompute: 5as^2b/t left out."""
    return (_megatron_layer(False).subs(FFN_4H),
            layer_activation_bytes("gpt", "materialised", t).subs(FFN_4H))


def _llama_vs_megatron(profile: str) -> tuple[sp.Expr, sp.Expr]:
    """Megatron's SP + selective layer vs a Llama profile at head width k, statistics ignored."""
    table = llama_layer_saved(profile, head_dim=k).without("norm_statistics", "softmax_statistics")
    return _megatron_layer(True), sharded(table, t, True).bytes()


def megatron_llama_fused() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) SP + selective layer vs the Llama fused profile (GQA, SwiGLU, TE kernels)."""
    return _llama_vs_megatron("fused")


def megatron_llama_eager() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) SP + selective layer vs the Llama eager PyTorch profile."""
    return _llama_vs_megatron("eager")


def megatron_without_sp_f() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) without-SP layer: 10 + 24/t is the GPT table at f = 4h, not at the real f."""
    return _megatron_layer(False).subs(FFN_4H), _megatron_layer(False)


def megatron_sp_logits() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) logits per GPU at p = 1: the SP function keeps only the fp32 copy."""
    return output_rows(True).where("logits").bytes(), logits_bytes(t)


def megatron_without_sp_logits() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) logits per GPU at p = 1: the without-SP function keeps only the bf16 logits."""
    return output_rows(False).where("logits").bytes(), logits_bytes(t)


def megatron_without_sp_final_norm() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) output edge without SP: the final norm's input is not counted."""
    derived = output_edge(t, False).without("logits").bytes()
    return output_rows(False).without("logits").bytes(), derived


def megatron_full_recompute() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) recompute_granularity='full' is reported with 10 + 24/t, not the 2sbh input."""
    return (_megatron_layer(False).subs(FFN_4H),
            layer_activation_bytes("gpt", tensor_parallel=t, recompute="full"))


@dataclass(frozen=True)
class Departure(Sided):
    """One way a Megatron estimator departs, the pair it is read from, and its unit."""

    name: str
    sides: Callable[[], tuple[sp.Expr, sp.Expr]]
    unit: str
    where: dict
    assumptions: tuple[str, ...]
    llama: bool = True
    topic: str = TOPIC
    source: str = SOURCE

    @property
    def difference(self) -> sp.Expr:
        """derived - Megatron, exactly."""
        counted, derived = self.pair
        return sp.expand((derived - counted).subs(self.where))


DEPARTURES: tuple[Departure, ...] = (
    Departure("linear biases not counted", megatron_linear_biases, "parameters per layer", GPT_SHAPE,
              ("GPT layer: biases on QKV, projection, fc1, fc2", "f = 4h, k = h/a"), llama=False),
    Departure("learned position embedding not counted", megatron_positions, "parameters", {},
              ("GPT: s learned position rows of width h (Llama uses RoPE: none)",), llama=False),
    Departure("padded vocabulary grows with t", megatron_padded_vocabulary, "parameters", {},
              ("untied embedding and head", "V padded to a multiple of 128 t "
               "(--make-vocab-size-divisible-by 128)")),
    Departure("final norm counted on the first stage", megatron_final_norm,
              "parameters per GPU", {}, ("p > 1 stages; the final norm lives on the last one",)),
    Departure("fp16 counted at bf16's 18 bytes", megatron_fp16_bytes, "bytes per parameter", {},
              ("fp16 params and grads, fp32 main grads and master in the optimizer",)),
    Departure("fp16 distributed optimizer counted at 6 + 12/d", megatron_fp16_distributed_bytes,
              "bytes per parameter", {}, ("as above, optimizer sharded over d",)),
    Departure("no 5as/h score term", megatron_no_score_term, "bytes per layer per GPU", {},
              ("GPT table, materialised attention, no recompute, no SP",
               "Megatron's 10 + 24/t assumes the scores are not kept (selective recompute "
               "or a fused kernel)"),
              topic=ACTIVATION_TOPIC, source=MEMORY + " compute_activation_memory_without_sp"),
    Departure("GQA, head width and SwiGLU ignored (Llama fused profile)", megatron_llama_fused,
              "bytes per layer per GPU", {},
              ("SP + selective recompute", "Megatron-Core + TE: fused RMSNorm, flash attention, "
               "fused SwiGLU; norm statistics and logsumexp ignored on both sides",
               "heads of width k (kv_channels): q and the attention output a k wide, k and v g k"),
              topic=ACTIVATION_TOPIC, source=MEMORY + " compute_activation_memory"),
    Departure("GQA, head width and SwiGLU ignored (Llama eager profile)", megatron_llama_eager,
              "bytes per layer per GPU", {},
              ("SP + selective recompute", "PyTorch eager: nn.RMSNorm fp32 upcasts, SDPA, "
               "SiLU(gate) * up; norm statistics and logsumexp ignored on both sides",
               "heads of width k (kv_channels)"),
              topic=ACTIVATION_TOPIC, source=MEMORY + " compute_activation_memory"),
    Departure("without-SP path ignores f", megatron_without_sp_f, "bytes per layer per GPU", {},
              ("GPT table, selective recompute, no SP", "Megatron uses 10 + 24/t (f = 4h) "
               "whatever ffn_hidden_size is; the 21/20 overhead left aside"),
              topic=ACTIVATION_TOPIC, source=MEMORY + " compute_activation_memory_without_sp"),
    Departure("SP path: logits at 4 bytes, not 2 + 4", megatron_sp_logits, "bytes per GPU", {},
              ("p = 1, vocabulary-parallel head", "derived: bf16 logits alive while the fp32 "
               "copy for the loss is made"),
              topic=ACTIVATION_TOPIC, source=MEMORY + " compute_activation_memory"),
    Departure("without-SP path: logits at 2 bytes, not 2 + 4", megatron_without_sp_logits,
              "bytes per GPU", {},
              ("p = 1, vocabulary-parallel head", "derived: bf16 logits and the fp32 copy"),
              topic=ACTIVATION_TOPIC, source=MEMORY + " compute_activation_memory_without_sp"),
    Departure("without-SP path: final norm input not counted", megatron_without_sp_final_norm,
              "bytes per GPU", {}, ("p = 1, no SP: the final norm's input 2sbh is whole on "
                                    "every TP rank",),
              topic=ACTIVATION_TOPIC, source=MEMORY + " compute_activation_memory_without_sp"),
    Departure("full recompute reported as 10 + 24/t", megatron_full_recompute,
              "bytes per layer per GPU", {},
              ("recompute_granularity = 'full' takes report_theoretical_memory's without-SP "
               "branch", "derived: full recompute keeps the layer input, 2sbh",
               "the 21/20 overhead left aside"),
              topic=ACTIVATION_TOPIC, source=MEMORY + " report_theoretical_memory"),
)


def _register(entry: Departure) -> None:
    kind = "weights" if entry.topic == TOPIC else "activations"
    @identity(f"Megatron {kind}: {entry.name}", topic=entry.topic, claim=entry,
              key=f"megatron.{entry.sides.__name__}",
              source=entry.source, assumptions=entry.assumptions, where=entry.where, holds=False)
    def derived() -> sp.Expr:
        return entry.pair[1]


for _entry in DEPARTURES:
    _register(_entry)


def size(entry: Departure, values: dict[sp.Symbol, int], family: str = "llama") -> sp.Expr:
    """The departure's difference at ``values`` (a preset's sizes plus t, p, d); 0 where it cannot arise."""
    if family == "llama" and not entry.llama:
        return sp.Integer(0)
    return substitute(entry.difference, values)


#: The layout the sizes are quoted at: t = 8, p = 4, d = 8 (a Llama 3 70B pre-training shape),
#: micro-batch b = 1 at the preset's s (8192 for Llama 3).
LAYOUT: dict[sp.Symbol, int] = {t: 8, p: 4, d: 8, b: 1}


def sizes(model_values: dict[sp.Symbol, int], family: str = "llama") -> dict[str, sp.Expr]:
    """Every departure's size for one preset at :data:`LAYOUT`."""
    values = {**model_values, **LAYOUT}
    return {entry.name: size(entry, values, family) for entry in DEPARTURES}




# ---- the Megatron-convention sums are Megatron's closed forms (holds=True) ----

ESTIMATORS = "Megatron estimators (derive.megatron)"


def _flops_identity(swiglu: bool, gated: bool) -> None:
    tokens, squares = BATCH_TOKENS, SQUARED_LENGTHS
    layer = ("SwiGLU" if swiglu else "GELU") + (", output gate" if gated else "")

    @identity(f"Megatron FLOPs of a batch, {layer}: GEMM table = training.py", topic=ESTIMATORS,
              key=f"megatron.batch_flops.{'swiglu' if swiglu else 'gelu'}{'_gated' if gated else ''}",
              claim=Later(lambda: megatron_num_floating_point_operations(tokens, squares, swiglu=swiglu,
                                                                        output_gate=gated)),
              source="megatron/training/training.py num_floating_point_operations "
                     "(transformer_flops, dense, core_v0.18.0)",
              assumptions=("T tokens in the batch, Q = sum of squared sequence lengths",
                           "GQA: g groups of width k; causal scores over s/2 keys",
                           "V is the padded vocabulary"))
    def derived() -> sp.Expr:
        return batch_flops(Reading(swiglu=swiglu), gated)


for _swiglu in (False, True):
    for _gated in (False, True):
        _flops_identity(_swiglu, _gated)

_EMBEDDING = 8 * s * b * p + s * b * h * p
_OUTPUT_SP = 4 * s * b * h * (1 + V / h)


@identity("Megatron compute_activation_memory, p stages (1F1B) = (L sbh(18 + 4f/h) + 8sbp + sbhp)/t",
          topic=ESTIMATORS, claim=(L * s * b * h * (18 + 4 * f / h) + _EMBEDDING) / t,
          source=MEMORY + " compute_activation_memory",
          assumptions=("first stage, p > 1, num_microbatches not given",))
def megatron_sp_first_stage() -> sp.Expr:
    return activation_bytes(True, False, False, False)


@identity("Megatron compute_activation_memory, one stage: adds 4sbh(1 + V/h)/t", topic=ESTIMATORS,
          claim=(L * s * b * h * (18 + 4 * f / h) + _EMBEDDING + _OUTPUT_SP).subs(p, 1) / t,
          source=MEMORY + " compute_activation_memory", assumptions=("p = 1",))
def megatron_sp_single_stage() -> sp.Expr:
    return activation_bytes(True, True, False, False).subs(p, 1)


@identity("Megatron compute_activation_memory, interleaved: times 1 + (p - 1)/(p v)",
          topic=ESTIMATORS,
          claim=(L * s * b * h * (18 + 4 * f / h) + _EMBEDDING) / t * (1 + (p - 1) / (p * v)),
          source=MEMORY + " compute_activation_memory (interleaved_schedule_memory_penalty)",
          assumptions=("v model chunks per rank, p > 1",))
def megatron_sp_interleaved() -> sp.Expr:
    return activation_bytes(True, False, True, False)


@identity("Megatron compute_activation_memory_without_sp, one stage: "
          "1.05 (L sbh(10 + 24/t) + 8sb + sbh + 2sbV/t + 2sbh)", topic=ESTIMATORS,
          claim=sp.Rational(105, 100) * (L * s * b * h * (10 + 24 / t) + _EMBEDDING.subs(p, 1)
                                         + 2 * (s * b * V / t + s * b * h)),
          source=MEMORY + " compute_activation_memory_without_sp", assumptions=("p = 1",))
def megatron_without_sp_single_stage() -> sp.Expr:
    return activation_bytes(False, True, False, False).subs(p, 1)


@identity("Megatron compute_activation_memory_without_sp, m < p micro-batches: times m/p",
          topic=ESTIMATORS,
          claim=sp.Rational(105, 100) * (L * s * b * h * (10 + 24 / t) + _EMBEDDING) * m / p,
          source=MEMORY + " compute_activation_memory_without_sp (min(1, num_microbatches / p))",
          assumptions=("1F1B, p > 1", "m < p micro-batches in the step"))
def megatron_without_sp_few_micro_batches() -> sp.Expr:
    return activation_bytes(False, False, False, True).xreplace({sp.Min(m, p): m})  # m < p


# ---- Mixture of Experts: the Megatron-convention FLOPs are training.py's closed forms ----

@identity("Megatron FLOPs per token, MoE + GQA: table = training.py", topic=EXPERTS,
          claim=Later(lambda: megatron_moe_flops(False, False, False)), source=EXPERT_FLOPS, where={D: 0},
          assumptions=("top-k routed experts of width f_E, no router, no shared expert",
                       "causal scores over s/2 keys", "no MTP (D = 0)"))
def megatron_moe_gqa_flops() -> sp.Expr:
    return flops_per_token(moe_reading(GQA), False)


@identity("Megatron FLOPs per token, MoE + MLA + MTP: table = training.py", topic=EXPERTS,
          claim=Later(lambda: megatron_moe_flops(True, True, True)), source=EXPERT_FLOPS,
          assumptions=("shared expert, query latent, D MTP modules of MoE type",
                       "latent and MTP norms priced at 6 per parameter"))
def megatron_moe_mla_flops() -> sp.Expr:
    return flops_per_token(moe_reading(moe_layout("mla", shared=True)), False)
