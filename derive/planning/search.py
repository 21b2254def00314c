"""The planner's search: every layout of a model on N GPUs, the ones that fit, ranked by predicted step time.

The command line is ``derive plan`` (:mod:`derive.plan`); the formula sheet's layouts section runs :func:`plan` too.

A layout is (t, p, v, c, d, b, recompute, ZeRO, balanced), ZeRO every stage the placement's
framework offers (:func:`derive.accounts.framework_placements.stage_placements`: Megatron's DDP, distributed
optimizer, Megatron-FSDP optim_grads and optim_grads_params), each with its placement's states: t divides the query and kv
heads, c (context parallel, profiles without score matrices) divides s, t p c
divides the GPUs (d = GPUs / (t p c)), p v <= L (uneven stages: the
most loaded holds ceil(L / (p v)) layers per chunk); at p > 1 each layout is also tried
balanced (:attr:`derive.parallelism.Parallelism.balanced`, Llama 3's pipeline: the embedding and
the loss take one layer slot each, p v <= L + 2, each rank's layers counted exactly:
:mod:`derive.accounts.pipeline_split`, one fewer on the first and the last rank, the middle ranks
judged too), m = T / (s b d) whole,
and interleaving (v > 1) needs m a multiple of p (Megatron's check). Memory is
the most loaded rank's (:mod:`derive.sweep`: the framework placement's states,
the first stage's in-flight micro-batches with the interleaving factor, the
logits on the last stage) plus the caching allocator's rounding of every
state buffer and every saved activation (:mod:`derive.accounts.allocator`),
judged against the GPU's usable range (:mod:`derive.accounts.budget`): it fits
at or under the high end, and one above the low end is marked *tight* (it fits only if the CUDA
context, NCCL buffers and fragmentation stay under their largest estimates); ``fit="low"`` keeps only layouts at or
under the low end. Each layout that fits is timed by the step model
(:func:`derive.accounts.prediction.predict`: GEMMs, element-wise work, the
communication ledger's rows on their links with Megatron's overlap, the
pipeline bubble, the optimizer; sequence parallelism on, as the memory accounts
assume) and the layouts are ranked by that predicted step time. Layouts the step model cannot tell
apart (equal predicted times, e.g. c and b traded at equal tokens per GPU with the context ring
hidden under attention) share one rank; within it they are listed by lower memory per GPU, then
smaller t, p, v, c, b, unbalanced first.
Under an FP8 ``precision`` (a recipe of :mod:`derive.recipes`) the memory counts the recipe's
weight copies and FP8 linear inputs (:func:`derive.stage_accounts.accounts`' ``recipe``) and the step model
times the FP8 GEMMs. The compute bound (hardware FLOPs at ``mfu`` x peak, x (1 + (p - 1)/(v m))) is
kept as the ``bound`` column. A model with routed experts (``--model mixtral-8x7b``, ``qwen3-30b-a3b``,
``deepseek-v3``) is planned over the same space crossed with e and t_E, its ranks' memory from the
expert accounts (:mod:`derive.planning.experts`); the candidates are :mod:`derive.planning.layouts`',
their judging and ranking :mod:`derive.planning.ranking`'s.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from derive.accounts.activations import layer_activations
from derive.accounts.budget import usable_bytes
from derive.accounts.framework_placements import stage_placements
from derive.accounts.prediction import tensor_cores
from derive.accounts.state import PRECISIONS as STATE_PRECISIONS
from derive.accounts.step_layout import LINEAR_DTYPE
from derive.evaluation import by_name
from derive.inputs import choose, exact_count
from derive.model import Model
from derive.planning.experts import expert_plan, refuse_dense_options
from derive.planning.layouts import MAX_CONTEXT, MICRO_BATCHES, context_sizes, layouts
from derive.planning.ranking import FITS, SYSTEM_NAMES, Plan, judged_columns, predicted_times
from derive.planning.rounding import rounding_bytes
from derive.stage_accounts import accounts
from derive.sweep import evaluate
from derive.symbols import L
from derive.systems import system

#: Precisions the planner takes: bf16 (the placement's own states) and the FP8 recipes the step model
#: times (derive.accounts.step_layout.LINEAR_DTYPE) whose states the accounts hold (derive.accounts.state).
PRECISIONS = ("bf16", *(name for name in LINEAR_DTYPE if name in STATE_PRECISIONS and STATE_PRECISIONS[name].fp8))


def plan(entry: Model, gpus: int, tokens: int, hardware_name: str = "h100", seq: int | None = None,
         profile: str = "llama-fused", placement_name: str = "megatron", mfu: float = 1.0,
         max_context: int = MAX_CONTEXT, fit: str = "high", precision: str = "bf16") -> Plan:
    """Every layout of ``entry`` on ``gpus`` GPUs at ``tokens`` per step, judged and timed.

    ``fit``: a layout fits at or under the usable range's ``high`` end (default; above the low end it
    is :meth:`Plan.tight`) or, conservatively, its ``low`` end. ``precision``: ``bf16`` (the placement's
    own states) or an FP8 recipe (:data:`PRECISIONS`): its weight copies and FP8 linear inputs in the
    memory (derive.sweep's ``recipe``), its FP8 GEMMs in the step time; ValueError naming ``precision``
    where the GPU has no tensor cores for it. A model with routed experts: :func:`derive.planning.experts.expert_plan`
    (Megatron's placements, the fused MoE table, bf16; ValueError naming the field of another option).
    """
    choose("fit", fit, FITS)
    if seq is not None:
        entry = replace(entry, seq=seq)
    if not entry.dense:
        refuse_dense_options(profile, placement_name, precision)
        return expert_plan(entry, gpus, tokens, hardware_name, context_sizes(entry.seq, gpus, max_context), fit)
    choose("precision", precision, PRECISIONS)
    tensor_cores(precision, system(SYSTEM_NAMES.get(hardware_name, hardware_name)))
    recipe = STATE_PRECISIONS[precision].fp8
    low, high = usable_bytes(hardware_name)
    stages = stage_placements(placement_name)
    linear = accounts(entry.architecture, profile, "none", None).context_parallel
    largest = layer_activations(profile, "fused", 1, True, "none").bytes() * L
    exact_count("seq", f"the activations of one unsplit GPU at micro-batch {max(MICRO_BATCHES)}",
                entry.at(largest, b=max(MICRO_BATCHES)))
    contexts = context_sizes(entry.seq, gpus, max_context) if linear else [1]
    base = layouts(entry, gpus, sorted(stages), contexts)
    # m = T / (s b d) in integers: T / s first (b d <= 8 * 2^20), so no int64 product overflows.
    sequences = tokens // entry.seq if tokens % entry.seq == 0 else 0

    def memory_of(part: dict[str, np.ndarray], whole: np.ndarray,
                  micro: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The most loaded rank's bytes (allocator rounding included) and the step bound, per layout."""
        recompute = str(part["recompute"][0])
        memory = np.full(part["t"].size, np.nan)
        time = np.full(part["t"].size, np.nan)
        for zero, balanced in sorted(set(zip(part["zero"].tolist(), part["balanced"].tolist()))):
            rows = (part["zero"] == zero) & (part["balanced"] == balanced) & whole
            if not rows.any():
                continue
            layout = {k: part[k][rows] for k in ("t", "p", "v", "c", "d", "b")}
            layout.update(s=np.full(rows.sum(), entry.seq, dtype=np.int64), m=micro[rows])
            ranks = ("first", "last", "middle") if balanced else ()
            placed = stages[int(zero)]  # the framework's placement at this stage
            figures = evaluate(entry, layout, recompute, int(zero), profile, tokens=tokens,
                               hardware_name=hardware_name, mfu=mfu, placement_name=placed,
                               names=tuple(f"{rank}_rank_bytes" for rank in ranks) or ("memory_per_gpu",),
                               balanced=bool(balanced), recipe=recipe)
            values = by_name(entry.values) | layout
            if not balanced:
                memory[rows] = figures["memory_per_gpu"] + rounding_bytes(
                    entry, recompute, int(zero), profile, placed, values, recipe=recipe)
            else:  # the most loaded rank, each with its own rounding (rank 1 is the last rank at p = 2)
                memory[rows] = np.max([
                    np.where((rank != "middle") | (layout["p"] > 2), figures[f"{rank}_rank_bytes"]
                             + rounding_bytes(entry, recompute, int(zero), profile, placed, values, True, rank,
                                              recipe),
                             0)
                    for rank in ranks], axis=0)
            time[rows] = figures["step_time"]
        return memory, {"bound": time}

    columns = judged_columns(base, sequences, (low, high), fit, memory_of)
    columns["step_time"], columns["breakdown"] = predicted_times(entry, columns, tokens, hardware_name, precision)
    return Plan(entry, gpus, hardware_name, tokens, (low, high), columns, fit, precision)
