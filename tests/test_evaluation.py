"""derive.evaluation, the one evaluator: its symbol -> value rule and its exact and vectorised backends.

Every expected value is computed here with Python ints and Fractions from the drawn sizes, not by SymPy.
"""
import random
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from derive.evaluation import by_name, exact_number, exact_value, substitute, symbol_values
from derive.evaluation.vectorised import compile
from derive.presets import model
from derive.symbols import L, N, P, V, a, b, h, s, t

#: Korthikanti et al. 2022's per-layer activation bytes without recompute, sbh(34 + 5as/h), over t ranks.
LAYER = s * b * h * (34 + 5 * a * s / h) / t
#: A ceiling, a ratio and a product: what the accounts' columns hold (vocabulary padded to 128 t).
PADDED = sp.ceiling(V / (128 * t)) * 128 * t * h + L * h**2 / t


def _layer(s_: int, b_: int, h_: int, a_: int, t_: int) -> Fraction:
    return Fraction(s_ * b_ * h_ * 34 + 5 * a_ * s_ * s_ * b_, t_)


def _padded(V_: int, t_: int, h_: int, L_: int) -> Fraction:
    return -(-V_ // (128 * t_)) * 128 * t_ * h_ + Fraction(L_ * h_ * h_, t_)


def test_drawn_sizes_every_backend() -> None:
    rng = random.Random(25)
    for _ in range(50):
        sizes = {s: rng.randint(1, 2**15), h: 64 * rng.randint(1, 256), a: rng.randint(1, 128)}
        t_, b_ = rng.choice((1, 2, 3, 8)), rng.randint(1, 16)
        values = symbol_values(sizes, t=t_, b=b_)
        want = _layer(sizes[s], b_, sizes[h], sizes[a], t_)
        assert substitute(LAYER, values) == sp.Rational(want.numerator, want.denominator)
        assert exact_value(LAYER, by_name(values)) == want


def test_a_model_at_its_sizes() -> None:
    """Model.subs and Model.at go through the same rule: L h^2 + V and N at the model's own fields."""
    m = model("1.3b")
    assert m.subs(L * h**2 + V) == m.layers * m.hidden**2 + m.vocab
    layer = _layer(m.seq, 2, m.hidden, m.heads, 8)
    assert m.subs(LAYER, b=2, t=8) == sp.Rational(layer.numerator, layer.denominator)
    # GPT-3 XL: 24 layers of 12 h^2 + 13 h, tied embedding V h, learned positions s h, final norm 2 h
    assert m.at(N) == m.subs(m.parameter_rows.numel()) == (
        24 * (12 * 2048**2 + 13 * 2048) + 50257 * 2048 + 2048 * 2048 + 2 * 2048)


def test_sizes_are_integers() -> None:
    """The exact backends keep sizes integers: an Integer from substitute, a whole Fraction from exact_value."""
    m = model("70b")
    value = m.subs(L * h * a)
    assert isinstance(value, sp.Integer) and int(value) == 80 * 8192 * 64
    assert exact_value(h * a, by_name(m.values)) == Fraction(8192 * 64)
    assert all(type(number) is int for number in m.values.values())


def test_a_float_enters_by_its_exact_binary_value() -> None:
    assert substitute(P * 10, {P: 0.1}) == sp.Rational(0.1) * 10 != 1
    assert exact_number(0.5) == sp.Rational(1, 2) and exact_number(3) == sp.Integer(3)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match=r"^bogus: unknown symbol \(known: "):
        symbol_values({h: 4096}, bogus=1)
    with pytest.raises(ValueError, match=r"^bogus: unknown symbol"):
        model("8b").subs(LAYER, bogus=2)
    with pytest.raises(ValueError, match=r"^b: must be a finite positive number, got 0"):
        symbol_values({}, b=0)
    with pytest.raises(ValueError, match=r"^result: not a number after substitution, 'h' is not given"):
        exact_value(LAYER, {"s": 8, "b": 1, "a": 4, "t": 1})
    with pytest.raises(ValueError, match=r"^t: needed \(the expression's symbols: L, V, h, t\)"):
        compile(PADDED)(L=np.array([1]), V=np.array([2]), h=np.array([3]))


def test_vectorised_equals_exact_on_a_seeded_grid() -> None:
    """numpy columns (int64 where whole) = the exact backend at every point of a drawn grid."""
    rng = np.random.default_rng(25)
    columns = {"V": rng.integers(1, 200_000, 500), "t": rng.choice([1, 2, 4, 8, 3], 500),
               "h": 64 * rng.integers(1, 256, 500), "L": rng.integers(1, 128, 500)}
    got = compile(PADDED)(**columns)
    want = [_padded(*(int(columns[name][i]) for name in ("V", "t", "h", "L"))) for i in range(500)]
    assert [exact_value(PADDED, {k: int(v[i]) for k, v in columns.items()}) for i in range(500)] == want
    assert got.dtype == np.float64 and got.tolist() == [float(x) for x in want]   # one correctly rounded division
    whole = {name: np.where(columns["t"] == 3, 1, column) if name == "t" else column
             for name, column in columns.items()}
    ints = compile(PADDED)(**whole)
    assert ints.dtype == np.int64
    assert ints.tolist() == [int(_padded(*(int(whole[n][i]) for n in ("V", "t", "h", "L")))) for i in range(500)]
