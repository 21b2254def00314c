"""Every identity of the registry: claim, proof status, source, assumptions."""
from __future__ import annotations

import sympy as sp

from derive.identities import prove_all
from derive.printing.latex import tex_equation
from derive.printing.text import text
from derive.render.sheet import Cell, Column, Section, Table, math_cell, text_cell


def identities_table() -> Table:
    """One row per identity, in registration order (topic modules in name order)."""
    rows = []
    for proof in prove_all():
        entry = proof.identity
        where = sorted(entry.where.items(), key=lambda pair: sp.default_sort_key(pair[0]))
        rows.append({
            "topic": text_cell(entry.topic), "name": text_cell(entry.name),
            "claim": math_cell(entry.claim),
            "where": Cell({text(k): text(v) for k, v in where},  # sp.sstr, read back when printed before
                          ", \\quad ".join(tex_equation(k, v) for k, v in where), math=bool(where)),
            "status": text_cell(proof.verdict),
            "difference": math_cell(proof.difference),
            "source": text_cell(entry.source),
            "assumptions": Cell(list(entry.assumptions), "; ".join(entry.assumptions)),
        })
    return Table(
        "identities", "Identities",
        (Column("topic", "topic"), Column("name", "identity"), Column("claim", "claim"),
         Column("where", "substitutions"), Column("status", "status"),
         Column("difference", "derived - claim"), Column("source", "source"),
         Column("assumptions", "assumptions")),
        tuple(rows),
    )


def identities_section() -> Section:
    """The registry, grouped by topic."""
    table = identities_table()
    topics = list(dict.fromkeys(row["topic"].text for row in table.rows))
    groups = [{"topic": topic, "rows": [row for row in table.rows if row["topic"].text == topic]}
              for topic in topics]
    return Section(
        "identities", "Identities",
        intro=("Each published closed form (the claim) is proven equal to the sum over the "
               "tensor tables under its substitutions; a departure is a form applied outside its "
               "assumptions, shown with the non-zero difference.",),
        tables={"identities": table}, extra={"groups": groups},
    )
