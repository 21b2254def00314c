"""An unevaluated factored form, factor(coefficient): sbh(34 + 5as/h) as Korthikanti et al. 2022 write Table 2.

:class:`Factored` keeps the factor and its coefficient apart, so each printer
of :mod:`derive.printing` prints it once: LaTeX as the paper writes it,
Python, numpy and JavaScript as the plain product; ``doit()`` multiplies.
"""
from __future__ import annotations

from typing import Iterable

import sympy as sp
from sympy.printing.precedence import PRECEDENCE

from derive.symbols import b, h, s

#: Korthikanti et al. 2022 write every activation form per sbh.
SBH: tuple[sp.Symbol, ...] = (s, b, h)


def coefficient(expr: sp.Expr, factor: tuple[sp.Symbol, ...] = SBH) -> sp.Expr:
    """``expr`` divided by the product of ``factor``, expanded (34 + 5as/h for the GPT layer)."""
    return sp.expand(sp.sympify(expr) / sp.Mul(*factor))


class Factored(sp.Expr):
    """factor × coefficient, unevaluated: Factored((s, b, h), 34 + 5as/h); ``doit()`` gives the product."""

    is_commutative = True
    #: printed as a product wherever it sits in a larger expression
    precedence = PRECEDENCE["Mul"]

    def __new__(cls, factor: Iterable[sp.Expr], coefficient: sp.Expr) -> Factored:
        factor = sp.Tuple(*factor)
        if not factor:
            raise ValueError("factor: a factored form needs at least one factor")
        return super().__new__(cls, factor, sp.sympify(coefficient))

    @property
    def factor(self) -> tuple[sp.Expr, ...]:
        """The factor's terms in the order printed (s, b, h)."""
        return tuple(self.args[0])

    @property
    def coefficient(self) -> sp.Expr:
        """What multiplies the factor (34 + 5as/h)."""
        return self.args[1]

    def doit(self, **hints) -> sp.Expr:
        """The product factor × coefficient, evaluated."""
        args = [arg.doit(**hints) for arg in self.args] if hints.get("deep", True) else self.args
        return sp.Mul(*args[0]) * args[1]

    def _eval_evalf(self, prec: int) -> sp.Expr:
        return self.doit()._evalf(prec)

    def _sympystr(self, printer) -> str:
        """Plain text, the product written out: 's*b*h*(34 + 5*a*s/h)' (formulas/tables.json)."""
        return "*".join(printer._print(part) for part in self.factor) + f"*({printer._print(self.coefficient)})"


def factored(expr: sp.Expr, factor: tuple[sp.Symbol, ...] = SBH) -> Factored:
    """``expr`` as factor(coefficient(expr)): 34sbh + 5as^2b as Factored((s, b, h), 34 + 5as/h)."""
    return Factored(factor, coefficient(expr, factor))
