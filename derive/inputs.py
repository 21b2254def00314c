"""Checks on user-supplied sizes and names: bad input is a ValueError naming the field."""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import stat
from typing import Iterable, Mapping, TypeVar

import sympy as sp

T = TypeVar("T")

#: The largest size derive reads from a user (an option or a config field): 2^53, the last
#: integer a float holds exactly, so the web page's float reading of a size is exact too.
MAX_SIZE = 2**53
#: The largest parameter count N a model may have: 2^48 (2.8e14, a hundred times any model trained),
#: so its state at up to 32 bytes per parameter stays a count a float holds exactly (<= 2^53).
MAX_PARAMETERS = 2**48
#: The largest config file read: 16 MiB. A Hugging Face config.json is a few KiB (the largest
#: shipped, deepseek-v3.json, is under 2 KiB); the cap stops a device or a huge file from being read whole.
MAX_CONFIG_BYTES = 2**24
#: The deepest nesting of JSON objects and arrays read: configs nest 3 deep (text_config.rope_scaling.x);
#: Python's json recursion would end in a RecursionError near 1000.
MAX_NESTING = 32
#: A JSON string (with its escapes): removed before the nesting is counted.
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def read_json(field: str, path: str | os.PathLike) -> object:
    """The JSON value of the regular file ``path``, at most MAX_CONFIG_BYTES and MAX_NESTING deep, else ValueError naming ``field``.

    Opened without blocking, so a FIFO or a device is refused rather than waited on.
    """
    shown = str(path)
    try:
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError) as error:
        raise ValueError(f"{field}: cannot read {shown!r} "
                         f"({getattr(error, 'strerror', None) or error})") from None
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{field}: {shown!r} is not a regular file")
        if info.st_size > MAX_CONFIG_BYTES:
            raise ValueError(f"{field}: {shown!r} is larger than {MAX_CONFIG_BYTES // 2**20} MiB "
                             f"({info.st_size} bytes); a config.json is a few KiB")
        with os.fdopen(handle, "rb", closefd=False) as stream:
            data = stream.read(MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise ValueError(f"{field}: cannot read {shown!r} ({error.strerror or error})") from None
    finally:
        os.close(handle)
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError(f"{field}: {shown!r} is larger than {MAX_CONFIG_BYTES // 2**20} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{field}: {shown!r} is not JSON ({error})") from None
    if nesting(text) > MAX_NESTING:
        raise ValueError(f"{field}: {shown!r} nests objects and arrays more than {MAX_NESTING} levels deep")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        raise ValueError(f"{field}: {shown!r} is not JSON ({error})") from None


def nesting(text: str) -> int:
    """How deep the objects and arrays of JSON ``text`` nest, counted up to MAX_NESTING + 1 (brackets in strings skipped)."""
    depth = deepest = 0
    for bracket in re.finditer(r"[\[\]{}]", _JSON_STRING.sub("", text)):
        depth += 1 if bracket.group() in "[{" else -1
        deepest = max(deepest, depth)
        if deepest > MAX_NESTING:
            break
    return deepest


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors on one line and exit status 2 (derive's CLIs share it)."""

    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def positive_int(field: str, value: object) -> int:
    """``value`` as a positive int, or ValueError naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ValueError(f"{field}: must be a positive integer, got {value!r}")
    if value <= 0:
        raise ValueError(f"{field}: must be a positive integer, got {value!r}")
    return value


def bounded_int(field: str, value: object, largest: int = MAX_SIZE) -> int:
    """``value`` as a positive int at most ``largest`` (2^53: a float holds it exactly), or ValueError naming ``field``."""
    value = positive_int(field, value)
    if value > largest:
        raise ValueError(f"{field}: must be at most 2^{largest.bit_length() - 1}, got {value!r}")
    return value


def finite_positive(field: str, value: object) -> float:
    """``value`` as a finite positive float (not a bool), or ValueError naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{field}: must be a positive number, got {value!r}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{field}: must be a finite positive number, got {value!r}")
    return number


def positive_size(field: str, value: object) -> sp.Expr:
    """A degree of parallelism or a count: a positive integer, or a symbolic expression that may be one.

    ``tensor_parallel=t`` stays symbolic; 0, -2, 1.5, nan, True or a string raise a ValueError naming ``field``.
    """
    if isinstance(value, sp.Basic) and not value.is_number:
        if not isinstance(value, sp.Expr) or value.is_positive is False:
            raise ValueError(f"{field}: must be a positive integer or a symbol, got {value}")
        return value
    if isinstance(value, sp.Integer):
        value = int(value)
    return sp.Integer(positive_int(field, value))


def positive_value(field: str, value: object) -> sp.Expr:
    """A size to substitute: a finite positive number, or a SymPy expression that may be positive."""
    if isinstance(value, bool) or not isinstance(value, (int, float, sp.Basic)):
        raise ValueError(f"{field}: must be a positive number or a SymPy expression, got {value!r}")
    expr = sp.sympify(value)
    if expr.is_number:
        if not (expr.is_extended_real and expr.is_finite and expr.is_positive):
            raise ValueError(f"{field}: must be a finite positive number, got {value!r}")
    elif not isinstance(expr, sp.Expr) or expr.is_positive is False:
        raise ValueError(f"{field}: must be a positive number or expression, got {value!r}")
    return expr


def exact_count(field: str, what: str, value: int | float, largest: int = MAX_SIZE) -> None:
    """ValueError naming ``field`` unless the derived count ``value`` is at most ``largest`` (2^53).

    Past 2^53 a float (numpy's sweeps, the web page) no longer holds every integer, and int64
    columns overflow soon after: the inputs that make such a count are refused before any work.
    """
    if not value <= largest:
        bound = f"2^{largest.bit_length() - 1}" if largest & (largest - 1) == 0 else str(largest)
        raise ValueError(f"{field}: {what} would pass {bound} "
                         "(every derived count must stay exact in a float)")


def flag(field: str, value: object) -> bool:
    """``value`` if it is a bool (True/False), else ValueError naming ``field``."""
    if not isinstance(value, bool):
        raise ValueError(f"{field}: must be True or False, got {value!r}")
    return value


def zero_stage(field: str, value: object) -> int:
    """A ZeRO stage 0-3 (an int, not a bool), else ValueError naming ``field``."""
    if isinstance(value, bool) or value not in (0, 1, 2, 3):
        raise ValueError(f"{field}: must be 0, 1, 2 or 3, got {value!r}")
    return int(value)


def divides(divisor_field: str, divisor: int, dividend_field: str, dividend: int) -> None:
    """ValueError unless ``divisor`` divides ``dividend`` exactly."""
    if dividend % divisor:
        raise ValueError(
            f"{divisor_field}: {divisor} does not divide {dividend_field} = {dividend}"
        )


def choose(field: str, value: str, options: Mapping[str, T] | Iterable[str]) -> str:
    """``value`` if it names one of ``options``, else ValueError listing them."""
    names = list(options)
    if value not in names:
        raise ValueError(f"{field}: unknown {field} {value!r} (known: {', '.join(names)})")
    return value
