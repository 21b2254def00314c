"""Each subtree printed once per printer: a mixin that remembers the text a printer gave each subexpression (issue 28).

The page's expressions share most of their subtrees (the same ledger rows, the same ceilings
under every flag value), and SymPy's printers print each occurrence again. A printer's text for
a subtree is a function of the subtree, the keyword arguments it is printed with (LaTeX's
``exp``) and the printer's settings, which do not change after ``__init__``, with two
exceptions this mixin leaves alone: a Float prints by how deep it sits (StrPrinter strips its
zeros only below the top), so a subtree holding one is printed every time; and a code printer
records what it cannot print or must declare (``_not_supported``, ``_number_symbols``) while
printing, so a subtree printed while either holds anything is printed every time too.
"""
from __future__ import annotations

import sympy as sp


class PrintedOnce:
    """Mixin for a SymPy printer: ``_print(expr)`` of a subtree it printed before (same keywords) returns the same text."""

    def _print(self, expr, **kwargs) -> str:
        if not isinstance(expr, sp.Basic):
            return super()._print(expr, **kwargs)
        try:
            key = (expr, tuple(sorted(kwargs.items())))
            text = self._printed_once.get(key)
        except AttributeError:  # the first subtree this printer prints
            self._printed_once: dict[tuple, str] = {}
            self._holds_float: dict[sp.Basic, bool] = {}
            text = None
        except TypeError:  # an unhashable keyword: printed every time
            return super()._print(expr, **kwargs)
        if text is not None:
            return text
        text = super()._print(expr, **kwargs)
        if not self._recorded() and not self._float_within(expr):
            self._printed_once[key] = text
        return text

    def _recorded(self) -> bool:
        """Whether this code printer's current ``doprint`` recorded an unsupported expression or a number constant (a
        subtree printed then may be what recorded it: kept only while nothing is recorded; never for LaTeX's)."""
        return bool(getattr(self, "_not_supported", None) or getattr(self, "_number_symbols", None))

    def _float_within(self, expr: sp.Basic) -> bool:
        """Whether ``expr`` holds a Float anywhere (each subtree looked at once)."""
        found = self._holds_float.get(expr)
        if found is None:
            found = isinstance(expr, sp.Float) or any(self._float_within(arg) for arg in expr.args
                                                      if isinstance(arg, sp.Basic))
            self._holds_float[expr] = found
        return found
