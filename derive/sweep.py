"""Every account over many configurations at once: grids of Megatron-style layouts as numpy columns.

:func:`grid` evaluates the main accounts of Megatron-style training
(derive.stage_accounts: framework placement of the states, Korthikanti et al.'s
saved-for-backward tables with sequence parallelism, 1F1B / interleaved pipeline
stages, GEMM FLOPs, the step-time bound) over the cross product of models and
layouts, the accounts compiled once and evaluated together, their shared parts once
(derive.evaluation.vectorised.compile_many). Communication is not
modelled. A placement's resident states enter as integer columns
(derive.state_columns), so one compiled expression serves every placement and
ZeRO stage.
"""
from __future__ import annotations

import itertools
from typing import Iterable, Mapping, Sequence

import numpy as np

from derive.accounts.flops import mfu as model_flops_utilisation
from derive.accounts.flops import step_time_lower_bound
from derive.evaluation import by_name
from derive.evaluation.vectorised import compile, compile_many
from derive.inputs import MAX_SIZE, bounded_int
from derive.model import Model
from derive.presets import hardware, model
from derive.stage_accounts import COLUMNS, accounts, stage_balance
from derive.state_columns import placement_sharded, state_columns


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
    exprs = {name: terms.column(name) for name in names}
    values = by_name(entry.values)
    values.update({name: np.asarray(array) for name, array in layout.items()})
    values.setdefault("c", np.asarray(1))
    values.update(states or {})
    if np.any(values["c"] > 1) and not terms.context_parallel:
        raise ValueError(f"c: context parallelism needs activations linear in s; {profile} with "
                         f"{attention_kernel} attention keeps score matrices")
    if tokens is not None:
        values["m"] = micro_batches(tokens, values["s"], values["b"], values["d"])
    gpus = values["t"] * values["p"] * values["d"] * values["c"]
    wanted = [name for name in exprs if "m" in values or name not in ("stage_activation_bytes", "memory_per_gpu")]
    columns = dict(zip(wanted, compile_many([exprs[name] for name in wanted])(**values)))
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
