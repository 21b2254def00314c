"""SymPy's string form of an expression (``sp.sstr``), its text kept between runs (derive.printing.cache).

tables.json gives each expression of the sheet as SymPy's string; StrPrinter orders a sum's
terms afresh on every print, so the text is read back as the LaTeX is.
"""
from __future__ import annotations

import sympy as sp
from sympy.printing.str import StrPrinter

from derive.printing.cache import Cached


class TextPrinter(Cached, StrPrinter):
    """SymPy's StrPrinter with its default settings (what ``sp.sstr`` prints), the text kept."""


def text(expr: sp.Expr) -> str:
    """``sp.sstr(expr)``, read back when this checkout printed the same expression before."""
    return TextPrinter().doprint(expr)
