"""The article's numeric claims, each checked against derive's expressions.

A :class:`Claim` records what the article prints (section, the printed value,
its unit and its printed precision) and a function that derives the same
quantity from derive's tables and presets. :func:`evaluate` says whether the
printed value is what the derived value rounds to under the stated precision.
A claim that does not hold is reported with the derived value and, where an
alternative reading reproduces the printed number (a GB/GiB mix-up, say), that
reading; it is never adjusted. A claim whose derivation needs a module not yet
built (activations, FLOPs, budgets) is *pending*: recorded, not judged.

The claims themselves live in ``derive.claims_article`` (registered on import).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Union

import sympy as sp

from derive.units import BYTE_UNITS

Number = Union[int, Fraction, sp.Expr]

#: unit name -> how many base units (bytes, parameters, FLOP, seconds, 1) one of it holds.
UNITS: dict[str, Fraction] = {
    **{name: Fraction(size) for name, size in BYTE_UNITS.items()},
    "billion parameters": Fraction(10**9),
    "parameters": Fraction(1),
    "bytes/parameter": Fraction(1),
    "FLOP": Fraction(1),
    "GFLOP": Fraction(10**9),
    "FLOP/token": Fraction(1),
    "GFLOP/token": Fraction(10**9),
    "TFLOP/s": Fraction(10**12),
    "s": Fraction(1),
    "days": Fraction(1),
    "steps": Fraction(1),
    "tokens/s": Fraction(1),
    "cards": Fraction(1),
    "x": Fraction(1),
    "ratio": Fraction(1),
    "%": Fraction(1, 100),
}

#: Printed-precision conventions: how a derived value is turned into what would be printed.
PRECISIONS = ("exact", "decimals", "significant", "ceil", "floor", "at least")


@dataclass(frozen=True)
class Precision:
    """How the article rounded: ``kind`` (one of PRECISIONS) and ``digits`` where it applies."""

    kind: str
    digits: int = 0

    def __post_init__(self) -> None:
        if self.kind not in PRECISIONS:
            raise ValueError(f"precision: unknown kind {self.kind!r} (known: {', '.join(PRECISIONS)})")

    def printed(self, value: Fraction) -> str:
        """``value`` (in the claim's unit) as the article would print it."""
        if self.kind == "exact":
            return str(value)
        if self.kind == "decimals":
            return f"{float(value):.{self.digits}f}"
        if self.kind == "significant":
            return f"{float(f'{float(value):.{self.digits}g}'):g}"
        if self.kind == "ceil":
            return str(math.ceil(value))
        if self.kind == "at least":
            return f"{float(value):.6g}"
        return str(math.floor(value))

    def describe(self) -> str:
        """One phrase: 'exact', '2 decimals', '2 significant figures', 'rounded up' ..."""
        return {"exact": "exact", "decimals": f"{self.digits} decimals",
                "significant": f"{self.digits} significant figures", "ceil": "rounded up (ceil)",
                "floor": "rounded down (floor)", "at least": "a lower bound"}[self.kind]


EXACT = Precision("exact")


def decimals(digits: int) -> Precision:
    """Printed with ``digits`` digits after the point."""
    return Precision("decimals", digits)


def significant(digits: int) -> Precision:
    """Printed with ``digits`` significant figures."""
    return Precision("significant", digits)


CEIL = Precision("ceil")
AT_LEAST = Precision("at least")


@dataclass(frozen=True)
class Alternative:
    """A reading that reproduces the printed value when the claim does not hold (the why)."""

    reason: str
    derive: Callable[[], Number]


@dataclass(frozen=True)
class Claim:
    """One numeric claim of the article and how derive derives it (None = pending)."""

    id: str
    section: str
    text: str
    value: Number
    unit: str
    precision: Precision
    derive: Callable[[], Number] | None
    pending: str = ""
    alternative: Alternative | None = None
    note: str = ""

    @property
    def printed_value(self) -> str:
        """The claimed value as the article writes it."""
        if isinstance(self.value, float):
            return f"{self.value:g}"
        return sp.sstr(sp.sympify(self.value))

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unit: unknown unit {self.unit!r} (known: {', '.join(UNITS)})")
        if (self.derive is None) == (not self.pending):
            raise ValueError(f"pending: claim {self.id!r} needs a derivation or a pending note, not both")


@dataclass(frozen=True)
class Verdict:
    """The outcome of one claim: 'holds', 'does not hold' or 'pending'; ``reason`` says why (or the convention it holds under)."""

    claim: Claim
    status: str
    derived: Fraction | sp.Expr | None
    printed: str
    reason: str = ""


CLAIMS: dict[str, Claim] = {}


def claim(id: str, section: str, text: str, value: Number, unit: str, precision: Precision,
          derive: Callable[[], Number] | None = None, *, pending: str = "",
          alternative: Alternative | None = None, note: str = "") -> Claim:
    """Register one claim; an id may be used once."""
    if id in CLAIMS:
        raise ValueError(f"id: claim {id!r} is registered twice")
    entry = Claim(id, section, text, value, unit, precision, derive, pending, alternative, note)
    CLAIMS[id] = entry
    return entry


def _as_fraction(value: Number) -> Fraction:
    if isinstance(value, float):
        return Fraction(repr(value))  # the decimal the article prints, read exactly
    if isinstance(value, Fraction):
        return value
    value = sp.sympify(value)
    if not value.is_Rational:
        raise ValueError(f"value: not a rational number: {value}")
    return Fraction(int(value.p), int(value.q))


def _in_unit(value: Number, unit: str) -> Fraction:
    return _as_fraction(value) / UNITS[unit]


def _matches(entry: Claim, derived: Number) -> tuple[bool, Fraction | sp.Expr, str]:
    """(whether it holds, derived value in the claim's unit, derived value as printed)."""
    if entry.precision.kind == "exact" and sp.sympify(entry.value).free_symbols:
        derived_expr = sp.sympify(derived)
        holds = sp.expand(derived_expr - sp.sympify(entry.value)) == 0
        return holds, derived_expr, sp.sstr(derived_expr)
    scaled = _in_unit(derived, entry.unit)
    shown = entry.precision.printed(scaled)
    if entry.precision.kind == "at least":
        return scaled >= _as_fraction(entry.value), scaled, shown
    return shown == entry.precision.printed(_as_fraction(entry.value)), scaled, shown


def evaluate(entry: Claim) -> Verdict:
    """Derive the claim's quantity and compare it at the claim's printed precision."""
    if entry.derive is None:
        return Verdict(entry, "pending", None, "", entry.pending)
    holds, derived, shown = _matches(entry, entry.derive())
    if holds:
        return Verdict(entry, "holds", derived, shown, entry.note)
    reason = (f"derived {_show(derived)} {entry.unit} prints as {shown} at "
              f"{entry.precision.describe()}, the article prints {entry.printed_value}")
    if entry.alternative is not None:
        alt_holds, alt_value, _ = _matches(entry, entry.alternative.derive())
        verdict = "reproduces" if alt_holds else "does not reproduce"
        reason += f"; {entry.alternative.reason} {verdict} it ({_show(alt_value)})"
    if entry.note:
        reason += f"; {entry.note}"
    return Verdict(entry, "does not hold", derived, shown, reason)


def _show(value: Fraction | sp.Expr) -> str:
    if isinstance(value, Fraction):
        return f"{float(value):.6g}"
    return sp.sstr(value)


def all_claims() -> list[Claim]:
    """Every registered claim, after importing the article's claim table."""
    import derive.claims_article  # noqa: F401  (registers on import)

    return list(CLAIMS.values())


def evaluate_all() -> list[Verdict]:
    """Every claim's verdict, in registration order."""
    return [evaluate(entry) for entry in all_claims()]
