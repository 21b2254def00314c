"""derive.printing.factored: the unevaluated sbh(34 + 5as/h) node, printed by every printer of derive.printing.

Korthikanti et al. 2022, Table 2: the GPT layer keeps sbh(34 + 5as/h) bytes with
materialised scores. The LaTeX below is written out by hand as the sheet prints it;
the values are computed by hand from the sizes drawn (34sbh + 5as^2b).
"""
import json
import random
import shutil
import subprocess
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp
from conftest import missing_tool
from hypothesis import given, settings, strategies as st

from derive.accounts.activations import article_layer_bytes
from derive.printing.factored import Factored, factored
from derive.printing.javascript import javascript
from derive.printing.latex import tex
from derive.printing.python import arguments, exact_function, numpy_function
from derive.symbols import L, V, a, b, h, s, t

#: Sizes small enough that every intermediate of the numpy code is an exact float64.
SIZES = {"a": (1, 64), "b": (1, 8), "h": (1, 8192), "s": (1, 4096)}


def gpt_layer() -> Factored:
    """The GPT layer's saved bytes (materialised scores), summed from its saved-tensor table and factored per sbh."""
    return factored(article_layer_bytes("materialised"))


def by_hand(sizes: dict[str, int]) -> Fraction:
    """34sbh + 5as^2b (Korthikanti et al. 2022, Table 2, no parallelism)."""
    return Fraction(34 * sizes["s"] * sizes["b"] * sizes["h"] + 5 * sizes["a"] * sizes["s"] ** 2 * sizes["b"])


def test_the_gpt_layer_prints_as_the_paper_writes_it():
    assert tex(gpt_layer()) == r"s b h \left(34 + \frac{5 a s}{h}\right)"


def test_the_factor_is_printed_in_the_order_given_and_the_sum_constants_first():
    tensor_parallel = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    assert tex(factored(tensor_parallel)) == r"s b h \left(10 + \frac{24}{t} + \frac{5 a s}{h t}\right)"
    assert tex(factored(6 * s * b * V, (s, b, V))) == r"6 s b V"
    assert tex(factored(L * s * b * h, (L, s, b, h))) == r"L s b h"
    assert tex(factored(5 * a * s**2 * b)) == r"\frac{5 a s}{h}\, s b h"


def test_the_plain_text_is_the_product_written_out():
    assert sp.sstr(gpt_layer()) == "s*b*h*(5*a*s/h + 34)"


def test_an_empty_factor_is_refused():
    with pytest.raises(ValueError, match="factor"):
        Factored((), 34)


@settings(max_examples=50, deadline=None)
@given(st.fixed_dictionaries({name: st.integers(*bounds) for name, bounds in SIZES.items()}))
def test_its_value_and_its_python_and_numpy_code_are_the_product(sizes):
    form = gpt_layer()
    values = {symbol: sizes[symbol.name] for symbol in form.free_symbols}
    expected = by_hand(sizes)
    assert form.doit().xreplace(values) == expected
    assert form.xreplace(values).doit() == expected
    assert form.xreplace(values).evalf() == float(expected)
    args = [sizes[symbol.name] for symbol in arguments(form)]
    assert exact_function(form)(*args) == expected
    assert numpy_function(form)(*(np.array([value]) for value in args))[0] == float(expected)


def test_its_javascript_is_the_product():
    node = shutil.which("node")
    if node is None:
        missing_tool("node")
    form = gpt_layer()
    names = sorted(symbol.name for symbol in form.free_symbols)
    assert names == ["a", "b", "h", "s"]
    rng = random.Random(25)
    cases = [{name: rng.randint(*SIZES[name]) for name in names} for _ in range(20)]
    script = (f"const f = {javascript(form)};\n"
              f"const cases = {json.dumps([[case[name] for name in names] for case in cases])};\n"
              "console.log(JSON.stringify(cases.map((c) => f(...c))));\n")
    run = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(run.stdout) == [float(by_hand(case)) for case in cases]
