"""One layout's memory per GPU by pipeline stage and by state: derive.stage_accounts' accounts split by the placement's rows.

The stage with the embedding (rank 0, ``first``), the most loaded middle stage (rank 1, p > 2, ``middle``),
the stage with the output head (rank p - 1, ``last``), or the one stage of p = 1 (``single``), each at the
layers it holds as :meth:`derive.stage_accounts.Accounts.loaded` counts them
(derive.accounts.pipeline_split.stage_layers). The resident state is split by the tags of the placement's
rows (derive.accounts.placement.placement_ledger: ``params``, ``grads``, ``optimizer`` of
derive.accounts.state), an FP8 recipe's weight copies and scales (``fp8_copies``) apart, then the
activations of the stage's in-flight micro-batches. ``derive predict --json`` prints them
(``memory.stages.<stage>.<state>``) and formulas/index.html runs the same expressions; the most loaded of the
ranks derive.stage_accounts compares is derive.planning.memory.memory_per_gpu, predict's fit check.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import sympy as sp

from derive.accounts.framework_placements import stage_placements
from derive.accounts.pipeline_split import stage_layers
from derive.accounts.placement import placement_ledger
from derive.accounts.state import PRECISIONS
from derive.architectures.decoder import Layout
from derive.evaluation.vectorised import compile
from derive.model import Model
from derive.parallelism import Parallelism
from derive.planning.memory import memory_profile
from derive.stage_accounts import accounts
from derive.state_columns import STATE_RANKS, placement_sharded
from derive.symbols import N, p

#: Each stage and where it exists: p = 1 (one stage holds both edges), p > 1 (ranks 0 and p - 1), p > 2 (rank 1).
STAGES: dict[str, sp.Boolean] = {"single": sp.Eq(p, 1), "first": sp.Gt(p, 1), "middle": sp.Gt(p, 2),
                                 "last": sp.Gt(p, 1)}
#: The tags of the resident state rows (derive.accounts.state), one part of the bar each.
STATE_TAGS = ("params", "grads", "optimizer")
#: The parts of a stage's bytes, in the order they stack.
PARTS = (*STATE_TAGS, "fp8_copies", "activations")
#: The framework whose ZeRO stages place the states (derive.planning.memory.memory_per_gpu's).
FRAMEWORK = "megatron"


@lru_cache(maxsize=None)
def state_bytes_per_parameter(placement_name: str, sharded: bool) -> dict[str, sp.Expr]:
    """Resident GPU bytes per parameter of ``placement_name`` by state tag (sharded over STATE_RANKS if asked).

    Kept per placement (read, never changed, by :func:`stage_parts`): the page asks it at every architecture and flag.
    """
    held = placement_ledger(placement_name, sharded, STATE_RANKS).where("resident").without("host")
    return {tag: sp.expand(held.where(tag).bytes() / N) for tag in STATE_TAGS}


@lru_cache(maxsize=None)
def stage_parts(architecture: Layout, profile: str, recompute: str, zero: int, balanced: bool = False,
                recipe: str | None = None, fp8_param_gather: bool = False) -> dict[str, dict[str, sp.Expr]]:
    """Stage -> part -> bytes per GPU (in the model's and the layout's symbols), summing to Accounts.loaded(stage).

    ``fp8_copies`` only under an FP8 ``recipe``; ``single`` is the whole model at p = 1 (Accounts.total).
    """
    placement_name = stage_placements(FRAMEWORK)[zero]
    sharded = placement_sharded(zero, placement_name)
    terms = accounts(architecture, profile, recompute, placement_name, sharded, "fused", balanced, recipe,
                     fp8_param_gather)
    per_parameter = state_bytes_per_parameter(placement_name, sharded)
    parts = {}
    for stage in STAGES:
        layers = {} if stage == "single" else stage_layers(stage, balanced)
        held = {} if stage == "single" else stage_layers(stage, balanced, True)
        count = terms.parameters[stage].xreplace(layers)
        found = {tag: count * per_parameter[tag] for tag in STATE_TAGS}
        if recipe is not None:
            found["fp8_copies"] = terms.fp8_bytes.xreplace(terms.fp8_counts(stage)).xreplace(layers)
        found["activations"] = terms.activation(stage).xreplace(held)
        parts[stage] = found
    return parts


def most_loaded(parts: dict[str, dict[str, sp.Expr]], middle: bool = False) -> sp.Expr:
    """The most loaded rank's bytes of ``parts`` (stage -> part -> bytes): the ranks Accounts compares at p > 1.

    ``middle``: rank 1 can be the most loaded (a balanced pipeline's, which holds a layer more than an edge
    rank; an MoE model's, whose rank 0 builds the dense layers: derive.planning.expert_stages).
    """
    totals = {stage: sp.Add(*found.values()) for stage, found in parts.items()}
    ranks = [totals["first"], totals["last"]]
    if middle:  # p > 2
        ranks.append(sp.Piecewise((0, sp.Eq(p, 2)), (totals["middle"], True)))
    return sp.Piecewise((totals["single"], sp.Eq(p, 1)), (sp.Max(*ranks), True))


def layout_sizes(entry: Model, layout: Parallelism) -> dict[str, int]:
    """The layout's sizes by symbol name, at the model's sequence length."""
    return {"s": entry.seq, "b": layout.micro_batch, "t": layout.tp, "p": layout.pp, "v": layout.vp,
            "d": layout.dp, "c": layout.cp, "m": layout.micro_batches}


def layout_parts(entry: Model, layout: Parallelism) -> dict[str, dict[str, sp.Expr]] | None:
    """:func:`stage_parts` at ``layout``'s choices (Megatron's placement at its ZeRO stage); None for MoE."""
    if not entry.dense:
        return None
    return stage_parts(entry.architecture, memory_profile(entry), layout.recompute, layout.zero, layout.balanced,
                       PRECISIONS[layout.precision].fp8, layout.fp8_param_gather)


def stage_memory(entry: Model, layout: Parallelism) -> dict[str, dict[str, float]] | None:
    """Stage -> part -> bytes per GPU of the stages ``layout`` has (:data:`STAGES`); None for an MoE model."""
    parts = layout_parts(entry, layout)
    if parts is None:
        return None
    values = {**{symbol.name: value for symbol, value in entry.values.items()}, **layout_sizes(entry, layout)}
    return evaluated_stages(parts, values, layout.pp)


def evaluated_stages(parts: dict[str, dict[str, sp.Expr]], values: dict[str, int],
                     pp: int) -> dict[str, dict[str, float]]:
    """Stage -> part -> bytes of ``parts`` at ``values`` (sizes by symbol name), the stages a p = ``pp`` layout has."""
    out = {}
    for stage, found in parts.items():
        if STAGES[stage].subs(p, pp) != sp.true:
            continue
        out[stage] = {}
        for part, expr in found.items():
            function = compile(expr)
            out[stage][part] = float(np.asarray(function(**{name: values[name] for name in function.names})))
    return out
