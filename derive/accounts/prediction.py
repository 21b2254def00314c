"""``predict(model, parallelism, system)``: the step model over a derive Model, a Parallelism and a System.

The communication rows are the ledger's (``derive.accounts.comm.collectives``), the
optimizer's bytes the state ledger's (``derive.accounts.state.bytes_per_parameter``),
the GEMMs and saved bytes the workload's (``derive.accounts.workload``).
FP8 recipes (``fp8-delayed``, ``fp8-current``, ``fp8-blockwise``, ``mxfp8``) run the
linear layers at the FP8 peak (``derive.accounts.step.LINEAR_DTYPE``); where the state
accounts do not know a recipe, its states and traffic are counted as Megatron's BF16
mixed precision with FP32 gradients (``FP8_STATES``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Iterable

import sympy as sp

from derive.accounts.comm import collectives
from derive.accounts.comm_rows import LayoutTerms
from derive.accounts.comm_rows import rows as comm_rows
from derive.accounts.pipeline_split import most_layers
from derive.accounts.state import PRECISIONS, bytes_per_parameter
from derive.accounts.step import (
    LINEAR_DTYPE,
    STATE_PRECISION,
    Efficiency,
    Layout,
    StepTime,
    step_time,
)
from derive.accounts.workload import workload
from derive.inputs import choose
from derive.parallelism import Parallelism
from derive.presets import Model
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
    """A communication ledger row at one layout, as floats (what the step model reads)."""

    name: str
    group: str
    collective: str
    overlap: str
    pass_: str
    ranks: float
    sent: float
    count: float


#: The layout symbols a ledger template is written in (derive.accounts.comm_rows.LayoutTerms).
TEMPLATE_SIZES = (t, p, v, c, d, e, t_E, m, b)


@lru_cache(maxsize=256)
def _template(model: Model, flags: Parallelism, whole_model: bool) -> tuple[tuple, object]:
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
    fields = [sp.sympify(model.at(getattr(row, name))) for row in rows for name in ("ranks", "sent", "count")]
    # one function for every row's ranks, sent and count: one lambdify, not three per row
    values = sp.lambdify(TEMPLATE_SIZES, fields, "math")
    return tuple((row.name, row.group, row.collective, row.overlap, row.pass_) for row in rows), values


#: The Parallelism fields a ledger template depends on (its sizes are the template's symbols).
FLAG_FIELDS = ("sequence_parallel", "zero", "reshard_after_forward", "recompute", "precision", "cp_comm",
               "scatter_gather", "algorithm", "capacity_factor", "sp_regather", "balanced", "fp8_param_gather")


@lru_cache(maxsize=256)
def _flags_of(values: tuple) -> Parallelism:
    return Parallelism(**dict(zip(FLAG_FIELDS, values)))


def _flags(parallelism: Parallelism) -> Parallelism:
    """``parallelism``'s flags on a one-GPU layout (the template's cache key)."""
    return _flags_of(tuple(getattr(parallelism, name) for name in FLAG_FIELDS))


def ledger_rows(model: Model, parallelism: Parallelism) -> list[Row]:
    """The rows of ``collectives(model, parallelism)`` as floats, from a template compiled once per flags.

    Equal to derive.accounts.comm.collectives row by row (tests/test_step.py); the planner's speed.
    """
    parallelism.check(model)
    if parallelism.dp_shard is not None:  # HSDP's shard size is a size, not a flag: the exact ledger
        return [Row(r.name, r.group, r.collective, r.overlap, r.pass_, float(r.ranks), float(r.sent),
                    float(r.count))
                for r in collectives(model, parallelism)]
    flags = _flags(parallelism)
    sizes = (parallelism.tp, parallelism.pp, parallelism.vp, parallelism.cp, parallelism.dp, parallelism.ep,
             parallelism.etp, parallelism.micro_batches, parallelism.micro_batch)
    names, values = _template(model, flags, parallelism.pp == 1)
    fields = values(*sizes)
    found = []
    for index, (name, group, collective, overlap, pass_) in enumerate(names):
        ranks, sent, count = (float(field) for field in fields[3 * index:3 * index + 3])
        if ranks == 1 or count == 0 or sent == 0:
            continue
        found.append(Row(name, group, collective, overlap, pass_, ranks, sent, count))
    return found


@lru_cache(maxsize=1024)
def _state_bytes_per_parameter(precision: str, zero: int, fp8_param_gather: bool = False) -> sp.Expr:
    """Resident state bytes per parameter, symbolic in d (and N_8 / N, n_8 / N under an FP8 recipe).

    ``fp8_param_gather``: the layer matrices held in FP8, not bf16 (the ledger's gathered rows, one table).
    """
    ledger = STATE_PRECISION.get(precision, ledger_precision(precision))
    return bytes_per_parameter(ledger, "adam", min(zero, 3), d, fp8_param_gather=fp8_param_gather)


@lru_cache(maxsize=4096)
def state_bytes_per_parameter(model: Model, precision: str, zero: int, data_parallel: int,
                              fp8_param_gather: bool = False) -> float:
    """Resident state bytes per parameter a rank's optimizer step touches (sharded over d under ZeRO)."""
    return float(model.at(_state_bytes_per_parameter(precision, zero, fp8_param_gather), d=data_parallel))


def tensor_cores(precision: str, system: System) -> str:
    """``precision`` if ``system``'s tensor cores run it (its GEMM dtype's peak, its recipe's generations), else ValueError naming it."""
    precision = choose("precision", precision, LINEAR_DTYPE)
    if LINEAR_DTYPE[precision] not in system.peaks:
        raise ValueError(f"precision: {system.name} has no {LINEAR_DTYPE[precision].upper()} tensor cores")
    if precision in RECIPES and system.generation not in RECIPES[precision].generations:
        raise ValueError(f"precision: {system.name} ({system.generation.capitalize()}) has no tensor cores for "
                         f"{precision} (Transformer Engine runs it on "
                         f"{', '.join(name.capitalize() for name in RECIPES[precision].generations)})")
    return precision


def predict(model: Model, parallelism: Parallelism, system: System, precision: str | None = None,
            overlap: Iterable[str] | None = None, eta: Efficiency | None = None) -> StepTime:
    """The predicted step of ``model`` under ``parallelism`` on ``system`` GPUs.

    ``precision`` overrides the parallelism's (an FP8 recipe the state accounts may not hold);
    ValueError naming the field when the layout does not divide the model.
    """
    precision = tensor_cores(precision or parallelism.precision, system)
    counted = replace(parallelism, precision=ledger_precision(precision))
    rows = ledger_rows(model, counted)
    lay = Layout(parallelism.tp, parallelism.pp, parallelism.vp, parallelism.cp, parallelism.ep,
                 parallelism.dp, parallelism.etp, parallelism.micro_batch, parallelism.micro_batches,
                 parallelism.sequence_parallel, parallelism.zero, parallelism.recompute, precision,
                 parallelism.balanced)
    replicas = parallelism.dp * parallelism.cp if parallelism.zero else 1
    return step_time(workload(model), lay, system, rows, eta, overlap,
                     state_bytes_per_parameter(model, precision, parallelism.zero, replicas,
                                               parallelism.fp8_param_gather))
