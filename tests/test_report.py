"""The command-line report: ``derive report``'s dispatcher and main in this process (its status, stdout and stderr),
and once as a user runs it, a subprocess (test_newcomer.py and test_pipes.py hold the process's other checks)."""
import io
import json
import re
import shlex
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from derive.__main__ import main


def derive(*args) -> subprocess.CompletedProcess:
    """``derive report *args`` run by the dispatcher in this process: its exit status and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            status = main(["report", *args])
        except SystemExit as stop:      # argparse's own errors
            status = stop.code
    return subprocess.CompletedProcess(["derive", "report", *args], status, out.getvalue(), err.getvalue())


def derive_process(*args) -> subprocess.CompletedProcess:
    """``python -m derive report *args`` as a user runs it: a new process."""
    return subprocess.run([sys.executable, "-m", "derive", "report", *args], capture_output=True, text=True)


#: Decimal and binary byte units, to read the article's GB beside the report's GiB.
SIZE = {"GB": 10**9, "TB": 10**12, "GiB": 2**30, "TiB": 2**40}


def same_size(printed: str, article: str) -> bool:
    """``printed`` ('131.42 GiB') and the article's ``article`` ('141.11 GB') agree within both roundings."""
    (value, unit), (quoted, quoted_unit) = printed.split(), article.split()
    return abs(float(value) * SIZE[unit] - float(quoted) * SIZE[quoted_unit]) <= \
        0.005 * (SIZE[unit] + SIZE[quoted_unit])


def test_default_report_has_the_article_sample_output():
    out = derive_process()
    assert out.returncode == 0, out.stderr
    text = out.stdout
    # The article's sample output of cli.py, section 8.4, in its GB; the report prints GiB / TiB.
    state = re.findall(r"params +(\S+ \S+) +grads +(\S+ \S+) +optim +(\S+ \S+) +resident +(\S+ \S+)", text)
    article = [("16.06 GB", "16.06 GB", "96.36 GB", "128.48 GB"),
               ("141.11 GB", "141.11 GB", "846.64 GB", "1.13 TB"),
               ("811.71 GB", "811.71 GB", "4.87 TB", "6.49 TB")]
    assert len(state) == 3
    for printed, quoted in zip(state, article):
        assert all(same_size(*pair) for pair in zip(printed, quoted)), (printed, quoted)
    # 70B: 2N = 141,107,412,992 B = 131.42 GiB; 16 N = 1.03 TiB
    assert "params  131.42 GiB  grads  131.42 GiB  optim  788.50 GiB  resident    1.03 TiB" in text
    activations = re.findall(r"(\S+ \S+) flash \| +(\S+ \S+) materialised scores \| all layers \+ logits +(\S+ \S+)",
                             text)
    article = [("1.14 GB", "11.88 GB", "42.81 GB"), ("2.28 GB", "23.76 GB", "188.84 GB"),
               ("4.56 GB", "47.51 GB", "581.29 GB")]
    assert len(activations) == 3
    for printed, quoted in zip(activations, article):
        assert all(same_size(*pair) for pair in zip(printed, quoted)), (printed, quoted)
    assert not re.search(r"\d (GB|TB)\b", text)
    for figure in ("6N = 48 GFLOP, with causal attention = 51 GFLOP", ">= 0.43 s",
                   "6N = 423 GFLOP, with causal attention = 449 GFLOP", ">= 3.72 s",
                   "6N = 2435 GFLOP, with causal attention = 2524 GFLOP", ">= 20.91 s",
                   "N = 8.03 B", "N = 70.55 B", "N = 405.85 B", "16 B/param"):
        assert figure in text, figure


def test_the_mfu_example():
    out = derive("--model", "70b", "--tokens", "4194304", "--gpus", "1024", "--step-time", "4.5")
    assert out.returncode == 0, out.stderr
    assert "4 Mi tokens/step on 1024 GPUs: >= 1.86 s at 100%, 4.65 s at 40% MFU" in out.stdout
    assert ("observed 4.5 s/step = 932 K tokens/s -> MFU 41.3%  HFU(selective) 42.3%  "
            "HFU(full) 55.1%") in out.stdout


def test_fp32_gradients():
    out = derive("--model", "70b", "--precision", "bf16-fp32grad")
    assert "18 B/param" in out.stdout
    # the article: fp32 grads 282.21 GB = 262.83 GiB, resident 18 N = 1.27 TB = 1.16 TiB
    assert "grads  262.83 GiB" in out.stdout and "resident    1.16 TiB" in out.stdout
    assert same_size("262.83 GiB", "282.21 GB") and same_size("1.16 TiB", "1.27 TB")


MODELS = ("llama3-8b", "llama3-70b", "llama3-405b")


def test_fit_answers_state_the_budget_unit():
    # The article's self-test answer, 2 / 17 / 93 H100s "at about 70 GiB each", holds at
    # 70 GB (10^9 B); at the default 70 GiB (2^30 B) the counts are 2 / 16 / 87.
    default = json.loads(derive("--json").stdout)
    assert [default[m]["fit.gpus_for_state"]["value"] for m in MODELS] == [2, 16, 87]
    assert default["llama3-70b"]["fit.budget"] == {"value": 70 * 2**30, "unit": "B",
                                                    "expression": "70GiB"}
    decimal = json.loads(derive("--json", "--budget", "70GB").stdout)
    assert [decimal[m]["fit.gpus_for_state"]["value"] for m in MODELS] == [2, 17, 93]
    text = derive("--model", "70b", "--budget", "80GB").stdout
    # 80 GB = 80e9 / 2^30 = 74.51 GiB, printed beside the size as given
    assert "fit at 80GB = 74.51 GiB per GPU: resident state needs >= 15 GPUs" in text


def test_json_keys_units_and_expressions():
    report = json.loads(derive("--model", "70b", "--json", "--tokens", "4194304", "--gpus",
                               "1024", "--step-time", "4.5").stdout)
    figures = report["llama3-70b"]
    assert figures["state.resident"]["unit"] == "B"
    assert figures["state.resident"]["expression"] == "16*N"
    assert figures["parameters"]["value"] == 70_553_706_496
    assert round(figures["observed.mfu"]["value"], 3) == 0.413
    assert {"flops.per_token_causal", "activations.per_layer_fused", "step.lower_bound",
            "observed.hfu_full", "fit.gpus_for_state_and_activations"} <= set(figures)


def test_custom_shape():
    out = derive("--layers", "32", "--hidden", "4096", "--heads", "32", "--kv-heads", "8",
                 "--ffn", "14336", "--vocab", "128256", "--json")
    assert json.loads(out.stdout)["custom"]["parameters"]["value"] == 8_030_261_248


@pytest.mark.parametrize("args, option", [
    (["--model", "llama9"], "--model"),
    (["--precision", "fp8"], "--precision"),
    (["--optimizer", "lion"], "--optimizer"),
    (["--peak", "tpu"], "--peak"),
    (["--layers", "0"], "--layers"),
    (["--hidden", "4096.5"], "--hidden"),
    (["--model", "8b", "--heads", "3"], "--heads"),
    (["--model", "8b", "--kv-heads", "5"], "--kv-heads"),
    (["--budget", "70"], "--budget"),
    (["--budget", "seventy GiB"], "--budget"),
    (["--zero", "5"], "--zero"),
    (["--layers", "2"], "--hidden"),
])
def test_bad_input_is_one_line_naming_the_option(args, option):
    out = derive(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert option in lines[0] and "Traceback" not in out.stderr


def test_hardware_budget_uses_the_low_end_of_the_usable_range():
    # derive.accounts.budget: H100 usable 62.49-74.16 GiB; 6.49 TB / 62.49 GiB -> 97 GPUs.
    out = derive("--model", "405b", "--budget", "h100", "--json")
    figures = json.loads(out.stdout)["llama3-405b"]
    assert round(figures["fit.budget"]["value"] / 2**30, 2) == 62.49
    assert "62.49-74.16 GiB" in figures["fit.budget"]["expression"]
    assert figures["fit.gpus_for_state"]["value"] == 97


def _readme_examples():
    """(command, printed output) for every `$ python -m derive report` run shown in docs/reference.md."""
    readme = (Path(__file__).resolve().parents[1] / "docs" / "reference.md").read_text()
    for block in re.findall(r"```console\n(.*?)```", readme, flags=re.S):
        for run in re.split(r"(?m)^(?=\$ )", block):
            if run.startswith("$ python -m derive report "):
                command, _, output = run.partition("\n")
                yield shlex.split(command[2:])[4:], output.rstrip("\n")


def test_readme_examples_are_what_the_report_prints():
    examples = list(_readme_examples())
    assert len(examples) >= 2
    for args, printed in examples:
        assert derive(*args).stdout.rstrip("\n") == printed, args
