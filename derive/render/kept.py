"""Values of the render kept between runs of a checkout, keyed by every source they are derived from (issue 28).

The calculator's generated script and data (:func:`derive.render.web.page_data`) and the sections
of numbers only (derive.render.context.KEPT: the held-out predictions, the planner's layouts, the
state, communication and MoE tables; no proof) are a function of derive's sources and data files
alone, with Python, SymPy and numpy: no option, no environment, no file outside derive/ (the page's
hand-written scripts, its CSS and KaTeX are read afresh by page_context; the templates are rendered
afresh). :func:`kept` reads such a value from ``.cache/printed/<name>-<tag>.pickle``, the tag being
the SHA-256 of every file under derive/ and templates/ (path and bytes) and those versions, taken
once per process, so an edit to any of them derives the value afresh in the next run and replaces
the file. The files lie beside the printed text (derive.printing.cache): ``bench/run.py --cold``
removes both; an installed package derives every time. The proofs are never kept: the sections that
show them are built in every render. :func:`template_cache` keeps Jinja's compiled templates there too.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Callable, TypeVar

import numpy as np
import sympy as sp
from jinja2 import FileSystemBytecodeCache

from derive.printing.cache import FOLDER, PACKAGE, ROOT

T = TypeVar("T")

#: The folders whose every file a kept value may be derived from: derive (code and data) and the templates.
TAGGED: tuple[Path, ...] = (PACKAGE, ROOT / "templates")


def tree_tag() -> str:
    """SHA-256 of every file under :data:`TAGGED` (relative path and bytes) and of Python's, SymPy's and numpy's versions."""
    return _tag(TAGGED)


@lru_cache(maxsize=4)
def _tag(folders: tuple[Path, ...]) -> str:
    """tree_tag of ``folders``, once per process (a render reads it for each kept value)."""
    digest = hashlib.sha256(f"python {sys.version}; sympy {sp.__version__}; numpy {np.__version__}".encode())
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def _path(name: str) -> Path | None:
    """The kept file of ``name`` for the sources as they are (None: not a checkout)."""
    return None if FOLDER is None else FOLDER / f"{name}-{tree_tag()}.pickle"


def is_kept(name: str) -> bool:
    """Whether ``name``'s value is kept for the sources as they are (a file to read back)."""
    path = _path(name)
    return path is not None and path.is_file()


def kept(name: str, compute: Callable[[], T]) -> T:
    """``compute()``, read from the checkout's kept file when no tagged source changed since it was written."""
    path = _path(name)
    if path is None:
        return compute()
    try:
        return pickle.loads(path.read_bytes())
    except Exception:  # missing or damaged (another run may be writing a new one): derived afresh
        pass
    value = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, staging = tempfile.mkstemp(dir=path.parent, prefix=f".{name}-", suffix=".pickle")
        with os.fdopen(handle, "wb") as stream:
            pickle.dump(value, stream, protocol=pickle.HIGHEST_PROTOCOL)
        os.chmod(staging, 0o644)
        os.replace(staging, path)
        for other in path.parent.glob(f"{name}-*.pickle"):  # earlier sources' files
            if other != path:
                other.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only checkout derives it again next time
    return value


def template_cache() -> FileSystemBytecodeCache | None:
    """Jinja's bytecode cache in ``.cache/printed/templates-<tag>`` (None: not a checkout).

    Jinja reads a compiled template back only when its source's checksum and Jinja's and Python's
    versions match; the tag (derive.render.__main__ holds the environment's settings) covers the rest.
    """
    if FOLDER is None:
        return None
    folder = FOLDER / f"templates-{tree_tag()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for other in FOLDER.glob("templates-*"):  # earlier sources' templates
            if other != folder:
                shutil.rmtree(other, ignore_errors=True)
    except OSError:
        return None  # a read-only checkout compiles every time
    return FileSystemBytecodeCache(str(folder))
