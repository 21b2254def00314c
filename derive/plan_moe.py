"""The planner for MoE models: every (t, p, e, t_E, d, b, ZeRO) layout, memory from the expert accounts, timed.

A layout holds t dividing the query and kv heads and f, p up to L (1F1B, v = 1:
the expert accounts' first stage is 1F1B's), c = 1, d = GPUs / (t p), the expert
tensor-parallel size t_E either 1 or t (Megatron-Core's default when
--expert-tensor-parallel-size is unset), e dividing the routed experts E and
t_E e dividing t c d (Megatron-Core folds the expert grid into tp x cp x dp:
megatron/core/parallel_state.py initialize_model_parallel, expert RankGenerator;
:meth:`derive.parallelism.Parallelism.check`), b in 1, 2, 4, 8 and
m = T / (s b d) whole, no recompute (the expert activation tables have none),
Megatron's distributed optimizer off or on. Memory is the first stage's
(:func:`derive.accounts.experts.moe_resident_bytes` of
:func:`derive.accounts.experts.first_stage_parameters`: experts over the expert
data-parallel group t d / (t_E e), the rest over d; plus
:func:`derive.accounts.experts.moe_first_stage_activation_bytes`: p micro-batches
in flight, SP on), judged like :func:`derive.plan.plan` against the GPU's usable
range. Each layout that fits is timed by :func:`derive.accounts.prediction.predict`
on the model's shipped config and the layouts are ranked by predicted step time.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import gcd

import numpy as np
import sympy as sp

from derive.accounts.budget import usable_bytes
from derive.accounts.experts import (first_stage_parameters, moe_first_stage_activation_bytes,
                                     moe_resident_bytes)
from derive.accounts.prediction import predict
from derive.architectures.moe_model import model_parameters
from derive.hf import published_model
from derive.inputs import choose
from derive.moe_presets import MoEModel, load_moe_model
from derive.parallelism import Parallelism
from derive.plan import FITS, MICRO_BATCHES, SYSTEM_NAMES, Ranked, divisors, fit_line, reasons
from derive.sweep import compile
from derive.symbols import E, L, a, b, d, e, f_E, g, p, s, t, t_E
from derive.systems import system

#: The MoE presets' shipped configs (the step model reads a config's layout).
CONFIGS = {"mixtral-8x7b": "mixtral-8x7b-v0.1", "deepseek-v3": "deepseek-v3", "qwen3-30b-a3b": "qwen3-30b-a3b"}
#: The layout symbols the memory expression keeps.
SIZES = (t, p, d, e, t_E, b)


@lru_cache(maxsize=16)
def memory_expression(entry: MoEModel, zero: int, single_stage: bool) -> sp.Expr:
    """First-stage bytes (states + 1F1B activations, SP on) with the layout sizes left as symbols."""
    stage = first_stage_parameters(model_parameters(entry.features), single_stage)
    states = moe_resident_bytes(stage, "bf16-fp32grad", "adam", zero_stage=zero)
    activations = moe_first_stage_activation_bytes("fused", entry.features, t, True, p)
    values = {symbol: sp.Integer(n) for symbol, n in entry.values.items() if symbol not in SIZES}
    return sp.expand((states + activations).xreplace(values))


def moe_layouts(entry: MoEModel, gpus: int) -> dict[str, np.ndarray]:
    """Every candidate as int64 columns t, p, e, etp, d, b, zero (written out: the tests enumerate the same)."""
    sizes = entry.values
    rows = []
    for tp in divisors(gcd(sizes[a], sizes.get(g, sizes[a]))):
        for pp in (k for k in divisors(gpus // tp) if k <= sizes[L]) if gpus % tp == 0 else ():
            dp = gpus // (tp * pp)
            for etp in sorted({1, tp}):
                if sizes[f_E] % etp:
                    continue
                for ep in (k for k in divisors(sizes[E]) if (tp * dp) % (etp * k) == 0):
                    rows += [(tp, pp, ep, etp, dp, bb, zero) for bb in MICRO_BATCHES for zero in (0, 1)]
    names = ("t", "p", "e", "etp", "d", "b", "zero")
    table = np.array(rows, dtype=np.int64).reshape(-1, len(names))
    return {name: table[:, index] for index, name in enumerate(names)}


@dataclass(frozen=True)
class MoEPlan(Ranked):
    """Every MoE layout with its memory, predicted step time, feasibility and reason."""

    model: MoEModel
    gpus: int
    hardware: str
    tokens: int
    usable: tuple[int, int]
    columns: dict[str, np.ndarray]
    fit: str = "high"

    def order(self) -> np.ndarray:
        """Feasible layouts by predicted step time (then memory), then the rest."""
        c = self.columns
        time = np.where(np.isnan(c["step_time"]), np.inf, c["step_time"])
        return np.lexsort((c["b"], c["etp"], c["e"], c["p"], c["t"], c["memory_per_gpu"], time,
                           ~c["feasible"]))


def plan_moe(name: str, gpus: int, tokens: int, hardware_name: str = "h100", seq: int | None = None,
             fit: str = "high") -> MoEPlan:
    """Every layout of the MoE preset ``name`` on ``gpus`` GPUs at ``tokens`` per step, judged and timed."""
    choose("fit", fit, FITS)
    entry = load_moe_model(choose("model", name, CONFIGS), seq)
    seq = int(entry.values[s])
    low, high = usable_bytes(hardware_name)
    c = moe_layouts(entry, gpus)
    per_step = seq * c["b"] * c["d"]
    whole = tokens % per_step == 0
    memory = np.zeros(c["t"].size)
    for zero in (0, 1):
        for single in (True, False):
            rows = (c["zero"] == zero) & ((c["p"] == 1) == single)
            if rows.any():
                function = compile(memory_expression(entry, zero, single))
                arrays = {"t": c["t"][rows], "p": c["p"][rows], "d": c["d"][rows], "e": c["e"][rows],
                          "t_E": c["etp"][rows], "b": c["b"][rows]}
                memory[rows] = np.broadcast_to(function(**{k: v for k, v in arrays.items()
                                                           if k in function.names}), rows.sum())
    reason = reasons(memory, (low, high), fit, batch=~whole)
    feasible = reason == ""
    config = published_model(CONFIGS[name], seq=seq)
    gpu = system(SYSTEM_NAMES.get(hardware_name, hardware_name))
    times = np.full(c["t"].size, np.nan)
    breakdowns = np.full(c["t"].size, None, dtype=object)
    for row in np.flatnonzero(feasible):
        layout = Parallelism(tp=int(c["t"][row]), pp=int(c["p"][row]), ep=int(c["e"][row]),
                             etp=int(c["etp"][row]), dp=int(c["d"][row]), micro_batch=int(c["b"][row]),
                             global_batch=tokens // seq, zero=int(c["zero"][row]),
                             sequence_parallel=int(c["t"][row]) > 1)
        result = predict(config, layout, gpu)
        times[row], breakdowns[row] = result.step_time_s, result.breakdown
    columns = {**c, "m": np.where(whole, tokens // per_step, 0), "memory_per_gpu": memory,
               "step_time": times, "breakdown": breakdowns, "feasible": feasible, "reason": reason}
    return MoEPlan(entry, gpus, hardware_name, tokens, (low, high), columns, fit)


def render_moe_plan(result: MoEPlan, top: int = 10) -> str:
    """The top feasible MoE layouts as text, with the best one's breakdown."""
    c = result.columns
    order = result.order()
    feasible = int(c["feasible"].sum())
    ranks, tight = result.ranks(), result.tight()
    lines = [f"== {result.model.name} on {result.gpus} {result.hardware.upper()}: {result.tokens:,} tokens per step",
             fit_line(result.usable, result.fit),
             f"  {len(order)} layouts, {feasible} fit",
             "  rank   t   p   e  t_E     d  b     m  zero  memory GiB  step s"]
    for row in order[:feasible]:
        if ranks[row] > top:
            break
        lines.append(f"  {ranks[row]:4d} {c['t'][row]:3d} {c['p'][row]:3d} {c['e'][row]:3d} {c['etp'][row]:4d} "
                     f"{c['d'][row]:5d} {c['b'][row]:2d} {c['m'][row]:5d}  {c['zero'][row]:4d}  "
                     f"{c['memory_per_gpu'][row] / 2**30:10.2f}  {c['step_time'][row]:6.2f}"
                     + ("  tight" if tight[row] else ""))
    if feasible:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in c["breakdown"][order[0]].items() if v)
        lines.append(f"  #1 breakdown (s): {parts}")
    return "\n".join(lines) + "\n"


def moe_json(result: MoEPlan) -> str:
    """Every MoE layout in rank order with its sizes, memory, step time, breakdown and reason."""
    import json
    c, ranks, tight = result.columns, result.ranks(), result.tight()
    layouts = [{**{key: int(c[key][row]) for key in ("t", "p", "e", "etp", "d", "b", "m", "zero")},
                "memory_per_gpu": int(round(c["memory_per_gpu"][row])),
                "step_time": None if np.isnan(c["step_time"][row]) else float(c["step_time"][row]),
                "breakdown": c["breakdown"][row], "feasible": bool(c["feasible"][row]),
                "rank": int(ranks[row]) or None, "tight": bool(tight[row]),
                "reason": str(c["reason"][row])} for row in result.order()]
    return json.dumps({"model": result.model.name, "gpus": result.gpus, "hardware": result.hardware,
                       "tokens": result.tokens, "layouts": layouts}, indent=1) + "\n"
