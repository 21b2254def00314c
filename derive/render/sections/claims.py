"""The article's numeric claims as ``python -m derive.check --document 'the article'`` judges them (derive.claims)."""
from __future__ import annotations

from derive.claims import ARTICLE, Claim, Verdict, all_claims, evaluate
from derive.render.sheet import Cell, Column, Section, Table, text_cell

#: the verdicts in the order the summary names them, each with its plural verb form.
STATUSES = {"holds": "hold", "does not hold": "do not hold", "pending": "pending"}


def claim_cells(verdict: Verdict) -> dict[str, Cell]:
    """One claim: where, what, the printed and the derived value, the verdict and why."""
    record, entry = verdict.record(), verdict.claim
    derived = f"{verdict.printed} {entry.unit}" if verdict.status != "pending" else ""
    return {
        "id": text_cell(entry.id), "section": text_cell(entry.section), "text": text_cell(entry.text),
        "printed": Cell(record["value"], f"{entry.printed_value} {entry.unit}"),
        "rounding": text_cell(record["rounding"]),
        "derived": Cell(record["derived"], derived),
        "status": text_cell(verdict.status), "reason": text_cell(verdict.reason),
    }


def claims_table(verdicts: list[Verdict]) -> Table:
    """Every registered claim in the article's order with its verdict."""
    return Table(
        "claims", "The article's numeric claims",
        (Column("id", "claim", width="0.13\\linewidth"), Column("section", "section", width="0.06\\linewidth"),
         Column("text", "what the article says", width="0.17\\linewidth"),
         Column("printed", "printed", width="0.07\\linewidth"),
         Column("rounding", "rounding", width="0.07\\linewidth"),
         Column("derived", "derived, as printed", width="0.07\\linewidth"),
         Column("status", "status", width="0.06\\linewidth"),
         Column("reason", "why not / what is missing", width="0.17\\linewidth")),
        tuple(claim_cells(v) for v in verdicts),
        note="A claim holds when the derived value, rounded as the article rounds it, prints as the "
             "article prints it; pending claims wait for a derivation and are not judged.",
    )


def sheet_verdicts() -> tuple[Verdict, ...]:
    """Every claim's verdict (derive.claims.evaluate_all), evaluated once per render: this section
    takes the article's, the literature section the papers'. Looked up by the registered claims, so a
    claim registered or replaced since is evaluated afresh."""
    return tuple(map(judged, all_claims()))


#: The verdicts evaluated in this process or kept from another (:func:`keep_verdicts`), by claim.
_VERDICTS: dict[int, Verdict] = {}


def judged(entry: Claim) -> Verdict:
    """``entry``'s verdict (derive.claims.evaluate), evaluated once per process."""
    found = _VERDICTS.get(id(entry))
    if found is None or found.claim is not entry:
        found = _VERDICTS[id(entry)] = evaluate(entry)
    return found


def document_groups() -> list[list[Claim]]:
    """The claims not evaluated yet in this process, document by document (derive.claims.all_claims' order)."""
    groups: dict[str, list[Claim]] = {}
    for entry in all_claims():
        found = _VERDICTS.get(id(entry))
        if found is None or found.claim is not entry:
            groups.setdefault(entry.document, []).append(entry)
    return list(groups.values())


def verdict_fields(group: list[Claim]) -> list[tuple[object, ...]]:
    """Each claim of ``group`` judged: its verdict's fields but the claim, what another process keeps (pickled)."""
    return [(v.status, v.derived, v.printed, v.reason) for v in map(judged, group)]


def keep_verdicts(group: list[Claim], fields: list[tuple[object, ...]]) -> None:
    """Keep :func:`verdict_fields` of ``group`` (judged in another process) as this process's verdicts."""
    for entry, values in zip(group, fields, strict=True):
        _VERDICTS[id(entry)] = Verdict(entry, *values)


def claims_section() -> Section:
    """The claims check, regenerated from the registry each time the sheet is rendered."""
    verdicts = [v for v in sheet_verdicts() if v.claim.document == ARTICLE]  # evaluate_all(ARTICLE)'s order
    counts = {status: sum(v.status == status for v in verdicts) for status in STATUSES}
    summary = ", ".join(f"{count} {STATUSES[status] if count != 1 else status}"
                        for status, count in counts.items())
    return Section(
        "claims", "The article's claims, checked",
        intro=(f"{len(verdicts)} numeric claims of the article (prose, code comments, sample output, "
               f"self-test answers): {summary}. A claim that does not hold is reported with the "
               "derived value and, where one reproduces the printed number, the alternative reading; "
               "it is never adjusted.",),
        tables={"claims": claims_table(verdicts)},
    )
