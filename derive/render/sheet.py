"""What a sheet section hands the templates: tables of printed cells, figures, and their data.

A :class:`Cell` carries both what the sheet prints (``text``, LaTeX when
``math``) and the value written to formulas/tables.json, so the Markdown,
the LaTeX and the JSON show the same numbers from one computation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import sympy as sp

from derive.printing.latex import tex
from derive.printing.text import text
from derive.units import format_bytes, format_memory


@dataclass(frozen=True)
class Column:
    """One column: its key in tables.json, its heading, the unit of its values, its LaTeX width."""

    key: str
    title: str
    unit: str = ""
    width: str = ""


@dataclass(frozen=True)
class Cell:
    """A printed value (``text``; LaTeX math when ``math``) and its JSON ``value``."""

    value: object
    text: str
    math: bool = False


@dataclass(frozen=True)
class Table:
    """Rows of cells under columns; ``key`` names it in tables.json."""

    key: str
    title: str
    columns: tuple[Column, ...]
    rows: tuple[Mapping[str, Cell], ...]
    note: str = ""

    def __post_init__(self) -> None:
        keys = [column.key for column in self.columns]
        for row in self.rows:
            if sorted(row) != sorted(keys):
                raise ValueError(f"table {self.key}: row keys {sorted(row)} != columns {keys}")

    def data(self) -> dict[str, object]:
        """The table as JSON-ready data: columns with units, rows of values."""
        return {
            "title": self.title,
            "note": self.note,
            "columns": [{"key": c.key, "title": c.title, "unit": c.unit} for c in self.columns],
            "rows": [{key: cell.value for key, cell in row.items()} for row in self.rows],
        }


@dataclass(frozen=True)
class Drawing:
    """A file written beside the sheet from ``template`` (under templates/) with ``context``.

    ``tex_template``, when set, draws the same figure inside sheet.tex from the
    same context (it is included with ``chart`` bound to ``context``).
    """

    filename: str
    template: str
    caption: str
    context: Mapping[str, object]
    tex_template: str = ""


@dataclass(frozen=True)
class Node:
    """One node of a flowchart: Mermaid id, label (plain text), class (a key of Flowchart.classes)."""

    id: str
    label: str
    cls: str


@dataclass(frozen=True)
class Flowchart:
    """A Mermaid flowchart for sheet.md (``md.mermaid`` in templates/md/macros.j2); ``classes`` maps class -> style."""

    direction: str
    nodes: tuple[Node, ...]
    edges: tuple[tuple[str, str], ...]
    classes: Mapping[str, str]

    def __post_init__(self) -> None:
        ids = [node.id for node in self.nodes]
        for node in self.nodes:
            if not node.id.isidentifier() or node.cls not in self.classes:
                raise ValueError(f"node: bad id {node.id!r} or unknown class {node.cls!r}")
        for source, target in self.edges:
            if source not in ids or target not in ids:
                raise ValueError(f"edge: {source!r} -> {target!r} names an unknown node")


@dataclass(frozen=True)
class Section:
    """One section of the sheet; ``key`` selects templates/md/<key>.md.j2 and templates/tex/<key>.tex.j2."""

    key: str
    title: str
    intro: tuple[str, ...] = ()
    tables: Mapping[str, Table] = field(default_factory=dict)
    figures: tuple[Drawing, ...] = ()
    extra: Mapping[str, object] = field(default_factory=dict)


def math_cell(expr: sp.Expr | int) -> Cell:
    """An expression: LaTeX on the sheet, SymPy's string in the JSON."""
    expr = sp.sympify(expr)
    value = int(expr) if expr.is_Integer else text(expr)
    return Cell(value, tex(expr), math=True)


def int_cell(value: int | sp.Expr) -> Cell:
    """An integer, printed with thousands separators."""
    number = int(value)
    if number != value:
        raise ValueError(f"value: {value} is not an integer")
    return Cell(number, f"{number:,}")


def bytes_cell(value: int | sp.Expr, unit: str | None = None) -> Cell:
    """A byte count: exact integer in the JSON (unit B); memory in GiB / TiB on the sheet, or in ``unit``."""
    return Cell(int_cell(value).value, format_memory(value) if unit is None else format_bytes(value, unit))


def article_bytes_cell(value: int | sp.Expr) -> Cell:
    """A byte count in a table that reproduces the article's: its decimal GB / TB, the note labels them."""
    return Cell(int_cell(value).value, format_bytes(value))


def text_cell(value: str) -> Cell:
    """Plain text, escaped for each format by the templates."""
    return Cell(value, value)


def tables_json(sections: list[Section], units: Mapping[str, int]) -> dict[str, object]:
    """formulas/tables.json: every table of every section by key, with the byte units."""
    tables: dict[str, object] = {}
    for section in sections:
        for table in section.tables.values():
            if table.key in tables:
                raise ValueError(f"table: key {table.key!r} used twice")
            tables[table.key] = {"section": section.key, **table.data()}
    return {"units": dict(units), "tables": tables}
