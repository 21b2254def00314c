"""Time the planner on issue 32's question: Llama 3 405B on 16,384 H100s, 16M tokens per step, s = 8192.

Run: ``.venv/bin/python bench/plan_405b.py [--rounds 3]``. Prints the first call's seconds
(templates and expressions compiled), the median of later calls, the target (2 s) and the
top ten with the rank of the paper's layout (TP 8, CP 1, PP 16, DP 128).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from derive.plan import plan, render_text  # noqa: E402
from derive.presets import model  # noqa: E402

TARGET_S = 2.0
PAPER = {"t": 8, "c": 1, "p": 16, "d": 128}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    entry = model("llama3-405b")
    start = time.perf_counter()
    result = plan(entry, 16384, 16 * 2**20, "h100", 8192)
    first = time.perf_counter() - start
    later = []
    for _ in range(rounds):
        start = time.perf_counter()
        result = plan(entry, 16384, 16 * 2**20, "h100", 8192)
        later.append(time.perf_counter() - start)
    print(f"first call {first:.2f} s, later calls median {statistics.median(later):.2f} s (target {TARGET_S} s)")
    print(render_text(result, 10))
    c = result.columns
    for rank, row in enumerate(result.order(), 1):
        if all(int(c[key][row]) == value for key, value in PAPER.items()) and c["feasible"][row]:
            print(f"the paper's layout first appears at rank {rank}: v={c['v'][row]} b={c['b'][row]} "
                  f"{c['recompute'][row]} zero={c['zero'][row]}, {c['step_time'][row]:.2f} s, "
                  f"{c['memory_per_gpu'][row] / 2**30:.1f} GiB; breakdown {c['breakdown'][row]}")
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
