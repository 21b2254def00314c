"""The registry of operations: each declares once its parameters, its GEMMs and what it keeps for backward.

An operation's parameter rows are declared in derive.architectures.blocks (by naming: transformers',
Meta's, Megatron's), its GEMMs are one weight GEMM per matrix (derive.architectures.gemms.Gemm: a
forward, a dgrad and a wgrad pass) plus, for attention, QK^T and PV; its saved rows, by
implementation, in derive.architectures.operations.{norm, attention, mlp, edges}.

A layer is a sequence of :class:`Step` s (an operation, the implementation or naming, its
options); walking it through :data:`REGISTRY` gives the parameter table (:func:`parameter_table`),
the GEMMs beyond the matrices' (:func:`score_table`) and the saved-for-backward table (:func:`saved_table`), every
saved row with the operation it comes from (:func:`walk`) and its coefficient of sbh
(:func:`per_sbh`), so the 34 of Korthikanti's sbh(34 + 5as/h) can be read row by row
(torch/utils/flop_counter.py composes its counts per operation the same way).
The MoE operations (router, routed experts, shared experts and their gate:
derive.architectures.operations.experts), MLA (.latent) and the MTP module (.mtp) declare theirs
in the same registry, under the ``eager`` (transformers) and ``fused`` (Megatron + TE) profiles.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import sympy as sp

from derive.architectures import blocks
from derive.architectures.gemms import attention_score_gemms
from derive.architectures.operations import attention, edges, experts, latent, mlp, mtp, norm
from derive.architectures.operations.rows import ACTIVATION, residual_dropout
from derive.inputs import choose
from derive.symbols import a, b, h, k_nope, k_rope, k_v, s
from derive.tensors import Ledger, Tensor


def _scores(mask: str, options: dict[str, object]) -> Ledger:
    """QK^T and PV of one layer, a query heads of the step's ``head_dim`` (derive.architectures.gemms)."""
    return attention_score_gemms(mask, a, options["head_dim"])


def _latent_scores(mask: str, options: dict[str, object]) -> Ledger:
    """MLA's QK^T (query/key width k_nope + k_rope) and PV (value width k_v) of one layer, a query heads."""
    return attention_score_gemms(mask, a, k_nope + k_rope, k_v)


def _hf_rms_norm(prefix: str, shape: tuple[sp.Expr, ...], tags: tuple[str, ...] = (),
                 normalised: str = ACTIVATION) -> list[Tensor]:
    """transformers' RMSNorm rows (derive.architectures.operations.norm.hf_rms_norm), its tags as one option."""
    return norm.hf_rms_norm(prefix, shape, *tags, normalised=normalised)


def _norm(name: str, width: sp.Expr, kind: str, tags: tuple[str, ...] = ()) -> list[Tensor]:
    """A norm's parameters (derive.architectures.blocks.norm), its block tags as one option."""
    return blocks.norm(name, width, kind, *tags)


@dataclass(frozen=True)
class Operation:
    """One operation: its parameter rows by naming, the GEMMs beyond its matrices', its saved rows by implementation."""

    name: str
    saved: dict[str, Callable[..., list[Tensor]]] = field(default_factory=dict)
    parameters: dict[str, Callable[..., list[Tensor]]] = field(default_factory=dict)
    gemms: dict[str, Callable[[str, dict[str, object]], Ledger]] = field(default_factory=dict)


#: Every operation of a dense or MoE model, by name.
REGISTRY: dict[str, Operation] = {op.name: op for op in (
    Operation("norm", saved={
        "layer_norm": norm.layer_norm, "cpu_layer_norm": norm.cpu_layer_norm,
        "eager_rms_norm": norm.eager_rms_norm, "fused_rms_norm": norm.fused_rms_norm,
        "hf_rms_norm": _hf_rms_norm, "gemma_rms_norm": norm.gemma_rms_norm,
        "te_rms_norm": norm.te_rms_norm},
        parameters={"norm": _norm}),
    Operation("attention", saved={
        "megatron": attention.megatron_attention, "eager_sdpa": attention.eager_sdpa_attention,
        "te_flash": attention.te_flash_attention, "hf": attention.hf_attention,
        "gpt2": attention.gpt2_attention, "hf_gqa": attention.hf_gqa, "te_gqa": attention.te_gqa,
        "hf_mla": latent.hf_mla, "te_mla": latent.te_mla},
        parameters={"projections": blocks.attention, "megatron": blocks.megatron_attention,
                    "sinks": blocks.sinks, "mla": latent.mla_attention},
        gemms={"projections": _scores, "megatron": _scores, "mla": _latent_scores}),
    Operation("mlp", saved={
        "megatron_gelu": mlp.megatron_gelu_mlp, "neox_gelu": mlp.neox_gelu_mlp,
        "gpt2_gelu_new": mlp.gpt2_gelu_new_mlp, "gated": mlp.gated_mlp,
        "te_fused_swiglu": mlp.te_fused_swiglu, "hf_swiglu": mlp.hf_swiglu,
        "te_dense_swiglu": mlp.te_dense_swiglu},
        parameters={"mlp": blocks.mlp}),
    Operation("router", saved={"eager": experts.eager_router, "fused": experts.fused_router},
              parameters={"router": experts.router}),
    Operation("experts", saved={**experts.EXPERTS, "fused": experts.fused_experts},
              parameters={"routed": experts.routed_experts}),
    Operation("shared_experts", saved={"eager": experts.eager_shared_experts,
                                       "fused": experts.fused_shared_experts},
              parameters={"shared": experts.shared_experts}),
    Operation("shared_gate", saved={"eager": experts.eager_shared_gate,
                                    "fused": experts.fused_shared_gate}),
    Operation("mtp", saved={"te_input": mtp.te_mtp_input, "te_head": mtp.te_mtp_head},
              parameters={"module": mtp.mtp_parameters}),
    Operation("dropout", saved={"residual": residual_dropout}),
    Operation("embedding", saved={"megatron": edges.embedding_saved,
                                  "hf_moe": edges.hf_moe_embedding_saved},
              parameters={"embedding": blocks.embedding, "positions": blocks.positions}),
    Operation("output", saved={"megatron": edges.output_saved, "hf_moe": edges.hf_moe_loss_saved},
              parameters={"head": blocks.head}),
)}


@dataclass(frozen=True)
class Step:
    """One operation of a layer as a profile runs it: the operation, its implementation, its options.

    ``held``: the parameter steps of the same operation this step holds (one list serves a layer's
    saved rows and its parameters: () for one that holds none, a dropout); None where the step
    itself declares parameters (``implementation`` names them).
    """

    operation: str
    implementation: str
    options: dict[str, object] = field(default_factory=dict)
    held: tuple["Step", ...] | None = None

    def _declared(self, kind: str) -> Callable:
        operation = REGISTRY[choose("operation", self.operation, REGISTRY)]
        table = getattr(operation, kind)
        return table[choose("implementation", self.implementation, table)]

    def saved(self) -> list[Tensor]:
        """The rows this step keeps for backward, from the registry."""
        return list(self._declared("saved")(**self.options))

    def parameters(self) -> list[Tensor]:
        """The parameter rows this step holds, from the registry."""
        if self.held is not None:
            return [kept for each in self.held for kept in each.parameters()]
        return list(self._declared("parameters")(**self.options))

    def gemms(self, mask: str) -> Ledger:
        """The GEMMs this step runs beyond its matrices' (attention's QK^T and PV under ``mask``)."""
        if self.held is not None:
            return sum((each.gemms(mask) for each in self.held), Ledger())
        extra = REGISTRY[choose("operation", self.operation, REGISTRY)].gemms.get(self.implementation)
        return extra(mask, self.options) if extra else Ledger()


def step(operation: str, implementation: str, held: tuple[Step, ...] | None = None,
         **options: object) -> Step:
    """A :class:`Step` with keyword options (``held``: the parameter steps it holds)."""
    return Step(operation, implementation, options, held)


def walk(steps: tuple[Step, ...]) -> list[tuple[str, Tensor]]:
    """Every saved row of ``steps`` in order, with the operation that keeps it."""
    return [(each.operation, kept) for each in steps for kept in each.saved()]


def parameter_table(steps: tuple[Step, ...]) -> Ledger:
    """The parameter rows of ``steps`` in order."""
    return Ledger(row for each in steps for row in each.parameters())


def score_table(steps: tuple[Step, ...], mask: str) -> Ledger:
    """The GEMMs of ``steps`` that multiply no parameter (attention's QK^T and PV under ``mask``)."""
    return sum((each.gemms(mask) for each in steps), Ledger())


def saved_table(steps: tuple[Step, ...]) -> Ledger:
    """The saved-for-backward table of ``steps``: the walk's rows."""
    return Ledger(kept for _, kept in walk(steps))


def per_sbh(steps: tuple[Step, ...], keep: Callable[[Tensor], bool] = lambda _: True,
            where: dict | None = None) -> list[tuple[str, str, sp.Expr]]:
    """(operation, row, bytes / sbh) of every kept row of ``steps``, ``where`` substituted (f = 4h: the 34's rows)."""
    return [(operation, kept.name, sp.simplify((kept.bytes / (s * b * h)).subs(where or {})))
            for operation, kept in walk(steps) if keep(kept)]
