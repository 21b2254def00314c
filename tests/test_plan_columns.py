"""The planner's step times, evaluated over numpy columns of layouts, against ``predict`` of each layout alone."""
from __future__ import annotations

import numpy as np
import pytest

from derive.accounts.allocator import allocated_bytes
from derive.accounts.prediction import ledger_rows, predict, predict_columns, template_rows
from derive.parallelism import Parallelism
from derive.planning.layouts import layout_parallelism
from derive.planning.ranking import SYSTEM_NAMES
from derive.planning.search import plan
from derive.presets import model
from derive.systems import system

#: Small plans, every feasible row checked: Llama 3 8B on 16 H100 (context parallel up to 4) and
#: Llama 3 70B on 64 A100 at s = 4096 (p = 1 and p > 1, every ZeRO stage, balanced pipelines).
SMALL = {
    "llama3-8b-16-h100": (model("llama3-8b"), 16, 64 * 8192, "h100", None, 4),
    "llama3-70b-64-a100": (model("llama3-70b"), 64, 128 * 4096, "a100", 4096, 2),
}
#: Issue 32's question and the paper's layout (Dubey et al. 2024, Table 4: TP 8, CP 1, PP 16, DP 128).
PAPER = {"t": 8, "c": 1, "p": 16, "d": 128}


def _close(actual: float, expected: float, rel: float, absolute: float = 0.0) -> bool:
    """``actual == pytest.approx(expected, rel=rel, abs=absolute)`` for floats, without building an approx per value."""
    return actual == expected or abs(actual - expected) <= max(rel * abs(expected), absolute)


def _assert_rows_equal_predict(result, rows) -> int:
    """Each row's step time and breakdown equal ``predict`` of its Parallelism to 1e-9 relative."""
    c = result.columns
    gpu = system(SYSTEM_NAMES.get(result.hardware, result.hardware))
    for row in rows:
        alone = predict(result.model, layout_parallelism(c, row, result.tokens, result.model.seq), gpu)
        assert _close(c["step_time"][row], alone.step_time_s, 1e-9), (row, c["step_time"][row], alone.step_time_s)
        assert list(c["breakdown"][row]) == list(alone.breakdown)
        for name, seconds in alone.breakdown.items():
            assert _close(c["breakdown"][row][name], seconds, 1e-9, 1e-15), (row, name, c["breakdown"][row][name], seconds)
    return len(rows)


@pytest.mark.parametrize("case", sorted(SMALL))
def test_every_feasible_row_equals_predict_of_its_layout(case):
    entry, gpus, tokens, hardware, seq, max_context = SMALL[case]
    result = plan(entry, gpus, tokens, hardware, seq, max_context=max_context)
    c = result.columns
    feasible = np.flatnonzero(c["feasible"])
    # the checks below reach the template groups: recompute policies, ZeRO stages, balanced, p = 1 and t = 1
    assert {str(x) for x in c["recompute"][feasible]} == {"none", "selective", "full"}
    assert set(c["zero"][feasible].tolist()) >= {0, 1} and set(c["balanced"][feasible].tolist()) == {0, 1}
    assert np.any(c["p"][feasible] == 1) and np.any(c["t"][feasible] == 1)
    assert _assert_rows_equal_predict(result, feasible) == feasible.size > 100
    assert np.all(np.isnan(c["step_time"][~c["feasible"]]))


def test_the_405b_papers_layout_rows_equal_predict():
    entry = model("llama3-405b")
    result = plan(entry, 16384, 16 * 2**20, "h100", 8192)
    c = result.columns
    paper = np.flatnonzero(c["feasible"] & np.logical_and.reduce([c[key] == value for key, value in PAPER.items()]))
    assert paper.size > 10 and set(c["recompute"][paper].tolist()) >= {"selective", "full"}
    _assert_rows_equal_predict(result, paper)


def test_template_columns_equal_each_layouts_ledger_rows():
    # Llama 3 70B, ZeRO-1, sequence parallel, full recompute: three layouts at once against one at a time
    entry = model("llama3-70b")
    layouts = [Parallelism(tp=4, pp=4, vp=5, cp=2, dp=2, global_batch=256, recompute="full",
                           sequence_parallel=True, zero=1),
               Parallelism(tp=8, pp=2, vp=2, cp=1, dp=4, global_batch=64, recompute="full",
                           sequence_parallel=True, zero=1),
               Parallelism(tp=2, pp=8, vp=1, cp=4, dp=1, micro_batch=2, global_batch=32, recompute="full",
                           sequence_parallel=True, zero=1)]
    sizes = tuple(np.array([getattr(x, name) for x in layouts]) for name in
                  ("tp", "pp", "vp", "cp", "dp", "ep", "etp", "micro_batches", "micro_batch"))
    columns = template_rows(entry, layouts[0], sizes, False)
    for index, layout in enumerate(layouts):
        alone = {row.name: (row.ranks, row.sent, row.count) for row in ledger_rows(entry, layout)}
        together = {row.name: (row.ranks[index], row.sent[index], row.count[index]) for row in columns
                    if row.count[index]}
        assert together == alone


def test_columns_take_what_predict_rejects():
    entry = model("llama3-70b")  # 64 heads, 8 key/value heads: t = 16 does not divide them
    sizes = {name: np.array([value]) for name, value in dict(t=16, p=1, v=1, c=1, d=4, b=1, m=1).items()}
    with pytest.raises(ValueError, match="tp"):
        predict_columns(entry, Parallelism(sequence_parallel=True), sizes, system("h100"))
    mixed = {**{name: np.array([x, x]) for name, x in dict(t=8, v=1, c=1, d=4, b=1, m=4).items()},
             "p": np.array([1, 2])}
    with pytest.raises(ValueError, match="p:"):
        predict_columns(entry, Parallelism(sequence_parallel=True), mixed, system("h100"))


def test_allocator_columns_equal_single_requests():
    # round_size / get_allocation_size / should_split by hand: 1 B -> 512 B; 1 MiB + 1 -> 1 MiB + 512 from
    # a 20 MiB segment (remaining > 1 MiB: split); 11 MiB + 1 -> 11 MiB + 512 in a 12 MiB segment (split
    # leaves 1 MiB - 512 <= 1 MiB: the whole segment); 0 -> 0
    requests = np.array([0, 1, 2**20 + 1, 11 * 2**20 + 1, 512], dtype=np.int64)
    expected = [0, 512, 2**20 + 512, 12 * 2**20, 512]
    assert allocated_bytes(requests).tolist() == expected
    assert [allocated_bytes(int(x)) for x in requests] == expected
    # one request past int64 stays exact: 2^80 + 1 -> 2^80 + 512, split from a 2^80 + 2 MiB segment
    assert allocated_bytes(2**80 + 1) == 2**80 + 512
