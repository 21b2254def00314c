"""One layout's most loaded rank in bytes: :mod:`derive.sweep`'s accounts at a :class:`derive.parallelism.Parallelism`.

derive.predict checks a layout against the GPU with it; derive.calibrate shows it for each held-out run.
"""
from __future__ import annotations

import numpy as np

from derive.accounts.framework_placements import stage_placements
from derive.accounts.state import PRECISIONS
from derive.model import Model
from derive.parallelism import Parallelism
from derive.sweep import evaluate


def memory_profile(entry: Model) -> str:
    """The layer profile predict's accounts take: the GPT of the Megatron papers, else Megatron-Core's fused llama."""
    return "gpt" if entry.family == "gpt" and entry.layout is None else "llama-fused"


def memory_per_gpu(entry: Model, layout: Parallelism) -> float | None:
    """The most loaded rank's bytes (derive.sweep: Megatron's placement at the stage, SP on); None for MoE.

    ZeRO-2 and -3 are Megatron-FSDP's optim_grads and optim_grads_params (derive.accounts.placement).
    Under an FP8 precision the recipe's weight copies and FP8 linear inputs count (derive.sweep's ``recipe``,
    with --fp8-param-gather's FP8 parameters).
    """
    if not entry.dense:
        return None
    profile = memory_profile(entry)
    arrays = {"s": np.array([entry.seq]), "b": np.array([layout.micro_batch]), "t": np.array([layout.tp]),
              "p": np.array([layout.pp]), "v": np.array([layout.vp]),
              # d is the data-parallel size alone: the accounts shard the distributed optimizer over d c
              # ranks themselves (derive.state_columns.STATE_RANKS; Megatron's
              # parallel_state.get_data_parallel_group(with_context_parallel=True))
              "d": np.array([layout.dp]),
              "c": np.array([layout.cp]), "m": np.array([layout.micro_batches])}
    # balanced pipelines: each rank's exact layers (Parallelism.balanced; derive.plan does the same)
    figures = evaluate(entry, arrays, layout.recompute, layout.zero, profile, names=("memory_per_gpu",),
                       placement_name=stage_placements("megatron")[layout.zero],
                       attention_kernel="fused", balanced=layout.balanced,
                       recipe=PRECISIONS[layout.precision].fp8, fp8_param_gather=layout.fp8_param_gather)
    return float(figures["memory_per_gpu"][0])
