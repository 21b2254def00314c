"""Published models read from their config.json (derive/configs): N, active N, resident state, FLOPs per token."""
from __future__ import annotations

from derive.accounts.flops import flops_per_token
from derive.accounts.state import bytes_per_parameter, state_bytes
from derive.hf import published_model, published_names
from derive.render.quantities import flop_cell
from derive.render.sheet import Column, Section, Table, bytes_cell, int_cell, text_cell
from derive.render.sections.models import RESIDENT_RECIPES


def published_models_table() -> Table:
    """One row per shipped config: its table's N and active N, the states of two recipes, causal FLOPs per token at s."""
    columns = [Column("model", "model"), Column("model_type", "model_type"),
               Column("s", "s (context)"), Column("N", "N", unit="parameters"),
               Column("active_N", "active N", unit="parameters")]
    for precision, optimizer, label in RESIDENT_RECIPES:
        columns.append(Column(precision, f"{label} ({bytes_per_parameter(precision, optimizer)} "
                                         "B/param)", unit="B"))
    columns.append(Column("flops", "FLOPs/token, causal, at s", unit="FLOP/token"))
    rows = []
    for name in published_names():
        model = published_model(name)
        row = {"model": text_cell(name), "model_type": text_cell(model.model_type),
               "s": int_cell(model.seq), "N": int_cell(model.parameters),
               "active_N": int_cell(model.active_parameters)}
        for precision, optimizer, _ in RESIDENT_RECIPES:
            row[precision] = bytes_cell(model.at(state_bytes(precision, optimizer).total))
        row["flops"] = flop_cell(model.at(flops_per_token(model.architecture, "causal")), digits=1)
        rows.append(row)
    return Table(
        "published_models", "Published models, from their config.json", tuple(columns),
        tuple(rows),
        note="Each row's table is generated from the model's published config.json "
             "(derive/configs, provenance in derive/configs/SOURCES.md) and validated tensor by "
             "tensor against transformers 5.23 (python -m derive.validate --hf). Active N: every "
             "parameter but the routed experts, plus top-k of them per MoE layer. FLOPs: "
             "6 N_GEMM + 6 L s a k (causal) at the config's context length; in an MoE model N_GEMM "
             "counts the routed experts at top-k (the router included), under MLA the scores are "
             "3 L s a (k_nope + k_rope + k_v).",
    )


def published_models_section() -> Section:
    """The published models' sizes, resident state and FLOPs."""
    return Section("published_models", "Published models from their configs",
                   tables={"published_models": published_models_table()})
