"""Time the planner on issue 32's question: Llama 3 405B on 16,384 H100s, 16M tokens per step, s = 8192.

Run: ``.venv/bin/python bench/plan_405b.py [--rounds 3]``. Prints the first call's seconds
(templates and expressions compiled), the median of later calls, the target (2 s) and the
top ten ranks (layouts with the same predicted step share one) with the rank of the paper's
layout (TP 8, CP 1, PP 16, DP 128): first as the planner answers by default (Megatron's
placements for ZeRO 0-3, fit at the usable range's high end, 'tight' above its low end), then
under the paper's own state placement read as ZeRO-2 (section 3.3.2: FSDP "shards the optimizer
states and gradients", parameters kept whole after forward: derive's deepspeed-zero2 placement),
then judged at the low end only; each time the paper's best feasible variant and, if none fits, why.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from derive.plan import render_text  # noqa: E402
from derive.planning.search import plan  # noqa: E402
from derive.presets import model  # noqa: E402

TARGET_S = 2.0
PAPER = {"t": 8, "c": 1, "p": 16, "d": 128}


#: (placement, fit) of each question asked.
VARIANTS = (("megatron", "high"), ("deepspeed-zero2", "high"), ("megatron", "low"))


def paper_rank(result) -> str:
    """The paper's best feasible variant and its rank, or its leanest variant's memory and reason."""
    c = result.columns
    order, ranks = result.order(), result.ranks()
    paper = [row for row in order if all(int(c[key][row]) == value for key, value in PAPER.items())]
    for row in paper[:1]:
        if c["feasible"][row]:
            return (f"the paper's layout first appears at rank {ranks[row]}: v={c['v'][row]} b={c['b'][row]} "
                    f"balanced={c['balanced'][row]} {c['recompute'][row]} zero={c['zero'][row]}, "
                    f"{c['step_time'][row]:.2f} s, {c['memory_per_gpu'][row] / 2**30:.1f} GiB; "
                    f"breakdown {dict((k, round(x, 3)) for k, x in c['breakdown'][row].items())}")
    unrecomputed = [row for row in paper if c["recompute"][row] == "none" and c["reason"][row] != "batch"]
    lean = min(unrecomputed, key=lambda row: c["memory_per_gpu"][row])
    return (f"the paper's layout without recompute does not fit: at best {c['memory_per_gpu'][lean] / 2**30:.1f} "
            f"GiB (v={c['v'][lean]} balanced={c['balanced'][lean]} zero={c['zero'][lean]}, "
            f"reason {c['reason'][lean]})")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    entry = model("llama3-405b")
    for placement, fit in VARIANTS:
        start = time.perf_counter()
        result = plan(entry, 16384, 16 * 2**20, "h100", 8192, placement_name=placement, fit=fit)
        first = time.perf_counter() - start
        later = []
        for _ in range(rounds):
            start = time.perf_counter()
            result = plan(entry, 16384, 16 * 2**20, "h100", 8192, placement_name=placement, fit=fit)
            later.append(time.perf_counter() - start)
        print(f"-- placement {placement}, fit at the usable range's {fit} end")
        print(f"first call {first:.2f} s, later calls median {statistics.median(later):.2f} s (target {TARGET_S} s)")
        print(render_text(result, 10))
        print(paper_rank(result))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
