"""The vectorised backend of derive.evaluation: one numpy function of keyword arrays per expression.

:func:`compile` turns a derive expression into a vectorised function of keyword
arrays named by derive's symbols (``s``, ``b``, ``h``, ``t``, ``p`` ...), once
per expression. With integer inputs it runs in int64 whenever an upper bound
on every intermediate (``derive.printing.python.upper_bound`` at the inputs' maxima)
fits, so sizes stay exact integers and a rational account is one correctly
rounded division; otherwise it runs in float64.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np
import sympy as sp

from derive.printing.python import LAMBDIFY_SETTINGS, MathPrinter, arguments, numpy_function, ratio, upper_bound

#: int64 evaluation only when every intermediate is below this (a margin under 2^63).
INT64_LIMIT = 2**62
#: From this many configurations on, integer scalars are folded into a specialised compile
#: (about 0.1 s once per expression and scalars; fewer array operations on every call).
FOLD_AT = 100_000


@dataclass(frozen=True)
class Compiled:
    """A derive expression compiled once: call it with keyword arrays named by its symbols."""

    expr: sp.Expr
    names: tuple[str, ...]
    numerator: Callable[..., np.ndarray]
    denominator: Callable[..., np.ndarray] | None
    bound: Callable[..., int]
    #: Names of symbols declared nonnegative (not positive): 0 is one of their values.
    nonnegative: frozenset[str] = frozenset()

    def __call__(self, **values: object) -> np.ndarray:
        """The expression at ``values`` (broadcast arrays): int64 where exact and whole, else float64."""
        missing = [name for name in self.names if name not in values]
        if missing:
            raise ValueError(f"{missing[0]}: needed (the expression's symbols: {', '.join(self.names)})")
        arrays = [_positive_array(name, values[name], name in self.nonnegative) for name in self.names]
        shape = np.broadcast_shapes(*(array.shape for array in arrays))
        scalars = tuple((name, int(array)) for name, array in zip(self.names, arrays)
                        if array.ndim == 0 and array.dtype.kind in "iu")
        if scalars and len(scalars) < len(self.names) and np.prod(shape) >= FOLD_AT:
            folded = _folded(self.expr, scalars)
            rest = dict(zip(self.names, arrays))
            return np.broadcast_to(folded.checked([rest[name] for name in folded.names]), shape)
        return np.broadcast_to(self.checked(arrays), shape)

    def checked(self, arrays: list[np.ndarray]) -> np.ndarray:
        """The value at validated arrays (in the order of ``names``)."""
        if all(array.dtype.kind in "iu" for array in arrays):
            biggest = [int(array.max()) if array.size else 1 for array in arrays]
            if self.bound(*biggest) < INT64_LIMIT:
                return self._integer(*(array.astype(np.int64, copy=False) for array in arrays))
        floats = [array.astype(np.float64, copy=False) for array in arrays]
        value = chunked(self.numerator, floats)
        if self.denominator is not None:
            value = value / chunked(self.denominator, floats)
        return np.asarray(value, dtype=np.float64)

    def _integer(self, *arrays: np.ndarray) -> np.ndarray:
        """int64 numerator over int64 denominator: the quotient if whole everywhere, else one division."""
        numerator = np.asarray(chunked(self.numerator, arrays))
        if self.denominator is None:
            return numerator
        denominator = np.asarray(chunked(self.denominator, arrays))
        quotient, remainder = np.divmod(numerator, denominator)
        if not remainder.any():
            return quotient
        return numerator / denominator


#: Configurations evaluated per block: every temporary of a block stays in the CPU's cache, so the
#: cost per configuration is flat from 10^4 to 10^7 (whole 10^7 columns go through memory at every step).
CHUNK = 2**15


def chunked(function: Callable[..., np.ndarray], arrays: Sequence[np.ndarray]) -> np.ndarray:
    """``function(*arrays)`` block by block of CHUNK configurations (arrays of one shape or scalars), else at once."""
    shape = np.broadcast_shapes(*(array.shape for array in arrays))
    size = math.prod(shape)
    if size <= CHUNK or any(array.ndim and array.shape != shape for array in arrays):
        return function(*arrays)
    flat = [array.reshape(-1) if array.ndim else array for array in arrays]
    first = np.asarray(function(*(array[:CHUNK] if array.ndim else array for array in flat)))
    out = np.empty(size, dtype=first.dtype)
    out[:CHUNK] = first
    for start in range(CHUNK, size, CHUNK):
        part = function(*(array[start:start + CHUNK] if array.ndim else array for array in flat))
        if np.result_type(part) != out.dtype:
            return function(*arrays)     # a block of another type: the whole at once, as before
        out[start:start + CHUNK] = part
    return out.reshape(shape)


@lru_cache(maxsize=256)
def _folded(expr: sp.Expr, scalars: tuple[tuple[str, int], ...]) -> "Compiled":
    """``expr`` with the integer scalars substituted, compiled: fewer array operations per call."""
    by_name = {symbol.name: symbol for symbol in expr.free_symbols}
    return compile(expr.xreplace({by_name[name]: sp.Integer(value) for name, value in scalars}))


def _positive_array(name: str, value: object, zero: bool = False) -> np.ndarray:
    """``value`` as a numeric array of positive finite numbers (or 0 too: ``zero``), or ValueError naming ``name``."""
    array = np.asarray(value)
    if array.dtype.kind not in "iuf":
        raise ValueError(f"{name}: must be positive numbers, got {array.dtype} values")
    if array.dtype.kind in "iu":             # finite by type: one pass for the smallest, no temporary
        if array.size and array.min() < (0 if zero else 1):
            raise ValueError(f"{name}: must be positive and finite, got {array.min()!r} .. {array.max()!r}")
        return array
    if array.size and not (np.all(np.isfinite(array)) and np.all(array >= 0 if zero else array > 0)):
        raise ValueError(f"{name}: must be positive and finite, got {array.min()!r} .. {array.max()!r}")
    return array


@lru_cache(maxsize=None)
def compile(expr: sp.Expr) -> Compiled:  # noqa: A001 (the evaluator's name: derive.evaluation.vectorised.compile)
    """``expr`` as a vectorised function of keyword arrays named by its symbols (cached per expression)."""
    expr = sp.sympify(expr)
    numerator, denominator = ratio(expr)
    names = tuple(symbol.name for symbol in arguments(expr))
    bound_expr = upper_bound(numerator) + upper_bound(denominator)
    bound_names = {symbol.name for symbol in arguments(bound_expr)}
    bound = sp.lambdify(arguments(bound_expr), bound_expr, "math", docstring_limit=0,
                        printer=MathPrinter(LAMBDIFY_SETTINGS))
    picks = [index for index, name in enumerate(names) if name in bound_names]

    def bound_at(*maxima: int) -> int:
        return bound(*(maxima[index] for index in picks))

    def over(part: sp.Expr) -> Callable[..., np.ndarray]:
        """``part`` as a function of all of ``names`` (positional), whatever symbols it uses."""
        function = numpy_function(part)
        used = [names.index(symbol.name) for symbol in arguments(part)]
        return lambda *arrays: function(*(arrays[index] for index in used))

    nonnegative = frozenset(symbol.name for symbol in arguments(expr)
                            if symbol.is_nonnegative and not symbol.is_positive)
    return Compiled(expr, names, over(numerator),
                    None if denominator == 1 else over(denominator), bound_at, nonnegative)

