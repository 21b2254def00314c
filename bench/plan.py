"""Time the planner on two published questions and rank the published layout among its answers.

Run: ``.venv/bin/python bench/plan.py [--model llama3-405b | deepseek-v3] [--gpus N] [--rounds 3]``.

- ``llama3-405b`` (default; issue 32's question): Llama 3 405B on 16,384 H100s, 16M tokens per step,
  s = 8192. Prints the first call's seconds (templates and expressions compiled), the median of later
  calls, the target (2 s) and the top ten ranks (layouts with the same predicted step share one) with
  the rank of the paper's layout (TP 8, CP 1, PP 16, DP 128): first as the planner answers by default
  (Megatron's placements for ZeRO 0-3, fit at the usable range's high end, 'tight' above its low end),
  then under the paper's own state placement read as ZeRO-2 (section 3.3.2: FSDP "shards the optimizer
  states and gradients", parameters kept whole after forward: derive's deepspeed-zero2 placement), then
  judged at the low end only; each time the paper's best feasible variant and, if none fits, why.
- ``deepseek-v3``: DeepSeek-V3 on ``--gpus`` (default 1,024) H100s, its pre-training batch of 15,360
  sequences of 4,096 tokens, the e and t_E axes searched too. Prints the first call's seconds, the median
  of later calls, the top five ranks and where the report's layout lands (DeepSeek-V3 technical report,
  section 3.2.1: 16-way pipeline, 64-way expert parallelism, ZeRO-1 data parallelism, no tensor
  parallelism; on 2,048 H800s there).
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
#: (placement, fit) of each question asked of Llama 3 405B.
VARIANTS = (("megatron", "high"), ("deepspeed-zero2", "high"), ("megatron", "low"))
#: DeepSeek-V3's pre-training batch in tokens, and the report's layout.
DEEPSEEK_TOKENS = 15360 * 4096
REPORT = {"t": 1, "p": 16, "e": 64, "zero": 1}


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


def report_rank(result) -> str:
    """The DeepSeek-V3 report's layout: its best feasible variant (any v, c, b, recompute) and rank, or why not."""
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


def timed(ask, rounds: int):
    """(``ask()``'s plan, the first call's seconds, each of ``rounds`` later calls' seconds)."""
    start = time.perf_counter()
    result = ask()
    first = time.perf_counter() - start
    later = []
    for _ in range(rounds):
        start = time.perf_counter()
        result = ask()
        later.append(time.perf_counter() - start)
    return result, first, later


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=("llama3-405b", "deepseek-v3"), default="llama3-405b")
    parser.add_argument("--gpus", type=int, default=1024, help="deepseek-v3's GPUs (Llama 3 405B: 16,384)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    entry = model(args.model)
    if args.model == "deepseek-v3":
        result, first, later = timed(lambda: plan(entry, args.gpus, DEEPSEEK_TOKENS), args.rounds - 1)
        print(f"first call {first:.2f} s"
              + (f", later calls (median) {statistics.median(later):.2f} s" if later else ""))
        print(render_text(result, 5), end="")
        print(report_rank(result))
        return 0
    for placement, fit in VARIANTS:
        result, first, later = timed(lambda: plan(entry, 16384, 16 * 2**20, "h100", 8192,
                                                  placement_name=placement, fit=fit), args.rounds)
        print(f"-- placement {placement}, fit at the usable range's {fit} end")
        print(f"first call {first:.2f} s, later calls median {statistics.median(later):.2f} s (target {TARGET_S} s)")
        print(render_text(result, 10))
        print(paper_rank(result))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
