"""Notation: every symbol of derive.symbols with its meaning (the article's section 1.3)."""
from __future__ import annotations

from derive.printing.latex import tex
from derive.render.sheet import Cell, Column, Section, Table, text_cell
from derive.symbols import NOTATION


def notation_section() -> Section:
    """The notation table, generated from the symbols the maths uses."""
    table = Table(
        "notation", "Symbols (derive.symbols)",
        (Column("symbol", "symbol"), Column("meaning", "meaning", width="0.62\\linewidth"),
         Column("group", "group")),
        tuple({"symbol": Cell(entry.symbol.name, tex(entry.symbol), math=True),
               "meaning": text_cell(entry.meaning), "group": text_cell(entry.group)}
              for entry in NOTATION),
    )
    return Section("notation", "Notation", tables={"notation": table})
