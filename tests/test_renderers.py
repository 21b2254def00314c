"""Real renderers: sheet.tex compiles with pdflatex, every math span of sheet.md parses with KaTeX.

Both tools are installed by .ci/run (Debian's texlive-latex-base and
texlive-latex-recommended; the npm package katex pinned in tests/katex/).
A missing tool fails these tests under CI=true; elsewhere they skip with one line naming it (conftest.missing_tool).
"""
import json
import re
import shutil
import subprocess
from pathlib import Path

from conftest import missing_tool

from derive.render.__main__ import ROOT
from derive.render.escape import LATEX_TEXT, escape_latex

KATEX_DIR = ROOT / "tests" / "katex"


def pdflatex(folder: Path, name: str) -> subprocess.CompletedProcess:
    """Run pdflatex on folder/name the way CI does; fail with the install hint when it is missing."""
    if shutil.which("pdflatex") is None:
        missing_tool("pdflatex")
    return subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error",
                           "-no-shell-escape", name], cwd=folder, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)


def katex(markdown: Path) -> tuple[int, dict]:
    """Run tests/katex/check_math.mjs on ``markdown``; fail with the install hint when node or katex is missing."""
    node = shutil.which("node")
    if node is None:
        missing_tool("node")
    installed = KATEX_DIR / "node_modules" / "katex" / "package.json"
    if not installed.exists():
        missing_tool("katex", "is not installed in tests/katex/node_modules")
    pinned = json.loads((KATEX_DIR / "package.json").read_text())["dependencies"]["katex"]
    version = json.loads(installed.read_text())["version"]
    if version != pinned:
        missing_tool("katex", f"{version} installed, {pinned} pinned")
    run = subprocess.run([node, str(KATEX_DIR / "check_math.mjs"), str(markdown)],
                         capture_output=True, text=True, timeout=120)
    return run.returncode, json.loads(run.stdout)


def test_sheet_tex_compiles_with_pdflatex(fresh, tmp_path):
    shutil.copy(fresh / "sheet.tex", tmp_path / "sheet.tex")
    run = pdflatex(tmp_path, "sheet.tex")
    log = (tmp_path / "sheet.log").read_text(errors="replace")
    errors = [line for line in log.splitlines() if line.startswith("!")]
    assert run.returncode == 0 and not errors, f"pdflatex failed: {errors or run.stdout[-2000:]}"
    assert (tmp_path / "sheet.pdf").read_bytes().startswith(b"%PDF")
    assert re.search(r"Output written on sheet\.pdf \(([4-9]|\d\d+) pages", log)
    # nothing runs off the page: no overfull line or table over 1 pt, no page box too tall
    overfull = [(float(width), line) for width, line in
                re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\).*? at lines (\d+)", log)]
    assert [entry for entry in overfull if entry[0] > 1] == []
    assert "Overfull \\vbox" not in log


def test_sheet_tex_draws_every_figure_and_sets_text_as_text(fresh):
    from derive.render.context import sheet_sections

    tex = (fresh / "sheet.tex").read_text()
    figures = [figure for section in sheet_sections() for figure in section.figures]
    assert {f.filename for f in figures} >= {"bytes_per_parameter.svg", "memory_timeline.svg"}
    for figure in figures:
        # drawn inside the PDF by its LaTeX counterpart, under the same title as the SVG
        assert figure.tex_template, figure.filename
        assert re.search(r"\\textbf\{" + re.escape(figure.context["title"]), tex), figure.filename
    # x^y in prose is raised, never printed as a caret; abbreviations in math are upright
    assert r"\textasciicircum" not in tex
    assert r"GB = 10\textsuperscript{9}" in tex
    spans = re.findall(r"(?<!\\)\$([^$\n]+)\$", tex)
    assert r"\mathrm{MFU}" in tex and not [m for m in spans if re.search(r"(?<!\{)[MH]FU", m)]
    # big values in TB, not thousands of GB (Llama 3 70B materialised activations: 1906.83 GB)
    assert "1.91 TB" in tex and "1906.83 GB" not in tex
    # no value of 1000 GB or more outside the claims, which quote each document in its own unit
    sections = re.split(r"(?m)^\\section\{", tex)
    derived = [part for part in sections if "checked}" not in part.partition("\n")[0]]
    assert len(derived) < len(sections)
    assert not [m for part in derived for m in re.findall(r"\d{4,}\.\d\d GB", part)]


def test_pdflatex_rejects_a_broken_document(tmp_path):
    (tmp_path / "broken.tex").write_text(
        "\\documentclass{article}\\begin{document}$\\frac{1}$ \\undefinedmacro\\end{document}\n")
    assert pdflatex(tmp_path, "broken.tex").returncode != 0


def python_math_spans(markdown: str) -> list[str]:
    """An independent count of the math spans: $$...$$ blocks, then $...$ (unescaped dollars)."""
    display = re.findall(r"(?<!\\)\$\$(.+?)\$\$", markdown, flags=re.S)
    rest = re.sub(r"(?<!\\)\$\$(.+?)\$\$", "", markdown, flags=re.S)
    return display + re.findall(r"(?<!\\)\$(.+?)(?<!\\)\$", rest)


def test_every_math_span_of_sheet_md_parses_with_katex(fresh):
    code, report = katex(fresh / "sheet.md")
    assert code == 0 and report["failures"] == [], report["failures"]
    spans = python_math_spans((fresh / "sheet.md").read_text())
    assert report["spans"] == len(spans) > 150


def test_katex_rejects_a_span_that_does_not_parse(tmp_path):
    bad = tmp_path / "bad.md"
    bad.write_text("fine $x^{2}$, broken $\\frac{1}{$ and an escaped \\$ sign\n\n$$\n\\sum_{i\n$$\n")
    code, report = katex(bad)
    assert code == 1
    assert [(f["line"], f["tex"]) for f in report["failures"]] == [(1, "\\frac{1}{"), (3, "\\sum_{i\n")]
    assert report["spans"] == 3


def test_every_escaped_character_compiles(tmp_path):
    text = escape_latex("".join(LATEX_TEXT) + " plain ASCII: a-b 1/2 (x) [y] @ ! ? ; : = + * ' \"")
    (tmp_path / "escaped.tex").write_text(
        "\\documentclass{article}\\tracinglostchars=3\\begin{document}\n" + text + "\n\\end{document}\n")
    run = pdflatex(tmp_path, "escaped.tex")
    assert run.returncode == 0, run.stdout[-2000:]
    log = (tmp_path / "escaped.log").read_text(errors="replace")
    assert "Missing character" not in log
