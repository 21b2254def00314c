"""Render templates/ into formulas/ atomically and deterministically."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from derive.render.context import sheet_context
from derive.render.web import PAGE, page_context
from derive.render.escape import (
    escape_latex,
    escape_markdown,
    escape_mermaid,
    escape_xml,
)

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"
#: the sheet's documents: output file -> template (figures come from the sections).
DOCUMENTS = {"sheet.md": "sheet.md.j2", "sheet.tex": "sheet.tex.j2"}
TABLES = "tables.json"
WEB_PAGE = "html/index.html.j2"


def environment(templates: Path = TEMPLATES) -> Environment:
    """Jinja2 with StrictUndefined, the escaping filters md, tex, xml and mermaid, and HTML autoescaped under html/."""
    env = Environment(loader=FileSystemLoader(templates), undefined=StrictUndefined,
                      keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
                      autoescape=lambda name: bool(name) and name.startswith("html/"))
    env.filters.update(md=escape_markdown, tex=escape_latex, xml=escape_xml, mermaid=escape_mermaid)
    return env


def render_files(templates: Path = TEMPLATES) -> dict[str, str]:
    """Every file of formulas/ (name -> text), rendered in memory."""
    env = environment(templates)
    context = sheet_context()
    files = {name: env.get_template(template).render(**context)
             for name, template in DOCUMENTS.items()}
    files[TABLES] = json.dumps(context["tables"], indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    for section in context["sections"]:
        for figure in section.figures:
            if figure.filename in files:
                raise ValueError(f"figure: {figure.filename!r} is written twice")
            files[figure.filename] = env.get_template(figure.template).render(**figure.context)
    svgs = {name: text for name, text in files.items() if name.endswith(".svg")}
    files[PAGE] = env.get_template(WEB_PAGE).render(**page_context(context["sections"], svgs))
    return files


def replace_folder(out_dir: Path, files: dict[str, str]) -> list[Path]:
    """Write ``files`` into a sibling staging folder, then swap it in for ``out_dir``."""
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


def render(out_dir: Path, templates: Path = TEMPLATES) -> list[Path]:
    """Render every file, then replace ``out_dir`` with them; on any failure ``out_dir`` is untouched."""
    return replace_folder(out_dir, render_files(templates))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m derive.render", description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "formulas")
    args = parser.parse_args(argv)
    for path in render(args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
