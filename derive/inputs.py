"""Checks on user-supplied sizes and names: bad input is a ValueError naming the field."""
from __future__ import annotations

from typing import Iterable, Mapping, TypeVar

T = TypeVar("T")


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
