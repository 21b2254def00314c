"""``derive`` / ``python -m derive``: one command whose subcommands are derive's front ends.

The dispatcher maps each subcommand to its module by name and imports it only
when it runs (``derive --help`` loads nothing else); ``python -m derive.<x>``
keeps working, and a bare ``derive --model …`` (no subcommand) is ``derive report``.
"""
from __future__ import annotations

import gc
import importlib
import sys
from typing import NamedTuple, Sequence


class Command(NamedTuple):
    """A subcommand: its module (with a ``main(argv)``), what it does, one example."""

    module: str
    summary: str
    example: str


#: The subcommands, in the order a newcomer meets them.
COMMANDS: dict[str, Command] = {
    "report": Command("derive.cli", "states, FLOPs and step-time bounds of one model (the default)",
                      "derive report --model 70b --gpu h100"),
    "plan": Command("derive.plan", "every layout of a dense model on N GPUs, ranked by predicted step time",
                    "derive plan --model 70b --gpus 64 --tokens 1048576 --gpu h100"),
    "predict": Command("derive.predict", "one layout's predicted step time, throughput and MFU",
                       "derive predict --model 70b --gpu h100 --tp 8 --pp 4 --gpus 64 --global-batch 128"),
    "comm": Command("derive.comm", "the bytes one rank sends per step, by group and pass",
                    "derive comm --model 70b --tp 8 --pp 4 --dp 2 --global-batch 64"),
    "calibrate": Command("derive.calibrate", "fit the step model's constants to published runs",
                         "derive calibrate"),
    "check": Command("derive.check", "prove every identity (--claims: every published claim)",
                     "derive check --claims"),
    "validate": Command("derive.validate.__main__", "measure the ledgers against PyTorch (needs derive[validate])",
                        "derive validate --hf"),
    "render": Command("derive.render.__main__", "write the formula sheet and its web page",
                      "derive render --out /tmp/formulas"),
    "list-models": Command("derive.cli", "every preset and shipped config --model takes",
                           "derive list-models"),
}


def usage() -> str:
    """``derive --help``: every subcommand with its example."""
    width = max(map(len, COMMANDS))
    lines = ["usage: derive [SUBCOMMAND] [OPTIONS]   (no subcommand: derive report)", "",
             "One command for derive's front ends; `derive SUBCOMMAND --help` shows its options.", "",
             "subcommands:"]
    for name, command in COMMANDS.items():
        lines.append(f"  {name:<{width}}  {command.summary}")
        lines.append(f"  {'':<{width}}  e.g. {command.example}")
    lines += ["", "python -m derive.<module> runs the same front ends (derive.plan, derive.predict, ...)."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the subcommand named first in ``argv`` (default: the report); its --help ends with an example."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        sys.stdout.write(usage())
        return 0
    name = args.pop(0) if args and args[0] in COMMANDS else "report"
    if name == "list-models":
        args = ["--list-models", *args]
    if args and not args[0].startswith("-") and name == "report" and args[0] not in COMMANDS:
        sys.stderr.write(f"derive: error: unknown subcommand {args[0]!r} "
                         f"(known: {', '.join(COMMANDS)}; derive --help lists them)\n")
        return 2
    command = COMMANDS[name]
    entry = importlib.import_module(command.module).main
    if argv is None:
        # The process's entry point (the console script, python -m derive): the modules just imported (SymPy's
        # among them, hundreds of thousands of objects) live until exit, so they are moved out of the collector's
        # generations (gc.freeze), and neither the run's collections nor the last one at exit walk them again.
        # A call with an explicit argv (a test, a caller's process) keeps its collector as it was.
        gc.freeze()
    if "-h" in args or "--help" in args:
        try:
            code = entry(args)
        except SystemExit as done:
            code = done.code or 0
        sys.stdout.write(f"\nexample:\n  {command.example}\n")
        return int(code)
    return entry(args)


if __name__ == "__main__":
    sys.exit(main())
