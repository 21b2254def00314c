"""The registry of operations: each declares once what it keeps for backward under each implementation.

A layer is a sequence of :class:`Step` s (an operation, the implementation a profile runs, its
options); walking it through :data:`REGISTRY` gives the saved-for-backward table, every row with
the operation it comes from (:func:`walk`) and its coefficient of sbh (:func:`per_sbh`), so the
34 of Korthikanti's sbh(34 + 5as/h) can be read row by row (torch/utils/flop_counter.py composes
its counts per operation the same way).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import sympy as sp

from derive.architectures.operations import attention, edges, mlp, norm
from derive.architectures.operations.rows import residual_dropout
from derive.inputs import choose
from derive.symbols import b, h, s
from derive.tensors import Ledger, Tensor


@dataclass(frozen=True)
class Operation:
    """One operation: the rows it keeps for backward, by implementation (a profile's kernel)."""

    name: str
    saved: dict[str, Callable[..., list[Tensor]]]


#: Every operation of a dense model, by name.
REGISTRY: dict[str, Operation] = {op.name: op for op in (
    Operation("norm", {
        "layer_norm": norm.layer_norm, "cpu_layer_norm": norm.cpu_layer_norm,
        "eager_rms_norm": norm.eager_rms_norm, "fused_rms_norm": norm.fused_rms_norm,
        "hf_rms_norm": norm.hf_rms_norm, "gemma_rms_norm": norm.gemma_rms_norm}),
    Operation("attention", {
        "megatron": attention.megatron_attention, "eager_sdpa": attention.eager_sdpa_attention,
        "te_flash": attention.te_flash_attention, "hf": attention.hf_attention,
        "gpt2": attention.gpt2_attention}),
    Operation("mlp", {
        "megatron_gelu": mlp.megatron_gelu_mlp, "neox_gelu": mlp.neox_gelu_mlp,
        "gpt2_gelu_new": mlp.gpt2_gelu_new_mlp, "gated": mlp.gated_mlp,
        "te_fused_swiglu": mlp.te_fused_swiglu}),
    Operation("dropout", {"residual": residual_dropout}),
    Operation("embedding", {"megatron": edges.embedding_saved}),
    Operation("output", {"megatron": edges.output_saved}),
)}


@dataclass(frozen=True)
class Step:
    """One operation of a layer as a profile runs it: the operation, its implementation, its options."""

    operation: str
    implementation: str
    options: dict[str, object] = field(default_factory=dict)

    def saved(self) -> list[Tensor]:
        """The rows this step keeps for backward, from the registry."""
        operation = REGISTRY[choose("operation", self.operation, REGISTRY)]
        return list(operation.saved[choose("implementation", self.implementation, operation.saved)](
            **self.options))


def step(operation: str, implementation: str, **options: object) -> Step:
    """A :class:`Step` with keyword options."""
    return Step(operation, implementation, options)


def walk(steps: tuple[Step, ...]) -> list[tuple[str, Tensor]]:
    """Every saved row of ``steps`` in order, with the operation that keeps it."""
    return [(each.operation, kept) for each in steps for kept in each.saved()]


def saved_table(steps: tuple[Step, ...]) -> Ledger:
    """The saved-for-backward table of ``steps``: the walk's rows."""
    return Ledger(kept for _, kept in walk(steps))


def per_sbh(steps: tuple[Step, ...], keep: Callable[[Tensor], bool] = lambda _: True,
            where: dict | None = None) -> list[tuple[str, str, sp.Expr]]:
    """(operation, row, bytes / sbh) of every kept row of ``steps``, ``where`` substituted (f = 4h: the 34's rows)."""
    return [(operation, kept.name, sp.simplify((kept.bytes / (s * b * h)).subs(where or {})))
            for operation, kept in walk(steps) if keep(kept)]
