"""``python -m derive.render [--out DIR]``: render the templates into the formula sheet, atomically and deterministically.

The templates are the checkout's top-level ``templates/``, or ``derive/templates``
in an installed package (setup.py copies them there). Output goes to the
checkout's ``formulas/`` or, from an install, ``./formulas``; a folder that
holds anything but an earlier sheet is refused, never overwritten.
"""
from __future__ import annotations

import gc
import json
import os
import shutil
import sys
import tempfile
from functools import partial
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from derive.inputs import OneLineParser
from derive.options.messages import writes_stdout
from derive.render.escape import (
    escape_latex,
    escape_markdown,
    escape_mermaid,
    escape_xml,
)

PACKAGE = Path(__file__).resolve().parents[1]
ROOT = PACKAGE.parent


def _checkout() -> bool:
    """True when derive runs from a source checkout (templates/ beside the package)."""
    return (ROOT / "templates" / "sheet.md.j2").is_file() and (ROOT / "pyproject.toml").is_file()


#: The templates: the checkout's templates/, else the copy installed as package data.
TEMPLATES = ROOT / "templates" if _checkout() else PACKAGE / "templates"
#: Where ``python -m derive.render`` writes without --out.
DEFAULT_OUT = ROOT / "formulas" if _checkout() else Path("formulas")
#: the sheet's documents: output file -> template (figures come from the sections).
DOCUMENTS = {"sheet.md": "sheet.md.j2", "sheet.tex": "sheet.tex.j2"}
TABLES = "tables.json"
#: tables.json's key listing every file of the sheet: a later render recognises its own files.
SHEET_FILES = "files"
WEB_PAGE = "html/index.html.j2"


def environment(templates: Path = TEMPLATES) -> Environment:
    """Jinja2 with StrictUndefined, the escaping filters md, tex, xml and mermaid, and HTML autoescaped under html/."""
    from derive.render.kept import template_cache  # compiled templates kept in a checkout

    env = Environment(loader=FileSystemLoader(templates), undefined=StrictUndefined,
                      keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
                      autoescape=lambda name: bool(name) and name.startswith("html/"),
                      bytecode_cache=template_cache())
    env.filters.update(md=escape_markdown, tex=escape_latex, xml=escape_xml, mermaid=escape_mermaid)
    return env


def render_files(templates: Path = TEMPLATES) -> dict[str, str]:
    """Every file of formulas/ (name -> text), rendered in memory; tables.json lists them all."""
    # The derivations load here, not on import: a wrong --out is refused in the time of a bare import.
    from derive.background import shared
    from derive.render.context import prepared, sheet_context
    from derive.render.web import PAGE, page_context, page_parts

    env = environment(templates)
    # the page's data (its calculator) does not read the sections or SVGs it is given, only passes them on
    # (tests/test_fast_paths.py): a second process shares its parts, the sections of numbers only, the proofs and
    # the claims' verdicts with this one, which then builds the page's context and the sections that show them
    checkout = _checkout()
    ready, page = prepared(partial(page_context, (), {}) if checkout else None, page_parts() if checkout else ())
    context = sheet_context(ready)
    files: dict[str, str] = {}
    for section in context["sections"]:
        for figure in section.figures:
            if figure.filename in files or figure.filename in DOCUMENTS or figure.filename in (TABLES, PAGE):
                raise ValueError(f"figure: {figure.filename!r} is written twice")
            files[figure.filename] = env.get_template(figure.template).render(**figure.context)
    documents = {name: partial(env.get_template(template).render, **context) for name, template in DOCUMENTS.items()}
    # The web page inlines KaTeX from the checkout's tests/katex (npm); an install renders the rest.
    if page is not None:
        svgs = {name: text for name, text in files.items() if name.endswith(".svg")}
        documents[PAGE] = partial(env.get_template(WEB_PAGE).render,
                                  **{**page, "sections": list(context["sections"]), "svgs": svgs})
    # the documents are rendered by this process and the second one, each once (sheet.tex takes the longest)
    files.update(zip(documents, shared(list(documents.values()))))
    tables = {**context["tables"], SHEET_FILES: sorted({*files, PAGE, TABLES})}
    files[TABLES] = json.dumps(tables, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return files


def earlier_sheet_files(out_dir: Path) -> set[str] | None:
    """The files an earlier render wrote into ``out_dir`` (its tables.json's list), or None if it is no sheet."""
    try:
        data = json.loads((out_dir / TABLES).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not (isinstance(data, dict) and {"units", "tables"} <= set(data)):
        return None
    listed = data.get(SHEET_FILES, [])
    return {name for name in listed if isinstance(name, str)} if isinstance(listed, list) else set()


def check_out_folder(out_dir: Path) -> set[str] | None:
    """The files of the earlier sheet in ``out_dir`` (None: absent or empty), or ValueError naming it: not a folder, or no sheet.

    Cheap, so main runs it before rendering: a wrong --out is refused before any work.
    """
    if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
        raise ValueError(f"out_dir: {out_dir} exists and is not a folder")
    if not out_dir.exists() or not any(out_dir.iterdir()):
        return None
    earlier = earlier_sheet_files(out_dir)
    if earlier is None:
        raise ValueError(f"out_dir: {out_dir} is not empty and holds no earlier sheet "
                         f"({TABLES} missing); choose a new or empty folder")
    return earlier


def check_out_dir(out_dir: Path, names: list[str]) -> None:
    """ValueError naming ``out_dir`` unless it is absent, an empty folder or an earlier sheet.

    An earlier sheet holds only plain files that this render writes or that its
    own tables.json lists; anything else in the folder is a user's and stays.
    """
    earlier = check_out_folder(out_dir)
    if earlier is None:
        return
    own = earlier | set(names)
    foreign = [p.name for p in sorted(out_dir.iterdir()) if p.name not in own or p.is_symlink() or not p.is_file()]
    if foreign:
        raise ValueError(f"out_dir: {out_dir} holds files that are not the sheet's "
                         f"({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}); "
                         "move them or choose another folder")


def replace_folder(out_dir: Path, files: dict[str, str]) -> list[Path]:
    """Write ``files`` into a sibling staging folder, then swap it in for ``out_dir`` (an earlier sheet or none)."""
    check_out_dir(out_dir, list(files))
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}-new-"))
    previous: Path | None = None
    try:
        os.chmod(staging, 0o755)
        for name in sorted(files):
            (staging / name).write_bytes(files[name].encode("utf-8"))
        if out_dir.exists():
            previous = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}-old-"))
            os.replace(out_dir, previous / out_dir.name)
        os.replace(staging, out_dir)
    except BaseException:
        if previous is not None and not out_dir.exists():
            os.replace(previous / out_dir.name, out_dir)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)
    return [out_dir / name for name in sorted(files)]


def render(out_dir: Path = DEFAULT_OUT, templates: Path = TEMPLATES) -> list[Path]:
    """Render every file, then replace ``out_dir`` with them; on any failure ``out_dir`` is untouched.

    ``out_dir`` must be new, empty or an earlier sheet (ValueError naming it otherwise).
    """
    files = render_files(templates)
    return replace_folder(Path(out_dir), files)


def _refused(prog: str, out: Path, error: Exception) -> int:
    """One error line naming --out; exit status 2."""
    message = str(error).replace("out_dir: ", "", 1) if str(error).startswith("out_dir: ") \
        else f"cannot write {out}: {error}"
    sys.stderr.write(f"{prog}: error: --out: {' '.join(message.split())}\n")
    return 2


@writes_stdout("python -m derive.render")
def main(argv: list[str] | None = None) -> int:
    """Entry point: write the sheet, or one error line and exit status 2."""
    parser = OneLineParser(prog="python -m derive.render", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="DIR",
                        help="folder to write the sheet into: new, empty or an earlier sheet "
                             "(default: formulas/ of the checkout, or ./formulas from an install)")
    args = parser.parse_args(argv)
    try:
        check_out_folder(args.out)           # a wrong --out is refused before the render
    except (ValueError, OSError) as error:
        return _refused(parser.prog, args.out, error)
    files = render_files()
    try:
        written = replace_folder(args.out, files)
    except (ValueError, OSError) as error:
        return _refused(parser.prog, args.out, error)
    for path in written:
        print(f"wrote {path}")
    from derive.render.web import PAGE  # loaded by render_files already
    if PAGE not in files:
        print(f"not written: {PAGE} (the web page inlines KaTeX from a checkout's tests/katex; an installed "
              "package has none: render from a checkout with `make derive`)")
    return 0


if __name__ == "__main__":
    status = main()
    # The process ends here: its last garbage collection would walk every object the render made (SymPy's
    # caches, the kept pages' data) to free what exit frees anyway; frozen, they are left to the exit.
    gc.freeze()
    sys.exit(status)
