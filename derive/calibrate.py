"""``python -m derive.calibrate``: fit the step model's efficiency constants on published runs, openly.

The fit and its calibration set: derive.calibration_fit; ``--check``, the held-out published
runs predicted with the shipped constants (fits nothing): derive.heldout. This module parses
the options and prints.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from derive.accounts.efficiency import CALIBRATION, Efficiency, calibrated
from derive.calibration_fit import calibration_runs, fit, objective, report
from derive.heldout import heldout_report, heldout_runs
from derive.inputs import OneLineParser
from derive.options.messages import UsageError, serve


def render_heldout(result: dict[str, object]) -> str:
    """Each release's rows (tokens/s per GPU, the predicted step's parts as shares of it) and groups' errors, the groups
    over all releases, the rows not run and why."""
    lines = []
    for container, release in result["releases"].items():
        lines.append(f"held out (never fitted): {release['release']}, {release['source']} ({release['source_file']})")
        for row in result["rows"]:
            if row["release"] != container:
                continue
            over = row["memory_gib"] is not None and row["memory_gib"] > row["hbm_gib"]
            parts = " ".join(f"{part} {share:.0%}" for part, share in row["breakdown"].items() if share >= 0.005)
            lines.append(f"  {row['run']:50s} published {row['published_tokens']:7,d}  predicted "
                         f"{row['predicted_tokens']:7,d} tokens/s/GPU  {row['error']:+7.1%}  [{parts}]"
                         + (f"  (derive's memory accounts: {row['memory_gib']} GiB > {row['hbm_gib']} GiB HBM)"
                            if over else ""))
        for name, errors in release["groups"].items():
            lines.append(f"  {container} {name}: mean |error| {errors['mean_abs_error']:.1%}, "
                         f"max {errors['max_abs_error']:.1%} ({errors['rows']} rows)")
        for row in result["not_run"]:
            if row["release"] == container:
                lines.append(f"  not run: {row['run']}: {row['reason']}")
    lines.append("all releases:")
    for name, errors in result["groups"].items():
        lines.append(f"{name}: mean |error| {errors['mean_abs_error']:.1%}, max {errors['max_abs_error']:.1%} "
                     f"({errors['rows']} rows)")
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    """The options of ``python -m derive.calibrate``."""
    parser = OneLineParser(prog="derive.calibrate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write derive/calibration.json")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--check", action="store_true",
                        help="predict the held-out published runs (derive/heldout_runs*.json) with the shipped "
                             "constants; fits nothing")
    return parser


def render_text(result: dict[str, object]) -> str:
    """Constants, then each row and each table's errors."""
    lines = ["constants: " + ", ".join(f"{k} = {v}" for k, v in result["constants"].items())]
    for row in result["rows"]:
        lines.append(f"  {row['table']:20s} {row['run']:20s} published {row['published_s']:9.3f} s  "
                     f"predicted {row['predicted_s']:9.3f} s  {row['error']:+7.1%}")
    for name, errors in result["tables"].items():
        lines.append(f"{name}: mean |error| {errors['mean_abs_error']:.1%}, max {errors['max_abs_error']:.1%} "
                     f"({errors['rows']} rows)")
    return "\n".join(lines) + "\n"


def run(argv: Sequence[str] | None = None) -> str:
    """Fit, report, and with --write store the result in derive/calibration.json."""
    args = build_parser().parse_args(argv)
    if args.check:
        if args.write:
            raise UsageError("--write: the held-out check fits and writes nothing; drop --write or --check")
        result = heldout_report(*heldout_runs(), calibrated())
        return json.dumps(result, indent=1) + "\n" if args.json else render_heldout(result)
    runs = calibration_runs()
    # from a fixed start and from the shipped constants (the objective has several valleys): the better fit
    eta = min((fit(runs, start) for start in (Efficiency(0.8, 0.7, 0.8, gemm_hopper=0.8), calibrated())),
              key=lambda found: objective(runs, found))
    result = report(runs, eta)
    if args.write:
        CALIBRATION.write_text(json.dumps(result, indent=1) + "\n")
    return json.dumps(result, indent=1) + "\n" if args.json else render_text(result)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point."""
    return serve(run, argv, "derive.calibrate")


if __name__ == "__main__":
    sys.exit(main())
