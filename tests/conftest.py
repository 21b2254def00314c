"""Fixtures shared by the sheet tests: one fresh render per test session."""
import fcntl
import json
import os
import shutil
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

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    """Under ``--dist loadgroup``, suffix each xdist_group test's id with its group, as pytest-xdist means to.

    pytest-xdist 3.8 writes the suffix to ``item._nodeid``, which pytest 9 no longer reads (the id
    lives in ``item._id``), so every group was scattered over the workers and each built its module
    fixtures again. Where xdist's own suffix took effect this does nothing.
    """
    _render_last(items)
    if not config.getoption("loadgroup", default=False):
        return
    from _pytest.nodeid import NodeId

    for item in items:
        groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                         for mark in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(groups)
        if groups and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
            item._id = NodeId.parse(item.nodeid + suffix)


def _render_last(items: list) -> None:
    """Move the ungrouped tests that need the session's render (``fresh``) after every other test, keeping the order.

    Under ``-n 2 --dist loadgroup`` the page tests' group (the largest, so the first one sent) renders
    at its first test, on one worker and the render's second process; the other worker meanwhile runs
    what needs no render, and reaches these tests once the sheet is there instead of waiting on its lock.
    """
    items[:] = sorted(items, key=lambda item: "fresh" in getattr(item, "fixturenames", ())
                      and not any(item.iter_markers("xdist_group")))


#: Marks a test that reads the page's data the session's render keeps (derive.render.web.calculator_data and
#: page_context read derive.render.kept's file): it needs ``fresh``, so it runs after the render has written
#: that file (``_render_last``) and reads it back, instead of deriving the page's data again (a minute of CPU).
after_render = pytest.mark.usefixtures("fresh")


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


#: The page tests' window sizes (tests/test_web_browser.py): a desktop and a phone.
DESKTOP, PHONE = (1280, 1000), (390, 844)


@pytest.fixture(scope="session")
def chromium():
    """One headless chromium (Debian's, driven by Selenium) for every page test module a worker runs.

    Started once per worker: most page tests share an xdist group (one worker runs them all); the planner's
    (test_web_plan.py, test_web_planner.py) run last on either worker. Modules take it through their
    ``browser`` fixture (tests/test_web_browser.py).
    """
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver is None:
        missing_tool("chromium" if binary is None else "chromedriver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={DESKTOP[0]},{DESKTOP[1]}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    session = webdriver.Chrome(service=Service(driver), options=options)
    yield session
    session.quit()


#: The context this process's render filled the templates with (``fresh_context``).
_CONTEXTS: list[dict] = []


def _render_fresh(out: Path) -> None:
    """render(out), keeping the context it derived."""
    from derive.render import context

    derived = context.sheet_context

    def kept(*apart) -> dict:
        _CONTEXTS.append(derived(*apart))
        return _CONTEXTS[-1]

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(context, "sheet_context", kept)
            render(out)
    except ValueError as error:
        if not str(error).startswith("katex: "):
            raise
        missing_tool("katex", "is not installed in tests/katex/node_modules (the web page inlines it)")


@pytest.fixture(scope="session")
def fresh(tmp_path_factory) -> Path:
    """formulas/ as make derive would write it now, in a temporary folder.

    Under pytest-xdist the workers of one run share it: the first to need it renders
    (the others wait on a lock in the run's temporary folder), so make test renders once.
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        out = tmp_path_factory.mktemp("render") / "formulas"
        _render_fresh(out)
        return out
    run = tmp_path_factory.getbasetemp().parent          # this run's folder, one per xdist run
    out, done = run / "fresh" / "formulas", run / "fresh" / "done"
    with open(run / "fresh.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(out, ignore_errors=True)         # a worker that failed midway
            _render_fresh(out)
            done.touch()
    return out


@pytest.fixture(scope="session")
def fresh_context(fresh) -> dict:
    """The context ``fresh`` was rendered from (derived again where another worker rendered it)."""
    if not _CONTEXTS:
        from derive.render.context import sheet_context

        _CONTEXTS.append(sheet_context())
    return _CONTEXTS[-1]


@pytest.fixture(scope="session")
def sheet(fresh) -> str:
    """The fresh sheet.md."""
    return (fresh / "sheet.md").read_text()


@pytest.fixture(scope="session")
def tables(fresh) -> dict:
    """The fresh tables.json's tables."""
    return json.loads((fresh / "tables.json").read_text())["tables"]
