"""python -m derive.comm: the bar's JSON, the text table, one-line errors with exit status 2."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from derive.comm import main

ROOT = Path(__file__).resolve().parents[1]
BAR = ["--model", "llama3-70b", "--tp", "8", "--pp", "4", "--dp", "32", "--seq", "8192", "--micro-batch", "1",
       "--global-batch", "512", "--precision", "bf16", "--zero", "1", "--no-sequence-parallel", "--json"]


def test_sequence_parallelism_and_the_distributed_optimizer_are_on_by_default(capsys):
    # derive.options.layout.DEFAULTS, as derive predict sets them: SP with t > 1, ZeRO-1 over d c > 1 ranks
    bar = [option for option in BAR if option != "--no-sequence-parallel"]
    del bar[bar.index("--zero"):bar.index("--zero") + 2]
    assert main(bar) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["layout"]["sequence_parallel"], data["layout"]["zero"]) == (True, 1)
    # sequence parallelism splits each pipeline send over the t = 8 ranks
    assert data["per_rank_bytes_per_step"]["pp"] == 2 * 16 * 8192 * 8192 * 2 // 8
    assert main(["--model", "llama3-70b", "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert (alone["layout"]["sequence_parallel"], alone["layout"]["zero"]) == (False, 0)  # t = d = 1


def test_the_bar_command_in_a_process():
    done = subprocess.run([sys.executable, "-m", "derive.comm", *BAR], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    totals = data["per_rank_bytes_per_step"]
    assert set(totals) == {"dp", "tp", "pp", "cp", "ep"}
    assert totals["pp"] == 2 * 16 * 8192 * 8192 * 2          # m = 16, activation forward, gradient back
    assert all(isinstance(value, int) for value in totals.values())
    row = next(r for r in data["collectives"] if r["name"] == "tp.attention.all-reduce")
    assert {"tensor", "collective", "group", "ranks", "payload", "sent", "received", "count", "pass",
            "overlap", "source"} <= set(row)
    assert row["sent"] == 8192 * 8192 * 2 * 2 * 7 // 8


def test_text_table(capsys):
    assert main(BAR[:-1]) == 0
    out = capsys.readouterr().out
    assert "by group and pass" in out and "dp.params.all-gather" in out


@pytest.mark.parametrize("argv, option", [
    (["--model", "llama3-70b", "--tp", "16"], "--tp"),
    (["--model", "llama3-70b", "--tp", "8", "--dp", "4", "--gpus", "64"], "--gpus"),
    (["--model", "llama3-70b", "--tp", "8", "--gpus", "60"], "--gpus"),
    (["--model", "llama3-70b", "--dp", "4", "--global-batch", "6"], "--global-batch"),
    (["--model", "llama3-70b", "--vp", "2"], "--vp"),
    (["--model", "llama3-70b", "--cp", "3"], "--cp"),
    (["--model", "llama3-70b", "--ep", "2", "--dp", "2"], "--ep"),
    (["--model", "nope"], "--model"),
    (["--tp", "8"], "--model"),
    (["--model", "llama3-70b", "--tp", "0"], "--tp"),
    (["--model", "llama3-70b", "--zero", "5"], "--zero"),
    (["--model", "llama3-70b", "--recompute", "half"], "--recompute"),
    (["--model", "llama3-70b", "--precision", "fp8"], "--precision"),
])
def test_bad_options_exit_2_with_one_line(argv, option, capsys):
    with pytest.raises(SystemExit) as stopped:
        sys.exit(main(argv))
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and option in err and "Traceback" not in err


def test_gpus_derives_dp():
    assert main(["--model", "llama3-8b", "--tp", "8", "--gpus", "64", "--json"]) == 0
