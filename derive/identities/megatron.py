"""Where Megatron-LM's weight estimator departs from the derived ledger, each as an exact difference.

The claim side of every entry is Megatron's convention (``derive.megatron``,
which reproduces megatron/training/theoretical_memory_usage.py
compute_weight_and_optimizer_memory record for record); the derived side is
derive's own table with one convention switched back. Each is a departure
(``holds=False``): the difference is what Megatron's number leaves out (+) or
adds (-). :data:`DEPARTURES` sizes each one at the Llama 3 presets.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sympy as sp

from derive import megatron
from derive.accounts.state import distributed_optimizer_bytes_per_parameter
from derive.architectures.parameters import gpt_edges, gpt_layer, llama_edges
from derive.identities import identity
from derive.symbols import L, V, a, d, f, h, k, p, t
from derive.tensors import Ledger

TOPIC = "Megatron departures (weights)"
SOURCE = "megatron/training/theoretical_memory_usage.py compute_weight_and_optimizer_memory (core_v0.18.0)"
GPT = {k: h / a, f: 4 * h}


def _first_stage(layer: Ledger, embedding: Ledger) -> Ledger:
    """The derived first of p > 1 stages on one TP rank: L/p layers and the input embedding."""
    return megatron._tensor_parallel(layer.times(L / p) + embedding)


def megatron_linear_biases() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) parameters of one GPT layer: Megatron counts no linear bias."""
    return megatron.layer(False, "LayerNorm").numel(), gpt_layer(head_dim=k).numel()


def megatron_positions() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) tied GPT edges: Megatron counts no learned position embedding."""
    return megatron.edges(False, "LayerNorm").numel(), gpt_edges().numel()


def megatron_padded_vocabulary() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) untied Llama edges: Megatron's V is padded to a multiple of 128 t."""
    counted = megatron.edges(True, "RMSNorm").numel()
    return counted.subs(V, megatron.padded_vocab(V)), llama_edges().numel()


def megatron_final_norm() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) first of p > 1 Llama stages: Megatron adds 1/p of the final norm."""
    counted = megatron.first_stage(True, "RMSNorm", True, single_stage=False).numel()
    edges = megatron.edges(True, "RMSNorm")
    derived = _first_stage(megatron.layer(True, "RMSNorm"), edges.where("embedding")).numel()
    return counted, derived


def megatron_fp16_bytes() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) bytes/parameter of fp16 training: the estimator only knows bf16's 18."""
    counted = distributed_optimizer_bytes_per_parameter("bf16", distributed=False)
    return counted, distributed_optimizer_bytes_per_parameter("fp16", distributed=False)


def megatron_fp16_distributed_bytes() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) bytes/parameter of fp16 with the distributed optimizer."""
    counted = distributed_optimizer_bytes_per_parameter("bf16", distributed=True)
    return counted, distributed_optimizer_bytes_per_parameter("fp16", distributed=True)


@dataclass(frozen=True)
class Departure:
    """One way Megatron's weight count departs, the pair it is read from, and its unit."""

    name: str
    sides: Callable[[], tuple[sp.Expr, sp.Expr]]
    unit: str
    where: dict
    assumptions: tuple[str, ...]
    llama: bool = True

    @property
    def difference(self) -> sp.Expr:
        """derived - Megatron, exactly."""
        counted, derived = self.sides()
        return sp.expand((derived - counted).subs(self.where))


DEPARTURES: tuple[Departure, ...] = (
    Departure("linear biases not counted", megatron_linear_biases, "parameters per layer", GPT,
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
)


def _register(entry: Departure) -> None:
    @identity(f"Megatron weights: {entry.name}", topic=TOPIC, claim=entry.sides()[0],
              source=SOURCE, assumptions=entry.assumptions, where=entry.where, holds=False)
    def derived() -> sp.Expr:
        return entry.sides()[1]


for _entry in DEPARTURES:
    _register(_entry)


def size(entry: Departure, values: dict[sp.Symbol, int], family: str = "llama") -> sp.Expr:
    """The departure's difference at ``values`` (a preset's sizes plus t, p, d); 0 where it cannot arise."""
    if family == "llama" and not entry.llama:
        return sp.Integer(0)
    return entry.difference.subs(values)


#: The layout the sizes are quoted at: t = 8, p = 4, d = 8 (a Llama 3 70B pre-training shape).
LAYOUT: dict[sp.Symbol, int] = {t: 8, p: 4, d: 8}


def sizes(model_values: dict[sp.Symbol, int], family: str = "llama") -> dict[str, sp.Expr]:
    """Every departure's size for one preset at :data:`LAYOUT`."""
    values = {**model_values, **LAYOUT}
    return {entry.name: size(entry, values, family) for entry in DEPARTURES}


