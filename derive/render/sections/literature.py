"""The papers derive builds on, checked claim by claim (derive.claims, one module per paper; issue 17)."""
from __future__ import annotations

from derive.claims import ARTICLE, DOCUMENTS, Verdict, documents
from derive.render.sections.claims import claim_cells, sheet_verdicts
from derive.render.sheet import Column, Section, Table, int_cell, text_cell


def documents_table(verdicts: list[Verdict]) -> Table:
    """Per document: how many claims hold, do not hold or are unconfirmed, and what is left out and why."""
    rows = []
    for name in documents():
        mine = [v for v in verdicts if v.claim.document == name]
        rows.append({
            "document": text_cell(name), "source": text_cell(DOCUMENTS[name].source),
            "claims": int_cell(len(mine)),
            "hold": int_cell(sum(v.status == "holds" for v in mine)),
            "do_not_hold": int_cell(sum(v.status == "does not hold" for v in mine)),
            "unconfirmed": int_cell(sum(v.status == "unconfirmed" for v in mine)),
            "scope": text_cell(DOCUMENTS[name].scope),
        })
    return Table(
        "literature_documents", "Claims per document",
        (Column("document", "document", width="0.12\\linewidth"),
         Column("source", "source", width="0.2\\linewidth"),
         Column("claims", "claims"), Column("hold", "hold"), Column("do_not_hold", "do not hold"),
         Column("unconfirmed", "unconfirmed"),
         Column("scope", "not checked or unconfirmed, and why", width="0.33\\linewidth")),
        tuple(rows),
        note="A paper's claim is judged only where its printed value was read in a copy or a "
             "quotation of the paper (the claim's checked_against); the others are unconfirmed: "
             "derive's value is computed, no verdict is given. python -m derive.check --document "
             "NAME prints one document's claims with their derived values and sources; --claims "
             "prints all of them.",
    )


def not_holding_table(verdicts: list[Verdict]) -> Table:
    """Every paper claim that does not hold: what the paper prints, what derive derives, and why."""
    rows = []
    for verdict in verdicts:
        if verdict.status != "does not hold":
            continue
        cells = dict(claim_cells(verdict))
        del cells["status"], cells["text"]
        rows.append({"document": text_cell(verdict.claim.document), **cells})
    return Table(
        "literature_not_holding", "The papers' claims that do not hold",
        (Column("document", "document", width="0.1\\linewidth"),
         Column("id", "claim", width="0.14\\linewidth"),
         Column("section", "where", width="0.07\\linewidth"),
         Column("printed", "printed", width="0.1\\linewidth"),
         Column("rounding", "rounding", width="0.07\\linewidth"),
         Column("derived", "derived, as printed", width="0.1\\linewidth"),
         Column("reason", "why", width="0.34\\linewidth")),
        tuple(rows),
        note="A claim holds when derive's value, rounded as the paper rounds it, prints as the paper "
             "prints it. Where a different reading reproduces the printed number, the reason names "
             "it; conventions the papers use are registered in derive.conventions. Where each "
             "printed value was read (checked_against): python -m derive.check --document NAME "
             "--json.",
    )


def literature_section() -> Section:
    """The papers' claims, regenerated from the registry each time the sheet is rendered."""
    every = list(sheet_verdicts())
    verdicts = [v for v in every if v.claim.document != ARTICLE]
    held = sum(v.status == "holds" for v in verdicts)
    failed = sum(v.status == "does not hold" for v in verdicts)
    papers = [name for name in documents() if name != ARTICLE]
    return Section(
        "literature", "The literature, checked",
        intro=(f"{len(verdicts)} numeric claims of the {len(papers)} papers the article builds on "
               f"({', '.join(papers)}), each derived from derive's tables under the paper's own "
               f"stated assumptions. {held + failed} were read in a copy or a quotation of the "
               f"paper: {held} hold, {failed} do not; {len(verdicts) - held - failed} are "
               "unconfirmed (their printed values were not found in any stored source, so derive "
               "gives its value and no verdict). A claim that does not hold is reported with "
               "derive's value, the reason in derive's terms (which tensor or GEMM the paper counts "
               "differently, a rounding, an arithmetic slip); where its printed value was read is in the "
               "JSON output; "
               "it is never adjusted.",),
        tables={"literature_documents": documents_table(every),
                "literature_not_holding": not_holding_table(verdicts)},
    )
