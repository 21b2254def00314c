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


def to_unit(value: sp.Expr | int | float | Fraction, unit: str) -> float:
    """``value`` bytes expressed in ``unit`` (a key of BYTE_UNITS)."""
    if unit not in BYTE_UNITS:
        raise ValueError(f"unit: unknown unit {unit!r} (known: {', '.join(BYTE_UNITS)})")
    return float(value) / BYTE_UNITS[unit]


def decimal_unit(value: float) -> str:
    """The largest decimal unit (B ... TB) in which ``value`` bytes is at least 1."""
    unit = DECIMAL_STEPS[0]
    for step in DECIMAL_STEPS:
        if abs(value) >= BYTE_UNITS[step]:
            unit = step
    return unit


def format_bytes(value: sp.Expr | int | float, unit: str | None = None, digits: int = 2) -> str:
    """``value`` bytes as e.g. '128.48 GB'; decimal units unless ``unit`` says otherwise."""
    unit = unit or decimal_unit(float(value))
    return f"{to_unit(value, unit):.{digits}f} {unit}"
