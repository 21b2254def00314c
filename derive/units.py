"""Byte and FLOP units. GB = 10^9 bytes, GiB = 2^30 bytes: never mixed silently (DESIGN rule 4)."""
from __future__ import annotations

from fractions import Fraction

import sympy as sp

#: unit name -> bytes.
BYTE_UNITS: dict[str, int] = {
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}

DECIMAL_STEPS: tuple[str, ...] = ("B", "KB", "MB", "GB", "TB")
#: Memory (states, activations, budgets, per-GPU bytes) is printed in these binary units; decimal
#: GB stays for link traffic, bandwidths (GB/s, the vendors' 10^9) and figures quoted from a source.
BINARY_STEPS: tuple[str, ...] = ("B", "KiB", "MiB", "GiB", "TiB")


def to_unit(value: sp.Expr | int | float | Fraction, unit: str) -> float:
    """``value`` bytes expressed in ``unit`` (a key of BYTE_UNITS)."""
    if unit not in BYTE_UNITS:
        raise ValueError(f"unit: unknown unit {unit!r} (known: {', '.join(BYTE_UNITS)})")
    return float(value) / BYTE_UNITS[unit]


def largest_unit(value: float, steps: tuple[str, ...] = DECIMAL_STEPS) -> str:
    """The largest unit of ``steps`` (decimal B ... TB unless told) in which ``value`` bytes is at least 1."""
    unit = steps[0]
    for step in steps:
        if abs(value) >= BYTE_UNITS[step]:
            unit = step
    return unit


#: Printed digits beyond which a scaled number is shown in scientific notation (no float noise).
FIXED_LIMIT = 10**6


def _fixed_or_scientific(number: float, digits: int) -> str:
    """``number`` with ``digits`` decimals, or in scientific notation when it is too long for that."""
    if abs(number) >= FIXED_LIMIT:
        return f"{number:.{max(digits, 2)}e}"
    return f"{number:.{digits}f}"


def format_bytes(value: sp.Expr | int | float, unit: str | None = None, digits: int = 2) -> str:
    """``value`` bytes as e.g. '128.48 GB'; decimal units unless ``unit`` says otherwise."""
    unit = unit or largest_unit(float(value))
    return f"{_fixed_or_scientific(to_unit(value, unit), digits)} {unit}"


def format_memory(value: sp.Expr | int | float, digits: int = 2) -> str:
    """Memory ``value`` bytes in the largest binary unit it fills ('131.42 GiB', '1.03 TiB')."""
    return format_bytes(value, largest_unit(float(value), BINARY_STEPS), digits)


#: Decimal prefixes of counts: parameters use the article's B (billion), FLOPs SI's G.
COUNT_PREFIXES: dict[str, tuple[tuple[str, int], ...]] = {
    "parameters": (("", 1), ("K", 10**3), ("M", 10**6), ("B", 10**9), ("T", 10**12)),
    "": (("", 1), ("K", 10**3), ("M", 10**6), ("G", 10**9), ("T", 10**12), ("P", 10**15)),
    "FLOP": (("", 1), ("K", 10**3), ("M", 10**6), ("G", 10**9), ("T", 10**12), ("P", 10**15),
             ("E", 10**18)),
}


def format_count(value: int | float, kind: str, digits: int = 2, below: float = 1) -> str:
    """``value`` in the smallest prefix of ``kind`` that brings it under ``below`` x 1000 ('70.55 B', '423 GFLOP').

    ``below`` = 10 keeps four digits before the point (2435 GFLOP rather than 2 TFLOP).
    """
    prefixes = COUNT_PREFIXES[kind]
    name, scale = prefixes[-1]
    for candidate, size in prefixes:
        if abs(value) < below * 1000 * size:
            name, scale = candidate, size
            break
    unit = "" if kind == "parameters" else kind
    return f"{_fixed_or_scientific(value / scale, digits)} {name}{unit}".rstrip()


#: Seconds in an hour and in a day (SI): the planner's and the sheet's days, predict's GPU-hours.
HOUR_SECONDS = 60 * 60
DAY_SECONDS = 24 * HOUR_SECONDS
#: Seconds in a Julian year (365.25 days); past LONGEST_YEARS a time is printed as a bound only.
YEAR_SECONDS = 365.25 * DAY_SECONDS
LONGEST_YEARS = 10**6


def format_seconds(value: float) -> str:
    """Seconds with two decimals ('4.65 s'), three significant digits when small, in years past 10^6 s.

    Past LONGEST_YEARS years only the bound is printed ('over 10^6 years'): no number nobody can read.
    """
    if 0 < abs(value) < 0.01:
        return f"{value:.3g} s"
    if abs(value) >= FIXED_LIMIT:
        years = abs(value) / YEAR_SECONDS
        if years >= LONGEST_YEARS:
            return f"over 10^{len(str(LONGEST_YEARS)) - 1} years"
        return f"{value:.2e} s ({years:.3g} years)"
    return f"{value:.2f} s"


def format_percent(fraction: float, digits: int = 3) -> str:
    """A fraction as a percentage with ``digits`` significant digits ('40%'); under 0.01 % only the bound."""
    if 0 < abs(fraction) < 1e-4:
        return "under 0.01%"
    return f"{fraction * 100:.{digits}g}%"
