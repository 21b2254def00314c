"""``sp.expand`` of a Laurent polynomial through SymPy's sparse polynomial ring (issue 28).

Every byte count, FLOP count and proof difference derive sums is a Laurent polynomial with
rational coefficients (sums and products of symbols, numbers and integer powers; a symbol may be
divided by: d, t, p), and :func:`expand` is ``sp.expand`` of such an expression, computed in
SymPy's sparse ring Q[x_1..x_n, y_1..y_n] (``sympy.polys.rings``, the arithmetic behind ``Poly``)
instead of by rewriting the expression tree: each ``x**-k`` is ``y**k`` for a generator y of its
own, and the ring's expanded sum is mapped back through the ring homomorphism y -> 1/x (each
monomial's exponents x^i y^j become x^(i - j), like ones summed). The result is the expanded Laurent
polynomial, exact and canonical: the same expression ``sp.expand`` returns (tests/test_expansion.py
holds the two equal on random and on derive's own expressions). Anything else (a ceiling, a Max, a
float, a square root, a power of a sum with a negative exponent) goes to ``sp.expand`` unchanged.
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp
from sympy.polys.domains import QQ
from sympy.polys.rings import PolyRing, ring


def expand(expr: object) -> sp.Expr:
    """``sp.expand(expr)``: through the polynomial ring for a Laurent polynomial, else SymPy's own."""
    expr = sp.sympify(expr)
    if not isinstance(expr, sp.Expr) or expr.is_Atom:
        return sp.expand(expr)
    return _expanded(expr)


@lru_cache(maxsize=4096)
def _expanded(expr: sp.Expr) -> sp.Expr:
    """:func:`expand` of a non-atomic expression, once per expression."""
    order = laurent_symbols(expr)
    if not order:
        return sp.expand(expr)
    n = 1 << (len(order) - 1).bit_length()  # a power of two: a few rings serve every size (each costs ms to build)
    gens = _ring(n).gens
    index = {symbol: i for i, symbol in enumerate(order)}
    collected: dict[tuple[int, ...], object] = {}
    for monomial, coefficient in _element(expr, gens, index, n, {}).terms():
        key = tuple(monomial[i] - monomial[n + i] for i in range(len(order)))
        collected[key] = collected.get(key, QQ.zero) + coefficient
    return sp.Add(*(sp.Mul(QQ.to_sympy(coefficient), *(order[i] ** power for i, power in enumerate(key) if power))
                    for key, coefficient in collected.items() if coefficient))


def laurent_symbols(expr: sp.Expr) -> list[sp.Symbol] | None:
    """The symbols of ``expr``, in the order met, if it is a Laurent polynomial with rational coefficients, else None.

    Its nodes: sums, products, commutative symbols, rational numbers and integer powers, a negative
    power only of a symbol.
    """
    symbols: dict[sp.Symbol, None] = {}
    seen: set[sp.Expr] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.is_Symbol:
            if not node.is_commutative:
                return None
            symbols[node] = None
        elif node.is_Add or node.is_Mul:
            stack.extend(node.args)
        elif node.is_Pow and node.exp.is_Integer and (node.exp > 0 or node.base.is_Symbol):
            stack.append(node.base)
        elif not node.is_Rational:
            return None
    return list(symbols)


@lru_cache(maxsize=64)
def _ring(n: int) -> PolyRing:
    """Q[g0..g(2n-1)]: the first n generators stand for up to n symbols, the last n for their inverses (unused ones stay at 0)."""
    return ring([sp.Symbol(f"g{i}") for i in range(2 * n)], QQ)[0]


def _element(node: sp.Expr, gens: tuple, index: dict[sp.Symbol, int], n: int, memo: dict):
    """``node`` as an element of the ring (x**-k as the k-th power of x's inverse generator)."""
    found = memo.get(node)
    if found is not None:
        return found
    if node.is_Symbol:
        value = gens[index[node]]
    elif node.is_Rational:
        value = gens[0].ring.ground_new(QQ(int(node.p), int(node.q)))
    elif node.is_Add:
        value = gens[0].ring.zero
        for term in node.args:
            value = value + _element(term, gens, index, n, memo)
    elif node.is_Mul:
        value = gens[0].ring.one
        for factor in node.args:
            value = value * _element(factor, gens, index, n, memo)
    elif node.exp < 0:  # a symbol's negative power (laurent_symbols admits no other)
        value = gens[n + index[node.base]] ** int(-node.exp)
    else:
        value = _element(node.base, gens, index, n, memo) ** int(node.exp)
    memo[node] = value
    return value
