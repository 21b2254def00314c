"""Issue 28's hostile inputs: config files read bounded, counts kept under 2^53, times printed readably."""
import contextlib
import io
import json
import os

import pytest

from derive.cli import main as report_main
from derive.hf import from_config
from derive.inputs import MAX_CONFIG_BYTES, MAX_NESTING, MAX_PARAMETERS, nesting, read_json
from derive.model import Model
from derive.plan import main as plan_main
from derive.presets import model
from derive.units import format_percent, format_seconds


def run(main, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as stop:
            status = stop.code
    return status, out.getvalue(), err.getvalue()


def nested(depth: int) -> str:
    return '{"model_type": "llama", "x": ' + "[" * depth + "1" + "]" * depth + "}"


def test_nesting_skips_brackets_inside_strings():
    assert nesting('{"a": "[[[{{{", "b": [[1], {"c": "]]]\\"[["}]}') == 3
    assert nesting("[]") == 1 and nesting('"{"') == 0
    assert nesting("[" * 100_000) == MAX_NESTING + 1  # counting stops past the limit


@pytest.fixture
def hostile(tmp_path):
    """Config files no reader should take: too deep, too large, not a regular file, not UTF-8."""
    files = {"deep": tmp_path / "deep.json", "huge": tmp_path / "huge.json",
             "fifo": tmp_path / "fifo", "folder": tmp_path / "folder", "binary": tmp_path / "binary.json"}
    files["deep"].write_text(nested(100_000))
    files["huge"].write_text('{"a": "' + "x" * MAX_CONFIG_BYTES + '"}')
    os.mkfifo(files["fifo"])
    files["folder"].mkdir()
    files["binary"].write_bytes(b"\xff\xfe{")
    return files


WHY = {"deep": f"more than {MAX_NESTING} levels deep", "huge": "larger than 16 MiB",
       "fifo": "is not a regular file", "folder": "is not a regular file", "binary": "is not JSON"}


@pytest.mark.parametrize("kind", sorted(WHY))
def test_config_files_are_read_bounded(hostile, kind):
    path = hostile[kind]
    with pytest.raises(ValueError, match=f"^config: .*{WHY[kind]}"):
        from_config(path)
    status, out, err = run(report_main, ["--config", str(path)])
    assert status == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"derive: error: --config: {path}: config: ") and WHY[kind] in err
    status, _, err = run(plan_main, ["--config", str(path), "--gpus", "8", "--tokens", "8192"])
    assert status == 2 and err.startswith("derive.plan: error: --config: ") and WHY[kind] in err


def test_nesting_at_the_limit_is_read(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(nested(MAX_NESTING - 1))
    value = read_json("config", path)["x"]       # the object and MAX_NESTING - 1 arrays
    for _ in range(MAX_NESTING - 1):
        (value,) = value
    assert value == 1
    path.write_text(nested(MAX_NESTING))
    with pytest.raises(ValueError, match=f"more than {MAX_NESTING} levels"):
        read_json("config", path)


def test_parameter_count_stays_under_2_48():
    # N = L (4 h^2 + 3 h f + 2 h) + 2 V h + h (Llama: q k v o at a = g, gate up down, two norms)
    ok = Model("ok", "llama", 1000, 2**17, 1, 1, 2**17, 1000, 16)
    assert ok.parameters == 1000 * (4 * 2**34 + 3 * 2**34 + 2 * 2**17) + 2 * 1000 * 2**17 + 2**17
    assert ok.parameters <= MAX_PARAMETERS
    with pytest.raises(ValueError, match="^ffn: the parameter count N would pass 2\\^48"):
        Model("big", "llama", 2, 64, 1, 1, 2**50, 8, 16)
    with pytest.raises(ValueError, match="^vocab: "):   # 2^47 * 2 * 8 = 2^51 in the two embeddings
        Model("big", "llama", 1, 8, 1, 1, 8, 2**47, 16)
    # seq is no size of a Llama table (RoPE): only GPT's learned positions make it count
    assert Model("long", "llama", 1, 8, 1, 1, 8, 8, 2**53).parameters < 2**12
    with pytest.raises(ValueError, match="^seq: "):
        Model("long", "gpt", 1, 8, 1, 1, 8, 8, 2**50)


@pytest.mark.parametrize("argv, option", [
    (["--model", "8b", "--micro-batch", str(10**12)], "--micro-batch"),
    (["--model", "8b", "--seq", str(10**8)], "--seq"),
    (["--layers", str(2**53), "--hidden", "8", "--heads", "1", "--ffn", "8", "--vocab", "8"], "--layers"),
    (["--model", "70b", "--hidden", str(2**30)], "--hidden"),
])
def test_counts_past_2_53_name_the_option(argv, option):
    status, out, err = run(report_main, argv)
    assert status == 2 and out == ""
    assert err.startswith(f"derive: error: {option}: ") and "would pass 2^" in err


def test_plan_checks_the_sequence_before_any_work():
    status, _, err = run(plan_main, ["--model", "8b", "--gpus", "8", "--tokens", str(2**53),
                                     "--seq", str(2**53)])
    assert status == 2 and err.startswith("derive.plan: error: --seq: ")
    assert " m " not in err and "request_bytes" not in err
    # 2^53 tokens in sequences of 2^16: m = 2^37 / (b d), in integers (no int64 product overflows)
    status, out, _ = run(plan_main, ["--model", "8b", "--gpus", "8", "--tokens", str(2**53),
                                     "--seq", str(2**16), "--json"])
    layouts = json.loads(out)["layouts"]
    assert status == 0 and layouts
    assert all(row["m"] * 2**16 * row["b"] * row["d"] == 2**53 for row in layouts)


def test_times_are_printed_with_units_never_as_300_digits():
    assert format_seconds(4.654) == "4.65 s" and format_seconds(0.00123) == "0.00123 s"
    assert format_seconds(3.15576e7 * 2) == "6.31e+07 s (2 years)"
    assert format_seconds(1e300) == "over 10^6 years"
    assert format_percent(0.4) == "40%" and format_percent(1e-300) == "under 0.01%"
    status, out, _ = run(report_main, ["--model", "8b", "--tokens", "4194304", "--gpus", "8",
                                       "--mfu", "1e-300"])
    assert status == 0 and "over 10^6 years at under 0.01% MFU" in out
    assert max(len(word) for word in out.split()) < 40
    # the planner's step times are predicted (no --mfu); 2^53 tokens take years, printed readably
    status, out, _ = run(plan_main, ["--model", "8b", "--gpus", "8", "--tokens", str(2**53),
                                     "--seq", str(2**16)])
    assert status == 0 and "e+" in out and max(len(word) for word in out.split()) < 40


def test_presets_stay_inside_the_bounds():
    for name in ("8b", "70b", "405b", "175b"):
        assert model(name).parameters < MAX_PARAMETERS


@pytest.mark.parametrize("axes, field", [
    ({"b": [2**70]}, "b"), ({"d": [0]}, "d"), ({"s": [2**53 + 1]}, "s"), ({"t": [1.5]}, "t"),
    ({"s": [2**53], "b": [2], "d": [4], "tokens": 2**53}, "b"),
])
def test_sweep_axes_are_bounded_sizes(axes, field):
    from derive.sweep import grid

    with pytest.raises(ValueError, match=f"^{field}: "):
        grid(["8b"], **axes)


@pytest.mark.parametrize("name", ["mixtral-8x7b-v0.1", "qwen1.5-moe-a2.7b", "deepseek-v3"])
def test_an_moe_config_with_too_many_layers_is_refused_before_listing_them(name):
    from derive.hf import published_config

    config = published_config(name)
    config["num_hidden_layers"] = 2**48           # one index per layer would need petabytes
    with pytest.raises(ValueError, match="^num_hidden_layers: .*at most 2\\^16"):
        from_config(config)


def test_plan_names_config_and_its_field(tmp_path):
    from derive.hf import published_config

    config = published_config("qwen2.5-7b")
    config["num_hidden_layers"] = "8"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    status, _, err = run(plan_main, ["--config", str(path), "--gpus", "8", "--tokens", "8192"])
    assert status == 2 and err.startswith(f"derive.plan: error: --config: {path}: num_hidden_layers: ")
