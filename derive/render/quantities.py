"""Numeric cells of the sheet: decimals, percentages, FLOP and time units."""
from __future__ import annotations

import sympy as sp

from derive.render.sheet import Cell
from derive.units import DAY_SECONDS

#: FLOP units: name -> FLOPs (decimal, like GB).
FLOP_UNITS: dict[str, int] = {"FLOP": 1, "GFLOP": 10**9, "TFLOP": 10**12}


def json_number(value: object) -> int | float | str:
    """An exact integer stays an int; a SymPy rational is its string (3/2); anything else a float."""
    if isinstance(value, sp.Basic):
        if value.is_Integer:
            return int(value)
        if value.is_Rational:
            return sp.sstr(value)
        return float(value)
    if isinstance(value, int):
        return value
    return float(value)


def number_cell(value: object, digits: int = 2, unit: str = "", scale: float = 1) -> Cell:
    """``value`` / ``scale`` printed with ``digits`` decimals and thousands separators, then ``unit``; JSON: ``value``."""
    text = f"{float(value) / scale:,.{digits}f}"
    return Cell(json_number(value), f"{text} {unit}" if unit else text)


def flop_cell(value: object, unit: str = "GFLOP", digits: int = 0) -> Cell:
    """FLOPs printed in ``unit`` (GFLOP = 10^9 FLOP); JSON: FLOPs."""
    return number_cell(value, digits, unit, FLOP_UNITS[unit])


def percent_cell(value: object, digits: int = 1) -> Cell:
    """A fraction printed as a percentage ('41.3 %'); JSON: the fraction."""
    return number_cell(value, digits, "%", 0.01)


def seconds_cell(value: object, digits: int = 2) -> Cell:
    """Seconds printed as '1.86 s'; JSON: seconds."""
    return number_cell(value, digits, "s")


def days_cell(seconds: object, digits: int = 0) -> Cell:
    """Seconds printed in days ('193 days'); JSON: seconds."""
    return number_cell(seconds, digits, "days", DAY_SECONDS)


def blank_cell() -> Cell:
    """An empty cell (null in the JSON)."""
    return Cell(None, "")
