"""Mixture of Experts: Mixtral 8x7B, DeepSeek-V3, Qwen3-30B-A3B; per-tensor tables and Megatron's departures (issue 15)."""
from __future__ import annotations

import sympy as sp

from derive.accounts.experts import REPLICATED, moe_layer_activations
from derive.architectures.tables import layer_parameters
from derive.identities.experts import DEPARTURES, LAYOUT, sizes
from derive.presets import MODELS, MOE_PRESETS
from derive.render.quantities import flop_cell
from derive.render.sections.megatron import _size_cell
from derive.render.sheet import Column, Section, Table, bytes_cell, int_cell, math_cell, text_cell
from derive.report import MoELayout, moe_figures
from derive.symbols import b, d, e, p, t, t_E

#: the layout the per-GPU numbers and departures are quoted at (t = 8, e = 8, t_E = 1, p = 4, d = 32).
REPORT_LAYOUT = MoELayout(tp=LAYOUT[t], ep=LAYOUT[e], etp=LAYOUT[t_E], pp=LAYOUT[p],
                          dp=LAYOUT[d], micro_batch=LAYOUT[b])
#: per-model layouts of the models table: t must divide the KV heads (Qwen3-30B-A3B has 4).
LAYOUTS = {"qwen3-30b-a3b": MoELayout(tp=4, ep=8, etp=1, pp=4, dp=64)}
#: the models the departures are sized for.
DEPARTURE_MODELS = ("deepseek-v3", "mixtral-8x7b")


def _layout() -> str:
    return ", ".join(f"{sp.sstr(symbol)} = {value}" for symbol, value in LAYOUT.items())


def models_table() -> Table:
    """N, active N, first-stage states and activations per GPU, FLOPs per token for each MoE preset."""
    rows = []
    for key in MOE_PRESETS:
        entry = MODELS[key]
        at = LAYOUTS.get(key, REPORT_LAYOUT)
        v = moe_figures(entry, at)
        rows.append({
            "model": text_cell(entry.name),
            "layout": text_cell(f"t = {at.tp}, e = {at.ep}, p = {at.pp}, d = {at.dp}"), "N": int_cell(v["parameters"]),
            "active": int_cell(v["active_parameters"]), "mtp": int_cell(v["mtp_parameters"]),
            "s": int_cell(entry.seq),
            "states": bytes_cell(v["state_bytes"]),
            "activations": bytes_cell(v["activation_bytes"]),
            "flops": flop_cell(v["flops_per_token"], "GFLOP", 1),
            "megatron": flop_cell(v["megatron_flops_per_token"], "GFLOP", 1),
        })
    return Table(
        "moe_models", "MoE models: parameters, states and activations per GPU, FLOPs per token",
        (Column("model", "model"), Column("layout", "layout"), Column("N", "N"), Column("active", "active N"),
         Column("mtp", "MTP modules"), Column("s", "s"), Column("states", "states / GPU"),
         Column("activations", "activations / GPU"), Column("flops", "FLOPs / token"),
         Column("megatron", "Megatron's count")),
        tuple(rows),
        note="States and activations on one GPU of the first pipeline stage at the layout shown "
             "(t_E = 1, b = 1): Megatron's "
             "bf16 recipe with the distributed optimizer (experts over EDP = t d/(t_E e)); activations: "
             "fused profile (Megatron + TE), p micro-batches in flight. FLOPs per token: the derived GEMMs "
             "(router included, MTP modules with their extra logit GEMM) at each model's s.",
    )


def _sharding(row) -> str:
    if row.has("routed_expert"):
        return "t_E e"
    return "whole" if any(row.has(tag) for tag in REPLICATED) else "t"


def parameter_table() -> Table:
    """DeepSeek-V3's MoE layer, tensor by tensor: shape, copies, elements and how a rank shards it."""
    model = MODELS["deepseek-v3"]
    rows = []
    for row in layer_parameters(model.layout, True).without("buffer"):
        rows.append({"tensor": text_cell(row.name), "shape": math_cell(sp.Mul(*row.shape)),
                     "count": math_cell(row.count), "numel": int_cell(model.subs(row.numel)),
                     "sharded": text_cell(_sharding(row))})
    return Table(
        "moe_parameters", "DeepSeek-V3 MoE layer: parameters tensor by tensor",
        (Column("tensor", "tensor"), Column("shape", "elements per copy"), Column("count", "copies"),
         Column("numel", "elements"), Column("sharded", "split over")),
        tuple(rows),
        note="Routed experts split over t_E e ranks, router, norms and MLA's down projections with their "
             "norms whole on every TP rank (Transformer Engine duplicates them), the rest over t.",
    )


def saved_table() -> Table:
    """DeepSeek-V3's MoE layer, fused profile: every saved tensor, bytes per micro-batch at b = 1, t = 1."""
    model = MODELS["deepseek-v3"]
    table = moe_layer_activations("fused", model.layout, tensor_parallel=1, sequence_parallel=False)
    rows = [{"tensor": text_cell(row.name), "shape": math_cell(sp.Mul(*row.shape)),
             "dtype": text_cell(row.dtype), "bytes": bytes_cell(model.subs(row.bytes, b=1), "MiB"),
             "note": text_cell(row.note)} for row in table]
    return Table(
        "moe_saved", "DeepSeek-V3 MoE layer, fused profile (Megatron + TE, grouped GEMM): saved for backward",
        (Column("tensor", "tensor"), Column("shape", "elements"), Column("dtype", "dtype"),
         Column("bytes", "bytes (s = 4096, b = 1)"), Column("note", "kept by", width="0.3\\linewidth")),
        tuple(rows),
        note="Dropless routing: k_E copies of each token through the experts; the eager profile "
             "(transformers) is validated tensor by tensor by python -m derive.validate.",
    )


def departures_table() -> Table:
    """Megatron's MoE departures with their difference and size for DeepSeek-V3 and Mixtral."""
    sized = {key: sizes(MODELS[key].values, MODELS[key].layout) for key in DEPARTURE_MODELS}
    rows = []
    for entry in DEPARTURES:
        unit = "B" if "bytes" in entry.unit else ""
        rows.append({
            "departure": text_cell(entry.name), "difference": math_cell(entry.difference),
            "unit": text_cell(entry.unit),
            **{key: (text_cell("-") if sized[key][entry.name] is None
                     else _size_cell(sized[key][entry.name], unit)) for key in DEPARTURE_MODELS},
        })
    return Table(
        "moe_departures", "Megatron-LM's MoE, MLA and MTP estimates against the derived tables",
        (Column("departure", "departure", width="0.16\\linewidth"),
         Column("difference", "derived - Megatron", width="0.3\\linewidth"),
         Column("unit", "unit", width="0.1\\linewidth"),
         *(Column(key, MODELS[key].name) for key in DEPARTURE_MODELS)),
        tuple(rows),
        note=f"Sizes at {_layout()} and each model's s; '-': the model has no such tensor. Positive: "
             "Megatron leaves it out; negative: Megatron counts more.",
    )


def moe_section() -> Section:
    """MoE and MLA accounts and Megatron's departures on them."""
    return Section(
        "moe", "Mixture of Experts and latent attention",
        intro=("Every MoE account is a sum over the same per-tensor tables: routed experts at k_E of "
               "their E copies per token, router and shared experts, MLA's latents. derive.megatron "
               "reproduces Megatron-LM's five estimators on all 400 MoE/MLA/MTP reference records "
               "exactly; the departures below are where Megatron's numbers and the tables differ.",),
        tables={"moe_models": models_table(), "moe_parameters": parameter_table(),
                "moe_saved": saved_table(), "moe_departures": departures_table()},
    )
