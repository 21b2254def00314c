"""derive.expansion.expand is sp.expand: by hand, on random Laurent polynomials (fixed seed), on every proof's difference, and through SymPy for anything else."""
import random

import pytest
import sympy as sp

from derive.expansion import expand, laurent_symbols

x, y, z = sp.symbols("x y z", positive=True)
n = sp.Symbol("n", integer=True)


def test_by_hand() -> None:
    """(x + 1/y)(x - 1/y) = x^2 - y^-2; (x + y)^3 and a product over a monomial denominator, multiplied out by hand."""
    assert expand((x + 1 / y) * (x - 1 / y)) == x**2 - y**-2
    assert expand((x + y) ** 3) == x**3 + 3 * x**2 * y + 3 * x * y**2 + y**3
    assert expand((2 * x + 3) * (x - 1) / (6 * x * y)) == x / (3 * y) + 1 / (6 * y) - 1 / (2 * x * y)
    assert expand(x * (1 / x - y) + x * y) == 1
    assert expand((x - y) * (x + y) - x**2 + y**2) == 0


def _random_laurent(rng: random.Random, depth: int) -> sp.Expr:
    """A random tree of sums, products, rationals, symbols and integer powers (negative ones of symbols only)."""
    leaf = rng.random()
    if depth == 0 or leaf < 0.2:
        if leaf < 0.1:
            return sp.Rational(rng.randint(-9, 9), rng.randint(1, 5))
        return rng.choice((x, y, z, n)) ** rng.choice((1, 1, 2, -1, -2))
    children = [_random_laurent(rng, depth - 1) for _ in range(rng.randint(2, 3))]
    kind = rng.random()
    if kind < 0.45:
        return sp.Add(*children)
    if kind < 0.9:
        return sp.Mul(*children)
    return sp.Add(*children[:2]) ** 2


def test_random_laurent_polynomials_are_sympys_expand() -> None:
    """200 random Laurent polynomials (fixed seed): the ring's expansion is the expression sp.expand returns."""
    rng = random.Random(28)
    checked = 0
    for _ in range(200):
        expr = _random_laurent(rng, 3)
        if laurent_symbols(expr) is None:  # a power of a sum with a negative exponent cannot be drawn
            continue
        assert expand(expr) == sp.expand(expr), expr
        checked += 1
    assert checked == 200


@pytest.mark.parametrize("expr", [
    sp.ceiling(x * (y + 1)), sp.sqrt(x) * (x + 1), 1 / (x + 1) * (x + y), sp.Float(0.5) * (x + 1),
    sp.Max(x, y) * (x + 2), (x + y) ** n, sp.Piecewise((x * (x + 1), y > 1), (0, True)),
], ids=["ceiling", "sqrt", "sum-denominator", "float", "max", "symbolic-power", "piecewise"])
def test_anything_else_is_sympys_expand(expr: sp.Expr) -> None:
    """Not a Laurent polynomial with rational coefficients: laurent_symbols refuses it and expand is sp.expand."""
    assert laurent_symbols(expr) is None
    assert expand(expr) == sp.expand(expr)


def test_noncommutative_symbols_are_sympys_expand() -> None:
    """Non-commuting symbols keep their order: SymPy expands them."""
    A, B = sp.symbols("A B", commutative=False)
    assert laurent_symbols(A * B + x) is None
    assert expand((A + B) * (A - B)) == sp.expand((A + B) * (A - B)) == A**2 - A * B + B * A - B**2


def test_every_proofs_difference_is_sympys_expand() -> None:
    """derived - claim of every registered identity expands to what sp.expand gives (the check's verdicts rest on it)."""
    from derive.identities import all_identities, prove

    for entry in all_identities():
        proved = prove(entry)
        assert expand(proved.derived - proved.claim) == sp.expand(proved.derived - proved.claim), entry.key
