"""The accounts a Megatron-style layout is judged by, as expressions of one (model, profile, recompute, placement) combination.

Framework placement of the states (derive.accounts.placement, or any placement's in
derive.state_columns' symbols), Korthikanti et al.'s saved-for-backward tables with
sequence parallelism, 1F1B / interleaved pipeline stages (derive.accounts.pipeline_split),
GEMM FLOPs per token (derive.accounts.flops); derive.sweep evaluates them over grids.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

import sympy as sp

from derive.accounts.activations import (
    LAYER_PROFILES,
    first_stage_activation_bytes,
    layer_activation_bytes,
    logits_bytes,
    output_edge,
)
from derive.accounts.flops import flops_per_token
from derive.accounts.pipeline_split import STAGE_LAYERS, rank_layers, stage_in_flight, stage_layers
from derive.accounts.framework_placements import placement
from derive.accounts.placement import placement_bytes_per_parameter
from derive.accounts.workload import RECOMPUTE_FLOPS
from derive.architectures.decoder import Layout
from derive.architectures.tables import edge_parameters, layer_parameters
from derive.inputs import choose
from derive.recipes import fp8_weight_counts
from derive.state_columns import STATE_RANKS, held_bytes, recipe_bytes
from derive.symbols import N, N_8, L, c, m, n_8, p, s, t, v
from derive.tensors import Ledger

#: Context parallelism over c ranks: each keeps the activations of s / c tokens of every sequence
#: (exact for tables linear in s: flash attention, no score matrices).
CONTEXT: dict[sp.Symbol, sp.Expr] = {s: s / c}


def _tensor_parallel_share(table: Ledger) -> Ledger:
    """One TP rank's parameters: GEMM matrices and the (vocabulary-parallel) embedding over t."""
    return table.map(lambda w: w.divided(t) if w.has("gemm") or w.has("embedding") else w)


def _layer_and_edges(architecture: Layout) -> tuple[Ledger, Ledger]:
    """One layer's parameter table and the model edges': a family's, or a dense config layout's."""
    if not architecture.dense:
        raise ValueError("model: sweeps and plans cover dense models; MoE / MLA layouts have "
                         "their own accounts (derive --moe)")
    return layer_parameters(architecture), edge_parameters(architecture)


@lru_cache(maxsize=None)
def _stage_parameters(architecture: Layout) -> dict[str, sp.Expr]:
    """Parameters per GPU on the single (p = 1), first, last and a middle pipeline stage (L / p layers each)."""
    layer, edges = _layer_and_edges(architecture)
    layers = _tensor_parallel_share(layer).numel() * L / p
    ends = _tensor_parallel_share(edges)
    first = ends.filter(lambda w: w.has("embedding") or w.has("position"))
    last = ends.filter(lambda w: w.has("output") or w.has("norm"))
    return {"single": sp.expand(layers.subs(p, 1) + ends.numel()),
            "first": sp.expand(layers + first.numel()),
            "last": sp.expand(layers + last.numel()),
            "middle": sp.expand(layers)}


@lru_cache(maxsize=None)
def _stage_fp8_weights(architecture: Layout) -> dict[str, tuple[sp.Expr, sp.Expr]]:
    """(N_8, n_8) per GPU of each stage: the layer matrices an FP8 recipe quantises (over t), L / p layers' worth.

    derive.recipes.fp8_weight_counts: elements of one TP rank's share of the layer table, matrices of the
    whole table (each rank holds a shard of every one); the edges (embedding, head) stay 16-bit.
    """
    layer, _ = _layer_and_edges(architecture)
    numel, tensors = fp8_weight_counts(_tensor_parallel_share(layer))[0], fp8_weight_counts(layer)[1]
    stage = (numel * L / p, tensors * L / p)
    return {"single": (numel * L, tensors * L), "first": stage, "last": stage, "middle": stage}


def stage_counts(architecture: Layout, stage: str, fp8: bool = False) -> dict[sp.Symbol, sp.Expr]:
    """N (and, ``fp8``, an FP8 recipe's N_8 and n_8) per GPU of ``stage`` ('single', 'first', 'last', 'middle')."""
    counts = {N: _stage_parameters(architecture)[stage]}
    if fp8:
        counts[N_8], counts[n_8] = _stage_fp8_weights(architecture)[stage]
    return counts


@lru_cache(maxsize=None)
def _stage_activations(profile: str, attention_kernel: str, recompute: str,
                       recipe: str | None = None) -> dict[str, sp.Expr]:
    """Activation bytes per GPU of the single, first, last and middle (rank 1) stage (SP on, m micro-batches per step).

    ``recipe``: an FP8 recipe keeps the layers' linear inputs in FP8 (derive.architectures.saved_fp8).
    """
    common = dict(profile=profile, attention_kernel=attention_kernel, tensor_parallel=t,
                  sequence_parallel=True, recompute=recompute, recipe=recipe)
    single = first_stage_activation_bytes(**common, pipeline=1, micro_batches=m)
    first = sp.Piecewise(
        (first_stage_activation_bytes(**common, pipeline=p, micro_batches=m), sp.Eq(v, 1)),
        (first_stage_activation_bytes(**common, pipeline=p, virtual=v, micro_batches=m), True))
    per_layer = layer_activation_bytes(profile, attention_kernel, t, True, recompute, recipe=recipe)
    last = (stage_in_flight("last") * L / (p * v) * per_layer
            + output_edge(t, sequence_parallel=True).bytes())
    middle = stage_in_flight("middle") * L / (p * v) * per_layer  # rank 1: no edge (balanced, p > 2)
    return {"single": single, "first": first, "last": last, "middle": middle}


@dataclass(frozen=True)
class Accounts:
    """The expressions of one (family, profile, recompute, placement, sharding, FP8 recipe) combination.

    Under an FP8 recipe ``fp8_bytes`` is what it adds per rank (weight copies, scales, history, in N_8 and n_8:
    derive.accounts.placement's ledger with the recipe less without it) and ``fp8_weights`` each stage's N_8, n_8.
    With no placement both are written in STATE_BYTES' symbols (:func:`held_bytes`).
    """

    parameters: dict[str, sp.Expr]
    bytes_per_parameter: sp.Expr
    activations: dict[str, sp.Expr]
    layer_activations: sp.Expr
    logits: sp.Expr
    model_flops: sp.Expr
    hardware_flops: sp.Expr
    balanced: bool = False
    fp8_bytes: sp.Expr = sp.Integer(0)
    fp8_weights: dict[str, tuple[sp.Expr, sp.Expr]] = field(default_factory=dict)
    #: The columns built so far (:meth:`column`).
    built: dict[str, sp.Expr] = field(default_factory=dict, init=False, compare=False, repr=False)

    def _staged(self, account: Callable[[str], sp.Expr], stage: str, activations: bool = False) -> sp.Expr:
        """``account`` of ``stage`` at p = 1 (the whole model), else at the layers ``stage`` holds."""
        return sp.Piecewise((account("single"), sp.Eq(p, 1)),
                            (account(stage).xreplace(stage_layers(stage, self.balanced, activations)), True))

    def loaded(self, stage: str) -> sp.Expr:
        """States + activations per GPU of ``stage`` at p > 1, at the layers it holds (:func:`stage_layers`)."""
        return (self.state(stage).xreplace(stage_layers(stage, self.balanced))
                + self.activation(stage).xreplace(stage_layers(stage, self.balanced, True)))

    def state(self, stage: str) -> sp.Expr:
        """Resident state bytes per GPU of ``stage`` ('single', 'first', 'last'), an FP8 recipe's copies included."""
        held = self.parameters[stage] * self.bytes_per_parameter
        if not self.fp8_weights:
            return held
        return held + self.fp8_bytes.xreplace(self.fp8_counts(stage))

    def fp8_counts(self, stage: str) -> dict[sp.Symbol, sp.Expr]:
        """N_8 and n_8 -> ``stage``'s quantised elements and matrices per GPU (empty without a recipe)."""
        if not self.fp8_weights:
            return {}
        numel, tensors = self.fp8_weights[stage]
        return {N_8: numel, n_8: tensors}

    def activation(self, stage: str) -> sp.Expr:
        """Activation bytes per GPU of ``stage`` on one of c context-parallel ranks."""
        return self.activations[stage].xreplace(CONTEXT)

    def total(self, stage: str) -> sp.Expr:
        """States + activations per GPU of ``stage``."""
        return self.state(stage) + self.activation(stage)

    @property
    def context_parallel(self) -> bool:
        """Whether s -> s / c is exact: the layer's bytes are at most linear in s (no score matrices)."""
        return sp.Poly(self.layer_activations, s).degree() <= 1

    def _ranks(self) -> tuple[str, ...]:
        """The ranks whose memory is compared: first and last, and balanced a middle one (rank 1)."""
        return ("first", "last", "middle") if self.balanced else ("first", "last")

    def _build(self, name: str) -> sp.Expr:
        """The account ``name`` of :meth:`columns`."""
        if name == "middle_rank_bytes":  # rank 1 holds v ceil((L + 2) / (p v)) layers, one more than an edge rank (p > 2)
            return sp.Piecewise((0, sp.Eq(p, 2)), (self.loaded("middle"), True))
        if name.endswith("_rank_bytes"):
            return self.loaded(name.removesuffix("_rank_bytes"))
        if name == "memory_per_gpu":
            most_loaded = sp.Max(*(self.column(f"{rank}_rank_bytes") for rank in self._ranks()), evaluate=False)
            return sp.Piecewise((self.total("single"), sp.Eq(p, 1)), (most_loaded, True))
        return {
            "parameters": lambda: self.parameters["single"].subs(t, 1),
            "stage_parameters": lambda: self._staged(self.parameters.__getitem__, "first"),
            "state_bytes": lambda: self._staged(self.state, "first"),
            "layer_activation_bytes": lambda: self.layer_activations.xreplace(CONTEXT),
            "stage_activation_bytes": lambda: self._staged(self.activation, "first", True),
            "logits_bytes": lambda: self.logits.xreplace(CONTEXT),
            "flops_per_token": lambda: self.model_flops,
            "hardware_flops_per_token": lambda: self.hardware_flops,
        }[name]()

    def column(self, name: str) -> sp.Expr:
        """One account of :meth:`columns`, built once."""
        if name not in self.built:
            self.built[name] = self._build(name)
        return self.built[name]

    def columns(self) -> dict[str, sp.Expr]:
        """Every account a grid reports, by column name."""
        ranks = tuple(f"{rank}_rank_bytes" for rank in self._ranks()) if self.balanced else ()
        return {name: self.column(name) for name in (*ranks, *COLUMNS)}


@lru_cache(maxsize=None)
def accounts(architecture: Layout, profile: str, recompute: str, placement_name: str | None = "megatron",
             sharded: bool = False, attention_kernel: str = "fused", balanced: bool = False,
             recipe: str | None = None, fp8_param_gather: bool = False) -> Accounts:
    """The accounts of one combination, built from derive's tables (cached); no ``placement_name``: any placement's.

    ``profile`` is a layer profile of ``derive.architectures.saved`` (``gpt``,
    ``llama-eager``, ``llama-fused``); ``attention_kernel`` applies to ``gpt`` only. ``balanced``:
    the embedding and the loss take one layer slot each (derive.parallelism.Parallelism.balanced),
    every rank's layers counted exactly (derive.accounts.pipeline_split). ``recipe``: an FP8 recipe
    (derive.recipes) on the placement's states, as the report counts it (``state.fp8_copies``: the
    placement's ledger with the recipe's rows, derive.accounts.placement.placement_ledger), and its
    FP8 linear inputs in the saved tables; ``fp8_param_gather``: Megatron's --fp8-param-gather.
    ``placement_name`` None: the states in STATE_BYTES' symbols, given as derive.state_columns.state_columns of a placement.
    """
    choose("recompute", recompute, RECOMPUTE_FLOPS)
    choose("profile", profile, LAYER_PROFILES)
    if fp8_param_gather and recipe is None:
        raise ValueError("fp8_param_gather: needs an FP8 recipe")
    fp8: dict[str, object] = {}
    if placement_name is None:
        per_parameter = held_bytes(N)
        added = N_8 * held_bytes(N_8) + n_8 * held_bytes(n_8)
    else:
        placement(placement_name)
        per_parameter = placement_bytes_per_parameter(placement_name, sharded, STATE_RANKS)
        added = None if recipe is None else recipe_bytes(placement_name, sharded, STATE_RANKS, recipe, fp8_param_gather)
    if recipe is not None:
        fp8 = {"fp8_bytes": sp.expand(added), "fp8_weights": _stage_fp8_weights(architecture)}
    return Accounts(
        parameters=_stage_parameters(architecture),
        bytes_per_parameter=per_parameter,
        activations=_stage_activations(profile, attention_kernel, recompute, recipe),
        layer_activations=layer_activation_bytes(profile, attention_kernel, t, True, recompute, recipe=recipe),
        logits=logits_bytes(t),
        model_flops=flops_per_token(architecture, "causal"),
        hardware_flops=flops_per_token(architecture, "causal", RECOMPUTE_FLOPS[recompute]),
        balanced=bool(balanced),
        **fp8,
    )


@lru_cache(maxsize=None)
def account_columns(architecture: Layout, profile: str, recompute: str, placement_name: str,
                    sharded: bool, attention_kernel: str = "fused", balanced: bool = False,
                    recipe: str | None = None, fp8_param_gather: bool = False) -> dict[str, sp.Expr]:
    """:meth:`Accounts.columns` of one combination (cached)."""
    return accounts(architecture, profile, recompute, placement_name, sharded, attention_kernel,
                    balanced, recipe, fp8_param_gather).columns()


#: Every column derive.sweep.evaluate can report from the accounts.
COLUMNS = ("parameters", "stage_parameters", "state_bytes", "layer_activation_bytes",
           "stage_activation_bytes", "logits_bytes", "memory_per_gpu", "flops_per_token",
           "hardware_flops_per_token")


def stage_balance(balanced: bool = False) -> sp.Expr:
    """p x the most layers a rank holds / L: how much longer the most loaded stage runs than an even one.

    p v ceil(L / (p v)) / L; balanced, a middle rank's v ceil((L + 2) / (p v)) layers (p > 2), else the
    edge ranks' one fewer (derive.accounts.pipeline_split.rank_layers).
    """
    if not balanced:
        return STAGE_LAYERS[L] / L
    most = sp.Piecewise((rank_layers("last", True), sp.Eq(p, 2)), (rank_layers("middle", True), True))
    return p * most / L
