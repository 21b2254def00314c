"""The planner's search space against a plain brute-force enumeration, and its ranking by predicted time."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from derive.plan import MAX_VIRTUAL, plan
from derive.presets import model

GPUS, TOKENS = 16, 64 * 8192


@pytest.fixture(scope="module")
def small():
    return plan(model("llama3-8b"), GPUS, TOKENS, max_context=4)


def _brute_force(entry, gpus: int, max_context: int) -> set[tuple]:
    """Every (t, p, v, c, d, b, zero, recompute) that divides: written out, no helper of derive.plan."""
    found = set()
    for t, c, p in itertools.product(range(1, gpus + 1), repeat=3):
        if entry.heads % t or entry.kv_heads % t or entry.seq % c or c > max_context:
            continue
        if gpus % (t * c * p) or p > entry.layers:
            continue
        for v in range(1, MAX_VIRTUAL + 1):
            if p * v > entry.layers or (v > 1 and p == 1):
                continue
            for b, zero, recompute in itertools.product((1, 2, 4, 8), (0, 1), ("none", "selective", "full")):
                found.add((t, p, v, c, gpus // (t * c * p), b, zero, recompute))
    return found


def test_candidates_are_exactly_the_brute_force_set(small):
    c = small.columns
    planned = {(int(c["t"][i]), int(c["p"][i]), int(c["v"][i]), int(c["c"][i]), int(c["d"][i]),
                int(c["b"][i]), int(c["zero"][i]), str(c["recompute"][i])) for i in range(c["t"].size)}
    assert len(planned) == c["t"].size  # no duplicates
    assert planned == _brute_force(small.model, GPUS, 4)


def test_p_times_v_equal_to_l_and_micro_batch_8_are_tried():
    entry = model("llama3-8b")  # L = 32
    result = plan(entry, 16, 64 * 8192, max_context=1)
    c = result.columns
    assert np.any((c["p"] * c["v"] == 32))
    assert np.any(c["b"] == 8)


def test_interleaving_is_checked_against_p_not_v(small):
    c = small.columns
    interleaved = (c["v"] > 1) & (c["reason"] != "batch")
    bad = interleaved & (c["m"] % c["p"] != 0)
    assert np.all(c["reason"][bad] == "schedule")
    # m a multiple of p (but not of v) is allowed
    fine = interleaved & (c["m"] % c["p"] == 0) & (c["m"] % c["v"] != 0)
    assert np.any(fine) and not np.any(c["reason"][fine] == "schedule")


def test_feasible_layouts_ranked_by_predicted_time(small):
    c, order = small.columns, small.order()
    feasible = int(c["feasible"].sum())
    times = c["step_time"][order[:feasible]]
    assert np.all(np.diff(times) >= 0) and np.all(np.isfinite(times))
    for row in order[:3]:
        assert sum(c["breakdown"][row].values()) == pytest.approx(c["step_time"][row])
    assert np.all(np.isnan(c["step_time"][~c["feasible"]]))
