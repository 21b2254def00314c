"""The held-out check (issues 29, 32): NVIDIA's Megatron-Bridge 25.11 pre-training table, predicted, never fitted."""
from __future__ import annotations

import json

import pytest

from derive.accounts.prediction import predict
from derive.accounts.step import CALIBRATION, calibrated
from derive.calibrate import (
    HELDOUT,
    HELDOUT_MODELS,
    HELDOUT_PRECISIONS,
    HELDOUT_SYSTEMS,
    calibration_runs,
    heldout_report,
    heldout_runs,
    main,
)
from derive.parallelism import Parallelism
from derive.presets import model
from derive.systems import system

#: One worker runs this module under make test's --dist loadgroup: its module fixtures are built once.
pytestmark = pytest.mark.xdist_group("heldout")

DATA = json.loads(HELDOUT.read_text())
FIELDS = {"system": str, "model": str, "gpus": int, "precision": str, "global_batch": int, "micro_batch": int,
          "seq": int, "fsdp": int, "tp": int, "pp": int, "cp": int, "vp": (int, type(None)), "ep": int, "ga": int,
          "tokens_per_s_per_gpu": int, "model_tflops_per_gpu": int, "source": str}


@pytest.fixture(scope="module")
def result():
    return heldout_report(*heldout_runs(), calibrated())


def test_every_row_is_well_formed_and_cites_its_source():
    assert "25.11" in DATA["release"] and DATA["source"].startswith("https://docs.nvidia.com/nemo/megatron-bridge/")
    assert len(DATA["rows"]) == 32  # the release's four systems: 9 + 9 + 8 + 6 rows ('A (B)' cells split in two)
    for row in DATA["rows"]:
        assert set(row) == set(FIELDS), row
        assert all(isinstance(row[key], kind) for key, kind in FIELDS.items()), row
        assert row["source"] == DATA["source"]
        assert row["precision"] in {"BF16", "FP8-CS", "FP8-MX"}
        assert row["gpus"] % (row["tp"] * row["pp"] * row["cp"]) == 0


def test_gradient_accumulation_agrees_with_the_batch_except_two_printed_rows():
    # GA = GBS / (MBS x DP), DP = GPUs / (TP PP CP): every row but two the page prints as it does
    # (GB300 Qwen3-235B: 8192 / (2 x 64) = 64, printed 32; H100 GPT-OSS: 512 / (4 x 16) = 8,
    # printed 2); derive takes GA from GBS, MBS and DP, never from the GA column
    off = [(row["system"], row["model"]) for row in DATA["rows"]
           if row["ga"] * row["micro_batch"] * row["gpus"] // (row["tp"] * row["pp"] * row["cp"]) != row["global_batch"]]
    assert off == [("DGX-GB300", "Qwen3_235B_a22B"), ("DGX-H100", "GPT OSS 120B")]


def test_published_model_flops_per_token_are_derives():
    # The page's model TFLOP/s over its tokens/s is derive's model FLOPs per token with causal
    # halving (a transcription check): dense within 0.1 % (measured 0.09 % at most), MoE without
    # MTP within 0.7 %; the DeepSeek-V3 row trained with MTP counts 4.0 % more, the MTP module
    # derive's step model lacks (when it gains one, this bound moves)
    rows = {f"{r['model']} {r['precision']} {r['gpus']} {r['system']}": r for r in DATA["rows"]}
    runs, _ = heldout_runs()
    for run in runs:
        step = predict(run.model, run.parallelism, run.gpu, run.precision)
        row = rows[run.label]
        ratio = (row["model_tflops_per_gpu"] / row["tokens_per_s_per_gpu"]
                 / (step.model_tflops_per_gpu / step.tokens_per_s_per_gpu))
        if "w/ MTP" in run.label:
            assert ratio == pytest.approx(1.04, abs=0.005)
        else:
            assert ratio == pytest.approx(1, abs=0.0015 if run.model.dense else 0.008), run.label


def test_one_row_by_hand(result):
    # Llama 3 70B, 64 H100, FP8 current scaling, GBS 128, MBS 1, s 8192, t 4, p 8, v 5: d = 64 / 32 = 2,
    # the distributed optimizer (FSDP 0), sequence parallel; published 1,602 tokens/s per GPU
    published_step = 128 * 8192 / (1602 * 64)
    layout = Parallelism(tp=4, pp=8, vp=5, dp=2, micro_batch=1, global_batch=128, sequence_parallel=True,
                         zero=1, precision="bf16-fp32grad")
    step = predict(model("llama3-70b"), layout, system("h100"), "fp8-current").step_time_s
    tokens = 128 * 8192 / (step * 64)
    row = next(r for r in result["rows"] if r["run"] == "LLAMA3_70B FP8-CS 64 DGX-H100")
    assert row["published_s"] == pytest.approx(published_step, abs=1e-4) == pytest.approx(10.2272, abs=1e-4)
    assert row["published_tokens"] == 1602 and row["predicted_tokens"] == round(tokens)
    assert row["predicted_s"] == pytest.approx(step, abs=1e-4)
    assert row["error"] == pytest.approx(tokens / 1602 - 1, abs=1e-4)
    assert (row["precision"], row["kind"], row["gpu"]) == ("fp8-current", "dense", "h100")


def test_derives_memory_accounts_refuse_eight_rows_that_ran(result):
    # predicted without the memory check; derive.predict (no recompute, unbalanced stages, the recipe's
    # FP8 weight copies and FP8 linear inputs counted) would refuse these seven published rows: 405B on
    # H100, B200 (both recipes), GB200 and GB300 (measured: 81.8 GiB > 74.5; 177.6 and 178.7 > 167.6;
    # 205.7 > 173.2; 339.4 > 268.2), and 70B under FSDP (ZeRO-3 as Megatron-FSDP optim_grads_params)
    # on 64 GB200 and GB300 at t = p = 1, b = 2: 80 layers of activations without recompute, 319.1 GiB
    # > 173.2 and > 268.2. 70B on 64 H100 fits at 73.5 GiB (76.1 counted in 16 bits). When the memory
    # accounts change (a recompute or offload switch the table does not state), this set is the one
    # to revisit.
    over = {row["run"] for row in result["rows"]
            if row["memory_gib"] is not None and row["memory_gib"] > row["hbm_gib"]}
    assert over == {"LLAMA3.1_405B FP8-CS 1024 DGX-H100",
                    "LLAMA3.1_405B FP8-CS 128 DGX-B200", "LLAMA3.1_405B FP8-MX 128 DGX-B200",
                    "LLAMA3.1_405B FP8-CS 256 DGX-GB200", "LLAMA3_70B FP8-CS 64 DGX-GB200",
                    "LLAMA3.1_405B FP8-CS 256 DGX-GB300", "LLAMA3_70B FP8-CS 64 DGX-GB300"}
    hbm = {row["gpu"]: row["hbm_gib"] for row in result["rows"]}
    assert hbm["h100"] == round(80e9 / 2**30, 1) == 74.5  # the H100's 80 GB in GiB
    # MoE rows are outside derive.predict's memory account; FSDP rows are in it
    assert all(row["memory_gib"] is None for row in result["rows"] if row["kind"] == "MoE")
    assert all(row["memory_gib"] is not None for row in result["rows"] if row["kind"] == "dense")


def test_nothing_is_fitted(result):
    # the shipped constants, untouched; no held-out row in the calibration set
    assert result["constants"] == json.loads(CALIBRATION.read_text())["constants"]
    assert not {run.table for run in calibration_runs()} & {DATA["release"]}


def test_rows_not_run_are_listed_with_the_reason(result):
    assert len(result["rows"]) + len(result["not_run"]) == len(DATA["rows"])
    assert len(result["rows"]) == 28  # every row but GPT-OSS 120B's four
    reasons = {row["reason"].partition(" (")[0] for row in result["not_run"]}
    assert reasons == {"model: derive has no 'GPT OSS 120B'"}
    for row in DATA["rows"]:
        runnable = (row["model"] in HELDOUT_MODELS and row["system"] in HELDOUT_SYSTEMS
                    and row["precision"] in HELDOUT_PRECISIONS)
        label = f"{row['model']} {row['precision']} {row['gpus']} {row['system']}"
        assert runnable == (label in {r["run"] for r in result["rows"]})


#: Regression bounds on each group's mean |error| of tokens/s per GPU, a little above what was measured
#: (python -m derive.calibrate --check, constants gemm 0.77, gemm_hopper 0.57, memory 0.98, network 0.76;
#: per-GEMM roofline, flash attention's scores on chip, balanced stages where Megatron needs them, EP
#: all-to-all across nodes overlapped): all 24.0 % (28 rows); dense 8.5 %, MoE 41.8 %; bf16 9.2 %,
#: fp8-current 19.2 %, mxfp8 35.0 %; h100 36.0 %, b200 45.4 %, gb200 13.3 %, gb300 8.4 %. Before those three
#: mechanisms: all 24.3 %, dense 15.2 %, MoE 34.7 %. The MoE misses are Qwen3-30B-A3B on B200 at b = 1 (+186 %)
#: and on H100 (+154 %), Qwen3-235B on B200 (+80 %): the same B200 layout at b = 4 on GB200 runs 2.6 times
#: faster per GPU (a fixed cost of about 0.36 s per micro-batch, 7 ms per MoE layer, that no GPU-work
#: account produces: host launch / the dispatcher's device-to-host sync, which the GB200 recipes' CUDA
#: graphs remove and the table does not state).
BOUNDS = {"all": 0.25, "kind dense": 0.09, "kind MoE": 0.43, "precision bf16": 0.10,
          "precision fp8-current": 0.20, "precision mxfp8": 0.36, "gpu h100": 0.37, "gpu b200": 0.46,
          "gpu gb200": 0.14, "gpu gb300": 0.09}


def test_group_errors_within_their_regression_bounds(result):
    groups = result["groups"]
    assert set(groups) == set(BOUNDS)
    for name, bound in BOUNDS.items():
        assert groups[name]["mean_abs_error"] <= bound, (name, groups[name])
    errors = [abs(row["error"]) for row in result["rows"]]
    assert groups["all"]["mean_abs_error"] == pytest.approx(sum(errors) / len(errors), abs=1e-4)


def test_the_command(capsys):
    assert main(["--check"]) == 0
    out = capsys.readouterr().out
    assert "LLAMA3_70B FP8-CS 64 DGX-H100" in out and "not run: GPT OSS 120B BF16 64 DGX-H100" in out
    assert main(["--check", "--write"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--write" in err


def test_derive_predict_predicts_the_same_row(result):
    # issue 29: `python -m derive.predict --precision fp8-current` on the row's layout (no memory check:
    # the run ran) prints the check's figure
    from derive.predict import run
    printed = json.loads(run(["--model", "llama3-70b", "--gpu", "h100", "--gpus", "64", "--tp", "4", "--pp", "8",
                              "--vp", "5", "--global-batch", "128", "--seq", "8192", "--precision", "fp8-current",
                              "--no-memory-check", "--json"]))
    row = next(r for r in result["rows"] if r["run"] == "LLAMA3_70B FP8-CS 64 DGX-H100")
    assert round(printed["tokens_per_s_per_gpu"]) == row["predicted_tokens"]
    assert printed["layout"]["zero"] == 1 and printed["layout"]["sequence_parallel"] is True


def test_balanced_stages_where_megatron_accepts_no_other_split():
    # Megatron asserts L (+1 embedding, +1 loss slot when accounted) divisible by p and each rank's share
    # by v: Llama 3.1 405B (L = 126) at p = 8, v = 4 needs 128 / 32 = 4; at p = 8, v = 8, 128 / 64 = 2;
    # Qwen3-235B (L = 94) at p = 8, v = 2: 96 / 16 = 6; Llama 3 70B (80) at p 8, v 5 splits evenly;
    # DeepSeek-V3 (61) at p = 4, v = 4 neither (63 / 16): a custom layout, kept unbalanced
    from derive.calibrate import megatron_needs_balanced
    assert megatron_needs_balanced(126, 8, 4) and megatron_needs_balanced(126, 8, 8)
    assert megatron_needs_balanced(94, 8, 2) and megatron_needs_balanced(94, 4, 12)
    assert not megatron_needs_balanced(80, 8, 5) and not megatron_needs_balanced(61, 4, 4)
    assert not megatron_needs_balanced(48, 1, 1)
    runs = {run.label: run for run in heldout_runs()[0]}
    assert runs["LLAMA3.1_405B FP8-CS 1024 DGX-H100"].parallelism.balanced
    assert not runs["LLAMA3_70B FP8-CS 64 DGX-H100"].parallelism.balanced
