"""The page's generated functions: each distinct expression printed once, as JavaScript (a function) and LaTeX.

Many page models and layouts share an expression; :class:`PageFunctions` prints it once and
every figure that uses it refers to its function by index in the generated array.
"""
from __future__ import annotations

import sympy as sp

from derive.printing.javascript import javascript
from derive.printing.latex import tex


class PageFunctions:
    """Distinct expressions -> their function index, LaTeX and argument names; the script that lists the functions."""

    def __init__(self) -> None:
        self.functions: dict[str, int] = {}
        self.printed: dict[sp.Expr, dict[str, object]] = {}

    def __call__(self, expr: sp.Expr) -> dict[str, object]:
        """The figure's entry for ``expr``: its function's index, its LaTeX and its arguments (printed once)."""
        expr = sp.sympify(expr)
        if expr not in self.printed:
            self.printed[expr] = {"function": self.functions.setdefault(javascript(expr), len(self.functions)),
                                  "tex": tex(expr), "args": sorted(symbol.name for symbol in expr.free_symbols)}
        return dict(self.printed[expr])

    def script(self, comment: str, array: str) -> str:
        """``const ARRAY = [ ... ];`` of every distinct function, after a ``// comment`` line."""
        lines = [f"// {comment}", f"const {array} = ["]
        lines += [f"  {code}," for code in self.functions]
        lines.append("];")
        return "\n".join(lines) + "\n"
