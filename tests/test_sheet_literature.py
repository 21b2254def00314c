"""The sheet's section on the papers' claims (tests/test_literature.py holds the claims themselves).

Apart from test_literature.py's xdist group: this test waits on the session's render, which the
worker running the page tests does first (conftest's ``pytest_collection_modifyitems`` puts the
tests that need it after the others), so the group's worker does not wait with it.
"""
from test_literature import COUNTS, verdicts  # noqa: F401 (fixture)

from derive.claims import ARTICLE


def test_sheet_section_counts_and_lists_every_claim_that_does_not_hold(sheet, tables, verdicts):
    assert "## The literature, checked" in sheet
    per_document = {row["document"]: row for row in tables["literature_documents"]["rows"]}
    for name, (hold, fail, unconfirmed) in COUNTS.items():
        row = per_document[name]
        assert (row["hold"], row["do_not_hold"], row["unconfirmed"]) == (hold, fail, unconfirmed)
    listed = [row["id"] for row in tables["literature_not_holding"]["rows"]]
    assert listed == [key for key, v in verdicts.items()
                      if v.claim.document != ARTICLE and v.status == "does not hold"]
    assert "Table A4" in per_document["Hoffmann et al. 2022"]["scope"]
