"""The sheet's LaTeX: SymPy's LatexPrinter subclassed for derive's notation (sympy/printing/latex.py)."""
from __future__ import annotations

from functools import lru_cache

import sympy as sp
from sympy.printing.latex import LatexPrinter

from derive.printing.cache import Cached
from derive.printing.factored import Factored
from derive.symbols import LATEX_NAMES, s


@lru_cache(maxsize=None)
def degree(term: sp.Expr) -> int:
    """Total degree of a term: numerator degree minus denominator degree (2N/d has degree 0)."""
    numerator, denominator = term.as_numer_denom()
    return sum(_poly_degree(side) * sign for side, sign in ((numerator, 1), (denominator, -1)))


def _poly_degree(expr: sp.Expr) -> int:
    """Total degree, with any non-polynomial factor (ceiling(V/128t), say) as a generator of its own.

    A monomial (rational coefficient times symbols to positive integer powers) is read off its
    exponents, as ``Poly`` reads it; anything else goes through ``Poly``.
    """
    if not expr.free_symbols:
        return 0
    exponents = [_monomial_exponent(factor) for factor in sp.Mul.make_args(expr)]
    if None not in exponents:
        return sum(exponents)
    return sp.Poly(expr).total_degree()


def _monomial_exponent(factor: sp.Expr) -> int | None:
    """The degree of one factor of a monomial: 0 for a rational, k for a symbol to the k; None for anything else."""
    if factor.is_Rational:
        return 0
    if factor.is_Symbol:
        return 1
    if factor.is_Pow and factor.base.is_Symbol and factor.exp.is_Integer and factor.exp > 0:
        return int(factor.exp)
    return None


def by_degree(term: sp.Expr) -> tuple[int, bool]:
    """Highest degree first (12Lh^2 + 13Lh + 2h, 2N + 14N/d, 6 + 12/d), fractions after polynomials."""
    return -degree(term), term.as_numer_denom()[1] != 1


def constants_first(term: sp.Expr) -> tuple[bool, bool, object]:
    """A coefficient as Korthikanti writes it: constants and s-free terms first, score (s) terms last (10 + 24/t + 5as/(ht))."""
    return term.has(s), term.as_numer_denom()[1] != 1, sp.default_sort_key(term)


#: The two ways the sheet orders the terms of a sum: whole expressions, and coefficients per s b h.
TERM_ORDERS = {"degree": by_degree, "constants-first": constants_first}


class SheetLatexPrinter(Cached, LatexPrinter):
    """Symbols in the sheet's names (N_{\\mathrm{GEMM}}); the terms of a sum in one of :data:`TERM_ORDERS`."""

    def __init__(self, terms: str = "degree") -> None:
        super().__init__()
        self.terms = terms
        self.term_order = TERM_ORDERS[terms]

    def cache_tag(self) -> str:
        """The class, settings and term order (derive.printing.cache)."""
        return f"{super().cache_tag()} {self.terms}"

    def _print_Symbol(self, expr: sp.Symbol, style: str = "plain") -> str:
        name = LATEX_NAMES.get(expr)
        if name is None and len(expr.name) > 1 and expr.name.isalpha():
            return rf"\mathrm{{{expr.name}}}"      # MFU, HFU: an abbreviation, set upright
        return name if name is not None else super()._print_Symbol(expr, style)

    def _as_ordered_terms(self, expr: sp.Expr, order: str | None = None) -> list[sp.Expr]:
        """The terms of a sum in this printer's order (SymPy's order breaks ties)."""
        terms = super()._as_ordered_terms(expr, order=order)
        if not isinstance(expr, sp.Add):
            return terms
        return sorted(terms, key=self.term_order)

    def _print_Factored(self, expr: Factored) -> str:
        """factor(coefficient) as Korthikanti writes it: s b h \\left(34 + \\frac{5 a s}{h}\\right), 2 s b h for one term.

        A sum inside the parentheses goes constants first (10 + 24/t + 5as/(ht)), whatever this printer's order.
        """
        product = " ".join(self._print(part) for part in expr.factor)
        coefficient = expr.coefficient
        if isinstance(coefficient, sp.Add):
            return rf"{product} \left({_PRINTERS['constants-first']._print(coefficient)}\right)"
        if coefficient == 1:
            return product
        space = " " if coefficient.is_Integer else r"\, "
        return f"{self._print(coefficient)}{space}{product}"


_PRINTERS = {name: SheetLatexPrinter(name) for name in TERM_ORDERS}


def tex(expr: sp.Expr | int, terms: str = "degree") -> str:
    """LaTeX of ``expr`` in the sheet's notation, sums in the ``terms`` order."""
    return _latex(sp.sympify(expr), terms)


@lru_cache(maxsize=None)
def _latex(expr: sp.Expr, terms: str) -> str:
    return _PRINTERS[terms].doprint(expr)


def tex_equation(symbol: sp.Expr, value: sp.Expr) -> str:
    """``symbol = value`` in the sheet's notation (an identity's substitution)."""
    return f"{tex(symbol)} = {tex(value)}"
