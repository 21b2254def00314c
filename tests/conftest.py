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

#: The system tools some tests run, and what brings each (tests/install_renderers.sh runs these as root).
TOOLS = {
    "pdflatex": "sudo apt-get install texlive-latex-base texlive-latex-recommended",
    "node": "sudo apt-get install nodejs npm",
    "chromium": "sudo apt-get install chromium chromium-driver",
    "chromedriver": "sudo apt-get install chromium-driver",
    "katex": "cd tests/katex && npm ci",
}


def in_ci() -> bool:
    """True under CI=true (or 1): there a missing tool fails the test instead of skipping it."""
    return os.environ.get("CI", "").lower() in ("true", "1")


def missing_tool(tool: str, detail: str = "") -> None:
    """A test needs ``tool``, which is missing: one line naming it and its install; fail under CI, else skip."""
    message = f"{tool} {detail or 'not found'}: {TOOLS[tool]} (or, as root, bash tests/install_renderers.sh)"
    if in_ci():
        pytest.fail(message)
    pytest.skip(message)


#: The context the session's render filled the templates with (``fresh_context``).
_CONTEXTS: list[dict] = []


@pytest.fixture(scope="session")
def fresh(tmp_path_factory) -> Path:
    """formulas/ as make derive would write it now, in a temporary folder."""
    from derive.render import context

    out = tmp_path_factory.mktemp("render") / "formulas"
    derived = context.sheet_context

    def kept() -> dict:
        _CONTEXTS.append(derived())
        return _CONTEXTS[-1]

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(context, "sheet_context", kept)
            render(out)
    except ValueError as error:
        if not str(error).startswith("katex: "):
            raise
        missing_tool("katex", "is not installed in tests/katex/node_modules (the web page inlines it)")
    return out


@pytest.fixture(scope="session")
def fresh_context(fresh) -> dict:
    """The context ``fresh`` was rendered from: tests of how templates are written need not derive it again."""
    return _CONTEXTS[-1]


@pytest.fixture(scope="session")
def sheet(fresh) -> str:
    """The fresh sheet.md."""
    return (fresh / "sheet.md").read_text()


@pytest.fixture(scope="session")
def tables(fresh) -> dict:
    """The fresh tables.json's tables."""
    return json.loads((fresh / "tables.json").read_text())["tables"]
