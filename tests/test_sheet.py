"""The committed sheet is what make derive writes, byte for byte."""
from pathlib import Path

from derive.render.__main__ import OUTPUTS, ROOT, render


def test_committed_formulas_are_fresh(tmp_path):
    written = render(tmp_path / "formulas")
    assert sorted(p.name for p in written) == sorted(OUTPUTS.values())
    for path in written:
        committed = ROOT / "formulas" / path.name
        assert committed.read_bytes() == path.read_bytes(), f"{committed} is stale: run make derive"


def test_sheet_carries_the_article_numbers(tmp_path):
    sheet = render(tmp_path / "formulas")[0].read_text()
    assert "128.48 GB" in sheet and "1.13 TB" in sheet and "6.49 TB" in sheet
    assert "70,553,706,496" in sheet
