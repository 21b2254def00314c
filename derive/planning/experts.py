"""The expert ranks' memory and the plan of an MoE model: the candidate space crossed with e and t_E, ranks 0, 1, p - 1.

:func:`derive.planning.search.plan` comes here when the model has routed experts. The layouts are
:func:`derive.planning.layouts.expert_layouts` under Megatron-LM's placements for ZeRO 0-3
(:func:`derive.accounts.framework_placements.stage_placements`); memory is the most loaded of ranks 0, 1
and p - 1 (:func:`rank_memory`): the placement's state buffers
(:func:`derive.accounts.experts.moe_state_buffers`: routed experts over the expert data-parallel group
t c d / (t_E e), the rest over d c) of the layers the rank builds (:func:`rank_layers`, dense and MoE
apart) and its edges (embedding on rank 0; final norm, head and MTP modules on rank p - 1), plus its
in-flight chunks (:func:`derive.accounts.pipeline_split.stage_in_flight`) of the fused saved-tensor
tables (:func:`derive.accounts.experts.moe_layer_activations`, SP on, s / c tokens per context rank),
each buffer and tensor as the caching allocator allocates it (:mod:`derive.accounts.allocator`, as a
dense model's plan counts them).

Recompute is read from the same ledger as a dense layer's (:func:`derive.accounts.activations.recomputed`):
full keeps each layer's input; selective drops the ``recomputed_selective`` rows, of which the fused
MoE table has none (flash attention keeps no score matrix), so it saves no memory here and costs its
recomputed attention in the step time. Each layout that fits is timed by the step model over columns
(:func:`derive.planning.ranking.predicted_times`, EP all-to-all included) on the preset's config
(transformers' model: DeepSeek-V3's MTP module is not timed) and ranked as a dense model's plan is.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

import numpy as np
import sympy as sp

from derive.accounts.activations import output_edge
from derive.accounts.budget import usable_bytes
from derive.accounts.comm import context_modelled
from derive.accounts.experts import (model_parallel_share, moe_layer_activations, moe_state_buffers, moe_state_rows,
                                     rank_share)
from derive.accounts.pipeline_split import stage_in_flight
from derive.accounts.framework_placements import stage_placements
from derive.architectures.tables import model_parameters
from derive.architectures.saved import eager_edges, fused_mtp
from derive.evaluation import substitute
from derive.evaluation.vectorised import compile
from derive.hf import published_model
from derive.inputs import exact_count
from derive.model import Model
from derive.planning.layouts import MICRO_BATCHES, expert_layouts
from derive.planning.ranking import Plan, judged_columns, predicted_times
from derive.planning.rounding import _rounded
from derive.planning.stage_memory import STATE_TAGS
from derive.presets import MOE_PRESETS
from derive.stage_accounts import CONTEXT
from derive.state_columns import STATE_RANKS, placement_sharded
from derive.symbols import D, L, L_E, p, t, v
from derive.tensors import Ledger

#: The layout symbols the memory expressions keep (every other size is the model's).
SIZES = ("t", "p", "v", "c", "d", "e", "t_E", "b", "m")
#: The framework whose ZeRO stages the MoE planner places (Megatron-Core's expert groups).
PLACEMENT = "megatron"
#: The saved-tensor profile: Megatron-Core + Transformer Engine (derive.architectures.saved).
PROFILE = "fused"
#: The layer profile an MoE model's plan takes (the option's default; its saved tensors are the fused MoE table's).
LAYER_PROFILE = "llama-fused"
#: Rank 0, rank 1 and rank p - 1 (derive.accounts.pipeline_split.RANKS).
RANKS = ("first", "middle", "last")

@lru_cache(maxsize=None)
def rank_layer_counts(rank: str) -> tuple[sp.Expr, sp.Expr]:
    """(dense, MoE) layers pipeline ``rank`` builds, in L, L_E, p, v: ``whole`` (p = 1) all L - L_E and L_E of them.

    At p > 1, v chunks of n = ceil(L / (p v)), a dense model's most loaded chunk
    (derive.accounts.pipeline_split.chunk_slots); rank r's first chunk is layers [r n, (r + 1) n)
    (get_transformer_layer_offset) and the L - L_E dense layers come first (DeepSeek-V3's
    first_k_dense_replace), so it builds min(max(L - L_E - r n, 0), n) dense layers, exact while p n >= L - L_E
    (every dense layer in the first round of chunks: :func:`expert_plan` and derive predict check it), and the
    rest of its v n layers MoE (at most L_E). L and L_E stay symbols until evaluated: at numbers SymPy 1.14
    evaluates Min(3, ceiling(61 / (p v))) to 3.
    """
    if rank == "whole":
        return L - L_E, L_E
    n = sp.ceiling(L / (p * v))
    index = {"first": 0, "middle": 1, "last": p - 1}[rank]
    dense = sp.Min(sp.Max(L - L_E - index * n, 0), n)
    return dense, sp.Min(v * n - dense, L_E)

def rank_layers(rank: str, layers: int, moe_layers: int, pipeline: np.ndarray | None,
                virtual: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(dense, MoE) layers pipeline ``rank`` builds of ``layers``, the last ``moe_layers`` MoE (:func:`rank_layer_counts`)."""
    sizes = {"L": np.asarray(layers), "L_E": np.asarray(moe_layers), "p": pipeline, "v": virtual}
    return tuple(_column(count, sizes) for count in rank_layer_counts(rank))

def _edge_parameters(table: Ledger, rank: str) -> Ledger:
    """The rows beside the layers ``rank`` holds: the embedding (first), norm, head and MTP (last), all (whole)."""
    edges = table.filter(lambda w: not w.has("layer") or w.has("mtp"))
    if rank == "first":
        return edges.where("embedding")
    if rank == "last":
        return edges.without("embedding")
    return edges if rank == "whole" else Ledger([])

#: L, L_E -> one dense layer's rows (count L - L_E) or one MoE layer's (count L_E) of the parameter table.
ONE_LAYER = {"dense": {L: 1, L_E: 0}, "moe": {L: 1, L_E: 1}}

@dataclass(frozen=True)
class RankTerms:
    """A rank's tensors, linear in the layers it builds (edges, then each dense and each MoE layer), as expressions.

    ``parameters``: (non-expert, routed-expert) parameters of the edges and of one dense / MoE layer;
    ``buffers``: each resident state row's bytes per (non-expert, routed-expert) parameter, one buffer
    each over the rank (``tags``: each buffer's state, derive.planning.stage_memory.STATE_TAGS); ``saved``: the bytes of each tensor one dense / MoE layer saves per micro-batch,
    of the edge tensors kept per held first chunk (``held``: the token ids) and once (``once``: the
    output edge, each MTP module's); ``held`` chunks of 1 / ``chunks`` of the rank's layers in flight.
    """

    parameters: dict[str, tuple[sp.Expr, sp.Expr]]
    buffers: tuple[tuple[sp.Expr, sp.Expr], ...]
    saved: dict[str, tuple[sp.Expr, ...]]
    held: sp.Expr
    chunks: sp.Expr
    tags: tuple[str, ...] = ()

@lru_cache(maxsize=64)
def rank_terms(entry: Model, zero: int, recompute: str, rank: str, kept: tuple[str, ...] = (),
               sequence_parallel: bool = True) -> RankTerms:
    """The terms of pipeline ``rank`` (first, middle, last; ``whole`` at p = 1) in t, p, v, c, d, e, t_E, b, m
    (and the model's sizes named in ``kept``, left symbols: the page keeps s, derive.render.page_plan_experts).

    States under Megatron's placement at ``zero`` (:func:`moe_state_buffers`: sharded over d c and the
    expert data-parallel group); activations of the fused tables at ``recompute`` (SP on unless
    ``sequence_parallel`` is False: derive predict's layouts of t > 1 without it; TE's fp32 rstd kept, s / c tokens), held as the rank's in-flight chunks (stage_in_flight), each 1 / v of its
    layers (a dense model's plan's convention), the token ids once per held first chunk on rank 0, the
    output edge and the D MTP modules once on rank p - 1.
    """
    features = entry.layout
    table = model_parameters(features)
    placed = stage_placements(PLACEMENT)[zero]
    values = {symbol: n for symbol, n in entry.values.items() if symbol.name not in SIZES + kept}

    def model(expr: sp.Expr) -> sp.Expr:
        return substitute(sp.sympify(expr).xreplace(CONTEXT), values)

    def split(rows: Ledger, one: dict | None = None) -> tuple[sp.Expr, sp.Expr]:
        share = model_parallel_share(rows)
        return tuple(model(part.numel().xreplace(one or {}))
                     for part in (share.without("routed_expert"), share.where("routed_expert")))

    def saved(rows: Ledger, copies: sp.Expr = 1) -> tuple[sp.Expr, ...]:
        return tuple(model(row.bytes) for row in rows for _ in range(int(model(copies))))
    layers = table.where("layer").without("mtp")
    held, chunks = (sp.Integer(1), sp.Integer(1)) if rank == "whole" else (stage_in_flight(rank), v)
    ids = Ledger([eager_edges(features)["embedding: token ids"]]) if rank in ("first", "whole") else Ledger([])
    once = Ledger([])
    if rank in ("last", "whole"):
        once = output_edge(t, sequence_parallel=sequence_parallel)
    mtp = (rank_share(fused_mtp(features), t, sequence_parallel) if features.mtp and rank in ("last", "whole")
           else Ledger([]))
    rows = moe_state_rows(placed, placement_sharded(zero, placed), STATE_RANKS)
    return RankTerms(
        parameters={"edges": split(_edge_parameters(table, rank)),
                    **{kind: split(layers, one) for kind, one in ONE_LAYER.items()}},
        buffers=tuple((model(rest), model(expert)) for rest, expert in
                      moe_state_buffers(placed, placement_sharded(zero, placed), STATE_RANKS)),
        saved={**{kind: saved(moe_layer_activations(PROFILE, features, kind == "moe", t, sequence_parallel, norm_statistics=True,
                                                    recompute=recompute))
                  for kind in ONE_LAYER},
               "held": saved(rank_share(ids, t, sequence_parallel)), "once": saved(once) + saved(mtp, D)},
        held=held, chunks=chunks, tags=tuple(next(tag for tag in STATE_TAGS if row.has(tag)) for row in rows))

def _column(expr: sp.Expr, values: dict[str, np.ndarray]) -> np.ndarray:
    """``expr`` compiled (derive.evaluation.vectorised.compile) at the columns it names."""
    function = compile(expr)
    return function(**{name: values[name] for name in function.names})

def _summed(sizes: Iterable[np.ndarray], rounded: bool) -> np.ndarray:
    """The bytes of tensors of ``sizes``: as requested, or (``rounded``) each as the caching allocator hands it out."""
    return sum((_rounded(size).astype(np.float64) if rounded else np.asarray(size, dtype=np.float64)
                for size in sizes), np.zeros(()))

def rank_memory(entry: Model, zero: int, recompute: str, rank: str, values: dict[str, np.ndarray],
                rounded: bool = True) -> np.ndarray:
    """Bytes of ``rank`` at the layout columns ``values`` (t, p, v, c, d, e, t_E, b, m), at the layers it builds.

    One buffer per resident state row and parameter group over the rank's parameters; every layer's saved
    tensors for each held chunk. ``rounded``: each buffer and tensor as the caching allocator allocates it
    (derive.accounts.allocator.allocated_bytes, as derive.planning.rounding.rounding_bytes counts them).
    """
    terms = rank_terms(entry, zero, recompute, rank)
    total, moe = entry.values[L], entry.values.get(L_E, entry.values[L])
    built = rank_layers(rank, total, moe, values.get("p"), values.get("v"))
    layers = dict(zip(ONE_LAYER, built))

    def saved(kind: str) -> np.ndarray:
        return _summed((_column(size, values) for size in terms.saved[kind]), rounded)
    counts = [_column(terms.parameters["edges"][group], values)
              + sum(layers[kind] * _column(terms.parameters[kind][group], values) for kind in ONE_LAYER)
              for group in (0, 1)]
    states = _summed((counts[0] * _column(rest, values) + counts[1] * _column(expert, values)
                      for rest, expert in terms.buffers), rounded)
    held = _column(terms.held / terms.chunks, values)
    total = states + held * (saved("held") + sum(layers[kind] * saved(kind) for kind in ONE_LAYER)) + saved("once")
    return np.where(values["p"] == 2, 0, total) if rank == "middle" else total

def _config_name(entry: Model) -> str:
    """The shipped config of the MoE preset ``entry``: its Model is what the step model and the layout rules read."""
    configs = {shown: config for config, shown, _, _ in MOE_PRESETS.values()}
    if entry.name not in configs:
        raise ValueError(f"model: {entry.name} is not one of the MoE presets the planner plans "
                         f"({', '.join(MOE_PRESETS)})")
    return configs[entry.name]

def refuse_dense_options(profile: str, placement_name: str, precision: str) -> None:
    """ValueError naming the field of an option an MoE model's plan cannot honour (dense models' only)."""
    if precision != "bf16":
        raise ValueError(f"precision: the MoE planner (derive.planning.experts) counts bf16 states and activations "
                         f"only; {precision} is planned for dense models (derive report and derive "
                         "predict take it for MoE models)")
    if placement_name != PLACEMENT:
        raise ValueError(f"placement: the MoE planner (derive.planning.experts) places states as Megatron-LM does "
                         f"(expert data-parallel groups); {placement_name} is planned for dense models")
    if profile != LAYER_PROFILE:
        raise ValueError(f"profile: the MoE planner (derive.planning.experts) reads the fused MoE table "
                         f"(derive.architectures.saved); {profile} is a dense layer profile")

def expert_plan(entry: Model, gpus: int, tokens: int, hardware_name: str, contexts: list[int], fit: str) -> Plan:
    """Every layout of the MoE preset ``entry`` on ``gpus`` GPUs at ``tokens`` per step, judged and timed.

    ``contexts``: the context-parallel sizes tried (dividing s).
    """
    config_name = _config_name(entry)
    largest = L * moe_layer_activations(PROFILE, entry.layout, True, 1, True, norm_statistics=True).bytes()
    exact_count("seq", f"the activations of one unsplit GPU at micro-batch {max(MICRO_BATCHES)}",
                entry.subs(largest, b=max(MICRO_BATCHES)))
    config = published_model(config_name, seq=entry.seq)
    low, high = usable_bytes(hardware_name)
    base = expert_layouts(entry, config, gpus, sorted(stage_placements(PLACEMENT)), contexts)
    chunk = -(-config.layers // (base["p"] * base["v"]))
    if np.any(base["p"] * chunk < config.layers - len(config.moe_layers)):
        raise ValueError(f"model: {entry.name}'s dense layers reach past the first round of pipeline chunks "
                         "(derive.planning.experts.rank_layers counts them there)")
    sequences = tokens // entry.seq if tokens % entry.seq == 0 else 0

    def memory_of(part: dict[str, np.ndarray], whole: np.ndarray,
                  micro: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The most loaded of ranks 0, 1 and p - 1 (or the one rank at p = 1), per layout."""
        recompute = str(part["recompute"][0])
        memory = np.full(part["t"].size, np.nan)
        for zero in sorted(set(part["zero"].tolist())):
            for single in (True, False):
                rows = (part["zero"] == zero) & ((part["p"] == 1) == single) & whole
                if rows.any():
                    values = {"t_E": part["etp"][rows], "m": micro[rows],
                              **{name: part[name][rows] for name in SIZES if name in part}}
                    memory[rows] = np.max([np.broadcast_to(rank_memory(entry, zero, recompute, rank, values),
                                                           rows.sum())
                                           for rank in (("whole",) if single else RANKS)],
                                          axis=0)
        return memory, {"balanced": np.zeros(part["t"].size, dtype=np.int64)}

    # context parallelism over MLA: derive comm and derive predict refuse it (the ledger has no rows for it)
    unmodelled = (base["c"] > 1) & (not context_modelled(config))
    columns = judged_columns(base, sequences, (low, high), fit, memory_of, unmodelled)
    columns["step_time"], columns["breakdown"] = predicted_times(config, columns, tokens, hardware_name)
    return Plan(entry, gpus, hardware_name, tokens, (low, high), columns, fit)
