"""Fixtures shared by the sheet tests: one fresh render per test session."""
import json
from pathlib import Path

import pytest

from derive.render.__main__ import render


@pytest.fixture(scope="session")
def fresh(tmp_path_factory) -> Path:
    """formulas/ as make derive would write it now, in a temporary folder."""
    out = tmp_path_factory.mktemp("render") / "formulas"
    render(out)
    return out


@pytest.fixture(scope="session")
def sheet(fresh) -> str:
    """The fresh sheet.md."""
    return (fresh / "sheet.md").read_text()


@pytest.fixture(scope="session")
def tables(fresh) -> dict:
    """The fresh tables.json's tables."""
    return json.loads((fresh / "tables.json").read_text())["tables"]
