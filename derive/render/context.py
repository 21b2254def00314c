"""What the sheet shows: every value computed here, from the expressions users import."""
from __future__ import annotations

import sympy as sp

from derive.accounts.state import OPTIMIZERS, PRECISIONS, bytes_per_parameter, state_bytes
from derive.check import run_proofs, verdict
from derive.presets import LLAMA3_MODELS, MODELS
from derive.symbols import LATEX_NAMES, NOTATION
from derive.units import format_bytes


def tex(expr: sp.Expr) -> str:
    """LaTeX of ``expr`` in the sheet's notation."""
    return sp.latex(sp.sympify(expr), symbol_names=LATEX_NAMES)


def notation() -> list[dict[str, str]]:
    """The notation table, from derive.symbols."""
    return [{"symbol": tex(entry.symbol), "meaning": entry.meaning} for entry in NOTATION]


def bytes_per_parameter_table() -> list[dict[str, str]]:
    """Resident bytes per parameter for every precision x optimizer, unsharded."""
    return [
        {"precision": precision, "optimizer": optimizer,
         "per_parameter": tex(bytes_per_parameter(precision, optimizer))}
        for precision in PRECISIONS for optimizer in OPTIMIZERS
    ]


def models() -> list[dict[str, str]]:
    """The Llama 3 presets' shapes and resident state at 16 and 18 bytes per parameter."""
    rows = []
    for name in LLAMA3_MODELS:
        model = MODELS[name]
        count = model.parameters
        rows.append({
            "name": name, "L": model.layers, "h": model.hidden, "a": model.heads,
            "g": model.kv_heads, "f": model.ffn, "V": model.vocab,
            "N": f"{count:,}", "N_GEMM": f"{model.gemm_parameters:,}",
            **{f"resident_{precision}": format_bytes(model.subs(
                state_bytes(precision, "adam").total, N=count))
               for precision in ("bf16", "bf16-fp32grad")},
        })
    return rows


def identities() -> list[dict[str, object]]:
    """Every identity with its proof status, source and assumptions."""
    return [
        {"name": proof.identity.name, "topic": proof.identity.topic,
         "claim": tex(proof.claim), "status": verdict(proof),
         "source": proof.identity.source, "assumptions": list(proof.identity.assumptions)}
        for proof in run_proofs()
    ]


def sheet_context() -> dict[str, object]:
    """Everything the templates need."""
    return {
        "notation": notation(),
        "bytes_per_parameter": bytes_per_parameter_table(),
        "models": models(),
        "identities": identities(),
    }
