"""Printed text (and SymPy's ceiling) kept between runs of a checkout, keyed by the exact expression and the printers' source (issue 28).

A printer's text is a function of the expression, the printer's class and settings, derive's
printing modules and SymPy. :class:`Cached` looks ``doprint(expr)`` up by the SHA-256 of the
printer's class, settings and the expression's pickle (an exact serialisation: equal bytes
unpickle to the same tree, symbols with their assumptions); the file it reads is named by the
SHA-256 of every source that prints (derive/printing/*.py, derive/symbols.py), SymPy's version
and Python's, so an edit to any of them starts an empty file. The folder is the checkout's
``.cache/printed`` (git-ignored); an installed package prints every time. :func:`ceiling` keeps
SymPy's ``ceiling(expr)`` the same way (the page's communication totals): a function of the
expression and SymPy alone.
"""
from __future__ import annotations

import atexit
import base64
import hashlib
import json
import os
import pickle
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import sympy as sp

PACKAGE = Path(__file__).resolve().parents[1]
ROOT = PACKAGE.parent
#: Where the printed text is kept: only in a source checkout (pyproject.toml beside the package).
FOLDER: Path | None = ROOT / ".cache" / "printed" if (ROOT / "pyproject.toml").is_file() else None
#: The sources whose text decides what a printer prints (beside SymPy and Python).
SOURCES = (*sorted((PACKAGE / "printing").glob("*.py")), PACKAGE / "symbols.py")


def sources_tag() -> str:
    """SHA-256 of the printing sources, SymPy's version and Python's: the cache file's name."""
    digest = hashlib.sha256(f"sympy {sp.__version__}; python {sys.version}".encode())
    for path in SOURCES:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


class _Store:
    """One file of printed text (key -> [text, imports]), read on first use and merged back at exit."""

    def __init__(self) -> None:
        self.entries: dict[str, list] | None = None
        self.new: dict[str, list] = {}
        self.path: Path | None = None

    def load(self) -> dict[str, list]:
        if self.entries is None:
            self.entries = {}
            if FOLDER is not None:
                self.path = FOLDER / f"{sources_tag()}.json"
                self.entries = _read(self.path)
        return self.entries

    def add(self, key: str, entry: list) -> None:
        if not self.new and self.path is not None:
            atexit.register(self.save)
        self.entries[key] = self.new[key] = entry

    def save(self) -> None:
        """Merge the new entries into the file (another run may have written since), atomically; drop other tags' files."""
        if not self.new or self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            merged = {**_read(self.path), **self.new}
            handle, staging = tempfile.mkstemp(dir=self.path.parent, prefix=".printed-", suffix=".json")
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                json.dump(merged, stream, separators=(",", ":"))
            os.chmod(staging, 0o644)
            os.replace(staging, self.path)
            for other in self.path.parent.glob("*.json"):  # earlier sources' files (not another run's staging)
                if other != self.path and not other.name.startswith("."):
                    other.unlink(missing_ok=True)
        except OSError:
            pass  # a read-only checkout prints again next time
        self.new = {}


def _read(path: Path) -> dict[str, list]:
    """The entries of ``path``, or none if it is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _well_formed(entry: object) -> bool:
    """Whether ``entry`` is [text, {module: [names]}] as :class:`Cached` writes it (anything else is printed again)."""
    return (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and isinstance(entry[1], dict)
            and all(isinstance(names, list) and all(isinstance(name, str) for name in names)
                    for names in entry[1].values()))


STORE = _Store()


class Cached:
    """Mixin for a SymPy printer: ``doprint(expr)`` read from :data:`STORE` when this printer printed the same expression before.

    A code printer's ``module_imports`` (what lambdify imports for the text) are kept with the text.
    """

    def cache_tag(self) -> str:
        """The printer's class and settings (what besides the expression decides its text)."""
        settings = sorted(self._settings.items(), key=str)
        return f"{type(self).__module__}.{type(self).__qualname__} {settings!r}"

    def doprint(self, expr, *args, **kwargs):
        if args or kwargs or FOLDER is None or not isinstance(expr, sp.Basic):
            return super().doprint(expr, *args, **kwargs)
        try:
            exact = pickle.dumps(expr, protocol=5)
        except Exception:  # an expression pickle cannot write (none of derive's): printed every time
            return super().doprint(expr)
        entries = STORE.load()
        key = hashlib.sha256(self.cache_tag().encode() + b"\0" + exact).hexdigest()
        imports = getattr(self, "module_imports", None)
        entry = entries.get(key)
        if _well_formed(entry) and (imports is not None or not entry[1]):
            text, used = entry
            for module, names in used.items():
                imports[module].update(names)
            return text
        if imports is None:
            text, used = super().doprint(expr), {}
        else:  # the imports this text needs, recorded apart from those of earlier texts
            self.module_imports = defaultdict(set)
            try:
                text = super().doprint(expr)
            finally:
                used, self.module_imports = self.module_imports, imports
            for module, names in used.items():
                imports[module].update(names)
            used = {module: sorted(names) for module, names in used.items() if names}
        STORE.add(key, [text, used])
        return text


def ceiling(total: sp.Expr) -> sp.Expr:
    """``sp.ceiling(total)``, read from :data:`STORE` when this checkout took the ceiling of the same expression before.

    SymPy's ceiling asks the assumptions of every term to split off the whole ones (tens of
    milliseconds on a ledger's total); it returns ``ipart + ceiling(spart)`` or an expression with
    no ceiling. The store keeps (ipart, spart) pickled, and the value is rebuilt as SymPy builds it,
    ``ipart + ceiling(spart, evaluate=False)``: kept only where that rebuilds the same tree.
    """
    if FOLDER is None or not isinstance(total, sp.Basic):
        return sp.ceiling(total)
    key = hashlib.sha256(b"sympy.ceiling\0" + pickle.dumps(total, protocol=5)).hexdigest()
    entry = STORE.load().get(key)
    if _well_formed(entry) and not entry[1]:
        try:
            ipart, spart = pickle.loads(base64.b64decode(entry[0]))
            return _rebuilt(ipart, spart)
        except Exception:  # a damaged entry: taken again
            pass
    value = sp.ceiling(total)
    rounded = [term for term in sp.Add.make_args(value) if isinstance(term, sp.ceiling)]
    ipart, spart = (value - rounded[0], rounded[0].args[0]) if len(rounded) == 1 else (value, None)
    if _rebuilt(ipart, spart) == value:
        STORE.add(key, [base64.b64encode(pickle.dumps((ipart, spart), protocol=5)).decode("ascii"), {}])
    return value


def _rebuilt(ipart: sp.Expr, spart: sp.Expr | None) -> sp.Expr:
    """ipart + ceiling(spart) as SymPy's RoundFunction.eval returns it (spart None: no ceiling left)."""
    return ipart if spart is None else ipart + sp.ceiling(spart, evaluate=False)
