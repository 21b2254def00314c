"""Render templates/ into formulas/ atomically and deterministically."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from derive.render.context import sheet_context

ROOT = Path(__file__).resolve().parents[2]
OUTPUTS = {"sheet.md.j2": "sheet.md"}


def render(out_dir: Path, templates: Path = ROOT / "templates") -> list[Path]:
    """Render every output into ``out_dir``; files are replaced only after all rendered."""
    env = Environment(loader=FileSystemLoader(templates), undefined=StrictUndefined,
                      keep_trailing_newline=True, autoescape=False)
    context = sheet_context()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=".render-") as staging:
        staged = []
        for template, target in OUTPUTS.items():
            path = Path(staging) / target
            path.write_text(env.get_template(template).render(**context), encoding="utf-8")
            staged.append(path)
        written = []
        for path in staged:
            final = out_dir / path.name
            os.replace(path, final)
            written.append(final)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m derive.render", description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "formulas")
    args = parser.parse_args(argv)
    for path in render(args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
