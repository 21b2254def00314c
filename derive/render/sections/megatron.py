"""Where Megatron-LM's estimators depart from the derived ledger, each difference sized at the presets."""
from __future__ import annotations

import sympy as sp

from derive.identities import Proof, all_identities, prove
from derive.identities.megatron import DEPARTURES, LAYOUT, sizes
from derive.identities.comm import TOPIC as COMMUNICATION_TOPIC
from derive.identities.megatron import TOPIC as WEIGHTS_TOPIC
from derive.presets import LLAMA3_MODELS, model
from derive.render.quantities import json_number, number_cell
from derive.render.sheet import Cell, Column, Section, Table, math_cell, text_cell
from derive.symbols import b
from derive.units import format_memory

#: the GPT preset sized beside the Llama 3 ones (the GPT-only departures vanish on Llama).
GPT_MODEL = "gpt3-175b"
MODELS = (*LLAMA3_MODELS, GPT_MODEL)
#: where an estimator's source is Megatron-LM's code (derive's sources cite its files by path).
MEGATRON_CODE = "megatron/"
#: the micro-batch the activation departures are sized at.
MICRO_BATCH = {b: 1}


def _layout() -> str:
    """The layout the sizes are quoted at, as 't = 8, p = 4, d = 8'."""
    return ", ".join(f"{sp.sstr(symbol)} = {value}" for symbol, value in LAYOUT.items())


def _size_cell(value: sp.Expr, unit: str) -> Cell:
    """A departure's size: bytes in binary units (GiB), an integer in full, a number to 3 significant figures.

    A size that still holds a symbol (a layout the presets do not fix) is printed as its expression.
    """
    value = sp.sympify(value)
    if not value.is_number:
        return math_cell(value)
    if unit == "B":
        return Cell(json_number(value), format_memory(value))
    if value.is_Integer:
        return number_cell(value, 0)
    return Cell(json_number(value), f"{float(value):.3g}")


def weights_table() -> Table:
    """The weight-side DEPARTURES: each difference as an expression and its size per preset (the
    activation-side ones are identities too, and appear in :func:`registry_table`)."""
    sized = {name: sizes(model(name).values, model(name).family) for name in MODELS}
    rows = []
    for entry in (entry for entry in DEPARTURES if entry.topic == WEIGHTS_TOPIC):
        rows.append({
            "departure": text_cell(entry.name), "difference": math_cell(entry.difference),
            "unit": text_cell(entry.unit),
            **{name: _size_cell(sized[name][entry.name], entry.unit) for name in MODELS},
            "assumptions": Cell(list(entry.assumptions), "; ".join(entry.assumptions)),
        })
    return Table(
        "megatron_weight_departures", "Megatron's weight and optimizer estimator against the derived ledger",
        (Column("departure", "departure", width="0.13\\linewidth"),
         Column("difference", "derived - Megatron", width="0.14\\linewidth"),
         Column("unit", "unit", width="0.08\\linewidth"), *(Column(name, name) for name in MODELS),
         Column("assumptions", "assumptions", width="0.14\\linewidth")),
        tuple(rows),
        note=f"Sizes at {_layout()}; a GPT-only departure is 0 on the Llama presets, which have no such "
             "tensor. Positive: Megatron leaves it out; negative: Megatron counts more.",
    )


def _unit(topic: str) -> str:
    """Bytes for an activation departure, a plain number otherwise."""
    return "B" if "activation" in topic.lower() else ""


def other_departures() -> list[Proof]:
    """Registry departures outside the weights topic whose source is Megatron-LM's code.

    Communication departures (bytes on a wire, not Megatron's estimator forms) are listed with the
    other identities.
    """
    return [prove(entry) for entry in all_identities()
            if not entry.holds and entry.topic not in (WEIGHTS_TOPIC, COMMUNICATION_TOPIC)
            and MEGATRON_CODE in entry.source.lower()]


def registry_table() -> Table:
    """Activation (and FLOP) forms of Megatron applied where the derived ledger differs, sized per preset."""
    rows = []
    for checked in other_departures():
        entry, unit = checked.identity, _unit(checked.identity.topic)
        values = {name: {symbol: sp.sympify(value) for symbol, value in
                         {**model(name).values, **LAYOUT, **MICRO_BATCH}.items()} for name in LLAMA3_MODELS}
        rows.append({
            "topic": text_cell(entry.topic), "departure": text_cell(entry.name),
            "claim": math_cell(checked.claim), "difference": math_cell(checked.difference),
            "status": text_cell(checked.verdict),
            **{name: _size_cell(checked.difference.xreplace(values[name]), unit) for name in LLAMA3_MODELS},
            "source": text_cell(entry.source),
        })
    return Table(
        "megatron_other_departures", "Megatron's activation and FLOP forms against the derived ledger",
        (Column("topic", "topic", width="0.07\\linewidth"), Column("departure", "departure", width="0.13\\linewidth"),
         Column("claim", "Megatron's form", width="0.11\\linewidth"),
         Column("difference", "derived - Megatron", width="0.13\\linewidth"),
         Column("status", "proof"), *(Column(name, name) for name in LLAMA3_MODELS),
         Column("source", "source", width="0.1\\linewidth")),
        tuple(rows),
        note=f"Activations per layer per micro-batch of b = 1 sequence (bytes, GiB = 2^30 B) at "
             f"{_layout()} and each preset's s; other sizes are plain ratios.",
    )


def megatron_section() -> Section:
    """The departures of Megatron-LM's estimators, quantified."""
    return Section(
        "megatron", "Megatron-LM's estimators against the derived ledger",
        intro=("derive.megatron reproduces Megatron-LM's estimators exactly by reading derive's own "
               "tables under Megatron's conventions. Each convention that differs from the derived "
               "ledger is a departure: its exact difference (derived minus Megatron) and its size for "
               "the presets.",),
        tables={"megatron_weight_departures": weights_table(),
                "megatron_other_departures": registry_table()},
    )
