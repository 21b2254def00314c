"""Time ``python -m derive.check`` (and ``make derive``'s render) against a bare SymPy import.

Run: ``make bench`` or ``.venv/bin/python bench/run.py [--repeat 5]``. Prints the
best wall time of each command over the repeats and the ratios to the import.
Targets: check <= 3x, render <= 6x a bare ``python -c "import sympy"``.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def best_wall_time(command: list[str], repeat: int) -> float:
    """The fastest of ``repeat`` runs of ``command``, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        commands = {
            "import sympy": [sys.executable, "-c", "import sympy"],
            "derive.check": [sys.executable, "-m", "derive.check"],
            "derive.render": [sys.executable, "-m", "derive.render", "--out",
                              str(Path(scratch) / "formulas")],
        }
        timings = {name: best_wall_time(cmd, args.repeat) for name, cmd in commands.items()}
    base = timings["import sympy"]
    targets = {"derive.check": 3.0, "derive.render": 6.0}
    for name, seconds in timings.items():
        ratio = seconds / base
        target = f"  (target <= {targets[name]:.0f}x)" if name in targets else ""
        print(f"{name:14} {seconds:6.3f} s  {ratio:5.2f}x import sympy{target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
