"""A front end whose stdout reader goes away (``derive check | head``): one line naming stdout and exit 2, no traceback."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command, prog", [
    (["derive.check"], "python -m derive.check"),
    (["derive", "check"], "python -m derive.check"),
    (["derive", "--model", "8b"], "derive"),
    (["derive.comm", "--model", "8b"], "python -m derive.comm"),
])
def test_a_closed_stdout_is_one_line_and_exit_2(command, prog):
    process = subprocess.Popen([sys.executable, "-m", *command], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    process.stdout.close()  # the reader is gone before the first line is written
    _, error = process.communicate(timeout=120)
    assert error.decode() == f"{prog}: error: stdout: cannot write the report (Broken pipe)\n"
    assert process.returncode == 2
