"""Closed forms as the sheet's cells: factored forms (derive.printing.factored), coefficients constants first."""
from __future__ import annotations

import sympy as sp

from derive.printing.factored import SBH, factored
from derive.printing.latex import tex
from derive.render.sheet import Cell
from derive.symbols import H_KV, a, g, h


def with_h_kv(expr: sp.Expr) -> sp.Expr:
    """``expr`` with g/a written as h_kv/h (so 4g/a reads 4h_kv/h)."""
    return sp.expand(sp.sympify(expr).subs(g, H_KV * a / h))


def sum_tex(expr: sp.Expr) -> str:
    """A sum in the papers' order: 10 + 24/t + 5as/(ht) (the printer's constants-first order)."""
    return tex(sp.expand(expr), terms="constants-first")


def factored_cell(expr: sp.Expr, factor: tuple[sp.Symbol, ...] = SBH) -> Cell:
    """A closed form as factor(coefficient): LaTeX on the sheet, 's*b*h*(34 + 5*a*s/h)' in the JSON."""
    form = factored(expr, factor)
    return Cell(sp.sstr(form), tex(form), math=True)


def coefficient_cell(value: sp.Expr) -> Cell:
    """A coefficient: a sum in the papers' order, or an exact number with its decimal (105/2 = 52.5)."""
    value = sp.sympify(value)
    if not value.is_number:
        return Cell(sp.sstr(value), sum_tex(value), math=True)
    if value.is_Integer:
        return Cell(int(value), tex(value), math=True)
    return Cell(sp.sstr(value), f"{tex(value)} = {float(value):g}", math=True)


def monomial_text(expr: sp.Expr) -> str:
    """A monomial as plain text for figure labels: 2*a*s -> '2as', s**2 -> 's^2'."""
    number, rest = sp.sympify(expr).as_coeff_Mul()
    if rest == 1:
        return sp.sstr(number)
    parts = []
    for base, power in sorted(rest.as_powers_dict().items(), key=lambda item: sp.default_sort_key(item[0])):
        name = sp.sstr(base) if base.is_Symbol else f"({sp.sstr(base)})"
        parts.append(name if power == 1 else f"{name}^{sp.sstr(power)}")
    prefix = "" if number == 1 else sp.sstr(number)
    return prefix + "".join(parts)
