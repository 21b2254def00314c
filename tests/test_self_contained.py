"""A fresh clone runs alone: nothing in derive/ or tests/ reads outside the repository."""
import ast
import hashlib
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "tests" / "reference"


def sources():
    for folder in ("derive", "tests", "bench"):
        yield from sorted(p for p in (REPO / folder).rglob("*.py")
                          if "node_modules" not in p.parts and p != Path(__file__).resolve())


def test_no_source_names_a_path_outside_the_repository():
    offenders = []
    for path in sources():
        tree = ast.parse(path.read_text(), filename=str(path))
        # docstrings may cite where a file came from; only code that could open a path counts
        docstrings = {id(node.value) for node in ast.walk(tree)
                      if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
        for node in ast.walk(tree):
            if id(node) in docstrings:
                continue
            # Path(__file__).parents[k] must stay inside the repository.
            if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "parents" and isinstance(node.slice, ast.Constant)):
                if REPO not in [path.parents[node.slice.value], *path.parents[node.slice.value].parents]:
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno} parents[{node.slice.value}]")
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if re.search(r"(^|/)\.\./|^/(work|home|root|tmp)/|shared/reference", node.value):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value!r}")
    assert offenders == []


def test_reference_data_is_the_recorded_copy():
    readme = (REFERENCE / "README.md").read_text()
    recorded = dict((name, digest) for digest, name in
                    re.findall(r"^([0-9a-f]{64})\s+(\S+\.json)$", readme, flags=re.M))
    assert sorted(recorded) == ["megatron_core.json", "megatron_moe.json"]
    for name, digest in recorded.items():
        assert hashlib.sha256((REFERENCE / name).read_bytes()).hexdigest() == digest, name
    # the README's counts: 1440 dense records over five estimators
    core = json.loads((REFERENCE / "megatron_core.json").read_text())["records"]
    assert len(core) == 1440
    assert len({r["function"] for r in core}) == 5
