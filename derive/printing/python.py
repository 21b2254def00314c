"""SymPy expressions turned once into Python code: exact (int and Fraction) or vectorised (numpy).

Both printers put an expression over one common denominator (``sp.together``)
before printing, so a rational expression costs one division, and print a
ceiling or floor of a ratio as integer floor division, so sizes stay
integers. ``exact_function`` prints Python (ints and ``fractions.Fraction``,
never a float); ``numpy_function`` prints numpy (Min/Max elementwise,
Piecewise as nested ``where``). Both go through ``sympy.lambdify``.
"""
from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Callable

import numpy as np
import sympy as sp
from sympy.printing.numpy import NumPyPrinter
from sympy.printing.pycode import PythonCodePrinter

from derive.printing.cache import Cached


@lru_cache(maxsize=4096)
def ratio(expr: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """(numerator, denominator) of ``expr`` over one common denominator.

    Branches of a Piecewise, Min or Max (and the sums and products holding
    them) go over the least common multiple of their denominators, which
    derive's positive symbols keep positive.
    """
    expr = sp.sympify(expr)
    if expr.is_Rational:
        return sp.Integer(expr.p), sp.Integer(expr.q)
    if isinstance(expr, (sp.Piecewise, sp.Min, sp.Max, sp.Add)):
        pieces = expr.args if isinstance(expr, sp.Piecewise) else [(arg, None) for arg in expr.args]
        parts = [(ratio(value), condition) for value, condition in pieces]
        common = sp.lcm([denominator for (_, denominator), _ in parts])
        scaled = [(numerator * _quotient(common, denominator), condition)
                  for (numerator, denominator), condition in parts]
        if isinstance(expr, sp.Piecewise):
            return sp.Piecewise(*scaled, evaluate=False), common
        return expr.func(*(value for value, _ in scaled), evaluate=False), common
    if expr.is_Mul:
        parts = [ratio(arg) for arg in expr.args]
        return sp.Mul(*(n for n, _ in parts)), sp.Mul(*(d for _, d in parts))
    if expr.is_Pow and expr.exp.is_Integer:
        numerator, denominator = ratio(expr.base)
        if expr.exp < 0:
            numerator, denominator = denominator, numerator
        return numerator ** abs(expr.exp), denominator ** abs(expr.exp)
    return expr, sp.Integer(1)


def _quotient(common: sp.Expr, denominator: sp.Expr) -> sp.Expr:
    """common / denominator, a polynomial: monomials cancel as they are built, the rest by ``cancel``."""
    quotient = common / denominator
    return quotient if sp.fraction(quotient)[1] == 1 else sp.cancel(quotient)


class _RatioPrinting:
    """Division, ceilings and floors printed as integer arithmetic over one common denominator."""

    def _divide(self, numerator: str, denominator: str) -> str:
        raise NotImplementedError

    def _minimum(self, args: list[str]) -> str:
        raise NotImplementedError

    def _maximum(self, args: list[str]) -> str:
        raise NotImplementedError

    def _where(self, condition: str, then: str, otherwise: str) -> str:
        raise NotImplementedError

    def _ratio_code(self, expr: sp.Expr) -> str:
        numerator, denominator = ratio(expr)
        if denominator == 1:
            return self._print(numerator)
        return self._divide(self._print(numerator), self._print(denominator))

    def doprint(self, expr, assign_to=None):
        """The code of ``expr`` over its common denominator (SymPy's printer entry point)."""
        if assign_to is None and isinstance(expr, sp.Expr):
            return self._ratio_code(expr)
        return super().doprint(expr, assign_to)

    def _print_Mul(self, expr: sp.Mul) -> str:
        numerator, denominator = sp.fraction(expr)
        if denominator == 1:
            return super()._print_Mul(expr)
        return self._divide(self._print(numerator), self._print(denominator))

    def _print_Pow(self, expr: sp.Pow, rational: bool = False) -> str:
        if expr.exp.is_Integer and expr.exp < 0:
            return self._divide("1", self._print(expr.base ** -expr.exp))
        return super()._print_Pow(expr, rational=rational)

    def _print_ceiling(self, expr: sp.Expr) -> str:
        numerator, denominator = ratio(expr.args[0])
        return f"(-((-({self._print(numerator)})) // ({self._print(denominator)})))"

    def _print_floor(self, expr: sp.Expr) -> str:
        numerator, denominator = ratio(expr.args[0])
        return f"(({self._print(numerator)}) // ({self._print(denominator)}))"

    def _print_Factored(self, expr: sp.Expr) -> str:
        """A factored form (derive.printing.factored) as its plain product, over one denominator."""
        return self._ratio_code(expr.doit())

    def _print_Min(self, expr: sp.Expr) -> str:
        return self._minimum([self._ratio_code(arg) for arg in expr.args])

    def _print_Max(self, expr: sp.Expr) -> str:
        return self._maximum([self._ratio_code(arg) for arg in expr.args])

    def _print_Piecewise(self, expr: sp.Piecewise) -> str:
        *branches, (last, last_condition) = expr.args
        if last_condition != sp.true:
            raise ValueError(f"expr: a Piecewise without a final 'otherwise' branch: {expr}")
        code = self._ratio_code(last)
        for value, condition in reversed(branches):
            code = self._where(self._print(condition), self._ratio_code(value), code)
        return code


class ExactPrinter(Cached, _RatioPrinting, PythonCodePrinter):
    """Python code with ints and ``Fraction`` only: the exact value of a rational expression."""

    def _divide(self, numerator: str, denominator: str) -> str:
        return f"Fraction({numerator}, {denominator})"

    def _minimum(self, args: list[str]) -> str:
        return f"min({', '.join(args)})"

    def _maximum(self, args: list[str]) -> str:
        return f"max({', '.join(args)})"

    def _where(self, condition: str, then: str, otherwise: str) -> str:
        return f"(({then}) if ({condition}) else ({otherwise}))"

    def _print_Rational(self, expr: sp.Rational) -> str:
        return self._divide(str(expr.p), str(expr.q))


class VectorPrinter(Cached, _RatioPrinting, NumPyPrinter):
    """numpy code: true division once at the end, integer floor division for ceilings."""

    def _divide(self, numerator: str, denominator: str) -> str:
        return f"(({numerator}) / ({denominator}))"

    def _minimum(self, args: list[str]) -> str:
        return self._fold("numpy.minimum", args)

    def _maximum(self, args: list[str]) -> str:
        return self._fold("numpy.maximum", args)

    @staticmethod
    def _fold(function: str, args: list[str]) -> str:
        code = args[0]
        for arg in args[1:]:
            code = f"{function}({code}, {arg})"
        return code

    def _where(self, condition: str, then: str, otherwise: str) -> str:
        return f"numpy.where({condition}, {then}, {otherwise})"

    def _print_Rational(self, expr: sp.Rational) -> str:
        return self._divide(str(expr.p), str(expr.q))


#: The settings lambdify gives the printer it makes for a module name (sympy/utilities/lambdify.py, ``lambdify``).
LAMBDIFY_SETTINGS = {"fully_qualified_modules": False, "inline": True, "allow_unknown_functions": True,
                     "user_functions": {}}


class MathPrinter(Cached, PythonCodePrinter):
    """The printer ``lambdify(..., "math")`` makes, its text kept (derive.printing.cache)."""


class NumPyCodePrinter(Cached, NumPyPrinter):
    """The printer ``lambdify(..., "numpy")`` makes, its text kept (derive.printing.cache)."""


def arguments(expr: sp.Expr) -> tuple[sp.Symbol, ...]:
    """The free symbols of ``expr``, sorted by name (the compiled function's keywords)."""
    return tuple(sorted(sp.sympify(expr).free_symbols, key=lambda symbol: symbol.name))


def exact_function(expr: sp.Expr) -> Callable[..., int | Fraction]:
    """``expr`` as Python of its free symbols (positional, sorted by name) returning int or Fraction."""
    return sp.lambdify(arguments(expr), expr, modules=[{"Fraction": Fraction, "math": math}],
                       printer=ExactPrinter({"fully_qualified_modules": False}), docstring_limit=0)


#: Parts computed once each, before the expression that uses them.
SHARED = (sp.ceiling, sp.floor, sp.Min, sp.Max, sp.Piecewise)


def shared_parts(expr: sp.Expr) -> tuple[list[tuple[sp.Symbol, sp.Expr]], sp.Expr]:
    """lambdify's ``cse`` hook: every ceiling, floor, Min, Max and Piecewise once, innermost first."""
    expr = sp.sympify(expr)
    replacements, named = _name_parts([expr], SHARED, "shared_")
    return replacements, _named(expr, named)


def _name_parts(exprs: list[sp.Expr], kinds: tuple[type, ...],
                prefix: str) -> tuple[list[tuple[sp.Symbol, sp.Expr]], dict[sp.Expr, sp.Symbol]]:
    """Every part of ``exprs`` of ``kinds`` named once, innermost first: (name, part in earlier names) pairs
    and the part -> name map. Children come before their parents: one walk, no sorting by size."""
    ordered = list(dict.fromkeys(part for expr in exprs for part in sp.postorder_traversal(expr)
                                 if isinstance(part, kinds)))
    names = sp.numbered_symbols(prefix, integer=True, positive=True)
    replacements: list[tuple[sp.Symbol, sp.Expr]] = []
    named: dict[sp.Expr, sp.Symbol] = {}
    for part in ordered:
        symbol = next(names)
        replacements.append((symbol, _named(part, named)))
        named[part] = symbol
    return replacements, named


def _named(expr: sp.Expr, named: dict[sp.Expr, sp.Symbol]) -> sp.Expr:
    """``expr.xreplace(named)``, Min and Max rebuilt unevaluated: their arguments are already distinct
    and in order, and re-evaluating them searches for comparable pairs (the bulk of code generation)."""
    if expr in named:
        return named[expr]
    if not expr.args:
        return expr
    args = tuple(_named(arg, named) for arg in expr.args)
    if args == expr.args:
        return expr
    if isinstance(expr, (sp.Min, sp.Max)):
        return expr.func(*args, evaluate=False)
    return expr.func(*args)


@lru_cache(maxsize=1024)
def numpy_function(expr: sp.Expr) -> Callable[..., np.ndarray]:
    """``expr`` as numpy of its free symbols (positional, sorted by name), shared parts computed once.

    Generated once per distinct expression in a process (the planners compile the same accounts
    for several models): the function is pure, so equal expressions share it.
    """
    return sp.lambdify(arguments(expr), expr, modules=[{"numpy": np}],
                       printer=VectorPrinter(), docstring_limit=0, cse=shared_parts)


#: Parts named before SymPy's ``cse`` runs over several expressions: their integer divisions printed as they are.
DIVISIONS = (sp.ceiling, sp.floor)


def joint_parts(exprs: tuple[sp.Expr, ...]) -> tuple[list[tuple[sp.Symbol, sp.Expr]], list[sp.Expr]]:
    """lambdify's ``cse`` hook for several polynomial expressions at once (ratio numerators and denominators).

    Every ceiling and floor is named once, innermost first (its argument keeps its ratio, printed as integer
    floor division); SymPy's ``cse`` then names every sub-expression the expressions share, so each is
    computed once for all of them. Should ``cse`` leave a division outside a ceiling or floor (a reciprocal
    would print as a float), the expressions keep only the named ceilings and floors.
    """
    exprs = [sp.sympify(expr) for expr in exprs]
    divisions, named = _name_parts(exprs, DIVISIONS, "division_")
    reduced = [_named(expr, named) for expr in exprs]
    common, shared = sp.cse(reduced, symbols=sp.numbered_symbols("common_"))
    if all(_integral(part) for part in (*(value for _, value in common), *shared)):
        return [*divisions, *common], list(shared)
    return divisions, reduced


def _integral(expr: sp.Expr) -> bool:
    """Whether ``expr`` has integer coefficients and positive integer powers only (no division to print)."""
    return all(part.is_Integer if part.is_Rational else part.exp.is_Integer and part.exp > 0
               for part in sp.preorder_traversal(expr) if part.is_Rational or part.is_Pow)


@lru_cache(maxsize=256)
def numpy_functions(exprs: tuple[sp.Expr, ...]) -> Callable[..., tuple[np.ndarray, ...]]:
    """Polynomial ``exprs`` (ceilings, floors, Min, Max, Piecewise allowed) as one numpy function returning each.

    Positional arguments: the free symbols of all of them, sorted by name; the parts they share
    (:func:`joint_parts`) computed once.
    """
    return sp.lambdify(arguments(sp.Tuple(*exprs)), tuple(exprs), modules=[{"numpy": np}],
                       printer=VectorPrinter(), docstring_limit=0, cse=joint_parts)


def upper_bound(expr: sp.Expr) -> sp.Expr:
    """An expression >= |every integer intermediate| of ``expr``'s code when every symbol is >= 1.

    Coefficients taken by absolute value, reciprocals bounded by 1, a ceiling
    of n/d by n + 1, Min, Max and Piecewise by the sum of their parts.
    """
    expr = sp.sympify(expr)
    if expr.is_Symbol:
        return expr
    if expr.is_Number:
        return abs(expr)
    if expr.is_Add or isinstance(expr, (sp.Min, sp.Max)):
        return sp.Add(*(upper_bound(arg) for arg in expr.args))
    if expr.is_Mul:
        return sp.Mul(*(upper_bound(arg) for arg in expr.args))
    if expr.is_Pow:
        if expr.exp.is_Integer and expr.exp > 0:
            return upper_bound(expr.base) ** expr.exp
        return sp.Integer(1) if expr.exp.is_negative else upper_bound(expr.base) ** expr.exp
    if isinstance(expr, (sp.ceiling, sp.floor)):
        numerator, _ = ratio(expr.args[0])
        return upper_bound(numerator) + 1
    if isinstance(expr, sp.Piecewise):
        return sp.Add(*(upper_bound(value) for value, _ in expr.args))
    raise ValueError(f"expr: cannot bound {type(expr).__name__} in {expr}")
