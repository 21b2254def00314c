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

from dataclasses import replace
from functools import lru_cache
from typing import Iterable

from derive.accounts.comm import collectives
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
from derive.symbols import d
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


@lru_cache(maxsize=4096)
def _rows(model: Model, parallelism: Parallelism) -> tuple:
    return tuple(collectives(model, parallelism))


def state_bytes_per_parameter(precision: str, zero: int, data_parallel: int) -> float:
    """Resident state bytes per parameter a rank's optimizer step touches (sharded over d under ZeRO)."""
    ledger = STATE_PRECISION.get(precision, ledger_precision(precision))
    return float(bytes_per_parameter(ledger, "adam", min(zero, 3), d).subs(d, data_parallel))


def predict(model: Model, parallelism: Parallelism, system: System, precision: str | None = None,
            overlap: Iterable[str] | None = None, eta: Efficiency | None = None) -> StepTime:
    """The predicted step of ``model`` under ``parallelism`` on ``system`` GPUs.

    ``precision`` overrides the parallelism's (an FP8 recipe the state accounts may not hold);
    ValueError naming the field when the layout does not divide the model.
    """
    precision = choose("precision", precision or parallelism.precision, LINEAR_DTYPE)
    if LINEAR_DTYPE[precision] not in system.peaks:
        raise ValueError(f"precision: {system.name} has no {LINEAR_DTYPE[precision].upper()} tensor cores")
    counted = replace(parallelism, precision=ledger_precision(precision))
    rows = _rows(model, counted)
    lay = Layout(parallelism.tp, parallelism.pp, parallelism.vp, parallelism.cp, parallelism.ep,
                 parallelism.dp, parallelism.etp, parallelism.micro_batch, parallelism.micro_batches,
                 parallelism.sequence_parallel, parallelism.zero, parallelism.recompute, precision)
    replicas = parallelism.dp * parallelism.cp if parallelism.zero else 1
    return step_time(workload(model), lay, system, rows, eta, overlap,
                     state_bytes_per_parameter(precision, parallelism.zero, replicas))
