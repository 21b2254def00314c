"""derive plan --precision: an FP8 recipe's weight copies and FP8 linear inputs in memory, its FP8 GEMMs in time.

The differences from the bf16 plan are written out by hand from Llama 3 8B's shapes (Dubey et al. 2024,
table 3: L = 32, h = 4096, f = 14336, 32 heads, 8 kv heads; s = 8192) and the recipe's definition
(Transformer Engine's DelayedScaling: two FP8 copies of each layer matrix, one fp32 scale_inv per matrix,
five FP8 tensors per GEMM each with an fp32 scale and an amax history of 1024 steps).
"""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from derive.accounts.allocator import allocated_bytes
from derive.accounts.prediction import predict
from derive.cli import run as report_run
from derive.parallelism import Parallelism
from derive.plan import main
from derive.planning.layouts import layout_parallelism
from derive.planning.search import plan
from derive.planning.memory import memory_per_gpu
from derive.presets import model
from derive.systems import system

L, h, f, s = 32, 4096, 14336, 8192
h_kv = 8 * h // 32
#: The layer matrices the recipe quantises, as the parameter table lists them: q, k, v, o, gate, up, down.
N_8 = L * (2 * h * h + 2 * h * h_kv + 3 * h * f)
n_8 = 7 * L
#: One 8B layer's saved bytes the recipe changes at b = 1, t = 1: the inputs of linear_qkv and linear_fc1
#: (the norms' outputs, [s, h]) and of linear_fc2 (SwiGLU's output, [s, f]) kept in 1 byte, not 2; the
#: attention output ([s, h]) stays for flash attention's backward and gains a 1-byte copy for linear_proj.
SAVED = -s * h - s * h - s * f + s * h
#: Each of those four FP8 inputs keeps one fp32 scale_inv: one request of 4 bytes each.
SCALES = 4
#: fp8-delayed's states: row-wise and column-wise copies (1 byte each), scale_inv, and per quantizer
#: (3 forward + 2 backward per GEMM) an fp32 scale and 1024 fp32 amax entries.
COPIES = (N_8, N_8, 4 * n_8, 4 * 5 * n_8, 4 * 5 * 1024 * n_8)

GPUS, TOKENS = 8, 8 * s


@pytest.fixture(scope="module")
def plans():
    entry = model("8b")
    return {precision: plan(entry, GPUS, TOKENS, precision=precision) for precision in ("bf16", "fp8-delayed")}


def _row(result, **layout) -> int:
    c = result.columns
    match = np.ones(c["t"].size, dtype=bool)
    for key, value in layout.items():
        match &= c[key] == value
    (rows,) = np.nonzero(match)
    assert rows.size == 1, layout
    return int(rows[0])


@pytest.mark.parametrize("t, p, d, held", [
    (1, 1, 8, 1),   # one micro-batch per step, all 32 layers on the rank
    (2, 2, 2, 2),   # m = 4: the first stage holds p = 2 micro-batches of its 16 layers, each split over t = 2
])
def test_fp8_memory_is_bf16s_less_the_saved_inputs_plus_the_copies(plans, t, p, d, held):
    assert N_8 == 6_979_321_856
    layout = dict(t=t, p=p, v=1, c=1, d=d, b=1, recompute="none", zero=1, balanced=0)
    bf16 = plans["bf16"].columns["memory_per_gpu"][_row(plans["bf16"], **layout)]
    fp8 = plans["fp8-delayed"].columns["memory_per_gpu"][_row(plans["fp8-delayed"], **layout)]
    layers = L // p
    # the first (most loaded) stage: its layers' matrices over t, the scale-carrying matrices whole on each rank
    numel, tensors = N_8 // p // t, n_8 // p
    assert numel % 2**21 == 0   # whole 2 MiB blocks: each copy is allocated at its size
    copies = (numel, numel, 4 * tensors, 4 * 5 * tensors, 4 * 5 * 1024 * tensors)
    # the saved inputs split over t (sequence parallelism splits the norms' outputs too), whole 2 MiB blocks;
    # the allocator hands each 4-byte scale a 512-byte block; the distributed optimizer keeps the copies whole
    activations = held * layers * (SAVED // t + SCALES * allocated_bytes(4))
    states = sum(allocated_bytes(size) for size in copies)
    assert states == 2 * numel + {1: 1024 + 4608 + 4_587_520, 2: 512 + 2560 + 2_293_760}[p]
    assert fp8 == bf16 + activations + states
    assert plans["fp8-delayed"].precision == "fp8-delayed"


def test_fp8_ranking_reads_fp8_step_times(plans):
    result, entry = plans["fp8-delayed"], model("8b")
    c = result.columns
    order = result.order()
    assert c["feasible"][order[0]]
    gpu = system("h100")
    for row in order[:3]:
        layout = layout_parallelism(c, row, TOKENS, entry.seq)
        assert c["step_time"][row] == pytest.approx(predict(entry, layout, gpu, "fp8-delayed").step_time_s, rel=1e-9)
        assert c["step_time"][row] < predict(entry, layout, gpu, "bf16").step_time_s
    bf16 = plans["bf16"].columns
    same = _row(plans["bf16"], **{key: c[key][order[0]] for key in ("t", "p", "v", "c", "d", "b", "recompute",
                                                                        "zero", "balanced")})
    assert bf16["step_time"][same] > c["step_time"][order[0]]


def test_predict_checks_memory_in_the_precision():
    entry = model("8b")
    layout = dict(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, zero=1)
    bf16 = memory_per_gpu(entry, Parallelism(**layout))
    fp8 = memory_per_gpu(entry, Parallelism(**layout, precision="fp8-delayed"))
    assert fp8 - bf16 == L * (SAVED + SCALES * 4) + sum(COPIES)   # no allocator rounding in predict
    # --fp8-param-gather: the row-wise copy is the parameter, N_8 bf16 parameters fewer
    gathered = memory_per_gpu(entry, Parallelism(**layout, precision="fp8-delayed", fp8_param_gather=True))
    assert gathered - fp8 == -2 * N_8


def test_the_copies_are_the_reports():
    """The planner's and predict's FP8 states are the report's ``state.fp8_copies`` (one ledger, not a second copy)."""
    report = json.loads(report_run(["--model", "8b", "--precision", "fp8-delayed", "--json"]))
    assert report["llama3-8b"]["state.fp8_copies"]["value"] == sum(COPIES) == 13_963_236_608


def _refused(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        sys.exit(main(argv))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize("argv, words", [
    (["--precision", "fp9"], "invalid choice"),
    (["--precision", "mxfp8"], "no tensor cores for mxfp8"),                       # Blackwell only
    (["--precision", "fp8-current", "--gpu", "a100-80gb"], "no FP8 tensor cores"),
    (["--precision", "fp8-current", "--placement", "deepspeed-zero1"], "holds bf16 states"),
])
def test_a_precision_that_cannot_run_names_the_option(argv, words, capsys):
    err = _refused(["--model", "8b", "--gpus", "8", "--tokens", str(TOKENS), *argv], capsys)
    assert "--precision" in err and words in err


def test_the_moe_planner_refuses_a_precision_it_does_not_count(capsys):
    err = _refused(["--model", "mixtral-8x7b", "--gpus", "64", "--tokens", str(2**22),
                    "--precision", "fp8-current"], capsys)
    assert err.count("--precision") >= 1 and "bf16" in err


def test_the_library_names_the_field():
    with pytest.raises(ValueError, match="^precision: h100 \\(Hopper\\) has no tensor cores for mxfp8"):
        plan(model("8b"), GPUS, TOKENS, precision="mxfp8")
    with pytest.raises(ValueError, match="^precision: unknown"):
        plan(model("8b"), GPUS, TOKENS, precision="fp8")
