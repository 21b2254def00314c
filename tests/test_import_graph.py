"""Data flows one way (DESIGN.md): each module imports only from its own layer or below."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "derive"

#: DESIGN.md's chain, bottom to top: a module of layer n may import layers 0..n only.
LAYERS: dict[str, int] = {
    # notation, element sizes, input checks, byte units
    "symbols": 0, "dtypes": 0, "inputs": 0, "units": 0,
    # GPUs and their links, each number with its source
    "systems": 0,
    # every SymPy printer: LaTeX, exact Python / numpy, JavaScript, the factored node (imports only symbols)
    "printing": 0,
    # SymPy expressions compiled to vectorised numpy functions (reads derive.printing.python only)
    "compiled": 0,
    "tensors": 1,
    # FP8 recipes as data (block shapes, scale dtypes, cached copies; the accounts read them)
    "recipes": 1,
    "architectures": 2,
    # numbers substituted into the expressions (model shapes, hardware, worked examples)
    "presets": 3, "configs": 3, "hf": 3, "moe_presets": 3,
    # a config.json's fields and family tables, and the settings transformers applies (derive.hf reads them)
    "hf_fields": 3, "hf_families": 3, "hf_settings": 3,
    # the names --model takes in every command (presets, MoE presets, shipped configs)
    "names": 3,
    "accounts": 4, "views": 4,
    # a training layout (t, p, v, c, e, d, ZeRO, batch): reads the precisions of the accounts
    "parallelism": 4,
    # a placement's states as integer columns; a layout's accounts per pipeline stage (the sweeps and plans read them)
    "state_columns": 4, "stage_accounts": 4,
    # the claim side: published and framework conventions, Megatron's estimators
    "conventions": 5, "megatron": 5, "megatron_moe": 5,
    "identities": 6,
    "claims": 7,
    # the report's figures as expressions over the accounts and conventions (report and render read them)
    "formulas": 7,
    # the step model's constants fitted on the published runs the claims hold (derive.calibrate prints it)
    "calibration_fit": 7,
    # front ends over the registry and the presets
    "check": 8, "render": 8, "report": 8, "report_moe": 8, "cli": 8, "validate": 8, "sweep": 8,
    "plan": 8, "plan_moe": 8, "web": 8, "comm": 8, "calibrate": 8, "predict": 8,
    # the layout options the front ends share (derive.comm, derive.predict)
    "options": 8, "peers": 8, "__main__": 8, "__init__": 8,
    # the verdicts' words, one table the report and the web page fill in
    "verdicts": 8,
    # the held-out published runs predicted (derive.calibrate --check, the sheet's step-time section);
    # reads derive.predict's memory account of each run
    "heldout": 8,
}


def _module_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _top(path: Path) -> str:
    """The derive sub-package or module a file belongs to ('accounts' for accounts/state.py)."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def _imports(path: Path, root: Path = PACKAGE) -> set[str]:
    """The top-level derive modules ``path`` (a file under ``root``) imports: absolute, relative, lazy."""
    found = set()
    package = path.relative_to(root.parent).with_suffix("").parts[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                module = ".".join(base + ((node.module,) if node.module else ()))
            else:
                module = node.module or ""
            names = [module] if module != "derive" else [f"derive.{a.name}" for a in node.names]
        else:
            continue
        found |= {name.split(".")[1] for name in names if name.startswith("derive.")}
    return found


def test_every_module_has_a_layer():
    unplaced = sorted({_top(path) for path in _module_files()} - set(LAYERS))
    assert not unplaced, f"add these derive modules to LAYERS in {Path(__file__).name}: {unplaced}"


@pytest.mark.parametrize("path", _module_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_run_down_the_layers(path):
    layer = LAYERS.get(_top(path))
    if layer is None:
        pytest.fail(f"{_top(path)} has no layer")
    upward = sorted(name for name in _imports(path) if LAYERS.get(name, 99) > layer)
    assert not upward, f"{path.relative_to(PACKAGE)} (layer {layer}) imports upward: {upward}"


def test_the_check_sees_an_upward_import(tmp_path):
    # a layer-4 file importing the identities (layer 6) is flagged; one importing tensors is not
    accounts = tmp_path / "derive" / "accounts"
    accounts.mkdir(parents=True)
    bad = accounts / "bad.py"
    bad.write_text("from derive.identities import proof\nfrom ..tensors import Ledger\n")
    assert _imports(bad, tmp_path / "derive") == {"identities", "tensors"}
    assert LAYERS["identities"] > LAYERS["accounts"] >= LAYERS["tensors"]


#: The command-line front ends. Each may import the shared parsing of derive.cli (OneLineParser,
#: UsageError, the number types) and derive.options, never another front end's logic; the one
#: module mapping subcommand names to front ends is derive/__main__.py, and it imports by name.
FRONT_ENDS = ("plan", "comm", "predict", "calibrate", "check", "validate", "render")
SHARED = {"cli", "options"}
#: The uses of a front end's library part by another: the sheet's layouts section runs derive.plan.plan.
#: (The held-out check the step-time section runs is the library derive.heldout, not derive.calibrate.)
LIBRARY_USES = {("render", "plan")}


@pytest.mark.parametrize("name", FRONT_ENDS)
def test_front_ends_do_not_import_each_other(name):
    paths = [PACKAGE / f"{name}.py"] if (PACKAGE / f"{name}.py").exists() else \
        sorted((PACKAGE / name).rglob("*.py"))
    others = set(FRONT_ENDS) - {name}
    for path in paths:
        found = {other for other in _imports(path) & (others - {name}) - SHARED
                 if (name, other) not in LIBRARY_USES}
        assert not found, f"{path.relative_to(PACKAGE)} imports the front ends {sorted(found)}"


def test_the_dispatcher_imports_front_ends_only_by_name():
    assert _imports(PACKAGE / "__main__.py") == set()
    from derive.__main__ import COMMANDS
    assert {"report", "plan", "predict", "comm", "calibrate", "check", "validate", "render"} <= set(COMMANDS)
