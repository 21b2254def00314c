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

from derive.printing.python import (LAMBDIFY_SETTINGS, MathPrinter, arguments, numpy_function, numpy_functions,
                                    ratio, upper_bound)

#: int64 evaluation only when every intermediate is below this (a margin under 2^63).
INT64_LIMIT = 2**62
#: Integers below this are exact in float64: a quotient of two of them is one correctly rounded division.
FLOAT_EXACT = 2**53
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
            bound = self.bound(*biggest)
            if bound < INT64_LIMIT:
                integers = [array.astype(np.int64, copy=False) for array in arrays]
                shape = np.broadcast_shapes(*(array.shape for array in integers))
                if math.prod(shape) <= CHUNK or any(array.ndim and array.shape != shape for array in integers):
                    return self._integer(*integers)
                return _blocks(self._parts, integers, shape, (self.denominator is not None,),
                               (bound < FLOAT_EXACT,))[0]
        floats = [array.astype(np.float64, copy=False) for array in arrays]
        value = chunked(self.numerator, floats)
        if self.denominator is not None:
            value = value / chunked(self.denominator, floats)
        return np.asarray(value, dtype=np.float64)

    def _parts(self, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        """The numerator (and the denominator, if any) at ``arrays``."""
        if self.denominator is None:
            return (self.numerator(*arrays),)
        return self.numerator(*arrays), self.denominator(*arrays)

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
#: A block's int64 temporaries take 64 KiB, under glibc malloc's default mmap and trim thresholds
#: (128 KiB, mallopt(3)): from 2^14 on, freed temporaries went back to the system and each new one
#: faulted its pages in again (getrusage's minor faults: 43 B per configuration at 2^14 for the nine
#: grid accounts, 2.9 B at 2^13).
CHUNK = 2**13


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



@dataclass(frozen=True)
class Joint:
    """Several expressions compiled together (:func:`compile_many`): call it with keyword arrays, get each one's values.

    Each value is the one its own :class:`Compiled` gives (the same ratio of the same integers, the same
    int64 or float64 choice). From FOLD_AT configurations of one shape on, the expressions that run in
    int64 are evaluated together, block by block: the inputs checked once, the parts they share
    (derive.printing.python.joint_parts) computed once per block, each quotient one float64 division
    whose wholeness is checked by multiplying back while every integer stays below FLOAT_EXACT.
    """

    each: tuple[Compiled, ...]

    def __call__(self, **values: object) -> list[np.ndarray]:
        """Each expression's values at ``values`` (broadcast arrays), in order."""
        arrays: dict[str, np.ndarray] = {}
        for compiled in self.each:
            missing = [name for name in compiled.names if name not in values]
            if missing:
                raise ValueError(f"{missing[0]}: needed (the expression's symbols: {', '.join(compiled.names)})")
            for name in compiled.names:
                if name not in arrays:
                    arrays[name] = _positive_array(name, values[name], name in compiled.nonnegative)
        shape = np.broadcast_shapes(*(array.shape for array in arrays.values()))
        size = math.prod(shape)
        if size < FOLD_AT or any(array.ndim and array.shape != shape for array in arrays.values()):
            return [compiled(**values) for compiled in self.each]
        maxima: dict[str, int] = {}
        together: dict[int, Compiled] = {}
        results: list[np.ndarray | None] = []
        for index, compiled in enumerate(self.each):
            scalars = tuple((name, int(arrays[name])) for name in compiled.names
                            if arrays[name].ndim == 0 and arrays[name].dtype.kind in "iu")
            if not scalars or len(scalars) == len(compiled.names):
                results.append(compiled(**values))
                continue
            folded = _folded(compiled.expr, scalars)
            own = [arrays[name] for name in folded.names]
            if all(array.dtype.kind in "iu" for array in own):
                for name in folded.names:
                    if name not in maxima:
                        maxima[name] = int(arrays[name].max())
                if folded.bound(*(maxima[name] for name in folded.names)) < INT64_LIMIT:
                    together[index] = folded
                    results.append(None)
                    continue
            results.append(np.broadcast_to(folded.checked(own), shape))
        if together:
            parts = [ratio(folded.expr) for folded in together.values()]
            pieces = tuple(piece for numerator, denominator in parts
                           for piece in ((numerator,) if denominator == 1 else (numerator, denominator)))
            names = [symbol.name for symbol in arguments(sp.Tuple(*pieces))]
            exact = [folded.bound(*(maxima[name] for name in folded.names)) < FLOAT_EXACT
                     for folded in together.values()]
            columns = _blocks(numpy_functions(pieces), [arrays[name].astype(np.int64, copy=False) for name in names],
                              shape, [denominator != 1 for _, denominator in parts], exact)
            for index, column in zip(together, columns):
                results[index] = column
        return results


def _blocks(function: Callable[..., Sequence[np.ndarray]], arrays: Sequence[np.ndarray], shape: tuple[int, ...],
            divided: Sequence[bool], exact: Sequence[bool]) -> list[np.ndarray]:
    """Int64 ratios block by block, each as ``Compiled._integer`` gives it: the quotient if whole everywhere, else a float64 division.

    ``function`` maps blocks of ``arrays`` (int64, of ``shape`` or scalars) to each ratio's numerator and,
    where ``divided``, its denominator. ``exact``: every integer of that ratio stays below FLOAT_EXACT, so
    the float64 quotient is the correctly rounded one and it is whole where it times the denominator
    gives the numerator back; otherwise int64 divmod says so. Each ratio fills one array of 8 bytes per
    configuration: int64 quotients while they are whole, turned into float64 in place at the first block
    that is not.
    """
    size = math.prod(shape)
    flat = [array.reshape(-1) if array.ndim else array for array in arrays]
    whole = [True] * len(divided)
    outputs = [(np.empty(size, dtype=np.int64),) if not over or fast else
               (np.empty(size, dtype=np.int64), np.empty(size, dtype=np.float64))
               for over, fast in zip(divided, exact)]
    for start in range(0, size, CHUNK):
        block = slice(start, start + CHUNK)
        pieces = iter(function(*(array[block] if array.ndim else array for array in flat)))
        for index, (over, fast, out) in enumerate(zip(divided, exact, outputs)):
            numerator = _int64(next(pieces))
            if not over:
                out[0][block] = numerator
                continue
            denominator = _int64(next(pieces))
            if not fast:
                quotient, remainder = np.divmod(numerator, denominator)
                out[0][block] = quotient
                np.divide(numerator, denominator, out=out[1][block])
                whole[index] = whole[index] and not remainder.any()
                continue
            quotient = np.divide(numerator, denominator)
            if whole[index]:
                integer = quotient.astype(np.int64)
                if (integer * denominator == numerator).all():
                    out[0][block] = integer
                    continue
                whole[index] = False
                _to_float(out[0], start)
            out[0].view(np.float64)[block] = quotient
    return [(out[0] if is_whole else out[-1].view(np.float64) if fast else out[1]).reshape(shape)
            for out, fast, is_whole in zip(outputs, exact, whole)]


def _to_float(column: np.ndarray, end: int) -> None:
    """The whole int64 quotients of ``column[:end]`` as float64 in the same memory, block by block."""
    floats = column.view(np.float64)
    for start in range(0, end, CHUNK):
        block = slice(start, min(start + CHUNK, end))
        floats[block] = column[block].astype(np.float64)


def _int64(value: object) -> np.ndarray:
    """A block's numerator or denominator: int64 (else an internal error: the bound said it fits)."""
    array = np.asarray(value)
    if array.dtype != np.int64:
        raise TypeError(f"an int64 evaluation gave {array.dtype} values")
    return array


def compile_many(exprs: Sequence[sp.Expr]) -> Joint:
    """``exprs`` as one :class:`Joint`: each compiled once (:func:`compile`), evaluated together."""
    return Joint(tuple(compile(expr) for expr in exprs))
