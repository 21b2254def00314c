"""The front ends' error lines: UsageError, the one-line error, and the message table the CLI and the page read.

Each entry of :data:`MESSAGES` is one line a front end writes, with its values as ``{name}``
fields; ``derive report`` fills them (:func:`usage`) and the web page ships them with the
values it knows filled and the rest left for its script (:func:`template`), so both say the
same words. ``ARGUMENT`` and ``INVALID_CHOICE`` are argparse's own wording
(Lib/argparse.py: ArgumentError.__str__, ArgumentParser._check_value), which a test holds to it.
"""
from __future__ import annotations

import functools
import os
import string
import sys
from typing import Callable, Mapping, Sequence

#: The prefix of every error line, before the front end's name.
ERROR_LINE = "{prog}: error: {message}"

MESSAGES: dict[str, str] = {
    # argparse's lines for an option value its type or choices refuse
    "argument": "argument {option}: {message}",
    "invalid_choice": "invalid choice: {text} (choose from {choices})",
    # the argparse types of derive.options.values
    "must_be": "must be {expected}, got {text}",
    # --budget (derive.options.values.parse_budget)
    "budget_hardware": "--budget: derive.accounts.budget records no driver capacity for {name} (only {known}); "
                       "give a size such as 130GiB",
    "budget_syntax": "--budget: expected a size with its unit such as 70GiB or 80GB, or one of {known}, got {text}",
    "budget_range": "--budget: must be positive, got {text}",
    "budget_small": "--budget: must be at least one byte, got {text}",
    "budget_large": "--budget: must be at most 2^53 bytes, got {text}",
    # --peak (derive.options.values.parse_peak)
    "peak_unknown": "--peak: unknown hardware {text} (known: {known}; or a number in FLOP/s)",
    "peak_range": "--peak: must be a positive number of FLOP/s up to 2^100, got {text}",
    # --gpu of the report and of derive.predict
    "gpu_unknown": "--gpu: unknown GPU {text} (known: {known})",
    # the report's custom shape (derive.cli.sourced_models)
    "required": "{option}: required for a custom shape without --model",
    "no_gqa": "--kv-heads: {name} has no grouped-query attention (GPT: kv heads = heads); set --heads instead",
    # a --model name derive.names does not know ({why}: its line)
    "model": "--model: {why}",
    # a config.json the library refuses while reading it (derive.hf.from_config)
    "config": "--config: {path}: {error}",
    # the report's options that only one of the dense and the MoE report reads (derive.cli.run)
    "moe_only": "{option}: only the MoE report (--moe, or an MoE --model or --config) reads it",
    "dense_only": "{option}: the MoE report (derive.report: Megatron bf16, distributed optimizer) does not take it",
}


class UsageError(Exception):
    """A bad option: reported as one line, exit status 2."""


class _Kept(dict):
    """Format values: a field not given stays ``{name}`` for the page to fill."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def template(key: str, **values: object) -> str:
    """MESSAGES[``key``] with ``values`` filled and every other field left as ``{name}``."""
    return string.Formatter().vformat(MESSAGES[key], (), _Kept(values))


def usage(key: str, **values: object) -> UsageError:
    """The UsageError of MESSAGES[``key``] with every field filled."""
    return UsageError(MESSAGES[key].format(**values))


def option_line(error: ValueError, fields: Mapping[str, str]) -> str:
    """A library ValueError 'field: why' as the line naming the field's option ('field' itself if none)."""
    field, _, rest = str(error).partition(": ")
    return f"{fields.get(field, field)}: {rest}"


def serve(run: Callable[[Sequence[str] | None], str], argv: Sequence[str] | None, prog: str) -> int:
    """Print ``run(argv)``; a UsageError or an unwritable stdout is one error line and exit status 2."""
    try:
        text = run(argv)
    except UsageError as error:
        sys.stderr.write(ERROR_LINE.format(prog=prog, message=" ".join(str(error).split())) + "\n")
        return 2
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as error:
        return stdout_lost(prog, error)
    return 0


def stdout_lost(prog: str, error: OSError) -> int:
    """One error line naming stdout (a closed pipe: ``| head``, a full disk) and exit status 2.

    stdout is pointed at /dev/null so that the interpreter's final flush cannot fail a second time
    (the ``signal`` module's documentation, "Note on SIGPIPE").
    """
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.stderr.write(ERROR_LINE.format(prog=prog, message="stdout: cannot write the report "
                                       f"({error.strerror or error})") + "\n")
    return 2


def writes_stdout(prog: str) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """A front end's ``main`` whose prints may meet a closed stdout: :func:`stdout_lost`'s line, not a traceback."""
    def wrap(main: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(main)
        def guarded(*args: object, **kwargs: object) -> int:
            try:
                code = main(*args, **kwargs)
                sys.stdout.flush()
                return code
            except BrokenPipeError as error:
                return stdout_lost(prog, error)
        return guarded
    return wrap
