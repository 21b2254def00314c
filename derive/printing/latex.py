"""The sheet's LaTeX: SymPy's LatexPrinter subclassed for derive's notation (sympy/printing/latex.py)."""
from __future__ import annotations

from functools import lru_cache

import sympy as sp
from sympy.printing.latex import LatexPrinter

from derive.printing.cache import Cached
from derive.printing.factored import Factored
from derive.printing.once import PrintedOnce
from derive.symbols import LATEX_NAMES, s


@lru_cache(maxsize=None)
def degree(term: sp.Expr) -> int:
    """Total degree of a term: numerator degree minus denominator degree (2N/d has degree 0)."""
    numerator, denominator = term.as_numer_denom()
    return sum(_poly_degree(side) * sign for side, sign in ((numerator, 1), (denominator, -1)))


def _poly_degree(expr: sp.Expr) -> int:
    """Total degree, with any non-polynomial factor (ceiling(V/128t), say) as a generator of its own.

    A product of monomials and sums of monomials (4m(bchst - bchs)) is read off its factors, as
    ``Poly`` reads it expanded (the degree of a product is the sum of its factors' degrees; a sum of
    distinct monomials has its highest one's); anything else goes through ``Poly``.
    """
    if not expr.free_symbols:
        return 0
    found = _product_degree(expr)
    return found if found is not None else sp.Poly(expr).total_degree()


def _product_degree(expr: sp.Expr) -> int | None:
    """The degree of a product of monomials and sums of monomials (to positive integer powers), else None."""
    total = 0
    for factor in sp.Mul.make_args(expr):
        power = 1
        if factor.is_Pow and factor.base.is_Add and factor.exp.is_Integer and factor.exp > 0:
            factor, power = factor.base, int(factor.exp)
        if factor.is_Add:
            found = _sum_degree(factor)
            if found is None:
                return None
            total += power * found
            continue
        exponent = 1 if _rounded_laurent(factor) else _monomial_exponent(factor)
        if exponent is None:
            return None
        total += exponent
    return total


def _rounded_laurent(factor: sp.Expr) -> bool:
    """Whether ``factor`` is ceiling or floor of a sum of monomials (negative powers too): one generator to ``Poly``.

    Its argument is already expanded, so ``Poly``'s ``expand`` would only build it again.
    """
    if not isinstance(factor, (sp.ceiling, sp.floor)) or not factor.free_symbols:
        return False
    return all(side.is_Rational or side.is_Symbol or (side.is_Pow and side.base.is_Symbol and side.exp.is_Integer)
               for term in sp.Add.make_args(factor.args[0]) for side in sp.Mul.make_args(term))


def _sum_degree(expr: sp.Add) -> int | None:
    """The highest degree of the terms when nothing can cancel there, else None.

    Distinct monomials cannot cancel (SymPy collects equal ones); nor can a single term of the
    highest degree (a product's leading part is the product of its factors' leading parts).
    """
    monomials = all(_monomial_exponent(side) is not None for term in expr.args for side in sp.Mul.make_args(term))
    degrees = [_product_degree(term) for term in expr.args]
    if None in degrees:
        return None
    top = max(degrees)
    return top if monomials or degrees.count(top) == 1 else None


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


class SheetLatexPrinter(Cached, PrintedOnce, LatexPrinter):
    """Symbols in the sheet's names (N_{\\mathrm{GEMM}}); the terms of a sum in one of :data:`TERM_ORDERS`; a subtree
    printed once (derive.printing.once)."""

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
