"""Time the MoE planner on DeepSeek-V3: 1,024 H100s, its pre-training batch of 15,360 sequences of 4,096 tokens.

Run: ``.venv/bin/python bench/plan_moe.py [--gpus 1024] [--rounds 3]``. Prints the first call's seconds
(expressions and ledger templates compiled), the median of later calls, the top five ranks and where
the report's layout lands (DeepSeek-V3 technical report, section 3.2.1: 16-way pipeline, 64-way expert
parallelism, ZeRO-1 data parallelism, no tensor parallelism; on 2,048 H800s, here on ``--gpus``).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from derive.plan_moe import plan_moe, render_moe_plan  # noqa: E402

TOKENS = 15360 * 4096
REPORT = {"t": 1, "p": 16, "e": 64, "zero": 1}


def report_rank(result) -> str:
    """The report's best feasible variant (any v, c, b, recompute) and its rank, or why none fits."""
    c = result.columns
    ranks = result.ranks()
    rows = [row for row in result.order() if all(int(c[key][row]) == value for key, value in REPORT.items())]
    if not rows:
        return "the report's layout does not divide this GPU count"
    row = rows[0]
    if not c["feasible"][row]:
        return f"the report's layout does not fit: {c['reason'][row]}, {c['memory_per_gpu'][row] / 2**30:.1f} GiB"
    return (f"the report's layout first appears at rank {ranks[row]}: v={c['v'][row]} c={c['c'][row]} "
            f"b={c['b'][row]} {c['recompute'][row]}, {c['step_time'][row]:.2f} s, "
            f"{c['memory_per_gpu'][row] / 2**30:.1f} GiB")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    start = time.perf_counter()
    result = plan_moe("deepseek-v3", args.gpus, TOKENS)
    first = time.perf_counter() - start
    later = []
    for _ in range(args.rounds - 1):
        start = time.perf_counter()
        plan_moe("deepseek-v3", args.gpus, TOKENS)
        later.append(time.perf_counter() - start)
    print(f"first call {first:.2f} s" + (f", later calls (median) {statistics.median(later):.2f} s" if later else ""))
    print(render_moe_plan(result, top=5), end="")
    print(report_rank(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
