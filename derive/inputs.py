"""Checks on user-supplied sizes and names: bad input is a ValueError naming the field."""
from __future__ import annotations

import math
from typing import Iterable, Mapping, TypeVar

import sympy as sp

T = TypeVar("T")

#: The largest size derive reads from a user (an option or a config field): 2^53, the last
#: integer a float holds exactly, so the web page's float reading of a size is exact too.
MAX_SIZE = 2**53


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
