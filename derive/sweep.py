"""Every account over many configurations at once: expressions compiled to numpy, and grids of layouts.

:func:`compile` turns a derive expression into a vectorised function of keyword
arrays named by derive's symbols (``s``, ``b``, ``h``, ``t``, ``p`` ...), once
per expression. With integer inputs it runs in int64 whenever an upper bound
on every intermediate (``derive.printing.python.upper_bound`` at the inputs' maxima)
fits, so sizes stay exact integers and a rational account is one correctly
rounded division; otherwise it runs in float64. :func:`grid` evaluates the
main accounts of Megatron-style training (framework placement of the states,
Korthikanti et al.'s saved-for-backward tables with sequence parallelism,
1F1B / interleaved pipeline stages, GEMM FLOPs, the step-time bound) over the
cross product of models and layouts. Communication is not modelled. A
placement's resident states enter as integer columns (:data:`STATE_BYTES`: bytes
per parameter held whole and sharded over d c, :func:`state_columns`), so one
compiled expression serves every placement and ZeRO stage; a correctly rounded
division makes its values those of each placement's own expression.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import sympy as sp

from derive.accounts.activations import (
    LAYER_PROFILES,
    first_stage_activation_bytes,
    layer_activation_bytes,
    logits_bytes,
    output_edge,
)
from derive.accounts.pipeline_split import STAGE_LAYERS, rank_layers, stage_in_flight, stage_layers
from derive.accounts.flops import flops_per_token, step_time_lower_bound
from derive.accounts.flops import mfu as model_flops_utilisation
from derive.accounts.placement import placement, placement_bytes, placement_bytes_per_parameter
from derive.architectures.decoder import Layout, edge_rows, layer_rows
from derive.architectures.families import FAMILIES
from derive.printing.python import arguments, numpy_function, ratio, upper_bound
from derive.inputs import MAX_SIZE, bounded_int, choose
from derive.presets import Model, hardware, model
from derive.recipes import fp8_weight_counts
from derive.symbols import N, N_8, L, c, d, m, n_8, p, s, t, v
from derive.tensors import Ledger

#: The ranks ZeRO's sharded states are split over: data- and context-parallel together, as
#: Megatron's distributed optimizer takes intra_dp_cp_group (megatron/core/optimizer/__init__.py,
#: data_parallel_group=...) and the step model's optimizer reads them (d c replicas).
STATE_RANKS = d * c

#: int64 evaluation only when every intermediate is below this (a margin under 2^63).
INT64_LIMIT = 2**62
#: From this many configurations on, integer scalars are folded into a specialised compile
#: (about 0.1 s once per expression and scalars; fewer array operations on every call).
FOLD_AT = 100_000


@dataclass(frozen=True)
class Compiled:
    """A derive expression compiled once: call it with keyword arrays named by its symbols."""

    expr: sp.Expr
    names: tuple[str, ...]
    numerator: Callable[..., np.ndarray]
    denominator: Callable[..., np.ndarray] | None
    bound: Callable[..., int]
    #: Names of symbols declared nonnegative (not positive): 0 is one of their values.
    nonnegative: frozenset[str] = frozenset()

    def __call__(self, **values: object) -> np.ndarray:
        """The expression at ``values`` (broadcast arrays): int64 where exact and whole, else float64."""
        missing = [name for name in self.names if name not in values]
        if missing:
            raise ValueError(f"{missing[0]}: needed (the expression's symbols: {', '.join(self.names)})")
        arrays = [_positive_array(name, values[name], name in self.nonnegative) for name in self.names]
        shape = np.broadcast_shapes(*(array.shape for array in arrays))
        scalars = tuple((name, int(array)) for name, array in zip(self.names, arrays)
                        if array.ndim == 0 and array.dtype.kind in "iu")
        if scalars and len(scalars) < len(self.names) and np.prod(shape) >= FOLD_AT:
            folded = _folded(self.expr, scalars)
            rest = dict(zip(self.names, arrays))
            return np.broadcast_to(folded.checked([rest[name] for name in folded.names]), shape)
        return np.broadcast_to(self.checked(arrays), shape)

    def checked(self, arrays: list[np.ndarray]) -> np.ndarray:
        """The value at validated arrays (in the order of ``names``)."""
        if all(array.dtype.kind in "iu" for array in arrays):
            biggest = [int(array.max()) if array.size else 1 for array in arrays]
            if self.bound(*biggest) < INT64_LIMIT:
                return self._integer(*(array.astype(np.int64, copy=False) for array in arrays))
        floats = [array.astype(np.float64, copy=False) for array in arrays]
        value = chunked(self.numerator, floats)
        if self.denominator is not None:
            value = value / chunked(self.denominator, floats)
        return np.asarray(value, dtype=np.float64)

    def _integer(self, *arrays: np.ndarray) -> np.ndarray:
        """int64 numerator over int64 denominator: the quotient if whole everywhere, else one division."""
        numerator = np.asarray(chunked(self.numerator, arrays))
        if self.denominator is None:
            return numerator
        denominator = np.asarray(chunked(self.denominator, arrays))
        quotient, remainder = np.divmod(numerator, denominator)
        if not remainder.any():
            return quotient
        return numerator / denominator


#: Configurations evaluated per block: every temporary of a block stays in the CPU's cache, so the
#: cost per configuration is flat from 10^4 to 10^7 (whole 10^7 columns go through memory at every step).
CHUNK = 2**15


def chunked(function: Callable[..., np.ndarray], arrays: Sequence[np.ndarray]) -> np.ndarray:
    """``function(*arrays)`` block by block of CHUNK configurations (arrays of one shape or scalars), else at once."""
    shape = np.broadcast_shapes(*(array.shape for array in arrays))
    size = math.prod(shape)
    if size <= CHUNK or any(array.ndim and array.shape != shape for array in arrays):
        return function(*arrays)
    flat = [array.reshape(-1) if array.ndim else array for array in arrays]
    first = np.asarray(function(*(array[:CHUNK] if array.ndim else array for array in flat)))
    out = np.empty(size, dtype=first.dtype)
    out[:CHUNK] = first
    for start in range(CHUNK, size, CHUNK):
        part = function(*(array[start:start + CHUNK] if array.ndim else array for array in flat))
        if np.result_type(part) != out.dtype:
            return function(*arrays)     # a block of another type: the whole at once, as before
        out[start:start + CHUNK] = part
    return out.reshape(shape)


@lru_cache(maxsize=256)
def _folded(expr: sp.Expr, scalars: tuple[tuple[str, int], ...]) -> "Compiled":
    """``expr`` with the integer scalars substituted, compiled: fewer array operations per call."""
    by_name = {symbol.name: symbol for symbol in expr.free_symbols}
    return compile(expr.xreplace({by_name[name]: sp.Integer(value) for name, value in scalars}))


def _positive_array(name: str, value: object, zero: bool = False) -> np.ndarray:
    """``value`` as a numeric array of positive finite numbers (or 0 too: ``zero``), or ValueError naming ``name``."""
    array = np.asarray(value)
    if array.dtype.kind not in "iuf":
        raise ValueError(f"{name}: must be positive numbers, got {array.dtype} values")
    if array.dtype.kind in "iu":             # finite by type: one pass for the smallest, no temporary
        if array.size and array.min() < (0 if zero else 1):
            raise ValueError(f"{name}: must be positive and finite, got {array.min()!r} .. {array.max()!r}")
        return array
    if array.size and not (np.all(np.isfinite(array)) and np.all(array >= 0 if zero else array > 0)):
        raise ValueError(f"{name}: must be positive and finite, got {array.min()!r} .. {array.max()!r}")
    return array


@lru_cache(maxsize=None)
def compile(expr: sp.Expr) -> Compiled:  # noqa: A001 (the issue's name: derive.sweep.compile)
    """``expr`` as a vectorised function of keyword arrays named by its symbols (cached per expression)."""
    expr = sp.sympify(expr)
    numerator, denominator = ratio(expr)
    names = tuple(symbol.name for symbol in arguments(expr))
    bound_expr = upper_bound(numerator) + upper_bound(denominator)
    bound_names = {symbol.name for symbol in arguments(bound_expr)}
    bound = sp.lambdify(arguments(bound_expr), bound_expr, "math", docstring_limit=0)
    picks = [index for index, name in enumerate(names) if name in bound_names]

    def bound_at(*maxima: int) -> int:
        return bound(*(maxima[index] for index in picks))

    def over(part: sp.Expr) -> Callable[..., np.ndarray]:
        """``part`` as a function of all of ``names`` (positional), whatever symbols it uses."""
        function = numpy_function(part)
        used = [names.index(symbol.name) for symbol in arguments(part)]
        return lambda *arrays: function(*(arrays[index] for index in used))

    nonnegative = frozenset(symbol.name for symbol in arguments(expr)
                            if symbol.is_nonnegative and not symbol.is_positive)
    return Compiled(expr, names, over(numerator),
                    None if denominator == 1 else over(denominator), bound_at, nonnegative)


# ---- the accounts a layout is judged by ----

#: Activation recompute policy -> the FLOP account's policy (Megatron's full recompute re-runs
#: the layers, not the output head: "full-layers" in derive.accounts.flops).
RECOMPUTE_FLOPS: dict[str, str] = {"none": "none", "selective": "selective", "full": "full-layers"}

#: Context parallelism over c ranks: each keeps the activations of s / c tokens of every sequence
#: (exact for tables linear in s: flash attention, no score matrices).
CONTEXT: dict[sp.Symbol, sp.Expr] = {s: s / c}


def _tensor_parallel_share(table: Ledger) -> Ledger:
    """One TP rank's parameters: GEMM matrices and the (vocabulary-parallel) embedding over t."""
    return table.map(lambda w: w.divided(t) if w.has("gemm") or w.has("embedding") else w)


def _layer_and_edges(architecture: str | Layout) -> tuple[Ledger, Ledger]:
    """One layer's parameter table and the model edges': a family's, or a dense config layout's."""
    if isinstance(architecture, Layout):
        if not architecture.dense:
            raise ValueError("model: sweeps and plans cover dense models; MoE / MLA layouts have "
                             "their own accounts (derive --moe)")
        return layer_rows(architecture), edge_rows(architecture)
    layer, edges = FAMILIES[choose("family", architecture, FAMILIES)]
    return layer(), edges()


# ---- a placement's states as columns: one expression serves every placement and ZeRO stage ----

#: The counts a placement's resident bytes are written in (derive.accounts.placement's rows): parameters,
#: and under an FP8 recipe the quantised elements and matrices (derive.recipes).
STATE_COUNTS = (N, N_8, n_8)
#: Per count, the bytes per unit of it a rank holds whole and the bytes sharded over STATE_RANKS: integer
#: symbols an evaluation is given as numbers (:func:`state_columns`), so the accounts of every placement
#: and ZeRO stage are one expression, compiled once (:func:`accounts` with no placement).
STATE_BYTES: dict[sp.Symbol, tuple[sp.Symbol, sp.Symbol]] = {
    count: (sp.Symbol(f"{count.name}_bytes_whole", nonnegative=True, integer=True),
            sp.Symbol(f"{count.name}_bytes_sharded", nonnegative=True, integer=True))
    for count in STATE_COUNTS}


def held_bytes(count: sp.Symbol) -> sp.Expr:
    """Bytes a rank holds per unit of ``count`` in STATE_BYTES' symbols: whole + sharded / (d c)."""
    whole, sharded = STATE_BYTES[count]
    return whole + sharded / STATE_RANKS


def state_split(expr: sp.Expr, ranks: sp.Symbol,
                counts: Sequence[sp.Symbol] = STATE_COUNTS) -> dict[str, int] | None:
    """``expr`` (bytes in ``counts``, sharded rows over ``ranks``) as the values of their STATE_BYTES symbols.

    None unless every term is a nonnegative whole multiple of one count, held whole or over ``ranks``.
    """
    found = dict.fromkeys((symbol.name for count in counts for symbol in STATE_BYTES[count]), 0)
    expr = sp.expand(expr * ranks)
    if expr == 0:
        return found
    if not expr.free_symbols <= {*counts, ranks}:
        return None
    for term in sp.Add.make_args(expr):
        coefficient, product = term.as_coeff_Mul()
        powers = product.as_powers_dict()
        held = [count for count in counts if count in powers]
        if (len(held) != 1 or powers[held[0]] != 1 or powers.get(ranks, 0) not in (0, 1) or len(powers) > 2
                or not (coefficient.is_Integer and coefficient > 0)):
            return None
        found[STATE_BYTES[held[0]][0 if ranks in powers else 1].name] += int(coefficient)
    return found


@lru_cache(maxsize=None)
def state_columns(placement_name: str, sharded: bool, recipe: str | None = None,
                  fp8_param_gather: bool = False) -> dict[str, int] | None:
    """The resident bytes of ``placement_name`` as the values of STATE_BYTES' symbols, as :func:`accounts` counts them.

    The placement's rows in N and, under ``recipe``, the rows it adds in N_8 and n_8; None where a row is not a
    whole multiple of one count (e.g. a scale per block of elements): such placements keep their own expressions.
    """
    if fp8_param_gather and recipe is None:
        raise ValueError("fp8_param_gather: needs an FP8 recipe")
    ranks = sp.Dummy("ranks", positive=True, integer=True)
    plain = placement_bytes(placement_name, sharded, ranks)
    found = state_split(plain, ranks, (N,))
    if recipe is None or found is None:
        return found
    added = state_split(placement_bytes(placement_name, sharded, ranks, recipe, fp8_param_gather) - plain,
                        ranks, (N_8, n_8))
    return None if added is None else {**found, **added}


@lru_cache(maxsize=None)
def _stage_parameters(architecture: str | Layout) -> dict[str, sp.Expr]:
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
def _stage_fp8_weights(architecture: str | Layout) -> dict[str, tuple[sp.Expr, sp.Expr]]:
    """(N_8, n_8) per GPU of each stage: the layer matrices an FP8 recipe quantises (over t), L / p layers' worth.

    derive.recipes.fp8_weight_counts: elements of one TP rank's share of the layer table, matrices of the
    whole table (each rank holds a shard of every one); the edges (embedding, head) stay 16-bit.
    """
    layer, _ = _layer_and_edges(architecture)
    numel, tensors = fp8_weight_counts(_tensor_parallel_share(layer))[0], fp8_weight_counts(layer)[1]
    stage = (numel * L / p, tensors * L / p)
    return {"single": (numel * L, tensors * L), "first": stage, "last": stage, "middle": stage}


def stage_counts(architecture: str | Layout, stage: str, fp8: bool = False) -> dict[sp.Symbol, sp.Expr]:
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
def accounts(architecture: str | Layout, profile: str, recompute: str, placement_name: str | None = "megatron",
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
    ``placement_name`` None: the states in STATE_BYTES' symbols, given as :func:`state_columns` of a placement.
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
        added = None if recipe is None else (
            placement_bytes(placement_name, sharded, STATE_RANKS, recipe, fp8_param_gather)
            - placement_bytes(placement_name, sharded, STATE_RANKS))
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
def account_columns(architecture: str | Layout, profile: str, recompute: str, placement_name: str,
                    sharded: bool, attention_kernel: str = "fused", balanced: bool = False,
                    recipe: str | None = None, fp8_param_gather: bool = False) -> dict[str, sp.Expr]:
    """:meth:`Accounts.columns` of one combination (cached)."""
    return accounts(architecture, profile, recompute, placement_name, sharded, attention_kernel,
                    balanced, recipe, fp8_param_gather).columns()


#: Every column :func:`evaluate` can report from the accounts.
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


def bubble_factor(pipeline: np.ndarray, virtual: np.ndarray, micro_batches: np.ndarray) -> np.ndarray:
    """1 + (p - 1) / (v m): the pipeline bubble of the (interleaved) 1F1B schedule (Narayanan et al. 2021, 2.2)."""
    return 1 + (pipeline - 1) / (virtual * micro_batches)


# ---- grids ----

#: Layout symbols a grid varies (e is carried: no dense-model account depends on it).
LAYOUT = ("s", "b", "t", "p", "v", "d", "c", "e")
#: Categorical axes.
CHOICES = ("recompute", "zero", "profile")


def _model(entry: str | Model) -> Model:
    """A preset name / alias or a Model (e.g. from a config)."""
    return entry if isinstance(entry, Model) else model(entry)


def placement_sharded(zero: int, placement_name: str) -> bool:
    """Whether ``zero`` asks for ``placement_name``'s sharding: 0 none, the placement's own stage sharded."""
    stage = placement(placement_name).stage
    if isinstance(zero, bool) or zero not in (0, stage):
        raise ValueError(f"zero: {placement_name} shards at stage {stage}; use 0 or {stage}, got {zero!r}")
    return zero == stage


def micro_batches(tokens: int, s: np.ndarray, b: np.ndarray, d: np.ndarray) -> np.ndarray:
    """m = T / (s b d) micro-batches per step; ValueError naming ``tokens`` where it is not whole."""
    if np.any(np.asarray(s, dtype=float) * np.asarray(b, dtype=float) * np.asarray(d, dtype=float) > MAX_SIZE):
        raise ValueError("b: s*b*d tokens per micro-batch round pass 2^53 at some layout")
    per_step = np.asarray(s) * np.asarray(b) * np.asarray(d)
    if np.any(tokens % per_step):
        raise ValueError(f"tokens: {tokens} is not a whole number of s*b*d micro-batches at every layout")
    return tokens // per_step


def evaluate(entry: Model, layout: Mapping[str, np.ndarray], recompute: str = "none",
             zero: int = 0, profile: str = "llama-fused", tokens: int | None = None,
             hardware_name: str = "h100", mfu: float = 1.0, placement_name: str = "megatron",
             names: Sequence[str] = COLUMNS, attention_kernel: str = "fused",
             balanced: bool = False, recipe: str | None = None,
             fp8_param_gather: bool = False) -> dict[str, np.ndarray]:
    """The accounts ``names`` of ``entry`` at the layouts in ``layout`` (arrays s, b, t, p, v, d [, c]; m or ``tokens``).

    ``balanced``: every layout's embedding and loss take a layer slot each (p > 1 everywhere).
    ``recipe``: an FP8 recipe's weight copies and FP8 linear inputs (:func:`accounts`).
    """
    sharded = placement_sharded(zero, placement_name)
    if balanced and np.any(np.asarray(layout["p"]) == 1):
        raise ValueError("balanced: the embedding and loss slots need p > 1")
    states = state_columns(placement_name, sharded, recipe, fp8_param_gather)
    terms = (accounts(entry.architecture, profile, recompute, None, False, attention_kernel, bool(balanced), recipe)
             if states is not None else
             accounts(entry.architecture, profile, recompute, placement_name, sharded, attention_kernel,
                      bool(balanced), recipe, fp8_param_gather))
    if tokens is not None:
        names = dict.fromkeys([*names, "flops_per_token", "hardware_flops_per_token"])
    run = {name: compile(terms.column(name)) for name in names}
    values = {symbol.name: number for symbol, number in entry.values.items()}
    values.update({name: np.asarray(array) for name, array in layout.items()})
    values.setdefault("c", np.asarray(1))
    values.update(states or {})
    if np.any(values["c"] > 1) and not terms.context_parallel:
        raise ValueError(f"c: context parallelism needs activations linear in s; {profile} with "
                         f"{attention_kernel} attention keeps score matrices")
    if tokens is not None:
        values["m"] = micro_batches(tokens, values["s"], values["b"], values["d"])
    gpus = values["t"] * values["p"] * values["d"] * values["c"]
    columns = {name: function(**values) for name, function in run.items()
               if "m" in values or name not in ("stage_activation_bytes", "memory_per_gpu")}
    shape = np.broadcast_shapes(*(np.shape(x) for x in values.values()))
    columns = {name: np.broadcast_to(column, shape) for name, column in columns.items()}
    columns["gpus"] = np.broadcast_to(gpus, shape)
    if tokens is not None:
        peak = hardware(hardware_name).peak_flops
        bound = step_time_lower_bound(tokens, columns["hardware_flops_per_token"], gpus, peak, mfu)
        columns["micro_batches"] = values["m"]
        columns["step_time"] = (bound * bubble_factor(values["p"], values["v"], values["m"])
                                * compile(stage_balance(bool(balanced)))(**values))
        columns["mfu"] = model_flops_utilisation(tokens / columns["step_time"], columns["flops_per_token"],
                                                 gpus, peak)
    return columns


def grid(models: Iterable[str | Model], s: Sequence[int] | None = None, b: Sequence[int] = (1,),
         t: Sequence[int] = (1,), p: Sequence[int] = (1,), v: Sequence[int] = (1,),
         d: Sequence[int] = (1,), c: Sequence[int] = (1,), e: Sequence[int] = (1,),
         recompute: Sequence[str] = ("none",),
         zero: Sequence[int] = (0,), profile: Sequence[str] = ("llama-fused",),
         tokens: int | None = None, hardware_name: str = "h100", mfu: float = 1.0,
         placement_name: str = "megatron", attention_kernel: str = "fused", frame: bool = False):
    """The accounts over the cross product of models and every axis, as numpy columns.

    ``s`` defaults to each model's own sequence length; c is the context-parallel
    size (GPUs = t p d c), e is carried (no dense-model account depends on it). With ``tokens`` (per
    step) the columns add m = T / (s b d), the first stage's activations, the
    most loaded GPU's memory, the step time bound x (1 + (p - 1)/(v m)) and MFU.
    Uneven stages stretch the step by :func:`stage_balance`.
    ``attention_kernel`` (``fused`` or ``materialised``) applies to the ``gpt`` profile.
    ``frame=True`` returns a pandas DataFrame (pandas is not a dependency).
    """
    axes = {"b": b, "t": t, "p": p, "v": v, "d": d, "c": c, "e": e}
    if s is not None:
        axes = {"s": s, **axes}
    axes = {name: tuple(bounded_int(name, value) for value in values) for name, values in axes.items()}
    parts: list[dict[str, np.ndarray]] = []
    for entry in map(_model, models):
        numeric = {"s": (entry.seq,), **axes}
        mesh = np.meshgrid(*(np.asarray(values, dtype=np.int64) for values in numeric.values()),
                           indexing="ij")
        layout = {name: array.ravel() for name, array in zip(numeric, mesh)}
        for choice in itertools.product(recompute, zero, profile):
            columns = evaluate(entry, layout, *choice, tokens=tokens, hardware_name=hardware_name,
                               mfu=mfu, placement_name=placement_name,
                               attention_kernel=attention_kernel)
            size = layout["s"].size
            labels = {"model": entry.name, **dict(zip(CHOICES, choice))}
            parts.append({**{k: np.full(size, value) for k, value in labels.items()}, **layout,
                          **{k: np.broadcast_to(value, (size,)) for k, value in columns.items()}})
    table = {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    if not frame:
        return table
    try:
        import pandas
    except ImportError as error:
        raise ValueError("frame: pandas is not installed (grid returns numpy columns without it)") from error
    return pandas.DataFrame(table)
