"""make derive is deterministic across runs and hash seeds, and atomic: a failure leaves formulas/ intact.

Tests of how the sheet is written share the session's one render (the ``rendered``
fixture); rendering itself is checked by the hash-seed and render-twice tests.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest
from jinja2 import UndefinedError

from derive.render import __main__ as renderer
from derive.render import context as sheet_contexts
from derive.render.__main__ import ROOT, TEMPLATES, render


def snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture
def rendered(fresh, monkeypatch):
    """render() writes the session's one render: these tests check the writing, not the rendering."""
    files = {p.name: p.read_text(encoding="utf-8") for p in fresh.iterdir()}
    monkeypatch.setattr(renderer, "render_files", lambda templates=TEMPLATES: dict(files))


def test_output_is_identical_across_hash_seeds(tmp_path, fresh):
    """A render in a process with another hash seed writes the session's render byte for byte."""
    seed = "4242" if os.environ.get("PYTHONHASHSEED") == "0" else "0"
    env = {**os.environ, "PYTHONHASHSEED": seed}
    # the session rendered under this process's seed; the subprocess hashes strings differently
    other = subprocess.run([sys.executable, "-c", "print(hash('derive.render'))"], env=env,
                           check=True, capture_output=True, text=True)
    assert int(other.stdout) != hash("derive.render")
    out = tmp_path / f"seed{seed}"
    subprocess.run([sys.executable, "-m", "derive.render", "--out", str(out)],
                   cwd=ROOT, env=env, check=True, capture_output=True)
    assert snapshot(out) == snapshot(fresh)
    assert sorted(snapshot(out)) == ["bytes_per_parameter.svg", "index.html", "layouts.svg",
                                     "memory_timeline.svg", "sheet.md", "sheet.tex", "tables.json"]


def test_rendering_twice_gives_the_same_bytes(tmp_path, fresh):
    render(tmp_path / "a")                      # the session's render (fresh) is the first
    assert snapshot(tmp_path / "a") == snapshot(fresh)


def test_a_failing_template_leaves_the_previous_sheet_intact(tmp_path, fresh, fresh_context, monkeypatch):
    monkeypatch.setattr(sheet_contexts, "sheet_context", lambda *apart: fresh_context)  # the session's derivations
    out = tmp_path / "formulas"
    shutil.copytree(fresh, out)
    before = snapshot(out)
    broken = tmp_path / "templates"
    shutil.copytree(TEMPLATES, broken)
    with (broken / "sheet.tex.j2").open("a") as template:
        template.write("{{ no_such_value }}\n")
    with pytest.raises(UndefinedError):
        render(out, templates=broken)
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["formulas", "templates"]


def test_a_failing_swap_restores_the_previous_sheet(tmp_path, monkeypatch, rendered):
    out = tmp_path / "formulas"
    render(out)
    (out / "sheet.md").write_text("previous sheet\n")
    before = snapshot(out)
    real_replace = os.replace

    def replace(source, target):
        if ".formulas-new-" in str(source):
            raise OSError("disk full (injected)")
        real_replace(source, target)

    monkeypatch.setattr(renderer.os, "replace", replace)
    with pytest.raises(OSError, match="injected"):
        render(out)
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["formulas"]


def test_files_an_earlier_sheet_listed_are_removed(tmp_path, rendered):
    out = tmp_path / "formulas"
    render(out)
    tables = json.loads((out / "tables.json").read_text())
    tables["files"].append("old_figure.svg")
    (out / "tables.json").write_text(json.dumps(tables))
    (out / "old_figure.svg").write_text("stale")
    render(out)
    assert "old_figure.svg" not in snapshot(out)
    assert json.loads((out / "tables.json").read_text())["files"] == sorted(snapshot(out))
    assert oct(out.stat().st_mode & 0o777) == oct(0o755)


def run_render(capsys, *args) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``python -m derive.render *args``: its main, in this process."""
    try:
        code = renderer.main(list(args))
    except SystemExit as done:                  # --help
        code = done.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("mine", [
    {"notes.txt": "mine"},                        # a folder that is no sheet
    {"sheet.md": "my own sheet"},                 # a file named like the sheet, but no tables.json
    {"tables.json": "{}", "sheet.md": "x"},       # a tables.json that is not derive's
])
def test_a_folder_that_is_not_a_sheet_is_refused_and_kept(tmp_path, mine, capsys):
    out = tmp_path / "docs"
    out.mkdir()
    for name, text in mine.items():
        (out / name).write_text(text)
    code, _, err = run_render(capsys, "--out", str(out))
    assert code == 2
    (line,) = err.splitlines()
    assert line.startswith("python -m derive.render: error: --out:") and "Traceback" not in line
    assert {p.name: p.read_text() for p in out.iterdir()} == mine
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs"]


def test_a_user_file_inside_an_earlier_sheet_is_refused_and_kept(tmp_path, rendered):
    out = tmp_path / "formulas"
    render(out)
    (out / "my_notes.md").write_text("mine")
    before = snapshot(out)
    with pytest.raises(ValueError, match="^out_dir: .*my_notes.md"):
        render(out)
    assert snapshot(out) == before


def test_a_file_is_never_turned_into_a_folder(tmp_path, capsys):
    target = tmp_path / "report.pdf"
    target.write_bytes(b"%PDF-1.4 mine")
    code, _, err = run_render(capsys, "--out", str(target))
    assert code == 2 and "--out" in err
    assert len(err.splitlines()) == 1
    assert target.read_bytes() == b"%PDF-1.4 mine"


def test_out_has_help_text(capsys):
    code, out, _ = run_render(capsys, "--help")
    assert code == 0 and "--out DIR" in out and "earlier sheet" in out


def test_a_wrong_out_is_refused_before_any_rendering(tmp_path, monkeypatch, capsys):
    def no_render(templates=TEMPLATES):
        raise AssertionError("rendered before checking --out")

    monkeypatch.setattr(renderer, "render_files", no_render)
    (tmp_path / "mine.txt").write_text("mine")
    assert renderer.main(["--out", str(tmp_path)]) == 2
    assert renderer.main(["--out", str(tmp_path / "mine.txt")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and all(line.startswith("python -m derive.render: error: --out: ") for line in lines)
    assert (tmp_path / "mine.txt").read_text() == "mine" and sorted(tmp_path.iterdir()) == [tmp_path / "mine.txt"]
