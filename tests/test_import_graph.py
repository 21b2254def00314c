"""Data flows one way (DESIGN.md): the module graph of derive has no cycle, no upward edge, and no front end imports another.

The graph is file level: every module of derive, every import statement in it (those inside
functions too: ast.walk sees them), relative imports resolved, ``from derive import x`` an edge
to the module x.
"""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "derive"

#: The chain, bottom to top: core -> tables -> operations -> model -> accounts -> conventions ->
#: identities -> claims -> reports -> shared options -> front ends. A module of layer n may import
#: layers 0..n only (each top-level module or sub-package of derive sits on one layer).
CHAIN: dict[str, tuple[str, ...]] = {
    # notation, element sizes, input checks, byte units, GPUs and their links (each number with its
    # source); every SymPy printer: LaTeX, exact Python / numpy, JavaScript, the factored node
    # (derive.printing imports only the symbols); the one evaluator (derive.evaluation: the symbol -> value
    # map, exact SymPy and Python backends, numpy columns in derive.evaluation.vectorised; it reads the
    # symbols, derive.inputs and derive.printing.python); work forked to a second CPU (derive.background);
    # sp.expand of a Laurent polynomial through SymPy's polynomial ring (derive.expansion)
    "core": ("__init__", "symbols", "dtypes", "inputs", "units", "systems", "printing", "evaluation",
             "background", "expansion"),
    # tensor ledgers and FP8 recipes as data (block shapes, scale dtypes, cached copies)
    "tables": ("tensors", "recipes"),
    # the layer's operations and their tables: parameters, GEMMs, saved tensors per profile
    "operations": ("architectures",),
    # the model description: one Model for dense and MoE, the presets, Hugging Face configs (their
    # fields, family tables and settings), the names --model takes
    "model": ("model", "presets", "configs", "hf", "hf_fields", "hf_families", "hf_settings", "names"),
    # the accounts over a model and a training layout (t, p, v, c, e, d, ZeRO, batch); a placement's
    # states as integer columns and a layout's accounts per pipeline stage (the sweeps and plans read them)
    "accounts": ("accounts", "views", "parallelism", "state_columns", "stage_accounts"),
    # the claim side: published and framework conventions, Megatron's estimators
    "conventions": ("conventions", "megatron"),
    "identities": ("identities",),
    # published claims, the report's figures as expressions over the accounts and conventions, and the
    # step model's constants fitted on the published runs the claims hold
    "claims": ("claims", "formulas", "calibration_fit"),
    # what the front ends print and search: the report and its printing, the verdicts' words, the
    # compiled sweeps, the planner's library, the peers table, the held-out published runs predicted
    # (derive.heldout)
    "reports": ("report", "report_text", "verdicts", "sweep", "planning", "peers", "heldout"),
    # what every front end shares: number syntax, the message table, the option sets (derive.options)
    "options": ("options",),
    # the front ends, and the dispatcher that runs them by name (derive/__main__.py)
    "front ends": ("cli", "plan", "predict", "comm", "calibrate", "check", "validate", "render", "__main__"),
}
LAYERS: dict[str, int] = {name: level for level, names in enumerate(CHAIN.values()) for name in names}
#: The command-line front ends: none imports another (each reads derive.options and the library).
FRONT_ENDS = CHAIN["front ends"][:-1]
#: A front end's use of another's library part still being split out (none: the sheet's step-time
#: section runs the held-out check of the library derive.heldout, not derive.calibrate).
LIBRARY_USES: set[tuple[str, str]] = set()


def module_name(path: Path, root: Path = PACKAGE) -> str:
    """'derive.accounts.state' for accounts/state.py; a package's __init__.py is the package."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Every module under ``root`` -> the modules under ``root`` it imports (anywhere in the file)."""
    paths = {module_name(path, root): path for path in sorted(root.rglob("*.py"))}

    def known(name: str) -> str | None:
        """``name`` or its nearest enclosing module that exists (a name imported from a module: the module)."""
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in paths.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [known(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
                module = ".".join(part for part in (base, node.module or "") if part)
                targets = [known(f"{module}.{alias.name}") for alias in node.names]
            else:
                continue
            found |= {target for target in targets if target and target != name}
        graph[name] = found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as one cycle through it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while component[-1:] != [node]:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(_cycle_through(graph, set(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _cycle_through(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """One import cycle inside ``component``, from its first module back to it (a -> b -> a)."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        node = frontier.pop(0)
        for other in sorted(graph[node] & component):
            if other == start:
                return paths[node] + [start]
            if other not in paths:
                paths[other] = paths[node] + [other]
                frontier.append(other)
    raise AssertionError(f"no cycle through {sorted(component)}")


def _top(module: str) -> str:
    """The derive sub-package or module a module belongs to ('accounts' for derive.accounts.state)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


GRAPH = module_graph()


def test_every_module_has_a_layer():
    unplaced = sorted({_top(module) for module in GRAPH} - set(LAYERS))
    assert not unplaced, f"add these derive modules to CHAIN in {Path(__file__).name}: {unplaced}"


def test_no_import_cycle():
    found = cycles(GRAPH)
    assert not found, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in found)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_run_down_the_chain(module):
    layer = LAYERS[_top(module)]
    upward = sorted(other for other in GRAPH[module] if LAYERS[_top(other)] > layer)
    assert not upward, f"{module} ({list(CHAIN)[layer]}) imports upward: {upward}"


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_front_ends_do_not_import_each_other(front_end):
    found = sorted({(module, other) for module, imported in GRAPH.items() if _top(module) == front_end
                    for other in imported if _top(other) in FRONT_ENDS and _top(other) != front_end
                    and (front_end, _top(other)) not in LIBRARY_USES})
    assert not found, f"{front_end} imports other front ends: {found}"


def test_the_dispatcher_imports_front_ends_only_by_name():
    assert GRAPH["derive.__main__"] == set()
    from derive.__main__ import COMMANDS
    assert {"report", "plan", "predict", "comm", "calibrate", "check", "validate", "render"} <= set(COMMANDS)


def test_the_graph_sees_a_cycle_hidden_in_functions(tmp_path):
    # two modules importing each other only inside functions, one of them relatively: one cycle
    package = tmp_path / "derive"
    (package / "accounts").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "accounts" / "__init__.py").write_text("")
    (package / "accounts" / "state.py").write_text("def f():\n    from derive.identities import proof\n")
    (package / "identities.py").write_text("def proof():\n    from .accounts import state\n    return state\n")
    graph = module_graph(package)
    assert graph["derive.accounts.state"] == {"derive.identities"}
    assert graph["derive.identities"] == {"derive.accounts.state"}
    assert cycles(graph) == [["derive.accounts.state", "derive.identities", "derive.accounts.state"]]


def test_the_chain_sees_an_upward_import(tmp_path):
    # an accounts module importing the identities is upward; one importing tensors is not
    package = tmp_path / "derive"
    (package / "accounts").mkdir(parents=True)
    (package / "accounts" / "bad.py").write_text("from derive.identities import proof\nfrom ..tensors import Ledger\n")
    (package / "identities.py").write_text("")
    (package / "tensors.py").write_text("")
    imported = module_graph(package)["derive.accounts.bad"]
    assert imported == {"derive.identities", "derive.tensors"}
    assert [other for other in imported if LAYERS[_top(other)] > LAYERS["accounts"]] == ["derive.identities"]
