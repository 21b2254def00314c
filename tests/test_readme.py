"""Every Python block of README.md and docs/*.md runs as written, and the last value of each block is the one its comment states."""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "CONTRIBUTING.md"]
BLOCKS = [block for path in DOCUMENTS
          for block in re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)]


def test_the_readme_has_its_python_blocks():
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs_as_written(index, monkeypatch):
    monkeypatch.chdir(ROOT)            # blocks read tests/reference/ relative to the checkout
    source = BLOCKS[index]
    tree = ast.parse(source)
    namespace: dict = {}
    *body, last = tree.body
    exec(compile(ast.Module(body=body, type_ignores=[]), f"README block {index}", "exec"), namespace)
    value = eval(compile(ast.Expression(last.value), f"README block {index}", "eval"), namespace) \
        if isinstance(last, ast.Expr) else None
    comment = source.rstrip("\n").splitlines()[-1].partition("#")[2].strip()
    if comment in ("True", "False"):
        assert value is (comment == "True")
