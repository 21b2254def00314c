"""Random bad values for every option and argument: one line and exit 2 / a ValueError naming it, or a valid result.

Never a traceback, a hang, NaN, infinity, negative or impossible sizes, a number
nobody can read, or a file touched outside --out. Commands are driven in process
(their ``main``) for speed; tests/test_bad_input.py runs them as subprocesses too.
Every draw is seeded. A fast run makes about 3,000 hostile inputs: the commands of
tests/fuzz_cases.COMMANDS (1,360: report 800, plan 120, check 20, render 60, comm 120,
predict 120; calibrate takes flags only and its fit outlasts the 10 s hang bound), config files
and mappings for from_config (230), the library's calls (15 x 60, hypothesis,
derandomised), the report's option lists (60) and page links for parse.js (50 links,
900 field readings); DERIVE_FUZZ_SCALE=10 (CI's slower variant, ``make fuzz``)
multiplies every count.
"""
import contextlib
import io
import json
import math
import random
import re
import subprocess
from pathlib import Path

import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from conftest import after_render

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
from derive.cli import main
from derive.model import Model
from derive.options.report import SHAPE_OPTIONS
from derive.presets import model
from derive.symbols import t
from derive.hf import from_config, published_config, published_names
from derive.inputs import MAX_PARAMETERS
from derive.render import __main__ as renderer
from derive.render.web import HAND_WRITTEN, calculator_data
from fuzz_cases import (
    COMMANDS,
    PATH_CONFIG,
    PATH_OUT,
    SCALE,
    draw_argv,
    hostile_configs,
    hostile_text,
    out_paths,
    problems_in_output,
    run_main,
    tree,
)

FAST = settings(max_examples=60 * SCALE, deadline=None, derandomize=True,
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


# ---- every command of tests/fuzz_cases.COMMANDS: hostile command lines, in process ----

@pytest.fixture(scope="module")
def sandbox(tmp_path_factory) -> tuple[Path, dict[str, list[str]]]:
    """A folder of hostile config files and --out targets; the commands run inside it."""
    folder = tmp_path_factory.mktemp("fuzz")
    paths = {PATH_CONFIG: hostile_configs(folder / "configs", random.Random(28), 20),
             PATH_OUT: out_paths(folder / "out")}
    return folder, paths


def touched_outside(before: dict, after: dict, outs: list[Path], folder: Path) -> list[str]:
    """Entries that changed and are neither under an --out folder nor a folder made to hold one."""
    inside = [str(out.relative_to(folder)) for out in outs if out.is_relative_to(folder)]
    wrong = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old == new or (old and new and old[0] == new[0] and Path(folder / name).is_dir()):
            continue                                   # a folder's own size and time follow its entries
        if any(name == out or name.startswith(out + "/") for out in inside):
            continue
        if old is None and any(out.startswith(name + "/") for out in inside):
            continue                                   # a new parent of --out
        wrong.append(name)
    return wrong


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_meets_hostile_options_with_one_line_or_a_sound_result(name, sandbox, fresh,
                                                                              monkeypatch):
    command, (folder, paths) = COMMANDS[name], sandbox
    rendered = {path.name: path.read_text(encoding="utf-8") for path in fresh.iterdir()}
    monkeypatch.setattr(renderer, "render_files", lambda templates=None: dict(rendered))  # one render
    monkeypatch.setattr(renderer, "DEFAULT_OUT", folder / "out" / "default")
    monkeypatch.chdir(folder)
    sheet = tree(renderer.ROOT / "formulas")
    rng = random.Random(f"fuzz {name}")
    findings, cases = [], command.cases * SCALE
    for _ in range(cases):
        argv = draw_argv(rng, command, paths)
        outs = [Path(part.partition("=")[2]) for part in argv if part.startswith("--out=")]
        outs = [folder / out for out in outs or [renderer.DEFAULT_OUT]] if name == "render" else []
        before = tree(folder)
        status, out, err = run_main(command.main, argv)
        if isinstance(status, BaseException):
            findings.append((argv, f"{type(status).__name__}: {status}"))
        elif status == 2:
            lines = err.splitlines()
            if out or len(lines) != 1 or "--" not in lines[0] or not (
                    lines[0].startswith(f"{command.prog}: error: ") or lines[0].startswith("--document: ")):
                findings.append((argv, f"not one error line: {err!r}"))
        elif status != 0 or err:
            findings.append((argv, f"status {status}: {err[-300:]!r}"))
        else:
            findings += [(argv, problem) for problem in problems_in_output(out, argv)]
        findings += [(argv, f"touched {path}") for path in touched_outside(before, tree(folder), outs, folder)]
    assert tree(renderer.ROOT / "formulas") == sheet
    assert cases >= command.cases
    assert not findings, findings[:5]


def mutated(rng: random.Random) -> dict:
    """A published config with one to three fields given hostile values (or removed)."""
    config = published_config(rng.choice(published_names()))
    for _ in range(rng.randint(1, 3)):
        key = rng.choice(sorted(config))
        value = rng.choice([2**48, 2**52, 2**53 + 1, 10**12, -1, 0, 1.5, "8", None, [8], {"a": 1}, True,
                            math.nan, math.inf, -math.inf, 1e308, "", 2**1000, hostile_text(rng)])
        config.pop(key) if rng.random() < 0.1 else config.__setitem__(key, value)
    return config


def test_from_config_names_a_field_or_builds_a_sound_model(sandbox):
    _, paths = sandbox
    rng = random.Random(2802)
    inputs = [mutated(rng) for _ in range(200 * SCALE)] + paths[PATH_CONFIG] + [
        {}, {"model_type": None}, {"model_type": ["llama"]}, {"model_type": "llama", "hidden_size": {}}]
    findings = []
    for config in inputs:
        status, _, _ = run_main(lambda _: from_config(config), [])
        if isinstance(status, ValueError):
            if not re.match(r"^[\w.\[\]-]+: \S", str(status)):
                findings.append((config, f"unnamed: {status}"))
        elif isinstance(status, BaseException):
            findings.append((config, f"{type(status).__name__}: {status}"))
        elif not (isinstance(status.parameters, int) and 0 < status.parameters <= MAX_PARAMETERS):
            findings.append((config, f"N = {status.parameters}"))
    assert len(inputs) >= 220
    assert not findings, findings[:5]


# ---- the page's links: hostile query strings through URLSearchParams and parse.js, in Node ----

def hostile_query(rng: random.Random, options: list[str]) -> str:
    """A link's query: known and unknown keys, repeated, percent-escapes broken or not, long values."""
    parts = []
    for _ in range(rng.randint(1, 6)):
        key = rng.choice(options + ["config", "x", "", "%zz", "model%00"])
        value = rng.choice([hostile_text(rng), "%", "%zz", "%00", "+8+", "%2B8", "8%20GB", "%E2%80%AE8",
                            "9" * rng.choice((17, 400, 100_000)), "&", "=", "%F0%9F"])
        parts.append(f"{key}={value}")
    return "&".join(parts)


@after_render
def test_the_page_reads_hostile_links_field_by_field(tmp_path):
    _, data = calculator_data()
    rng = random.Random(2803)
    options = [field["option"] for field in data["fields"]]
    queries = [hostile_query(rng, options) for _ in range(50 * SCALE)]
    script = tmp_path / "links.js"
    script.write_text(HAND_WRITTEN[0].read_text() + """
const [data, queries] = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
const parse = DeriveParse(data);
console.log(JSON.stringify(queries.map((query) => {
  const params = new URLSearchParams(query);
  return data.fields.map((field) => {
    try {
      return parse.parseField(field, params.has(field.option) ? params.get(field.option) : field.default);
    } catch (error) {
      return { thrown: String(error) };
    }
  });
})));
""")
    (tmp_path / "queries.json").write_text(json.dumps([data, queries]))
    run = subprocess.run(["node", str(script), str(tmp_path / "queries.json")], capture_output=True,
                         text=True, timeout=120, check=True)
    findings, readings = [], 0
    for query, results in zip(queries, json.loads(run.stdout)):
        for field, result in zip(data["fields"], results):
            readings += 1
            bounds, value = field["bounds"], result.get("value")
            if "thrown" in result or ("error" in result) == ("value" in result):
                findings.append((query, field["option"], result))
            elif "error" in result and ("\n" in result["error"] or field["option"] not in result["error"]):
                findings.append((query, field["option"], result))
            elif isinstance(value, (int, float)) and not isinstance(value, bool) and bounds and not (
                    math.isfinite(value) and bounds["above"] < value <= bounds["at_most"]):
                findings.append((query, field["option"], result))
    assert readings >= 600 * SCALE
    assert not findings, findings[:5]
