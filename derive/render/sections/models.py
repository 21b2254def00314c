"""The three Llama 3 models: shapes, N, N_GEMM, and resident state at 16 and 18 bytes/parameter (article 1.3, 3.5)."""
from __future__ import annotations

from derive.accounts.state import bytes_per_parameter, state_bytes
from derive.presets import LLAMA3_MODELS, MODELS
from derive.render.sheet import Column, Section, Table, article_bytes_cell, int_cell, text_cell

#: the two recipes of the article's resident-state table: bf16 + Adam and Megatron's default.
RESIDENT_RECIPES = (("bf16", "adam", "bf16 + Adam"), ("bf16-fp32grad", "adam", "bf16, fp32 grads + Adam"))


def llama3_models_table() -> Table:
    """L, h, a, g, f, V from the presets; N and N_GEMM summed from the parameter tables."""
    rows = []
    for name in LLAMA3_MODELS:
        model = MODELS[name]
        rows.append({
            "model": text_cell(name), "L": int_cell(model.layers), "h": int_cell(model.hidden),
            "a": int_cell(model.heads), "g": int_cell(model.kv_heads), "f": int_cell(model.ffn),
            "V": int_cell(model.vocab), "N": int_cell(model.parameters),
            "N_GEMM": int_cell(model.gemm_parameters),
        })
    return Table(
        "llama3_models", "Llama 3 models",
        (Column("model", "model"), *(Column(key, key) for key in ("L", "h", "a", "g", "f", "V")),
         Column("N", "N", unit="parameters"), Column("N_GEMM", "N_GEMM", unit="parameters")),
        tuple(rows),
        note="Llama 3 paper (Dubey et al. 2024), Table 3; V = 128256 with special tokens.",
    )


def resident_state_table() -> Table:
    """Resident parameters + gradients + optimizer state of each model under each recipe, in the article's GB."""
    columns = [Column("model", "model")]
    for precision, optimizer, label in RESIDENT_RECIPES:
        per_parameter = bytes_per_parameter(precision, optimizer)
        columns.append(Column(precision, f"{label} ({per_parameter} B/param)", unit="B"))
    rows = []
    for name in LLAMA3_MODELS:
        model = MODELS[name]
        row = {"model": text_cell(name)}
        for precision, optimizer, _ in RESIDENT_RECIPES:
            row[precision] = article_bytes_cell(model.at(state_bytes(precision, optimizer).total))
        rows.append(row)
    return Table("resident_state", "Resident state (parameters, gradients, optimizer)",
                 tuple(columns), tuple(rows),
                 note="In the article's units (its section 8.4 output): GB = 10^9 B, TB = 10^12 B.")


def models_section() -> Section:
    """The Llama 3 sizes and their resident state."""
    return Section("models", "Llama 3 models and their resident state",
                   tables={"llama3_models": llama3_models_table(),
                           "resident_state": resident_state_table()})
