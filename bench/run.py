"""Time ``python -m derive.check``, ``python -m derive.render`` and the report against a bare SymPy import.

Run: ``make bench`` or ``.venv/bin/python bench/run.py [--rounds 7] [--only derive.check]``. Each round runs
every command once, in turn (interleaved, so a burst of load hits all of them), and
the ratio of each command to the round's bare ``import sympy`` is taken within the
round; the report is the median of those paired ratios, with their spread, and the same
ratio of CPU time (user + system of the child), which load from other processes moves less
than wall time (the targets are on wall time, measured on an idle machine). Targets:
check <= 3x, render <= 6x, the report (``derive --model 70b``) <= 1.3x a bare
``python -c "import sympy"`` (issue 28). Sweep rates and memory: bench/sweep.py.

derive keeps every printer's text in the checkout's ``.cache/printed`` (derive.printing.cache), and there
too the render's page data and sections of numbers only, keyed by every file of derive/ and templates/
(derive.render.kept): a run after the first reads them. ``--cold`` removes the folder before every command,
as after an edit of derive/printing or a new SymPy (an edit anywhere in derive/ is cold for the kept values).
With two CPUs the check and the render fork a second process (derive.background); the CPU ratio counts both.

Every command runs as Python runs by default, writing and reading its modules' bytecode: pip compiled
SymPy's when it installed it, while an editable checkout's derive is compiled on its first import. So
``PYTHONDONTWRITEBYTECODE`` (set on some machines, CI sandboxes among them) is dropped from the children's
environment and each command runs once, untimed, before the rounds; otherwise every timed run would
recompile derive's modules and compare that with a SymPy that never recompiles.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = "import sympy"
TARGETS = {"derive.check": 3.0, "derive.render": 6.0, "derive --model 70b": 1.3}


def _child_cpu() -> float:
    """CPU seconds (user + system) of every finished child so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wall_time(command: list[str]) -> float:
    """Seconds one run of ``command`` takes."""
    return timed(command)[0]


#: The children's environment: this one, with bytecode written as by default (see the module's docstring).
CHILD_ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
#: derive.printing.cache's folder in this checkout; ``--cold`` removes it before each command.
PRINTED = ROOT / ".cache" / "printed"
COLD = {"cold": False}


def timed(command: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of ``command`` (``--cold``: with no printed text kept)."""
    if COLD["cold"]:
        shutil.rmtree(PRINTED, ignore_errors=True)
    cpu, start = _child_cpu(), time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, env=CHILD_ENV)
    return time.perf_counter() - start, _child_cpu() - cpu


def paired_ratios(commands: dict[str, list[str]], rounds: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per command, its (wall, CPU) time over the same round's bare import, one ratio per round (interleaved)."""
    ratios: dict[str, list[float]] = {name: [] for name in commands if name != BASE}
    cpu_ratios: dict[str, list[float]] = {name: [] for name in ratios}
    for round_index in range(rounds):
        order = list(commands)
        if round_index % 2:                      # alternate the order so neither end is favoured
            order.reverse()
        seconds = {name: timed(commands[name]) for name in order}
        for name in ratios:
            ratios[name].append(seconds[name][0] / seconds[BASE][0])
            cpu_ratios[name].append(seconds[name][1] / seconds[BASE][1])
    return ratios, cpu_ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--only", action="append", choices=sorted(TARGETS), metavar="NAME",
                        help="time only this command (repeatable; default: all of "
                             + ", ".join(repr(name) for name in TARGETS) + ")")
    parser.add_argument("--cold", action="store_true",
                        help="remove .cache/printed before every command (derive.printing.cache)")
    args = parser.parse_args()
    COLD["cold"] = args.cold
    if args.rounds < 1:
        parser.error("--rounds: must be a positive integer")
    with tempfile.TemporaryDirectory() as scratch:
        commands = {
            BASE: [sys.executable, "-c", "import sympy"],
            "derive.check": [sys.executable, "-m", "derive.check"],
            "derive.render": [sys.executable, "-m", "derive.render", "--out",
                              str(Path(scratch) / "formulas")],
            "derive --model 70b": [sys.executable, "-m", "derive", "report", "--model", "70b"],
        }
        commands = {name: command for name, command in commands.items()
                    if name == BASE or not args.only or name in args.only}
        for command in commands.values():      # warm the file cache and compile the bytecode once, untimed
            wall_time(command)
        ratios, cpu_ratios = paired_ratios(commands, args.rounds)
    print(f"{args.rounds} interleaved rounds{' (cold: no printed text kept)' if args.cold else ''}; "
          f"median of paired ratios to a bare `{BASE}` (wall; CPU beside)")
    for name, values in ratios.items():
        median = statistics.median(values)
        print(f"{name:20} {median:5.2f}x  (min {min(values):.2f}x, max {max(values):.2f}x; "
              f"CPU {statistics.median(cpu_ratios[name]):.2f}x; "
              f"target <= {TARGETS[name]:g}x: {'met' if median <= TARGETS[name] else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
