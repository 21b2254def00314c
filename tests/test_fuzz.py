"""Random bad values for every option and argument: one line and exit 2 / a ValueError naming it, or a valid result.

Never a traceback, NaN, infinity or negative bytes. The command line is driven
in process (``derive.cli.main``) for speed; tests/test_bad_input.py runs it as a
subprocess too. Examples are bounded so the suite stays quick.
"""
import contextlib
import io
import json
import math

import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from derive.accounts.activations import (
    first_stage_activation_bytes,
    layer_activation_bytes,
    logits_bytes,
    model_activation_bytes,
    step_timeline,
)
from derive.accounts.budget import gpus_to_hold, usable_bytes
from derive.accounts.flops import hfu, mfu, step_time_lower_bound
from derive.accounts.state import resident_bytes, state_bytes
from derive.cli import SHAPE_OPTIONS, main
from derive.presets import Model, model
from derive.symbols import t

FAST = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

#: Hostile text for any option: numbers out of range, non-numbers, huge, tiny, units, names.
NASTY = ["", " ", "0", "-1", "-0", "1.5", "1e400", "1e-300", "nan", "inf", "-inf", "abc", "0x10",
         "9" * 40, "2", "8", "70GiB", "-70GiB", "0.0001KB", "70", "h100", "H200", "b200", "1e9",
         "\u0661\u0662", "None", "True", "3", "4.5", "1024", "4194304", "llama3-70b", "gpt"]
OPTIONS = {
    "--model": ["8b", "70b", "405b", "175b", "1.3b", "llama9"],
    "--precision": ["bf16", "fp16", "bf16-fp32grad", "fp8", "mxfp8", "fp8-delayed"],
    "--optimizer": ["adam", "sgd", "adam-8bit", "lion"],
    "--micro-batch": [], "--tokens": [], "--gpus": [], "--peak": ["h100", "a100", "tpu"],
    "--mfu": ["0.4", "1", "1.01"], "--step-time": ["4.5", "0.01"],
    "--profile": ["article", "gpt", "llama-eager", "llama-fused", "mamba"],
    "--zero": ["0", "1", "2", "3", "4"], "--dp": [], "--budget": ["80GB", "h100", "a100"],
    **{option: [] for option in SHAPE_OPTIONS.values()},
}


def value_for(option: str) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(OPTIONS[option] + NASTY),
                     st.integers(-3, 2**60).map(str),
                     st.floats(allow_nan=True, allow_infinity=True).map(repr),
                     st.text(max_size=6))


ARGV = st.lists(st.sampled_from(sorted(OPTIONS)), max_size=6, unique=True).flatmap(
    lambda options: st.tuples(*(value_for(option) for option in options)).map(
        lambda values: [part for option, value in zip(options, values)
                        for part in (f"{option}={value}",)])).flatmap(
    lambda argv: st.tuples(st.booleans(), st.booleans()).map(
        lambda flags: argv + (["--json"] if flags[0] else [])
        # a valid step half the time, so --mfu and --step-time meet their own checks
        + (["--tokens=4194304", "--gpus=1024"] if flags[1] and not any(
            part.startswith(("--tokens", "--gpus")) for part in argv) else [])))


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as stop:          # argparse's own one-line errors
            status = stop.code
    return status, out.getvalue(), err.getvalue()


def reject_constant(name: str) -> float:
    raise AssertionError(f"invalid JSON constant {name}")


@FAST
@given(ARGV)
def test_cli_is_one_line_or_a_valid_report(argv):
    status, out, err = run_cli(argv)
    if status == 2:
        assert out == ""
        lines = err.splitlines()
        assert len(lines) == 1, (argv, err)
        assert lines[0].startswith("derive: error: ") and "--" in lines[0], (argv, err)
        return
    assert status == 0 and err == "", (argv, err)
    if "--json" in argv:
        report = json.loads(out, parse_constant=reject_constant)
        for figures in report.values():
            for key, figure in figures.items():
                assert math.isfinite(figure["value"]), (argv, key)
                if figure["unit"] in ("B", "GPUs", "s", "parameters", "FLOP/token"):
                    assert figure["value"] >= 0, (argv, key)
    else:
        words = out.replace("(", " ").replace(")", " ").split()
        assert not {"nan", "inf", "-inf", "NaN"} & set(words), (argv, out)
        assert "Traceback" not in out and " -" not in out.replace(" -> ", " "), (argv, out)


#: Values for any library argument: bad numbers, wrong types, symbols, SymPy's own nan and oo.
ANY = st.one_of(st.integers(-10, 10**30), st.floats(allow_nan=True, allow_infinity=True),
                st.booleans(), st.text(max_size=4), st.none(),
                st.sampled_from([t, -t, sp.Integer(0), sp.Integer(-3), sp.Integer(4), sp.nan,
                                 sp.oo, sp.Rational(1, 2), sp.Float(2.0), 1.0, 2, 8]))
NAMES = st.one_of(st.sampled_from(["gpt", "llama-eager", "llama-fused", "materialised", "fused",
                                   "none", "selective", "full", "bf16", "adam", "h100", "a100",
                                   "70b", "llama"]), st.text(max_size=4), ANY)

CALLS = {
    "layer_activation_bytes": (layer_activation_bytes, dict(
        profile=NAMES, attention_kernel=NAMES, tensor_parallel=ANY, sequence_parallel=ANY,
        recompute=NAMES)),
    "model_activation_bytes": (model_activation_bytes, dict(
        profile=NAMES, tensor_parallel=ANY, logits=ANY)),
    "logits_bytes": (logits_bytes, dict(tensor_parallel=ANY)),
    "first_stage_activation_bytes": (first_stage_activation_bytes, dict(
        profile=NAMES, tensor_parallel=ANY, pipeline=ANY, virtual=ANY, micro_batches=ANY,
        edges=ANY)),
    "step_timeline": (step_timeline, dict(precision=NAMES, optimizer=NAMES, zero_stage=ANY,
                                          tensor_parallel=ANY, accumulated_gradients=ANY)),
    "resident_bytes": (resident_bytes, dict(precision=NAMES, optimizer=NAMES, zero_stage=ANY,
                                            ranks=ANY, params=ANY)),
    "state_bytes": (state_bytes, dict(zero_stage=ANY, ranks=ANY)),
    "mfu": (mfu, dict(tokens_per_second=ANY, flops_per_token=ANY, gpus=ANY, peak_flops=ANY)),
    "hfu": (hfu, dict(tokens_per_second=ANY, flops_per_token=ANY, gpus=ANY, peak_flops=ANY,
                      recompute_factor=ANY)),
    "step_time_lower_bound": (step_time_lower_bound, dict(
        tokens=ANY, flops_per_token=ANY, gpus=ANY, peak_flops=ANY, mfu=ANY)),
    "gpus_to_hold": (gpus_to_hold, dict(total_bytes=ANY, per_gpu_bytes=ANY)),
    "usable_bytes": (usable_bytes, dict(hardware_name=NAMES)),
    "model": (model, dict(name=NAMES)),
    "Model": (lambda **kw: Model(**{"name": "x", "family": "llama", "layers": 2, "hidden": 64,
                                    "heads": 4, "kv_heads": 2, "ffn": 128, "vocab": 100,
                                    "seq": 16, **kw}),
              dict(family=NAMES, layers=ANY, hidden=ANY, heads=ANY, kv_heads=ANY, ffn=ANY,
                   vocab=ANY, seq=ANY, head_dim=ANY)),
    "Model.subs": (lambda **kw: model("8b").subs(resident_bytes("bf16", "adam", 3), **kw),
                   dict(N=ANY, d=ANY, Q=ANY, Z=ANY)),
}


#: Arguments without a default.
REQUIRED = {
    "mfu": ("tokens_per_second", "flops_per_token", "gpus", "peak_flops"),
    "hfu": ("tokens_per_second", "flops_per_token", "gpus", "peak_flops", "recompute_factor"),
    "step_time_lower_bound": ("tokens", "flops_per_token", "gpus", "peak_flops"),
    "gpus_to_hold": ("total_bytes", "per_gpu_bytes"),
    "model": ("name",),
}


def numbers_in(result: object) -> list[sp.Expr]:
    """Every expression a result holds, at a positive point for its symbols (t = 8, the rest 3)."""
    if isinstance(result, tuple):
        return [value for item in result for value in numbers_in(item)]
    if hasattr(result, "end_of_forward"):
        return numbers_in((result.end_of_forward, result.end_of_backward, result.simple_sum))
    if hasattr(result, "params") and hasattr(result, "optimizer"):
        return numbers_in((result.params, result.grads, result.optimizer))
    if isinstance(result, Model):
        return [sp.Integer(result.parameters)]
    expr = sp.sympify(result)
    return [expr.subs({symbol: 8 if symbol == t else 3 for symbol in expr.free_symbols})]


@pytest.mark.parametrize("name", sorted(CALLS))
def test_library_raises_naming_the_argument_or_returns_finite_values(name):
    function, arguments = CALLS[name]

    required = {key: arguments[key] for key in REQUIRED.get(name, ())}
    optional = {key: value for key, value in arguments.items() if key not in required}

    @FAST
    @given(st.fixed_dictionaries(required, optional=optional))
    def check(kwargs):
        try:
            result = function(**kwargs)
        except ValueError as error:
            named = str(error).partition(":")[0]
            assert named in {*kwargs, "profile", "attention_kernel", "mask", "recompute", "precision",
                             "optimizer", "hardware_name", "name", "model", "profile",
                             "family", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab",
                             "seq", "head_dim", "peak"}, (name, kwargs, error)
            return
        for value in numbers_in(result):
            assert value.is_finite and value.is_extended_real, (name, kwargs, value)
            if name not in ("mfu", "hfu", "step_time_lower_bound"):
                assert value >= 0, (name, kwargs, value)

    check()
