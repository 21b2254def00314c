"""Time derive's evaluation paths side by side: compiled sweeps, plain loops, Model.subs, derive.megatron, derive.plan.

Run: ``.venv/bin/python bench/sweep.py [--configs 1000000] [--repeat 3]``. Prints
one line per path with its rate and the issue's target:
``derive.sweep`` memory_per_gpu >= 10^7 configurations/s at 10^7 (and >= 10x the
plain per-configuration loop), all nine grid accounts together
(``derive.evaluation.vectorised.compile_many``, as ``derive.sweep`` evaluates them) >= 5 x 10^6/s,
printed beside the nine one by one, <= 200 bytes per configuration (tracemalloc's peak over the nine columns), a flat
cost per configuration from 10^4 to 10^7 (issue 28), compilation <= 1 s, ``derive.megatron`` <= 20 us
per call, ``python -m derive.plan`` (405B on 16384 GPUs) <= 5x a bare
``import sympy``.
"""
from __future__ import annotations

import argparse
import subprocess
import tracemalloc
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import sympy as sp

from derive import stage_accounts
from derive.architectures.decoder import LLAMA
from derive.evaluation import vectorised
from derive.megatron import records
from derive.printing.python import arguments, exact_function, ratio
from derive.presets import model

ROOT = Path(__file__).resolve().parents[1]
LLAMA_70B = model("70b")
#: The accounts timed: one plain (resident state on the most loaded stage) and the most loaded rank.
ACCOUNTS = ("state_bytes", "memory_per_gpu")
#: Megatron's arguments for Llama 3 70B at t = 8, p = 4, d = 32, interleaved v = 5, 16 micro-batches.
MEGATRON_ARGS = {
    "num_layers": 80, "hidden_size": 8192, "num_attention_heads": 64, "num_query_groups": 8,
    "group_query_attention": True, "kv_channels": 128, "ffn_hidden_size": 28672, "swiglu": True,
    "normalization": "RMSNorm", "padded_vocab_size": 128256, "seq_length": 8192,
    "micro_batch_size": 1, "untie_embeddings_and_output_weights": True,
    "tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 4, "data_parallel_size": 32,
    "virtual_pipeline_model_parallel_size": 5, "use_distributed_optimizer": True,
    "sequence_parallel": True, "recompute_granularity": "selective", "attention_output_gate": False,
}


def best(run: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` runs, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def configurations(count: int) -> dict[str, np.ndarray]:
    """``count`` random layouts of Llama 3 70B (t, p, v, d, c, b, m), model sizes as scalars."""
    rng = np.random.default_rng(0)
    values: dict[str, object] = {symbol.name: number for symbol, number in LLAMA_70B.values.items()}
    values.update(t=rng.choice([1, 2, 4, 8], count), p=rng.integers(1, 17, count),
                  v=rng.integers(1, 6, count), d=rng.integers(1, 257, count),
                  c=rng.choice([1, 2, 4, 8], count), b=rng.integers(1, 9, count),
                  m=rng.integers(1, 129, count))
    return values


def expressions() -> dict[str, sp.Expr]:
    terms = stage_accounts.accounts(LLAMA, "llama-fused", "selective", "megatron", True)
    columns = terms.columns()
    return {name: columns[name] for name in ACCOUNTS}


def line(name: str, value: str, target: str = "") -> None:
    print(f"{name:58} {value:>22}  {target}")


def bench_compile(exprs: dict[str, sp.Expr]) -> None:
    for name, expr in exprs.items():
        vectorised.compile.cache_clear()
        ratio.cache_clear()
        seconds = best(lambda: vectorised.compile(expr), 1)
        line(f"compile {name}", f"{seconds:.3f} s", "(target <= 1 s)")


def bench_sweep(exprs: dict[str, sp.Expr], count: int, repeat: int) -> dict[str, float]:
    values = configurations(count)
    seconds = best(lambda: values["t"] * values["d"], repeat)
    line(f"machine: one numpy int64 multiply of {count:,} elements", f"{seconds * 1e3:.2f} ms")
    rates = {}
    for name, expr in exprs.items():
        function = vectorised.compile(expr)
        function(**values)
        seconds = best(lambda: function(**values), repeat)
        rate = rates[name] = count / seconds
        line(f"derive.sweep {name}, {count:,} configurations", f"{rate:,.0f} configs/s",
             f"{rate / 1e7:.2f}x the target >= 10,000,000 ({'met' if rate >= 1e7 else 'NOT met'})")
    exprs_all = list(stage_accounts.account_columns(LLAMA, "llama-fused", "selective", "megatron", True).values())
    joint = vectorised.compile_many(exprs_all)
    joint(**values)
    seconds = best(lambda: joint(**values), repeat)
    rate = count / seconds
    line(f"derive.sweep all {len(exprs_all)} grid accounts together, {count:,} configs", f"{rate:,.0f} configs/s",
         f"{rate / 5e6:.2f}x the target >= 5,000,000 ({'met' if rate >= 5e6 else 'NOT met'})")
    each = [vectorised.compile(expr) for expr in exprs_all]
    seconds = best(lambda: [function(**values) for function in each], repeat)
    line(f"the {len(exprs_all)} accounts one by one (compile each)", f"{count / seconds:,.0f} configs/s",
         f"together / one by one = {rate * seconds / count:.2f}x")
    tracemalloc.start()
    joint(**values)
    peak = tracemalloc.get_traced_memory()[1] / count
    tracemalloc.stop()
    line(f"memory of the {len(exprs_all)} accounts together (tracemalloc peak)", f"{peak:,.0f} B/config",
         f"target <= 200 ({'met' if peak <= 200 else 'NOT met'})")
    return rates


def bench_flat(repeat: int, largest: int) -> None:
    """memory_per_gpu's cost per configuration from 10^4 up: flat means the 10^4 rate is kept."""
    function = vectorised.compile(expressions()["memory_per_gpu"])
    rates = {}
    for count in (10**k for k in range(4, 8) if 10**k <= largest):
        values = configurations(count)
        function(**values)
        rates[count] = count / best(lambda: function(**values), repeat)
        line(f"memory_per_gpu at {count:,} configurations", f"{rates[count]:,.0f} configs/s",
             f"{rates[count] / rates[10**4]:.2f}x the 10^4 rate")


def bench_loops(exprs: dict[str, sp.Expr], sweep_rates: dict[str, float]) -> None:
    values = configurations(20000)
    rows = [{name: int(np.asarray(value if np.ndim(value) == 0 else value[i]))
             for name, value in values.items()} for i in range(20000)]
    for name, expr in exprs.items():
        symbols = arguments(expr)
        floats = sp.lambdify(symbols, expr, "math")
        exact = exact_function(expr)
        for label, function in (("float", floats), ("exact Fraction", exact)):
            args = [[row[symbol.name] for symbol in symbols] for row in rows]
            seconds = best(lambda: [function(*arg) for arg in args], 2)
            rate = len(rows) / seconds
            line(f"plain Python loop ({label}) {name}", f"{rate:,.0f} configs/s",
                 f"sweep/loop = {sweep_rates[name] / rate:,.0f}x (target >= 10x)" if label == "float" else "")
        subs_rows = rows[:100]

        def by_subs() -> None:
            for row in subs_rows:
                float(LLAMA_70B.subs(expr, **{k: row[k] for k in ("t", "p", "v", "d", "c", "b", "m")}))

        seconds = best(by_subs, 1)
        line(f"Model.subs + float {name}", f"{seconds / len(subs_rows) * 1e6:,.0f} us/config")


def bench_megatron(repeat: int) -> None:
    calls = {
        "compute_weight_and_optimizer_memory": lambda: records.compute_weight_and_optimizer_memory(MEGATRON_ARGS),
        "compute_activation_memory": lambda: records.compute_activation_memory(MEGATRON_ARGS, 16),
        "compute_activation_memory_without_sp":
            lambda: records.compute_activation_memory_without_sp(MEGATRON_ARGS, 16),
        "num_floating_point_operations": lambda: records.num_floating_point_operations(MEGATRON_ARGS, 512),
    }
    for name, call in calls.items():
        call()
        per = best(lambda: [call() for _ in range(2000)], repeat) / 2000
        line(f"derive.megatron.records.{name}", f"{per * 1e6:.1f} us/call", "(target <= 20 us)")


def wall(command: list[str], repeat: int) -> float:
    return best(lambda: subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL), repeat)


def bench_plan(repeat: int) -> None:
    base = wall([sys.executable, "-c", "import sympy"], repeat)
    plan = wall([sys.executable, "-m", "derive.plan", "--model", "405b", "--gpus", "16384",
                 "--tokens", str(16 * 2**20)], repeat)
    line("import sympy", f"{base:.3f} s")
    line("python -m derive.plan --model 405b --gpus 16384", f"{plan:.3f} s",
         f"{plan / base:.2f}x import sympy (target <= 5x)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--configs", type=int, default=10**7)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    exprs = expressions()
    bench_compile(exprs)
    rates = bench_sweep(exprs, args.configs, args.repeat)
    bench_flat(args.repeat, args.configs)
    bench_loops(exprs, rates)
    bench_megatron(args.repeat)
    bench_plan(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
