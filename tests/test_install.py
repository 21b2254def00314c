"""An installed wheel works away from the checkout; prediction needs no torch; measuring without it is one line."""
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from derive.render.__main__ import ROOT, TEMPLATES

#: One worker runs this module under make test's --dist loadgroup: its module fixtures are built once.
pytestmark = pytest.mark.xdist_group("install")

SITE_PACKAGES = sysconfig.get_paths()["purelib"]
SHAPE = "dict(s=8, b=2, h=32, a=4, g=4, f=128)"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel `pip install .` would install, built from the checkout and unpacked into a folder."""
    # build from a copy of what an sdist holds, so no stale build/ of the checkout leaks in
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("derive", "templates"):
        shutil.copytree(ROOT / folder, source / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    wheels = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index",
                    "--no-build-isolation", "--wheel-dir", str(wheels), str(source)],
                   check=True, capture_output=True)
    (wheel,) = wheels.glob("derive-*.whl")
    site = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    return site


def python(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -S`` with only the unpacked wheel and the dependencies on the path (no editable checkout)."""
    env = {"PYTHONPATH": f"{site}:{SITE_PACKAGES}", "PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-S", *args], cwd=cwd, env=env, capture_output=True,
                          text=True)


def test_the_wheel_ships_every_template(installed):
    shipped = sorted(p.relative_to(installed / "derive" / "templates")
                     for p in (installed / "derive" / "templates").rglob("*.j2"))
    assert shipped == sorted(p.relative_to(TEMPLATES) for p in TEMPLATES.rglob("*.j2"))
    assert len(shipped) >= 10


@pytest.fixture(scope="module")
def renders(installed, tmp_path_factory) -> tuple[Path, dict[str, subprocess.CompletedProcess]]:
    """Two renders by the install in one empty folder: the `derive` command with --out, and
    python -m derive.render with its default out (each test below reads both)."""
    folder = tmp_path_factory.mktemp("installed-render")
    return folder, {
        "where": python(installed, folder, "-c", "import derive; print(derive.__file__)"),
        "command": python(installed, folder, "-m", "derive", "render", "--out", "sheet"),
        "default": python(installed, folder, "-m", "derive.render"),
    }


def test_an_install_renders_the_committed_sheet(installed, renders):
    folder, runs = renders
    assert runs["where"].stdout.startswith(str(installed)), runs["where"].stderr
    assert runs["command"].returncode == 0, runs["command"].stderr
    for name in ("sheet.md", "sheet.tex", "tables.json", "memory_timeline.svg"):
        assert (folder / "sheet" / name).read_bytes() == (ROOT / "formulas" / name).read_bytes()
    # without --out an install writes ./formulas, not into site-packages
    assert runs["default"].returncode == 0, runs["default"].stderr
    assert (folder / "formulas" / "sheet.md").read_bytes() == (ROOT / "formulas" / "sheet.md").read_bytes()
    assert not (installed / "formulas").exists()


def test_prediction_imports_no_torch():
    code = ("import sys; from derive.validate import predicted_saved_bytes; "
            f"print(predicted_saved_bytes('gpt-eager', {SHAPE})); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # sbh(34 + 5as/h) = 8*2*32*(34 + 5*4*8/32) = 19968, plus 2 LayerNorms x (mean, rstd) x sb x 2 B = 128
    assert out.stdout.split() == ["20096", "False"]


BLOCK_TORCH = "import sys; sys.modules['torch'] = None; "


def test_measuring_without_torch_is_one_line():
    code = BLOCK_TORCH + f"from derive.validate import measured_saved_bytes; measured_saved_bytes('gpt-eager', {SHAPE})"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: torch is not installed: measuring needs the validate extra, "
        "pip install 'derive[validate]' (torch 2.13.0; the CPU build is enough)")
    cli = subprocess.run([sys.executable, "-c", BLOCK_TORCH + "import runpy; "
                          "runpy.run_module('derive.validate', run_name='__main__')"],
                         capture_output=True, text=True)
    assert cli.returncode == 2
    assert cli.stderr.splitlines() == [
        "python -m derive.validate: error: torch is not installed: measuring needs the validate "
        "extra, pip install 'derive[validate]' (torch 2.13.0; the CPU build is enough)"]


def test_license_is_an_spdx_string():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"


def test_an_installed_derive_render_says_why_no_page(installed, renders, tmp_path):
    # the installed `derive` command: the dispatcher runs derive.render; no KaTeX in an install
    folder, runs = renders
    for run, out in ((runs["command"], folder / "sheet"), (runs["default"], folder / "formulas")):
        assert run.returncode == 0, run.stderr
        assert not (out / "index.html").exists()
        assert run.stdout.splitlines()[-1].startswith("not written: index.html (the web page inlines KaTeX")
    listed = python(installed, tmp_path, "-m", "derive", "report", "--list-models")
    assert listed.returncode == 0 and "qwen2.5-7b" in listed.stdout and "deepseek-v3" in listed.stdout
