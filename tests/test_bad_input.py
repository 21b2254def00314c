"""Every bad input the issue lists: a ValueError naming the argument (library), one line and exit 2 (CLI)."""
import math
import subprocess
import sys

import pytest
import sympy as sp

from derive.accounts.activations import (
    first_stage_activation_bytes,
    layer_activation_bytes,
    logits_bytes,
    step_timeline,
)
from derive.accounts.budget import gpus_to_hold
from derive.accounts.flops import hfu, mfu, step_time_lower_bound
from derive.accounts.state import resident_bytes
from derive.cli import main
from derive.presets import Model, model
from derive.symbols import e, p, t


@pytest.mark.parametrize("call, argument", [
    (lambda: layer_activation_bytes("gpt", tensor_parallel=0), "tensor_parallel"),
    (lambda: layer_activation_bytes("gpt", tensor_parallel=-2), "tensor_parallel"),
    (lambda: layer_activation_bytes("gpt", tensor_parallel=1.5), "tensor_parallel"),
    (lambda: layer_activation_bytes("gpt", tensor_parallel=-t), "tensor_parallel"),
    (lambda: layer_activation_bytes("gpt", sequence_parallel="yes"), "sequence_parallel"),
    (lambda: first_stage_activation_bytes(pipeline=0), "pipeline"),
    (lambda: first_stage_activation_bytes(virtual=0), "virtual"),
    (lambda: first_stage_activation_bytes(micro_batches=-1), "micro_batches"),
    (lambda: logits_bytes(tensor_parallel=0), "tensor_parallel"),
    (lambda: step_timeline(tensor_parallel=0), "tensor_parallel"),
    (lambda: step_timeline(zero_stage=True), "zero_stage"),
    (lambda: resident_bytes("bf16", "adam", zero_stage=3, ranks=0), "ranks"),
    (lambda: resident_bytes("bf16", "adam", zero_stage=3, ranks=-8), "ranks"),
    (lambda: resident_bytes("bf16", "adam", zero_stage=True), "zero_stage"),
    (lambda: resident_bytes("bf16", "adam", params=-1), "params"),
    (lambda: mfu(1e9, 1e9, 8, 1e15), "tokens_per_second"),          # MFU 125
    (lambda: mfu(1e3, math.inf, 8, 1e15), "flops_per_token"),
    (lambda: hfu(1e3, 1e9, 8, 1e15, 0.5), "recompute_factor"),
    (lambda: step_time_lower_bound(1e6, 1e9, 8, 1e15, mfu=1.5), "mfu"),
    (lambda: gpus_to_hold(math.nan, 8e10), "total_bytes"),
    (lambda: gpus_to_hold(1e12, math.inf), "per_gpu_bytes"),
    (lambda: gpus_to_hold(1e12, "80GB"), "per_gpu_bytes"),
    (lambda: model("70b").subs(e, Z=1), "Z"),          # the Q is a symbol now (packed batch)
    (lambda: model("70b").subs(e, Q=0), "Q"),
    (lambda: Model("x", "gpt", 2, 64, 4, 2, 256, 100, 16), "kv_heads"),
])
def test_library_names_the_argument(call, argument):
    with pytest.raises(ValueError, match=f"^{argument}:"):
        call()


def test_first_stage_at_symbolic_p_is_right_at_p_1():
    # Llama 3 70B, llama-fused with SP, t = 8, b = 1: 22,502,449,152 B of layers and embedding,
    # plus the output layer's 558,891,008 B when the first stage is also the last (p = 1).
    llama = model("70b")
    symbolic = first_stage_activation_bytes("llama-fused", tensor_parallel=8,
                                            sequence_parallel=True, pipeline=p)
    numeric = first_stage_activation_bytes("llama-fused", tensor_parallel=8,
                                           sequence_parallel=True, pipeline=1)
    assert llama.subs(symbolic.subs(p, 1), b=1) == 23_061_340_160
    assert llama.subs(numeric, b=1) == 23_061_340_160
    without = first_stage_activation_bytes("llama-fused", tensor_parallel=8,
                                           sequence_parallel=True, pipeline=p, output_layer=False)
    assert llama.subs(without.subs(p, 1), b=1) == 22_502_449_152
    # at p = 4 the output layer lives on the last stage: the symbolic form drops it
    four = first_stage_activation_bytes("llama-fused", tensor_parallel=8,
                                        sequence_parallel=True, pipeline=4)
    assert llama.subs(symbolic.subs(p, 4), b=1) == llama.subs(four, b=1)
    assert isinstance(symbolic, sp.Expr) and symbolic.has(sp.Piecewise)


def cli(*argv, capsys):
    try:
        status = main(list(argv))
    except SystemExit as stop:     # argparse's own errors
        status = stop.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("argv, option, words", [
    (["--budget", "0.0001KB"], "--budget", "at least one byte"),
    (["--budget=-70GiB"], "--budget", "must be positive"),
    (["--budget", "h200"], "--budget", "130GiB"),
    (["--hidden", "9" * 331, "--model", "8b"], "--hidden", "2^53"),
    (["--peak", "1e-300"], "--peak", "float range"),
    (["--peak", "1e-300", "--json"], "--peak", "float range"),     # never JSON Infinity
    (["--peak", "inf"], "--peak", "positive"),
    (["--peak", "nan"], "--peak", "positive"),
    (["--model", "70b", "--tokens", "4194304", "--gpus", "1024", "--step-time", "0.5"],
     "--step-time", "faster than the hardware allows"),
    (["--model", "175b", "--kv-heads", "8"], "--kv-heads", "grouped-query"),
    (["--zero", "2"], "--zero", "needs dp"),
    (["--dp", "8"], "--dp", "only ZeRO"),
    (["--tokens", "4194304"], "--tokens", "gpus"),
    (["--gpus", "8"], "--gpus", "tokens"),
    (["--step-time", "4.5"], "--step-time", "needs tokens and gpus"),
    (["--mfu", "0.5"], "--mfu", "needs tokens and gpus"),
    (["--mfu", "abc"], "--mfu", "a fraction in (0, 1]"),
    (["--model", "8b", "--tokens", "100", "--gpus", "1", "--mfu", "1e-320"], "--mfu", "float"),
    (["--zero", "two"], "--zero", "ZeRO stage"),
    (["--micro-batch", "0"], "--micro-batch", "positive integer"),
])
def test_cli_one_line_naming_the_option(argv, option, words, capsys):
    status, out, err = cli(*argv, capsys=capsys)
    assert status == 2 and out == ""
    (line,) = err.splitlines()
    assert option in line and words in line and "_fraction" not in line


def test_budget_takes_hardware_names_in_any_case(capsys):
    status, out, _ = cli("--model", "8b", "--budget", "H100", capsys=capsys)
    assert status == 0 and "h100 usable low end 62.49 GiB" in out


def test_zero3_counts_the_ranks_it_shards_over(capsys):
    # 405B, bf16 + Adam: 16 N = 6.49 TB = 5.90 TiB; ZeRO-3 over 2 ranks holds 2.95 TiB per rank, and the
    # state needs ceil(16 N / 70 GiB) = 87 ranks - the same count as splitting the state.
    status, out, _ = cli("--model", "405b", "--zero", "3", "--dp", "2", capsys=capsys)
    assert status == 0
    assert ("ZeRO-3 over 2 ranks holds 2.95 TiB per rank (does not fit); the state needs >= 87 "
            "ranks") in out
    # ZeRO-1 over 64 ranks: 4 N replicated (1.62 TB) exceeds 70 GiB at any number of ranks
    status, out, _ = cli("--model", "405b", "--zero", "1", "--dp", "64", capsys=capsys)
    assert "unsharded state alone exceeds the budget" in out


def test_units_scale_both_ways(capsys):
    status, out, _ = cli("--layers", "2", "--hidden", "64", "--heads", "4", "--ffn", "256",
                         "--vocab", "1000", capsys=capsys)
    assert status == 0
    # N = 2 (3 * 64 * 256 + 4 * 64 * 64 + 2 * 64) + 2 * 1000 * 64 + 64 = 259,392 -> 259.39 K
    assert "N = 259.39 K" in out and "6N = 1556 KFLOP" in out
    status, out, _ = cli("--layers", "1000", "--hidden", str(2**17), "--heads", "1",
                         "--ffn", str(2**17), "--vocab", "1000", capsys=capsys)
    # N = 1000 (4 h^2 + 3 h f + 2 h) + 2 V h + h = 120,259,608,707,072 at h = f = 2^17, under 2^48:
    # 16 N = 1,924,153,739,313,152 B = 1750.01 TiB, no float noise
    assert status == 0 and "N = 120.26 T" in out and "resident 1750.01 TiB" in out
    assert not [word for word in out.split() if "." in word and len(word) > 10], out
    # N = 8.46e17 passes 2^48 (its 16 bytes each would pass 2^53): refused, naming the first largest field
    status, _, err = cli("--layers", "100000", "--hidden", str(2**40), "--heads", "1",
                         "--ffn", str(2**40), "--vocab", "1000", capsys=capsys)
    assert status == 2 and err.startswith("derive: error: --hidden: the parameter count N would pass 2^48")


def test_a_full_disk_is_one_line():
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "derive", "report", "--model", "8b"],
                                stdout=full, stderr=subprocess.PIPE, text=True)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "derive: error: stdout: cannot write the report (No space left on device)"]
