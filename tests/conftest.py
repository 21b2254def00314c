"""Fixtures shared by the sheet tests: one fresh render per test session."""
import json
import os
from pathlib import Path

import pytest
from hypothesis import settings

# No per-example deadline: the suite runs on loaded 2-core machines, where a slow
# example is not a failure. Under CI the examples are derandomised, so a landing
# run is reproducible; locally they stay random and keep searching.
settings.register_profile("derive", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "derive")

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
