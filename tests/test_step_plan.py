"""The planner's search space against a plain brute-force enumeration, and its ranking by predicted time."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from derive.planning.layouts import MAX_VIRTUAL
from derive.planning.search import plan
from derive.presets import model

#: One worker runs this module under make test's --dist loadgroup: its module fixtures are built once.
pytestmark = pytest.mark.xdist_group("step_plan")

GPUS, TOKENS = 16, 64 * 8192


@pytest.fixture(scope="module")
def small():
    return plan(model("llama3-8b"), GPUS, TOKENS, max_context=4)


def _brute_force(entry, gpus: int, max_context: int) -> set[tuple]:
    """Every (t, p, v, c, d, b, zero, recompute, balanced) that divides: written out, no helper of derive.plan.

    Balanced pipelines (embedding and loss one layer slot each) need p > 1 and allow p v <= L + 2.
    """
    found = set()
    for t, c, p in itertools.product(range(1, gpus + 1), repeat=3):
        if entry.heads % t or entry.kv_heads % t or entry.seq % c or c > max_context:
            continue
        if gpus % (t * c * p):
            continue
        for v, balanced in itertools.product(range(1, MAX_VIRTUAL + 1), (0, 1)):
            if p * v > entry.layers + 2 * balanced or (v > 1 and p == 1) or (balanced and p == 1):
                continue
            for b, zero, recompute in itertools.product((1, 2, 4, 8), (0, 1, 2, 3), ("none", "selective", "full")):
                found.add((t, p, v, c, gpus // (t * c * p), b, zero, recompute, balanced))
    return found


def test_candidates_are_exactly_the_brute_force_set(small):
    c = small.columns
    planned = {(int(c["t"][i]), int(c["p"][i]), int(c["v"][i]), int(c["c"][i]), int(c["d"][i]),
                int(c["b"][i]), int(c["zero"][i]), str(c["recompute"][i]), int(c["balanced"][i]))
               for i in range(c["t"].size)}
    assert len(planned) == c["t"].size  # no duplicates
    assert planned == _brute_force(small.model, GPUS, 4)


def test_p_times_v_equal_to_l_and_micro_batch_8_are_tried():
    entry = model("llama3-8b")  # L = 32
    result = plan(entry, 16, 64 * 8192, max_context=1)
    c = result.columns
    assert np.any((c["p"] * c["v"] == 32))
    assert np.any(c["b"] == 8)


def test_balanced_pipelines_reach_l_plus_2_chunks():
    # Llama 3 8B, L = 32: p = 2, v = 17 is out of MAX_VIRTUAL; on 34 = 2 x 17 GPUs p = 17 pairs with
    # v = 2 only balanced (34 = 32 + 2 slots), never in the even split (34 > 32)
    result = plan(model("llama3-8b"), 34, 34 * 8192, max_context=1)
    c = result.columns
    reach = (c["p"] == 17) & (c["v"] == 2)
    assert np.any(reach) and np.all(c["balanced"][reach] == 1)


def test_balanced_stage_drops_the_head_from_the_slowest_stage():
    # p = 16, Llama 3 405B (L = 126, s = 8192): the even split's last stage runs ceil(126/16) = 8
    # layers and the output head; balanced, 128 slots: a middle stage runs 8 layers, the last 7 and
    # the head. Per token a layer is 2(h(h + 2 g k) + h^2 + 3 h f) + 2 s h (causal scores) = 6.64 GFLOP,
    # the head 2 h V = 4.20 GFLOP: the balanced micro-batch takes 8 x 6.64 / (8 x 6.64 + 4.20)
    from dataclasses import replace

    from derive.accounts.prediction import predict
    from derive.parallelism import Parallelism
    from derive.systems import system
    entry = replace(model("llama3-405b"), seq=8192)
    h, f, kv, vocab, s = 16384, 53248, 8 * 128, 128256, 8192
    layer = 2 * (h * (h + 2 * kv) + h * h + 3 * h * f) + 2 * s * h
    even = Parallelism(tp=8, pp=16, dp=128, global_batch=2048, sequence_parallel=True)
    balanced = replace(even, vp=8, balanced=True)
    with pytest.raises(ValueError, match="pp x vp"):
        replace(balanced, balanced=False).check(entry)
    slow = predict(entry, even, system("h100")).breakdown["compute"]
    fast = predict(entry, replace(even, balanced=True), system("h100")).breakdown["compute"]
    assert fast / slow == pytest.approx(8 * layer / (8 * layer + 2 * h * vocab), rel=0.01)
    assert predict(entry, balanced, system("h100")).breakdown["compute"] == pytest.approx(fast)


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
    ranked = small.ranked()
    times = c["step_time"][ranked]
    assert np.all(np.diff(times) >= 0) and np.all(np.isfinite(times))
    # the dominated variants follow the ranked rows, in time order too, then the layouts that do not fit
    feasible = int(c["feasible"].sum())
    assert np.all(np.diff(c["step_time"][order[ranked.size:feasible]]) >= 0)
    for row in order[:3]:
        assert sum(c["breakdown"][row].values()) == pytest.approx(c["step_time"][row])
    assert np.all(np.isnan(c["step_time"][~c["feasible"]]))


def test_dominated_variants_by_brute_force(small):
    """A row is unranked exactly when another recompute / ZeRO variant of its layout is no slower and needs no
    more memory, strictly better in one (every pair compared in plain Python)."""
    c = small.columns
    keys = [name for name in ("t", "p", "v", "c", "d", "b", "balanced") if name in c]
    feasible = [int(row) for row in np.flatnonzero(c["feasible"])]
    variants: dict[tuple, list[int]] = {}
    for row in feasible:
        variants.setdefault(tuple(int(c[key][row]) for key in keys), []).append(row)
    def beats(i: int, j: int) -> bool:
        ti, tj, mi, mj = c["step_time"][i], c["step_time"][j], c["memory_per_gpu"][i], c["memory_per_gpu"][j]
        return ti <= tj and mi <= mj and (ti < tj or mi < mj)
    expected = {row for rows in variants.values() for row in rows if any(beats(other, row) for other in rows)}
    assert set(np.flatnonzero(small.dominated()).tolist()) == expected and expected
    ranks = small.ranks()
    assert all(ranks[row] == 0 for row in expected) and all(ranks[row] > 0 for row in set(feasible) - expected)
