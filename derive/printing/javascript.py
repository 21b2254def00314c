"""The page's calculator code: SymPy's JavaScript code printer (sympy/printing/jscode.py) subclassed."""
from __future__ import annotations

import sympy as sp
from sympy.printing.jscode import JavascriptCodePrinter

from derive.printing.cache import Cached
from derive.printing.once import PrintedOnce


class JavascriptPrinter(Cached, PrintedOnce, JavascriptCodePrinter):
    """SymPy's JavaScript printer; NaN (a figure that does not exist at these values) as NaN; a subtree the page's
    expressions share printed once (derive.printing.once)."""

    def _print_NaN(self, expr: sp.Expr) -> str:
        return "NaN"

    def _print_Factored(self, expr: sp.Expr) -> str:
        """A factored form (derive.printing.factored) as its plain product."""
        return self._print(expr.doit())


_PRINTER = JavascriptPrinter()


def javascript(expr: sp.Expr) -> str:
    """``expr`` as a JavaScript function of its symbols (sorted by name), by SymPy's JS printer."""
    names = sorted(symbol.name for symbol in expr.free_symbols)
    return f"function ({', '.join(names)}) {{ return {' '.join(_PRINTER.doprint(expr).split())}; }}"
