"""The four states and their lifetimes in one step (the article's section 2), from the state ledger."""
from __future__ import annotations

import sympy as sp

from derive.accounts.activations import article_model_bytes, logits_bytes
from derive.accounts.state import ACCOUNTS, PRECISIONS, state_bytes, state_ledger
from derive.printing.factored import factored
from derive.printing.latex import tex
from derive.render.sections.bytes_per_parameter import STAGE_NAMES
from derive.render.sheet import Cell, Column, Section, Table, math_cell, text_cell
from derive.render.timeline import memory_timeline_figure
from derive.symbols import L, N, V, b, h, s
from derive.tensors import Tensor

#: What each state is and when it lives within one step (the article's section 2.1-2.2).
STATES: dict[str, tuple[str, str]] = {
    "params": ("parameters (compute copy)",
               "resident: read by every layer's forward and backward GEMMs; rewritten from the "
               "fp32 master at the end of the optimizer step"),
    "grads": ("gradients",
              "produced layer by layer in backward (last layer first); all N present at the end "
              "of backward; consumed by the optimizer step, then zeroed"),
    "optimizer": ("optimizer state (fp32 master and moments)",
                  "resident: read and written only inside optimizer.step(); idle the rest of the step"),
    "activations": ("activations",
                    "saved layer by layer in forward, freed layer by layer in backward: largest at "
                    "the end of forward, zero at the end of backward (the gradients' complement)"),
}

#: ledger tag of the ZeRO stage that partitions a tensor -> the sheet's name for that stage.
STAGES = {f"zero{stage}": name for stage, name in STAGE_NAMES.items() if stage}


def _one(tensor: Tensor, options: tuple[str, ...] | dict[str, str], field: str) -> str:
    found = sorted(tag for tag in tensor.tags if tag in options)
    if len(found) != 1:
        raise ValueError(f"{field}: tensor {tensor.name!r} has tags {sorted(tensor.tags)}")
    return found[0]


def activations_cell() -> Cell:
    """All layers + logits of one micro-batch from the activation ledger: L sbh(34 + 5as/h) + 6sbV (article 4.3)."""
    total, logits = article_model_bytes("materialised"), logits_bytes()
    layers = sp.expand(total - logits)
    return Cell(sp.sstr(total), f"{tex(factored(layers, (L, s, b, h)))} + {tex(factored(logits, (s, b, V)))}",
                math=True)


def states_table() -> Table:
    """One row per state: its bytes under bf16 + Adam (summed from the ledger) and its lifetime."""
    held = state_bytes("bf16", "adam")
    rows = []
    for account, (name, lifetime) in STATES.items():
        if account in ACCOUNTS:
            size = math_cell(getattr(held, account))
        else:
            size = activations_cell()
        rows.append({"state": text_cell(name), "account": text_cell(account),
                     "bytes": size, "lifetime": text_cell(lifetime)})
    return Table(
        "states", "The four states (bf16 + Adam; activations: GPT layer at f = 4h, materialised "
                  "scores, one micro-batch, with logits)",
        (Column("state", "state", width="0.2\\linewidth"), Column("account", "account"),
         Column("bytes", "bytes", unit="B", width="0.14\\linewidth"),
         Column("lifetime", "lifetime in one step", width="0.38\\linewidth")),
        tuple(rows),
    )


def state_ledger_table(optimizer: str = "adam") -> Table:
    """Every tensor of every precision recipe's state ledger: dtype, bytes/parameter, account, lifetime, ZeRO stage."""
    rows = []
    for precision in PRECISIONS:
        for tensor in state_ledger(precision, optimizer):
            stage = sorted(tag for tag in tensor.tags if tag in STAGES)
            rows.append({
                "precision": text_cell(precision), "tensor": text_cell(tensor.name),
                "dtype": text_cell(tensor.dtype),
                "bytes_per_parameter": math_cell(sp.expand(tensor.bytes / N)),
                "account": text_cell(_one(tensor, ACCOUNTS, "account")),
                "lifetime": text_cell(_one(tensor, ("resident", "transient"), "lifetime")),
                "partitioned_from": Cell(STAGES[stage[0]] if stage else None,
                                         STAGES[stage[0]] if stage else "not partitioned"),
            })
    return Table(
        "state_ledger", f"State ledger per parameter ({optimizer})",
        (Column("precision", "precision"), Column("tensor", "tensor", width="0.3\\linewidth"),
         Column("dtype", "dtype"), Column("bytes_per_parameter", "B / param", unit="B/param"),
         Column("account", "account"), Column("lifetime", "lifetime"),
         Column("partitioned_from", "sharded from")),
        tuple(rows),
        note="A transient tensor lives only during one layer's backward and is not resident.",
    )


def states_section() -> Section:
    """The four states, their lifetimes, the per-tensor state ledger, and one step of 70B over time (article 2.2)."""
    return Section(
        "states", "The four states and their lifetimes",
        intro=("Parameters, gradients and optimizer state are linear in N with a coefficient set "
               "by precision and optimizer; activations are linear in the tokens of a micro-batch "
               "and do not depend on N. Activations peak at the end of forward, gradients at the "
               "end of backward, so adding all four is an upper bound on the peak.",),
        tables={"states": states_table(), "state_ledger": state_ledger_table()},
        figures=(memory_timeline_figure(),),
    )
