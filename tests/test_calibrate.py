"""The shipped calibration: Korthikanti et al. 2022 Table 5 within the issue's target, and not stale."""
from __future__ import annotations

import json

import pytest

from derive.accounts.efficiency import CALIBRATION, calibrated
from derive.calibrate import render_text
from derive.calibration_fit import calibration_runs, korthikanti_runs, report


def test_korthikanti_table5_within_target():
    runs = korthikanti_runs()
    assert [run.seconds for run in runs] == [1.10, 1.42, 13.75, 18.13, 37.83, 49.05, 71.49, 94.42]
    errors = [abs(row["error"]) for row in report(runs, calibrated())["rows"]]
    assert len(errors) == 8
    assert sum(errors) / 8 <= 0.03 and max(errors) <= 0.06  # Calculon: 3.65 % mean, 8.87 % max


def test_every_table_within_its_bound():
    # Llama 3 (H100, Hopper's GEMM constant) near the 5 %; Narayanan (A100, implied by
    # throughput, layouts transcribed) within 15 %; Korthikanti as above
    tables = json.loads(CALIBRATION.read_text())["tables"]
    assert tables["dubey-table4"]["mean_abs_error"] <= 0.05 and tables["dubey-table4"]["max_abs_error"] <= 0.06
    assert tables["narayanan-table1"]["mean_abs_error"] <= 0.08
    assert tables["narayanan-table1"]["max_abs_error"] <= 0.15
    assert tables["korthikanti-table5"]["mean_abs_error"] <= 0.03


def test_every_constant_is_named_printed_and_a_fraction():
    shipped = json.loads(CALIBRATION.read_text())
    assert set(shipped["constants"]) == {"gemm", "gemm_hopper", "memory", "network"} == set(shipped["meaning"])
    assert all(0 < value <= 1 for value in shipped["constants"].values())
    text = render_text(report(calibration_runs(), calibrated()))
    for name, value in shipped["constants"].items():
        assert f"{name} = {value}" in text


def test_the_shipped_file_matches_a_fresh_report():
    shipped = json.loads(CALIBRATION.read_text())
    fresh = report(calibration_runs(), calibrated())
    assert shipped["constants"] == fresh["constants"]
    assert [row["predicted_s"] for row in shipped["rows"]] == pytest.approx(
        [row["predicted_s"] for row in fresh["rows"]], rel=1e-3)
    assert set(shipped["tables"]) == {"korthikanti-table5", "narayanan-table1", "dubey-table4"}


def test_published_step_times_from_throughputs():
    runs = {run.label: run for run in calibration_runs()}
    # Llama 3 405B on 16,384 H100s: 2,048 sequences of 8,192 tokens at 400 TFLOPs per GPU
    llama = runs["405B 16384 GPUs"]
    assert llama.parallelism.dp == 128 and llama.parallelism.global_batch == 2048
    # Narayanan Table 1, 1T: 3,072 sequences over 3,072 GPUs at 163 teraFLOP/s, Eq. 3's FLOPs
    l, h, s, vocab, batch = 128, 25600, 2048, 51200, 3072
    eq3 = 96 * batch * s * l * h**2 * (1 + s / (6 * h) + vocab / (16 * l * h))
    assert runs["1008.0B"].seconds == pytest.approx(eq3 / (3072 * 163e12), rel=1e-3)
