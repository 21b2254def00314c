"""Step time predicted from derive's ledgers: GEMMs at a roofline, element-wise bytes at HBM speed, collectives on their links.

One step on the slowest pipeline stage (``derive.accounts.schedule``):

    step = (m + (p - 1)/v) x stage(micro-batch) + exposed DP + exposed PP + optimizer

where stage(micro-batch) = GEMMs + attention + element-wise work + exposed TP / CP / EP
communication of one micro-batch on the stage holding ceil(L/(p v)) v layers and the
output head. The compute of a micro-batch (every GEMM pass on its own roofline, the FP8 casts,
element-wise bytes) is derive.accounts.compute_time's; the communication rows on their links and
what the overlap rules leave exposed, derive.accounts.comm_time's; the optimizer reads and writes
every resident state byte once. The eta constants are fitted by ``python -m derive.calibrate``
and read from ``derive/calibration.json`` (derive.accounts.efficiency). Every function takes one
layout's sizes as numbers or many layouts' as numpy columns (the planner's, derive.accounts.step_layout):
the same numpy operations evaluate both.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from derive.accounts.comm_time import communication
from derive.accounts.compute_time import compute_per_micro_batch
from derive.accounts.efficiency import Efficiency, calibrated
from derive.accounts.schedule import overlap_rules, pipeline_length
from derive.accounts.step_layout import Layout, local_parameters
from derive.accounts.workload import PASSES, Workload
from derive.systems import System
from derive.units import DAY_SECONDS, HOUR_SECONDS


@dataclass
class StepTime:
    """A predicted step: seconds, throughput, utilisation under named FLOP conventions, and the breakdown."""

    step_time_s: float
    tokens_per_s_per_gpu: float
    model_tflops_per_gpu: float
    mfu: float
    hfu: float
    mfu_full_square: float
    hfu_full_square: float
    breakdown: dict[str, float]
    conventions: dict[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The JSON object of ``python -m derive.predict``."""
        return {"step_time_s": self.step_time_s, "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
                "model_tflops_per_gpu": self.model_tflops_per_gpu, "mfu": self.mfu, "hfu": self.hfu,
                "mfu_full_square": self.mfu_full_square, "hfu_full_square": self.hfu_full_square,
                "breakdown": dict(self.breakdown), "conventions": dict(self.conventions)}


def layout_gpus(lay: Layout) -> Any:
    """The layout's GPUs: t p c d (derive.parallelism.Parallelism.gpus; the expert grid spans the same ranks)."""
    return lay.t * lay.p * lay.c * lay.d


def budget_time(tokens_per_s_per_gpu: Any, gpus: Any, tokens: Any) -> dict[str, Any]:
    """Days and GPU-hours to train on ``tokens`` at a predicted step's throughput on ``gpus`` GPUs.

    The whole run moves tokens_per_s_per_gpu x gpus tokens per second (tokens per step / step time), so
    the budget takes tokens / that seconds: days = seconds / 86,400, GPU-hours = gpus x seconds / 3,600.
    Numbers, numpy columns or SymPy expressions (the page's traced figures) alike.
    """
    seconds = tokens / (tokens_per_s_per_gpu * gpus)
    return {"days": seconds / DAY_SECONDS, "gpu_hours": gpus * seconds / HOUR_SECONDS}


def optimizer_seconds(work: Workload, lay: Layout, gpu: System, eta: Efficiency,
                      state_bytes_per_parameter: float) -> float:
    """Read and write every resident state byte once (Adam's step, multi-tensor apply), sharded over d under ZeRO."""
    local = local_parameters(work, lay)
    return 2 * local * state_bytes_per_parameter / (eta.memory * gpu.hbm_bandwidth)


def _plain(value: Any, shape: tuple[int, ...] = ()) -> Any:
    """A Python float of one layout's figure (a 0-d array or numpy scalar); columns' figures as columns of ``shape``."""
    return float(value) if shape == () else np.broadcast_to(value, shape)


def step_time(work: Workload, lay: Layout, gpu: System, rows: Iterable[Any] = (),
              eta: Efficiency | None = None, overlap: Iterable[str] | None = None,
              state_bytes_per_parameter: float = 16.0) -> StepTime:
    """The predicted step of ``work`` under ``lay`` on ``gpu`` with the communication ``rows`` (one rank's, per step)."""
    eta = eta or calibrated()
    rules = overlap_rules(None if overlap is None else frozenset(overlap))
    compute = compute_per_micro_batch(work, lay, gpu, eta)
    comm = communication(rows, work, lay, gpu, eta, compute, rules)
    gemm = compute["linear"] + compute["expert"] + compute["attention"] + compute["head"]
    stage = gemm + compute["recompute"] + compute["memory_bound"] + comm["tp"] + comm["cp"] + comm["ep"]
    m = lay.m
    length = pipeline_length(lay.p, lay.v, m)
    breakdown = {"compute": m * gemm, "recompute": m * compute["recompute"],
                 "memory_bound": m * compute["memory_bound"], "tp": m * comm["tp"],
                 "cp": m * comm["cp"], "ep": m * comm["ep"], "bubble": (length - m) * stage,
                 "dp": comm["dp"], "pp": comm["pp"],
                 "optimizer": optimizer_seconds(work, lay, gpu, eta, state_bytes_per_parameter)}
    seconds = sum(breakdown.values())
    gpus = layout_gpus(lay)
    tokens = lay.b * m * lay.d * work.seq
    causal = [row.flops_per_token for row in work.rows]
    square = [flops * (2 if row.kind == "score" else 1) for flops, row in zip(causal, work.rows)]
    again = [lay.recompute in row.recomputed for row in work.rows]
    model_flops = len(PASSES) * sum(causal)
    full_square = len(PASSES) * sum(square)
    hardware = model_flops + sum(flops for flops, rerun in zip(causal, again) if rerun)
    hardware_full = full_square + sum(flops for flops, rerun in zip(square, again) if rerun)
    peak = gpu.peak("bf16")
    per_gpu = tokens / seconds / gpus
    shape = np.shape(per_gpu)
    return StepTime(
        *(_plain(value, shape) for value in (seconds, per_gpu, per_gpu * model_flops / 1e12,
                                             per_gpu * model_flops / peak, per_gpu * hardware / peak,
                                             per_gpu * full_square / peak, per_gpu * hardware_full / peak)),
        {name: _plain(value, shape) for name, value in breakdown.items()},
        {"mfu": "model FLOPs (every GEMM's three passes, causal attention halved) / bf16 dense peak",
         "hfu": "mfu's FLOPs plus the recomputed forwards",
         "mfu_full_square": "as mfu with the full s x s score square (Korthikanti et al. 2022, Appendix A)",
         "hfu_full_square": "as hfu with the full score square",
         "model_tflops_per_gpu": "mfu's FLOPs per second per GPU / 1e12",
         "rank_order": "tp, cp, dp, pp (Megatron's order string tp-cp-ep-dp-pp); expert layers on Megatron's "
                       "expert grid t_E, ep, edp, pp",
         "overlap": ", ".join(sorted(rules)) or "none"})
