"""Numeric claims of published documents, each checked against derive's expressions.

A :class:`Claim` records what a document prints (the document, its section or
table, the printed value, its unit and how it was rounded) and a function that
derives the same quantity from derive's tables and presets. :func:`evaluate`
says whether the printed value is what the derived value rounds to. A claim
that does not hold is reported with the derived value and, where an
alternative reading reproduces the printed number (a GB/GiB mix-up, say), that
reading; it is never adjusted. A claim without a derivation is *pending*:
recorded, not judged. A paper's claim records in ``checked_against`` where its
printed value was read (a URL or repository/path); one without such a source is
*unconfirmed*: derive's value is shown, but no verdict about the paper is given.

Each submodule holds one document's claims and registers them on import (the
article in ``article``, each paper in a module named after its first author);
:func:`all_claims` imports every submodule, so adding a module adds a document.
"""
from __future__ import annotations

import importlib
import math
import pkgutil
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Union

import sympy as sp

from derive.expansion import expand
from derive.units import BYTE_UNITS

Number = Union[int, Fraction, sp.Expr]

#: unit name -> how many base units (bytes, parameters, FLOP, seconds, 1) one of it holds.
UNITS: dict[str, Fraction] = {
    **{name: Fraction(size) for name, size in BYTE_UNITS.items()},
    "billion parameters": Fraction(10**9),
    "parameters": Fraction(1),
    "elements": Fraction(1),
    "bytes/parameter": Fraction(1),
    "FLOP": Fraction(1),
    "GFLOP": Fraction(10**9),
    "ZFLOP": Fraction(10**21),
    "FLOP/token": Fraction(1),
    "GFLOP/token": Fraction(10**9),
    "TFLOP/token": Fraction(10**12),
    "PFLOP/s-days": Fraction(10**15 * 86400),
    "TFLOP/s": Fraction(10**12),
    "PFLOP/s": Fraction(10**15),
    "s": Fraction(1),
    "days": Fraction(1),
    "steps": Fraction(1),
    "tokens/s": Fraction(1),
    "cards": Fraction(1),
    "M tokens": Fraction(10**6),
    "x": Fraction(1),
    "ratio": Fraction(1),
    "%": Fraction(1, 100),
}

#: How a printed value was rounded: how a derived value is turned into what would be printed.
ROUNDINGS = ("exact", "decimals", "significant", "ceil", "floor", "at least")


@dataclass(frozen=True)
class Rounding:
    """How a document rounded: ``kind`` (one of ROUNDINGS) and ``digits`` where it applies."""

    kind: str
    digits: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ROUNDINGS:
            raise ValueError(f"rounding: unknown kind {self.kind!r} (known: {', '.join(ROUNDINGS)})")

    def printed(self, value: Fraction) -> str:
        """``value`` (in the claim's unit) as the document would print it."""
        if self.kind == "exact":
            return str(value)
        if self.kind == "decimals":
            return f"{float(_half_up(value, self.digits)):.{self.digits}f}"
        if self.kind == "significant":
            return f"{float(_half_up(value, self.digits - 1 - _exponent(value))):g}"
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


def _half_up(value: Fraction, digits: int) -> Fraction:
    """``value`` rounded to ``digits`` decimals (negative: tens, hundreds ...), ties away from zero, exactly."""
    scale = Fraction(10) ** digits
    magnitude = math.floor(abs(value) * scale + Fraction(1, 2)) / scale
    return magnitude if value >= 0 else -magnitude


def _exponent(value: Fraction) -> int:
    """The power of ten of ``value``'s leading digit, counted exactly (after rounding carries)."""
    if value == 0:
        return 0
    exponent = math.floor(math.log10(abs(value)))
    while Fraction(10) ** exponent > abs(value):
        exponent -= 1
    while Fraction(10) ** (exponent + 1) <= abs(value):
        exponent += 1
    return exponent


EXACT = Rounding("exact")


def decimals(digits: int) -> Rounding:
    """Printed with ``digits`` digits after the point."""
    return Rounding("decimals", digits)


def significant(digits: int) -> Rounding:
    """Printed with ``digits`` significant figures."""
    return Rounding("significant", digits)


CEIL = Rounding("ceil")
FLOOR = Rounding("floor")
AT_LEAST = Rounding("at least")


@dataclass(frozen=True)
class Alternative:
    """A reading that reproduces the printed value when the claim does not hold (the why)."""

    reason: str
    derive: Callable[[], Number]


@dataclass(frozen=True)
class Claim:
    """One numeric claim of a document and how derive derives it (None = pending)."""

    id: str
    section: str
    text: str
    value: Number
    unit: str
    rounding: Rounding
    derive: Callable[[], Number] | None
    pending: str = ""
    alternative: Alternative | None = None
    note: str = ""
    document: str = ""
    checked_against: str = ""

    @property
    def printed_value(self) -> str:
        """The claimed value as the document writes it."""
        if isinstance(self.value, float):
            if self.rounding.kind == "decimals":
                return f"{self.value:.{self.rounding.digits}f}"
            return f"{self.value:g}"
        return sp.sstr(sp.sympify(self.value))

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unit: unknown unit {self.unit!r} (known: {', '.join(UNITS)})")
        if (self.derive is None) == (not self.pending):
            raise ValueError(f"pending: claim {self.id!r} needs a derivation or a pending note, not both")


@dataclass(frozen=True)
class Verdict:
    """The outcome of one claim: 'holds', 'does not hold', 'unconfirmed' or 'pending'; ``reason`` says why (or the convention it holds under)."""

    claim: Claim
    status: str
    derived: Fraction | sp.Expr | None
    printed: str
    reason: str = ""

    def record(self) -> dict[str, object]:
        """A JSON-ready description of this verdict and its claim."""
        entry = self.claim
        return {"id": entry.id, "document": entry.document, "section": entry.section,
                "text": entry.text, "value": entry.printed_value, "unit": entry.unit,
                "rounding": entry.rounding.describe(), "status": self.status,
                "derived": None if self.derived is None else str(self.derived),
                "printed": self.printed, "reason": self.reason,
                "checked_against": entry.checked_against}


CLAIMS: dict[str, Claim] = {}
#: The source article's name as a document (derive.claims.article).
ARTICLE = "the article"


@dataclass(frozen=True)
class Document:
    """A document whose claims are checked: its name (first author and year), its source, and what is left out and why."""

    name: str
    source: str
    scope: str = ""

    def claim(self, id: str, section: str, text: str, value: Number, unit: str, rounding: Rounding,
              derive: Callable[[], Number] | None = None, *, pending: str = "",
              alternative: Alternative | None = None, note: str = "",
              checked_against: str = "") -> Claim:
        """Register one claim of this document (``checked_against``: where its printed value was read); an id may be used once."""
        if id in CLAIMS:
            raise ValueError(f"id: claim {id!r} is registered twice")
        entry = Claim(id, section, text, value, unit, rounding, derive, pending, alternative, note,
                      self.name, checked_against)
        CLAIMS[id] = entry
        return entry


#: Every document with claims, by name, in registration order.
DOCUMENTS: dict[str, Document] = {}


def document(name: str, source: str, scope: str = "") -> Document:
    """Register a document (once) and return it; its ``claim`` registers claims under its name."""
    if name in DOCUMENTS:
        raise ValueError(f"document: {name!r} is registered twice")
    DOCUMENTS[name] = Document(name, source, scope)
    return DOCUMENTS[name]


def _as_fraction(value: Number) -> Fraction:
    if isinstance(value, float):
        return Fraction(repr(value))  # the decimal the document prints, read exactly
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
    if entry.rounding.kind == "exact" and sp.sympify(entry.value).free_symbols:
        derived_expr = sp.sympify(derived)
        holds = expand(derived_expr - sp.sympify(entry.value)) == 0
        return holds, derived_expr, sp.sstr(derived_expr)
    scaled = _in_unit(derived, entry.unit)
    shown = entry.rounding.printed(scaled)
    if entry.rounding.kind == "at least":
        return scaled >= _as_fraction(entry.value), scaled, shown
    return shown == entry.rounding.printed(_as_fraction(entry.value)), scaled, shown


def evaluate(entry: Claim) -> Verdict:
    """Derive the claim's quantity and compare it at the claim's printed precision."""
    if entry.derive is None:
        return Verdict(entry, "pending", None, "", entry.pending)
    holds, derived, shown = _matches(entry, entry.derive())
    if not entry.checked_against and entry.document not in ("", ARTICLE):
        return Verdict(entry, "unconfirmed", derived, shown,
                       f"no verdict: the printed value {entry.printed_value} {entry.unit} was not "
                       f"confirmed against a copy of {entry.document}; derive's value prints as "
                       f"{shown}")
    if holds:
        return Verdict(entry, "holds", derived, shown, entry.note)
    reason = (f"derived {_show(derived)} {entry.unit} prints as {shown} at "
              f"{entry.rounding.describe()}, {entry.document} prints {entry.printed_value}")
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


def _load() -> None:
    """Import every document module (each registers its claims on import); ``_`` modules are helpers."""
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


def documents() -> list[str]:
    """The names of every document with claims: the article first, then the papers by author."""
    _load()
    return sorted(DOCUMENTS, key=lambda name: (name != ARTICLE, name))


def all_claims(document: str | None = None) -> list[Claim]:
    """Every registered claim (of ``document`` if given), document by document, each in its order."""
    names = documents()
    if document is not None and document not in DOCUMENTS:
        raise ValueError(f"document: unknown document {document!r} (known: {'; '.join(names)})")
    rank = {name: index for index, name in enumerate(names)}
    entries = sorted(CLAIMS.values(), key=lambda entry: rank.get(entry.document, len(rank)))
    return [entry for entry in entries if document is None or entry.document == document]


def evaluate_all(document: str | None = None) -> list[Verdict]:
    """Every claim's verdict (of ``document`` if given), in registration order."""
    return [evaluate(entry) for entry in all_claims(document)]
