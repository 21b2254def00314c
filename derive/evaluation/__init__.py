"""One evaluator for the report, the sweeps, Megatron's estimators and the page: a symbol -> value map, three backends.

:func:`symbol_values` is the one substitution rule: a model's sizes (``Model.values``) and
further symbols given by name (``b=1``, ``d=8``), each name a symbol of ``derive.symbols``
and each value positive (``derive.inputs.positive_value``), else a ValueError naming it.
The backends take that map: :func:`substitute` (SymPy's ``xreplace``; an int stays an
Integer, a float enters by its exact binary value), :func:`exact_value` (the exact Python
code of ``derive.printing.python``: ints and Fractions, compiled once per expression) and
``derive.evaluation.vectorised.compile`` (numpy columns, int64 where exact). The web page
runs the JavaScript of the same expressions (``derive.printing.javascript``) at
:func:`by_name` of the same map. numpy loads only with the vectorised backend.
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Callable, Mapping

import sympy as sp

from derive.inputs import positive_value
from derive.symbols import BY_NAME


def symbol_values(sizes: Mapping[sp.Symbol, object], **extra: object) -> dict[sp.Symbol, object]:
    """``sizes`` with ``extra`` (symbol name -> positive value) added; ValueError naming an unknown symbol or a bad value."""
    unknown = sorted(set(extra) - set(BY_NAME))
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown symbol (known: {', '.join(sorted(BY_NAME))})")
    values = dict(sizes)
    values.update({BY_NAME[name]: positive_value(name, value) for name, value in extra.items()})
    return values


def by_name(values: Mapping[sp.Symbol, object]) -> dict[str, object]:
    """The map keyed by symbol name: the keywords of the compiled backends and the page's values."""
    return {symbol.name: value for symbol, value in values.items()}


def exact_number(value: object) -> sp.Expr:
    """A number as an exact SymPy number (a float by its exact binary value)."""
    return sp.Rational(value) if isinstance(value, float) else sp.sympify(value)


def substitute(expr: sp.Expr, values: Mapping[sp.Symbol, object]) -> sp.Expr:
    """``expr`` with ``values`` substituted exactly (SymPy's ``xreplace``; symbols not in ``values`` stay)."""
    return sp.sympify(expr).xreplace({symbol: sp.Rational(value) if isinstance(value, float) else sp.sympify(value)
                                      for symbol, value in values.items()})   # exact_number, inlined: the hot path


@lru_cache(maxsize=None)
def _exact_code(expr: sp.Expr) -> tuple[tuple[str, ...], Callable[..., int | Fraction]]:
    """The names of ``expr``'s symbols and its exact Python code (derive.printing.python.exact_function), made once."""
    from derive.printing.python import arguments, exact_function  # numpy loads with it: only when a number is asked for

    return tuple(symbol.name for symbol in arguments(expr)), exact_function(expr)


def exact_value(expr: sp.Expr, values: Mapping[str, int]) -> Fraction:
    """``expr`` at ``values`` (symbol name -> int) exactly, as :func:`substitute` would give it but compiled."""
    names, function = _exact_code(expr)
    try:
        result = function(*[values[name] for name in names])
    except KeyError as missing:
        raise ValueError(f"result: not a number after substitution, {missing} is not given") from None
    return result if type(result) is Fraction else Fraction(result)
