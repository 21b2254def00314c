"""derive.sweep and derive.printing.python: compiled expressions equal exact substitution; grids equal the per-configuration path."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from derive import stage_accounts, state_columns, sweep
from derive.evaluation import vectorised
from derive.accounts.activations import first_stage_activation_bytes
from derive.accounts.flops import step_time_lower_bound
from derive.architectures.decoder import LLAMA
from derive.architectures.tables import parameter_count
from derive.megatron.activations import activation_bytes
from derive.megatron.tables import Reading, padded_vocab
from derive.megatron.weights import weight_and_optimizer_bytes
from derive.printing.python import arguments, exact_function
from derive.presets import MODELS, hardware
from derive.symbols import BY_NAME, N, V, h, m, p, t, v

#: One worker runs this module under make test's --dist loadgroup: its module fixtures are built once.
pytestmark = pytest.mark.xdist_group("sweep")

RNG = np.random.default_rng(20240716)

#: Ranges the random configurations draw from (p = 1 included, odd sizes for ceilings).
RANGES = {"s": (1, 9000), "b": (1, 9), "h": (64, 20000), "a": (1, 130), "g": (1, 130),
          "L": (1, 130), "V": (1000, 260000), "f": (64, 60000), "t": (1, 17), "p": (1, 9),
          "v": (1, 5), "d": (1, 4097), "m": (1, 65), "k": (16, 257), "c": (1, 17)}


def _draws(names: tuple[str, ...], count: int) -> dict[str, np.ndarray]:
    draws = {name: RNG.integers(*RANGES[name], size=count) for name in names}
    if "p" in draws:
        draws["p"][: count // 4] = 1      # the p = 1 edge, a quarter of the rows
    return draws


def _exact(expr: sp.Expr, row: dict[str, int]) -> sp.Rational:
    return expr.xreplace({BY_NAME[name]: sp.Integer(value) for name, value in row.items()})


EXPRESSIONS = {
    "padded vocabulary (ceiling)": padded_vocab(V),
    "Megatron first-stage activations, 1F1B capped by m (Min)":
        activation_bytes(True, False, False, True),
    "Megatron activations without SP, interleaved, x 21/20":
        activation_bytes(False, False, True, False),
    "Megatron weights + distributed optimizer (/ p t d)":
        weight_and_optimizer_bytes(Reading(), False, True),
    "most loaded rank (Piecewise in p and v, Max, ceilings)":
        stage_accounts.accounts(LLAMA, "llama-fused", "selective", "megatron", True).columns()["memory_per_gpu"],
    "first stage, interleaved, GPT with scores":
        first_stage_activation_bytes("gpt", "materialised", t, True, pipeline=p, virtual=v, micro_batches=m),
}


@pytest.mark.parametrize("name", EXPRESSIONS)
def test_compile_equals_exact_substitution(name):
    expr = EXPRESSIONS[name]
    names = tuple(symbol.name for symbol in arguments(expr))
    draws = _draws(names, 200)
    got = vectorised.compile(expr)(**draws)
    for index in range(200):
        row = {key: int(values[index]) for key, values in draws.items()}
        want = _exact(expr, row)
        assert want.is_Rational
        if got.dtype.kind == "i":
            assert want.is_Integer and int(got[index]) == int(want), row
        else:
            # float64 rounding: a handful of units in the last place (a sum of rounded terms)
            assert got[index] == pytest.approx(float(want), rel=1e-14, abs=0), row


def test_whole_values_stay_int64_and_exact():
    llama = {symbol.name: value for symbol, value in MODELS["llama3-70b"].values.items()}
    count = vectorised.compile(parameter_count(LLAMA))(**{k: np.array([v]) for k, v in llama.items()})
    assert count.dtype == np.int64
    assert int(count[0]) == 70_553_706_496      # Llama 3 70B, 70.55 B parameters


def test_values_beyond_int64_fall_back_to_float64():
    # 2^40 h^2 is beyond int64 at h = 2^20: the float path, still to float64 rounding.
    expr = 2**40 * h**2 + 3 * h
    got = vectorised.compile(expr)(h=np.array([2**20, 5]))
    assert got.dtype == np.float64
    assert got[0] == float(2**80 + 3 * 2**20) and got[1] == float(2**40 * 25 + 15)


def test_compile_is_cached_per_expression():
    expr = padded_vocab(V)
    assert vectorised.compile(expr) is vectorised.compile(padded_vocab(V))


def test_compile_names_a_missing_or_bad_symbol():
    function = vectorised.compile(padded_vocab(V))
    with pytest.raises(ValueError, match="^t: needed"):
        function(V=np.array([50257]))
    with pytest.raises(ValueError, match="^t: must be positive"):
        function(V=np.array([50257]), t=np.array([0]))
    with pytest.raises(ValueError, match="^V: must be positive"):
        function(V=np.array([np.nan]), t=np.array([1]))


def test_padded_vocabulary_by_hand():
    # GPT-2's 50257 tokens padded to 128 t: 50304 at t = 1, 50432 at t = 2 (197 x 256), 51200 at t = 8.
    got = vectorised.compile(padded_vocab(V))(V=50257, t=np.array([1, 2, 8]))
    assert got.tolist() == [50304, 50432, 51200] and got.dtype == np.int64


def test_exact_function_returns_fractions():
    expr = sp.Rational(21, 20) * sp.Min(m, p) * h / t + sp.ceiling(V / (128 * t))
    function = exact_function(expr)
    names = [symbol.name for symbol in arguments(expr)]
    result = function(*(dict(V=50257, h=4096, m=3, p=4, t=8)[name] for name in names))
    assert isinstance(result, Fraction)
    assert result == Fraction(21, 20) * 3 * 4096 / 8 + 50    # ceil(50257 / 1024) = 50


# ---- grid ----

GRID = dict(b=[1, 2], t=[1, 8], p=[1, 4, 5], v=[1, 2], d=[16], recompute=["none", "selective", "full"],
            zero=[0, 1], tokens=8192 * 2 * 16 * 64)


@pytest.fixture(scope="module")
def grid():
    return sweep.grid(["llama3-8b", "llama3-70b"], **GRID)


def test_grid_covers_the_cross_product(grid):
    assert len(grid["t"]) == 2 * 2 * 2 * 3 * 2 * 3 * 2
    assert set(grid["model"]) == {"llama3-8b", "llama3-70b"}


def test_grid_equals_the_per_configuration_path(grid):
    rows = RNG.choice(len(grid["t"]), size=25, replace=False)
    for row in rows:
        entry = MODELS[grid["model"][row]]
        terms = stage_accounts.accounts(entry.architecture, "llama-fused", str(grid["recompute"][row]), "megatron",
                               bool(grid["zero"][row]))
        values = {**{symbol.name: value for symbol, value in entry.values.items()},
                  **{key: int(grid[key][row]) for key in ("s", "b", "t", "p", "v", "d", "c")},
                  "m": int(grid["micro_batches"][row])}
        for column, expr in terms.columns().items():
            want = _exact(expr, {k: val for k, val in values.items() if BY_NAME.get(k) in expr.free_symbols})
            assert float(grid[column][row]) == pytest.approx(float(want), rel=4e-16), (column, values)


def test_grid_state_bytes_are_megatrons_18_and_6_plus_12_over_d(grid):
    # Megatron's bf16 recipe: 18 bytes per parameter, 6 + 12/d with the distributed optimizer
    # (docs/user-guide/features/dist_optimizer.md); one stage, one TP rank holds all N.
    single = (grid["p"] == 1) & (grid["t"] == 1)
    for zero, per_parameter in ((0, Fraction(18)), (1, 6 + Fraction(12, 16))):
        rows = single & (grid["zero"] == zero)
        assert all(Fraction(int(grid["state_bytes"][r])) == per_parameter * int(grid["parameters"][r])
                   for r in np.flatnonzero(rows))


def test_grid_step_time_is_the_bound_times_the_bubble(grid):
    row = np.flatnonzero((grid["model"] == "llama3-70b") & (grid["p"] == 4) & (grid["v"] == 2)
                         & (grid["t"] == 8) & (grid["recompute"] == "none"))[0]
    gpus, m_ = 8 * 4 * 16, int(grid["micro_batches"][row])
    bound = GRID["tokens"] * int(grid["flops_per_token"][row]) / (gpus * 989e12)
    assert grid["step_time"][row] == pytest.approx(bound * (1 + 3 / (2 * m_)), rel=1e-12)


def test_step_time_lower_bound_takes_arrays():
    fpt = np.array([449_222_541_312, 2 * 449_222_541_312])
    got = step_time_lower_bound(4194304, fpt, 1024, hardware("h100").peak_flops, mfu=0.4)
    assert got[0] == pytest.approx(4.65, abs=0.005)        # the article's 70B step at 40 % MFU
    assert got[1] == pytest.approx(2 * got[0], rel=1e-15)
    with pytest.raises(ValueError, match="^gpus:"):
        step_time_lower_bound(4194304, fpt, np.array([1024, 0]), 989e12)


def test_context_parallelism_splits_the_tokens_of_flash_profiles():
    # llama-fused keeps no score matrix: c context-parallel ranks each keep s / c tokens' bytes.
    columns = sweep.grid(["70b"], t=[8], c=[1, 2, 8], d=[4])
    per_layer = columns["layer_activation_bytes"]
    assert per_layer[0] == 2 * per_layer[1] == 8 * per_layer[2]
    assert columns["gpus"].tolist() == [32, 64, 256]


def test_context_parallelism_refuses_score_matrices():
    with pytest.raises(ValueError, match="^c: "):
        sweep.grid(["70b"], c=[2], profile=["gpt"], attention_kernel="materialised")


def test_blocks_of_configurations_give_the_exact_values_across_block_edges():
    """More than vectorised.CHUNK configurations are evaluated block by block: every value as exact_function's."""
    expr = stage_accounts.accounts(LLAMA, "llama-fused", "selective", "megatron", True).columns()["memory_per_gpu"]
    count = 3 * vectorised.CHUNK + 5
    rng = np.random.default_rng(28)
    values = {symbol.name: number for symbol, number in MODELS["llama3-70b"].values.items()}
    values.update(t=rng.choice([1, 2, 4, 8], count), p=rng.integers(1, 17, count),
                  v=rng.integers(1, 6, count), d=rng.integers(1, 257, count),
                  c=rng.choice([1, 2, 4, 8], count), b=rng.integers(1, 9, count),
                  m=rng.integers(1, 129, count))
    got = vectorised.compile(expr)(**values)
    exact = exact_function(expr)
    names = [symbol.name for symbol in arguments(expr)]
    edges = [0, vectorised.CHUNK - 1, vectorised.CHUNK, 2 * vectorised.CHUNK + 1, count - 1]
    for index in edges + list(rng.integers(0, count, 20)):
        row = [values[name] if np.ndim(values[name]) == 0 else int(values[name][index]) for name in names]
        expected = exact(*row)
        if got.dtype.kind == "i":
            assert int(got[index]) == expected, index
        else:  # a float column: the exact Fraction to float rounding
            assert float(got[index]) == pytest.approx(float(expected), rel=1e-14), index


# ---- a placement's states as columns (one expression for every placement and ZeRO stage) ----

def test_state_columns_are_the_placements_bytes_per_parameter():
    # Megatron's bf16 recipe (docs/user-guide/features/dist_optimizer.md): 18 bytes whole; with the
    # distributed optimizer 2 (bf16 params) + 4 (fp32 grads) whole, 12 (fp32 master, two moments)
    # sharded; ZeRO-3 (ZeRO paper, 2 + 2 + 12 bytes of mixed-precision Adam) shards all 16.
    assert state_columns.state_columns("megatron", False) == {"N_bytes_whole": 18, "N_bytes_sharded": 0}
    assert state_columns.state_columns("megatron", True) == {"N_bytes_whole": 6, "N_bytes_sharded": 12}
    assert state_columns.state_columns("deepspeed-zero3", True) == {"N_bytes_whole": 0, "N_bytes_sharded": 16}
    # MXFP8 keeps one scale byte per 32 elements (N_8 / 32): not a whole multiple, its own expression
    assert state_columns.state_columns("megatron", True, "mxfp8") is None


def test_a_state_column_may_be_zero_a_size_may_not():
    function = vectorised.compile(N * state_columns.held_bytes(N))
    got = function(N=np.array([1000, 1001]), N_bytes_whole=0, N_bytes_sharded=16, c=1, d=np.array([4, 8]))
    assert got.tolist() == [4000, 2002]
    with pytest.raises(ValueError, match="^d: must be positive"):
        function(N=1000, N_bytes_whole=0, N_bytes_sharded=16, c=1, d=0)


@pytest.mark.parametrize("placement_name, zero, recipe", [
    ("megatron", 0, None), ("megatron", 1, None), ("megatron-fsdp-optim-grads-params", 3, None),
    ("deepspeed-zero2", 2, None), ("megatron", 1, "fp8-delayed"), ("megatron", 1, "mxfp8")])
def test_evaluate_equals_the_placements_own_expressions(placement_name, zero, recipe):
    """evaluate (the states as columns where the placement allows) = each placement's own compiled accounts."""
    entry = MODELS["llama3-70b"]
    count = 4000
    rng = np.random.default_rng(zero)
    layout = dict(s=np.full(count, 8192), t=rng.choice([1, 2, 4, 8], count), p=rng.integers(2, 17, count),
                  v=rng.integers(1, 6, count), d=rng.integers(1, 257, count), c=rng.choice([1, 2, 4], count),
                  b=rng.integers(1, 9, count), m=rng.integers(1, 129, count))
    names = ("state_bytes", "memory_per_gpu", "first_rank_bytes", "last_rank_bytes", "middle_rank_bytes")
    for balanced in (False, True):
        got = sweep.evaluate(entry, layout, "selective", zero, placement_name=placement_name, names=names,
                             balanced=balanced, recipe=recipe)
        own = stage_accounts.accounts(entry.architecture, "llama-fused", "selective", placement_name, bool(zero),
                             balanced=balanced, recipe=recipe)
        values = {**{symbol.name: value for symbol, value in entry.values.items()}, **layout}
        for name in names:
            want = vectorised.compile(own.column(name))(**values)
            assert np.array_equal(got[name], want), (name, balanced)


# ---- the accounts evaluated together (compile_many) ----

def _layouts(count: int, rng: np.random.Generator, widest_batch: int = 9) -> dict[str, object]:
    values = {symbol.name: number for symbol, number in MODELS["llama3-405b"].values.items()}
    values.update(t=rng.choice([1, 2, 4, 8], count), p=rng.integers(1, 17, count),
                  v=rng.integers(1, 6, count), d=rng.integers(1, 4097, count),
                  c=rng.choice([1, 2, 4, 8], count), b=rng.integers(1, widest_batch, count),
                  m=rng.integers(1, 129, count))
    return values


@pytest.mark.parametrize("widest_batch", [9, 2**20])
def test_accounts_together_equal_each_alone_and_the_exact_values(widest_batch):
    """compile_many over the nine grid accounts = each account's own compile, dtype and bits, = exact_function.

    Micro-batches up to 2^20 push some accounts' integers past 2^53: their wholeness is then decided by
    int64 divmod rather than by multiplying the float64 quotient back.
    """
    exprs = stage_accounts.accounts(LLAMA, "llama-fused", "selective", "megatron", True).columns()
    count = 2 * vectorised.FOLD_AT + 7
    rng = np.random.default_rng(widest_batch)
    values = _layouts(count, rng, widest_batch)
    together = vectorised.compile_many(list(exprs.values()))(**values)
    for (name, expr), got in zip(exprs.items(), together):
        alone = vectorised.compile(expr)(**values)
        assert got.dtype == alone.dtype and np.array_equal(got, alone), name
        exact = exact_function(expr)
        names = [symbol.name for symbol in arguments(expr)]
        got = np.broadcast_to(got, (count,))     # an account of the model's sizes alone is one value
        for index in [0, vectorised.CHUNK - 1, vectorised.CHUNK, count - 1, *rng.integers(0, count, 10)]:
            row = [values[key] if np.ndim(values[key]) == 0 else int(values[key][index]) for key in names]
            want = exact(*row)
            if got.dtype.kind == "i":
                assert int(got[index]) == want, (name, index)
            else:   # the correctly rounded quotient of the exact integers (num and den below 2^53 here)
                assert got[index] == pytest.approx(float(want), rel=1e-15), (name, index)


def test_accounts_together_name_a_missing_or_bad_symbol_as_each_alone():
    exprs = list(stage_accounts.accounts(LLAMA, "llama-fused", "selective", "megatron", True).columns().values())
    values = _layouts(vectorised.FOLD_AT, np.random.default_rng(1))
    joint = vectorised.compile_many(exprs)
    with pytest.raises(ValueError, match="^m: needed"):
        joint(**{key: value for key, value in values.items() if key != "m"})
    values["d"] = values["d"].copy()
    values["d"][5] = 0
    with pytest.raises(ValueError, match="^d: must be positive"):
        joint(**values)
