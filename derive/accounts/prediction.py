"""``predict(model, parallelism, system)``: the step model over a derive Model, a Parallelism and a System.

The communication rows are the ledger's (``derive.accounts.comm.collectives``), the
optimizer's bytes the state ledger's (``derive.accounts.state.bytes_per_parameter``),
the GEMMs and saved bytes the workload's (``derive.accounts.workload``).
FP8 recipes (``fp8-delayed``, ``fp8-current``, ``fp8-blockwise``, ``mxfp8``) run the
linear layers at the FP8 peak (``derive.accounts.step_layout.LINEAR_DTYPE``); where the state
accounts do not know a recipe, its states and traffic are counted as Megatron's BF16
mixed precision with FP32 gradients (``FP8_STATES``). ``predict_columns`` runs the same step
model over numpy columns of layouts that share their flags (the planner's many layouts at once).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable, Iterable, Mapping

import numpy as np
import sympy as sp

from derive.accounts.comm import check_context, collectives
from derive.accounts.comm_row import LayoutTerms
from derive.accounts.comm_rows import rows as comm_rows
from derive.accounts.pipeline_split import most_layers
from derive.accounts.state import PRECISIONS, bytes_per_parameter
from derive.accounts.efficiency import Efficiency
from derive.accounts.step import StepTime, step_time
from derive.accounts.step_layout import LINEAR_DTYPE, STATE_PRECISION, Layout
from derive.accounts.workload import workload
from derive.inputs import choose
from derive.model import Model
from derive.parallelism import Parallelism
from derive.printing.python import LAMBDIFY_SETTINGS, NumPyCodePrinter
from derive.recipes import RECIPES
from derive.symbols import b, c, d, e, m, p, t, t_E, v
from derive.systems import System

#: The state-ledger precision an FP8 recipe's states and traffic are counted in when the state
#: accounts have no row for it: Megatron keeps FP32 main weights and gradients beside the FP8
#: GEMM copies (Transformer Engine: "FP8 ... only for the GEMMs; master weights stay in higher
#: precision").
FP8_STATES = "bf16-fp32grad"


def ledger_precision(precision: str) -> str:
    """The precision the state and communication ledgers count ``precision``'s states in."""
    choose("precision", precision, LINEAR_DTYPE)
    return precision if precision in PRECISIONS else FP8_STATES


@dataclass(frozen=True)
class Row:
    """A communication ledger row at one layout, as floats (what the step model reads), or at columns of layouts."""

    name: str
    group: str
    collective: str
    overlap: str
    pass_: str
    ranks: float | np.ndarray
    sent: float | np.ndarray
    count: float | np.ndarray


#: The layout symbols a ledger template is written in (derive.accounts.comm_row.LayoutTerms).
TEMPLATE_SIZES = (t, p, v, c, d, e, t_E, m, b)


@lru_cache(maxsize=256)
def _template(model: Model, flags: Parallelism, whole_model: bool) -> tuple[tuple, tuple, tuple[int, ...]]:
    """The ledger's rows for ``model`` with the layout sizes left as symbols, compiled once (per flags).

    ``rows`` of derive.accounts.comm_rows with LayoutTerms in t, p, v, c, d, e, t_E, m and the
    most loaded rank's layers min(v ceil(L / (p v)), L) (balanced: derive.accounts.pipeline_split's,
    a middle rank's v ceil((L + 2) / (p v)), at p = 2 one fewer), MoE layers first (as
    derive.accounts.comm.collectives numbers them); ``whole_model`` when p = 1 (every edge on the rank).
    """
    layers = most_layers(flags.balanced, model.layers)
    moe = sp.Min(layers, len(model.moe_layers))
    terms = LayoutTerms(t=t, p=sp.Integer(1) if whole_model else p, v=v, c=c, d=d, e=e, t_E=t_E, m=m,
                        dense_layers=layers - moe, moe_layers=moe,
                        capacity=None if flags.capacity_factor is None else sp.Rational(flags.capacity_factor))
    rows = comm_rows(model.architecture, terms, flags, whole_model)
    fields = [_at(model, sp.sympify(getattr(row, name))) for row in rows for name in ("ranks", "sent", "count")]
    # each distinct expression of the rows' ranks, sent and count compiled once (rows and templates repeat them)
    distinct = list(dict.fromkeys(fields))
    index = {field: position for position, field in enumerate(distinct)}
    return (tuple((row.name, row.group, row.collective, row.overlap, row.pass_) for row in rows),
            _numpy_fields(distinct), tuple(index[field] for field in fields))


@lru_cache(maxsize=4096)
def _at(model: Model, field: sp.Expr) -> sp.Expr:
    """``model.at(field)``, once per expression (the templates of many flags repeat their rows' fields)."""
    return sp.sympify(model.at(field))


#: Every ledger expression compiled so far -> (the numpy function of TEMPLATE_SIZES that returns it among
#: others, as a list, and its place in that list).
_COMPILED_FIELDS: dict[sp.Expr, tuple[Callable[..., list], int]] = {}


def _numpy_fields(fields: list[sp.Expr]) -> tuple[tuple[Callable[..., list], int], ...]:
    """Each ledger expression as numpy of TEMPLATE_SIZES (one layout's sizes or columns): new ones in one lambdify."""
    new = [field for field in fields if field not in _COMPILED_FIELDS]
    if new:
        function = sp.lambdify(TEMPLATE_SIZES, new, "numpy", docstring_limit=0,
                              printer=NumPyCodePrinter(LAMBDIFY_SETTINGS))
        _COMPILED_FIELDS.update((field, (function, position)) for position, field in enumerate(new))
    return tuple(_COMPILED_FIELDS[field] for field in fields)


#: The Parallelism fields a ledger template depends on (its sizes are the template's symbols).
FLAG_FIELDS = ("sequence_parallel", "zero", "reshard_after_forward", "recompute", "precision", "cp_comm",
               "scatter_gather", "algorithm", "capacity_factor", "sp_regather", "balanced", "fp8_param_gather")


@lru_cache(maxsize=256)
def _flags_of(values: tuple) -> Parallelism:
    return Parallelism(**dict(zip(FLAG_FIELDS, values)))


def _flags(parallelism: Parallelism) -> Parallelism:
    """``parallelism``'s flags on a one-GPU layout (the template's cache key)."""
    return _flags_of(tuple(getattr(parallelism, name) for name in FLAG_FIELDS))


@lru_cache(maxsize=4096, typed=True)
def _one_layout_fields(function: Callable[..., list], *sizes: int) -> list:
    """``function(*sizes)`` of one layout's sizes, once: templates of other flags (recompute, ZeRO stage, balanced)
    share the compiled functions, and the planner's checks predict each layout under each of them. Read only."""
    return function(*sizes)


def template_rows(model: Model, flags: Parallelism, sizes: tuple, whole_model: bool) -> list[Row]:
    """The ledger template of ``flags`` at ``sizes`` (TEMPLATE_SIZES' values: numbers or columns).

    A row that moves nothing at a layout (one rank, no bytes or no calls) counts 0 there; rows that
    move nothing at every layout are left out.
    """
    names, compiled, where = _template(model, _flags(flags), whole_model)
    one_layout = not any(isinstance(size, np.ndarray) for size in sizes)
    computed: dict[Callable[..., list], list] = {}
    for function, _ in compiled:
        if function not in computed:
            computed[function] = _one_layout_fields(function, *sizes) if one_layout else function(*sizes)
    fields = [computed[function][position] for function, position in (compiled[index] for index in where)]
    found = []
    if one_layout:
        # one layout: each field is one number already, a float of it is what a 0-d column holds (numpy on
        # scalars, row by row, cost the scalar predict most of its time)
        for index, (name, group, collective, overlap, pass_) in enumerate(names):
            ranks, sent, count = map(float, fields[3 * index:3 * index + 3])
            if ranks != 1 and count != 0 and sent != 0:
                found.append(Row(name, group, collective, overlap, pass_, ranks, sent, count))
        return found
    shape = np.broadcast_shapes(*(np.shape(size) for size in sizes))
    for index, (name, group, collective, overlap, pass_) in enumerate(names):
        ranks, sent, count = (np.broadcast_to(np.asarray(field, dtype=float), shape)
                              for field in fields[3 * index:3 * index + 3])
        moves = (ranks != 1) & (count != 0) & (sent != 0)
        if moves.any():
            found.append(Row(name, group, collective, overlap, pass_, ranks, sent, np.where(moves, count, 0.0)))
    return found


def ledger_rows(model: Model, parallelism: Parallelism) -> list[Row]:
    """The rows of ``collectives(model, parallelism)`` as floats, from a template compiled once per flags.

    Equal to derive.accounts.comm.collectives row by row (tests/test_step.py); the planner's speed.
    """
    parallelism.check(model)
    check_context(model, parallelism.cp)  # the ledger's refusal, as derive comm's (no CP rows over MLA)
    if parallelism.dp_shard is not None:  # HSDP's shard size is a size, not a flag: the exact ledger
        return [Row(r.name, r.group, r.collective, r.overlap, r.pass_, float(r.ranks), float(r.sent),
                    float(r.count))
                for r in collectives(model, parallelism)]
    sizes = (parallelism.tp, parallelism.pp, parallelism.vp, parallelism.cp, parallelism.dp, parallelism.ep,
             parallelism.etp, parallelism.micro_batches, parallelism.micro_batch)
    return template_rows(model, parallelism, sizes, parallelism.pp == 1)  # one layout's: floats


@lru_cache(maxsize=1024)
def state_bytes_expression(precision: str, zero: int, fp8_param_gather: bool = False) -> sp.Expr:
    """Resident state bytes per parameter, symbolic in d (and N_8 / N, n_8 / N under an FP8 recipe).

    ``fp8_param_gather``: the layer matrices held in FP8, not bf16 (the ledger's gathered rows, one table).
    """
    ledger = STATE_PRECISION.get(precision, ledger_precision(precision))
    return bytes_per_parameter(ledger, "adam", min(zero, 3), d, fp8_param_gather=fp8_param_gather)


@lru_cache(maxsize=4096)
def state_bytes_per_parameter(model: Model, precision: str, zero: int, data_parallel: int,
                              fp8_param_gather: bool = False) -> float:
    """Resident state bytes per parameter a rank's optimizer step touches (sharded over d under ZeRO)."""
    return float(model.at(state_bytes_expression(precision, zero, fp8_param_gather), d=data_parallel))


def tensor_cores(precision: str, system: System) -> str:
    """``precision`` if ``system``'s tensor cores run it (its GEMM dtype's peak, its recipe's generations)."""
    precision = choose("precision", precision, LINEAR_DTYPE)
    if LINEAR_DTYPE[precision] not in system.peaks:
        raise ValueError(f"precision: {system.name} has no {LINEAR_DTYPE[precision].upper()} tensor cores")
    if precision in RECIPES and system.generation not in RECIPES[precision].generations:
        raise ValueError(f"precision: {system.name} ({system.generation.capitalize()}) has no tensor cores for "
                         f"{precision} (Transformer Engine runs it on "
                         f"{', '.join(name.capitalize() for name in RECIPES[precision].generations)})")
    return precision


def predict(model: Model, parallelism: Parallelism, system: System, precision: str | None = None,
            overlap: Iterable[str] | None = None, eta: Efficiency | None = None,
            expert_op_fuser: bool = False, recompute_modules: Iterable[str] = ()) -> StepTime:
    """The predicted step of ``model`` under ``parallelism`` on ``system`` GPUs.

    ``precision`` overrides the parallelism's (an FP8 recipe the state accounts may not hold);
    ``expert_op_fuser``: the experts run as Transformer Engine's fused ops (Megatron's
    ``use_transformer_engine_op_fuser``: ``TEGroupedMLP._fused_forward``, core_v0.18.0, te.ops GroupedLinear,
    ScaledClampedQGeGLU, GroupedLinear), which add the bias and clamp inside them: no eager bias or clamp
    kernels (derive.accounts.compute_time.EXPERT_BIAS_KERNELS, EXPERT_CLAMP_KERNELS); ``recompute_modules``:
    Megatron's ``--recompute-modules`` derive costs beside the parallelism's policy ("layernorm", "moe_act":
    derive.accounts.compute_time.RECOMPUTE_MODULE_KERNELS).
    ValueError naming the field when the layout does not divide the model.
    """
    precision = tensor_cores(precision or parallelism.precision, system)
    counted = replace(parallelism, precision=ledger_precision(precision))
    rows = ledger_rows(model, counted)
    lay = Layout(parallelism.tp, parallelism.pp, parallelism.vp, parallelism.cp, parallelism.ep,
                 parallelism.dp, parallelism.etp, parallelism.micro_batch, parallelism.micro_batches,
                 parallelism.sequence_parallel, parallelism.zero, parallelism.recompute, precision,
                 parallelism.balanced, parallelism.cp_comm, frozenset(recompute_modules))
    replicas = parallelism.dp * parallelism.cp if parallelism.zero else 1
    work = workload(model)
    if expert_op_fuser:
        work = replace(work, expert_output_bias=False, clamped_glu=False)
    return step_time(work, lay, system, rows, eta, overlap,
                     state_bytes_per_parameter(model, precision, parallelism.zero, replicas,
                                               parallelism.fp8_param_gather))


#: The flags the size rules of a Parallelism read: Parallelism.check the balanced split, its construction
#: that expert parallelism with t > 1 needs sequence parallelism (HSDP's dp_shard, a size, is refused
#: before); every other flag is checked on its own when the flags are built.
SHAPE_FLAGS = ("balanced", "sequence_parallel")


@lru_cache(maxsize=256)
def _shape_flags(values: tuple) -> Parallelism:
    return Parallelism(**dict(zip(SHAPE_FLAGS, values)))


@lru_cache(maxsize=65536)
def _check_shape(model: Model, flags: Parallelism, tp: int, pp: int, vp: int, cp: int, ep: int, etp: int) -> None:
    """``Parallelism.check`` of one (t, p, v, c, e, t_E) under ``flags`` (one micro-batch per pipeline rank)."""
    replace(flags, tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, etp=etp, dp=ep * etp, micro_batch=1,
            global_batch=pp * ep * etp).check(model)


def predict_columns(model: Model, flags: Parallelism, sizes: Mapping[str, np.ndarray], system: System,
                    overlap: Iterable[str] | None = None, eta: Efficiency | None = None) -> StepTime:
    """``predict`` of many layouts at once: int64 columns t, p, v, c, d, b, m (optionally e, etp) under ``flags``.

    ``flags`` holds what the layouts share (recompute, ZeRO stage, sequence parallelism, balanced,
    precision, ...; its sizes are ignored); p must be 1 in every layout or in none (the ledger
    template differs). Each distinct (t, p, v, c) is checked as ``Parallelism.check`` checks it;
    the batch rules (m whole, m a multiple of p when v > 1) are the caller's. The StepTime's
    figures and breakdown are columns.
    """
    precision = tensor_cores(flags.precision, system)
    if flags.dp_shard is not None:
        raise ValueError("dp_shard: HSDP's shard size is a size of the exact ledger; predict each layout")
    t, p_, v_, c_, d_, b_, m_ = (np.asarray(sizes[name]) for name in ("t", "p", "v", "c", "d", "b", "m"))
    e_ = np.asarray(sizes.get("e", np.ones_like(t)))
    etp = np.asarray(sizes.get("etp", t))
    whole = p_ == 1
    if whole.any() and not whole.all():
        raise ValueError("p: the columns mix p = 1 with p > 1 (one ledger template each)")
    shape_flags = _shape_flags(tuple(getattr(flags, name) for name in SHAPE_FLAGS))
    for shape in set(zip(t.tolist(), p_.tolist(), v_.tolist(), c_.tolist(), e_.tolist(), etp.tolist())):
        _check_shape(model, shape_flags, *shape)
    check_context(model, int(c_.max(initial=1)))
    counted = replace(flags, precision=ledger_precision(precision))
    # the template over float columns: no int64 product can wrap around (exact below 2^53, as Python's ints)
    floats = tuple(np.asarray(size, dtype=float) for size in (t, p_, v_, c_, d_, e_, etp, m_, b_))
    rows = template_rows(model, counted, floats, bool(whole.all()))
    lay = Layout(t, p_, v_, c_, e_, d_, etp, b_, m_, flags.sequence_parallel, flags.zero, flags.recompute,
                 precision, flags.balanced, flags.cp_comm)
    replicas = d_ * c_ if flags.zero else np.ones_like(d_)
    distinct, where = np.unique(replicas, return_inverse=True)
    states = np.array([state_bytes_per_parameter(model, precision, flags.zero, int(count), flags.fp8_param_gather)
                       for count in distinct])[where.reshape(replicas.shape)]
    return step_time(workload(model), lay, system, rows, eta, overlap, states)
