"""formulas/index.html plans a layout: its fields, checks and the bytes each rank sends, against the CLIs.

Every data-key the page shows that ``derive report --json`` or ``python -m derive.comm --json``
also has (dotted for nested keys) must equal the CLI's value for the same options: exactly for
integers, to 1e-12 for floats. A bad layout field shows comm's own line next to it and greys only
the layout's figures. Same browser set-up as test_web_browser.py.
"""
import json

import pytest
from test_web_browser import browser, calculator, errors, open_page, page  # noqa: F401 (fixtures)

from derive.cli import run as report_run
from derive.comm import run as comm_run
from derive.predict import run as predict_run
from derive.names import is_moe
from derive.options.messages import UsageError

pytestmark = pytest.mark.xdist_group("web_browser")

#: The layout options as derive comm takes them (--sequence-parallel: a flag).
COMM_OPTIONS = ("model", "seq", "tp", "pp", "vp", "cp", "ep", "etp", "dp", "gpus", "micro-batch", "global-batch",
                "precision", "zero", "recompute")
#: The dense report's options; an MoE report's (its layout's dp from --gpus / (tp pp cp)).
DENSE_REPORT = ("model", "seq", "precision", "optimizer", "micro-batch", "profile", "budget", "peak", "gpu",
                "tokens", "mfu", "step-time")
MOE_REPORT = ("model", "seq", "precision", "micro-batch", "tp", "pp", "ep", "etp", "moe-profile")


def flattened(data: object, prefix: str = "") -> dict[str, object]:
    """A JSON object's numbers by dotted key (lists left out: the page keys none)."""
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            out.update(flattened(value, f"{prefix}{key}."))
        return out
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        return {prefix[:-1]: data}
    return {}


def data_parallel(options: dict[str, str]) -> int | None:
    """--dp, else --gpus / (tp pp cp) by hand; None where neither is given."""
    if "dp" in options:
        return int(options["dp"])
    if "gpus" not in options:
        return None
    return int(options["gpus"]) // (int(options.get("tp", 1)) * int(options.get("pp", 1)) * int(options.get("cp", 1)))


def sequence_parallel(options: dict[str, str]) -> list[str]:
    """The page's sequence-parallel=1 / 0 as the CLI's flag; none: the layout's default (on when tp > 1)."""
    return {"1": ["--sequence-parallel"], "0": ["--no-sequence-parallel"]}.get(options.get("sequence-parallel"), [])


def comm_json(options: dict[str, str]) -> dict[str, object]:
    argv = [f"--{o}={options[o]}" for o in COMM_OPTIONS if o in options]
    argv += sequence_parallel(options)
    data = json.loads(comm_run([*argv, "--json"]))
    return {key: value for key, value in flattened(data).items() if key != "seq"}


def report_json(options: dict[str, str]) -> dict[str, object]:
    moe = is_moe(options["model"])
    argv = [f"--{o}={options[o]}" for o in (MOE_REPORT if moe else DENSE_REPORT) if o in options]
    dp = data_parallel(options)
    if moe and dp is not None:  # the MoE report has no --cp: its d is the layout's d c (its world t p d)
        argv.append(f"--dp={dp * int(options.get('cp', 1))}")
    if not moe and options.get("zero", "0") != "0":
        argv += [f"--zero={options['zero']}", f"--dp={dp}"]
    if not moe and "tokens" in options:
        argv.append(f"--gpus={options['gpus']}")
    (figures,) = json.loads(report_run([*argv, "--json"])).values()
    return {key: figure["value"] if isinstance(figure, dict) else figure
            for key, figure in figures.items() if key != "seq"}


def page_values(browser) -> dict[str, str]:
    """data-key -> data-value (its text) of every figure shown."""
    pairs = browser.execute_script(
        "return [...document.querySelectorAll('output[data-key][data-value]')]"
        ".filter((e) => e.closest('.figure').offsetParent !== null).map((e) => [e.dataset.key, e.dataset.value]);")
    return dict(pairs)


def assert_same(shown: dict[str, str], expected: dict[str, object], options) -> None:
    for key, value in expected.items():
        assert key in shown, (options, key)
        if isinstance(value, int):
            assert float(shown[key]) == value and float(shown[key]).is_integer(), (options, key, shown[key], value)
        else:
            assert float(shown[key]) == pytest.approx(value, rel=1e-12, abs=0), (options, key)


ISSUE = {"model": "deepseek-v3", "gpu": "h100", "gpus": "1024", "tp": "2", "pp": "8", "ep": "64", "seq": "4096",
         "micro-batch": "1", "global-batch": "8192", "precision": "bf16", "recompute": "full"}

#: Links over every layout option: a dense preset over tp, pp, cp, dp; DeepSeek-V3 as the issue links it;
#: shipped configs by name; MoE with ZeRO and FP8; interleaving.
LINKS = [
    {"model": "70b", "gpus": "256", "tp": "8", "pp": "4", "cp": "2", "seq": "8192", "global-batch": "64",
     "sequence-parallel": "1"},
    {**ISSUE, "sequence-parallel": "1"},
    {"model": "qwen2.5-7b", "gpus": "16", "tp": "4", "zero": "1", "recompute": "selective", "micro-batch": "2",
     "global-batch": "32"},
    {"model": "gemma-2-9b", "dp": "8", "zero": "3", "precision": "bf16-fp32grad"},
    {"model": "mixtral-8x7b", "gpus": "64", "tp": "2", "ep": "8", "zero": "1", "sequence-parallel": "1",
     "precision": "fp8-delayed", "global-batch": "128"},
    {"model": "8b", "gpus": "64", "pp": "4", "vp": "2", "global-batch": "64", "zero": "2"},
    # --gpus without --tokens and --dp without --zero: the layout's, not refused (the report reads neither)
    {"model": "llama3-8b", "gpus": "8"},
    {"model": "llama3-8b", "dp": "8"},
    {"model": "405b", "gpus": "16384", "tp": "8", "pp": "16", "cp": "1", "global-batch": "2048", "seq": "8192",
     "recompute": "full", "sequence-parallel": "1"},
    # t_E e = 64 over t c d = 64 (predict's rule) but t d = 16: the MoE report's world is t p (d c); the step's EP
    # overlap pairs each all-to-all with its own part (tests/test_page_step.py)
    {"model": "mixtral-8x7b", "gpus": "64", "tp": "8", "cp": "4", "ep": "8", "etp": "8", "micro-batch": "8",
     "zero": "3", "seq": "4096", "sequence-parallel": "1"},
]


@pytest.mark.parametrize("options", LINKS, ids=range(len(LINKS)))
def test_every_key_the_clis_have_is_their_value(browser, calculator, options):
    open_page(browser, calculator, options)
    assert errors(browser) == {}
    shown = page_values(browser)
    comm = {key: value for key, value in comm_json(options).items() if key in shown}
    # the bytes by group and the layout's sizes are all on the page
    assert {key for key in comm_json(options) if key.startswith("per_rank_bytes_per_step.")} <= set(comm)
    assert {"layout.gpus", "layout.dp", "layout.micro_batches"} <= set(comm)
    assert_same(shown, comm, options)
    assert_same(shown, report_json(options), options)


def test_dp_is_derived_from_the_gpus_and_shown(browser, calculator):
    # 1024 GPUs over t p c = 2 x 8 x 1: 64 data-parallel ranks, 8192 / (1 x 64) = 128 micro-batches
    open_page(browser, calculator, {**ISSUE, "sequence-parallel": "1"})
    shown = page_values(browser)
    assert (shown["layout.dp"], shown["layout.gpus"], shown["layout.micro_batches"]) == ("64", "1024", "128")


#: (options, the field comm names): the layout's checks, each comm's own line.
BAD_LAYOUTS = [
    ({"model": "70b", "gpus": "100", "tp": "8"}, "gpus"),
    ({"model": "70b", "gpus": "64", "dp": "4", "tp": "8"}, "gpus"),
    ({"model": "70b", "dp": "8", "global-batch": "12"}, "global-batch"),
    ({"model": "70b", "vp": "2"}, "vp"),
    ({"model": "70b", "pp": "4", "vp": "2", "dp": "2", "global-batch": "6"}, "vp"),
    ({"model": "70b", "tp": "16"}, "tp"),
    ({"model": "70b", "pp": "41", "vp": "2", "global-batch": "82"}, "pp"),
    ({"model": "70b", "cp": "3"}, "cp"),
    ({"model": "70b", "etp": "2"}, "etp"),
    ({"model": "70b", "ep": "2", "dp": "2"}, "ep"),
    ({"model": "deepseek-v3", "ep": "3", "dp": "3"}, "ep"),
    ({"model": "deepseek-v3", "ep": "8", "dp": "4"}, "ep"),
    ({**ISSUE, "sequence-parallel": "0"}, "sequence-parallel"),
    ({"model": "deepseek-v3", "cp": "2"}, "cp"),
    ({"model": "70b", "cp": "two"}, "cp"),
    ({"model": "70b", "recompute": "most"}, "recompute"),
]


def comm_line(options: dict[str, str]) -> str:
    argv = [f"--{o}={options[o]}" for o in COMM_OPTIONS if o in options]
    argv += sequence_parallel(options)
    return _comm_error(argv)


def report_line(options: dict[str, str]) -> str | None:
    """The report's UsageError line for the page's options, None where it takes them."""
    try:
        report_json(options)
    except UsageError as error:
        return " ".join(str(error).split())
    return None


def _comm_error(argv: list[str]) -> str:
    """derive comm's one error line for ``argv`` (argparse's or a UsageError), without its prefix."""
    import contextlib
    import io

    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            comm_run(argv)
        except UsageError as error:
            return " ".join(str(error).split())
        except SystemExit:
            return stderr.getvalue().strip().split(": error: ", 1)[1]
    raise AssertionError(f"{argv} gave no error")


@pytest.mark.parametrize("options, option", BAD_LAYOUTS, ids=range(len(BAD_LAYOUTS)))
def test_a_bad_layout_marks_its_field_and_greys_only_the_layouts_figures(browser, calculator, options, option):
    open_page(browser, calculator, options)
    shown_errors = errors(browser)
    assert set(shown_errors) == {option}
    # where the report refuses the same field (an MoE report's ep), its line stands: both are a CLI's
    assert shown_errors[option] in (comm_line(options), report_line(options)), options
    assert browser.find_element("name", option).get_attribute("aria-invalid") == "true"
    shown = page_values(browser)
    assert not any(key.startswith(("per_rank_bytes_per_step", "layout.")) for key in shown)
    if option in ("cp", "recompute", "gpus", "vp", "global-batch", "sequence-parallel") and "two" not in options.values():
        # the report's figures stay live: it reads none of these (its --gpus only with --tokens)
        assert_same(shown, report_json(options), options)


# ---- layout.js in Node, on hand values ----

def layout_js(cases: list[tuple[str, dict[str, str]]], tmp_path) -> list[dict]:
    """layout.js's answer for each (model, field texts): {errors} or the sizes and figures it derives."""
    import subprocess

    from test_web import node
    from derive.render.web import HAND_WRITTEN, calculator_data

    code, data = calculator_data()
    parse, layout = HAND_WRITTEN[0], next(path for path in HAND_WRITTEN if path.name == "layout.js")
    script = tmp_path / "layout.js"
    script.write_text(code.replace("const DERIVE_FUNCTIONS", "var DERIVE_FUNCTIONS") + parse.read_text()
                      + layout.read_text() + """
const [data, cases] = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
const parse = DeriveParse(data);
const layout = DeriveLayout(data, parse);
console.log(JSON.stringify(cases.map(([name, texts]) => {
  const parsed = {};
  for (const field of data.fields) parsed[field.option] = parse.parseField(field, texts[field.option] || "").value;
  const flags = { sequence_parallel: parsed["sequence-parallel"] === true, zero: parsed.zero ?? 0,
                  precision: parsed.precision ?? "bf16", recompute: parsed.recompute ?? "none" };
  const config = layout.configuration(texts, parsed, data.layout.comm.models[name], flags);
  if (Object.keys(config.errors).length) return config.errors;
  return Object.fromEntries(layout.evaluate(config).map((figure) => [figure.formula.key, figure.value]));
})));
""")
    (tmp_path / "cases.json").write_text(json.dumps([data, cases]))
    run = subprocess.run([node(), str(script), str(tmp_path / "cases.json")], capture_output=True, text=True,
                         timeout=120, check=True)
    return json.loads(run.stdout)


def test_the_layout_checks_and_sizes_on_hand_values(tmp_path):
    cases = [
        ("llama3-70b", {"gpus": "1024", "tp": "8", "pp": "4"}),
        ("llama3-70b", {"gpus": "100", "tp": "8"}),
        ("llama3-70b", {"gpus": "64", "dp": "4", "tp": "8"}),
        ("llama3-70b", {"dp": "8", "global-batch": "12"}),
        ("llama3-70b", {"pp": "4", "vp": "2", "dp": "2", "global-batch": "6"}),
        ("llama3-70b", {"cp": "3"}),
        ("deepseek-v3", {"ep": "8", "tp": "2", "dp": "8"}),
        ("llama3-70b", {"pp": "4", "global-batch": "8"}),
        ("llama3-70b", {"etp": "2"}),
    ]
    got = layout_js(cases, tmp_path)
    # 1024 GPUs over t p c = 8 x 4 x 1: 32 data-parallel ranks; one micro-batch of one sequence each
    assert (got[0]["layout.dp"], got[0]["layout.gpus"], got[0]["layout.micro_batches"]) == (32, 1024, 1)
    assert got[1] == {"gpus": "--gpus: 100 is not a multiple of tp x pp x cp = 8"}
    assert got[2] == {"gpus": "--gpus: 64 GPUs disagree with tp x pp x cp x dp = 32"}
    assert got[3] == {"global-batch": "--global-batch: 12 is not a whole number of micro-batches of micro_batch x "
                                      "dp = 1 x 8 sequences (megatron/core/num_microbatches_calculator.py)"}
    # 6 sequences over 2 replicas of micro-batches of 1: m = 3, not a multiple of p = 4
    assert got[4] == {"vp": "--vp: the interleaved schedule needs the 3 micro-batches to be a multiple of pp = 4 "
                            "(megatron/core/pipeline_parallel/schedules.py)"}
    assert got[5]["cp"].startswith("--cp: 2 x cp = 6 does not divide seq = 8192 (")
    assert got[6] == {"sequence-parallel": "--sequence-parallel: expert parallelism with tensor parallelism needs "
                                           "sequence parallelism (megatron/training/arguments.py validate_args)"}
    # Llama 3 70B, h = 8192, s = 8192, b = 1 in bf16: a stage boundary sends s b h 2 = 2^27 bytes, once per
    # micro-batch forward and once backward; 8 micro-batches: 2 x 8 x 2^27 = 2^31 bytes (Narayanan et al. 2021, 3.2)
    assert got[7]["per_rank_bytes_per_step.pp"] == 2 * 8 * 8192 * 8192 * 2
    assert got[7]["per_rank_bytes_per_step.tp"] == 0 and got[7]["per_rank_bytes_per_step.dp"] == 0
    assert got[8] == {"etp": "--etp: llama3-70b has no routed experts"}


#: (options, the report's field): a bad report field greys the report's figures only; the layout's stay.
BAD_REPORT_FIELDS = [
    ({"model": "70b", "gpus": "64", "tp": "8", "budget": "80"}, "budget"),
    ({"model": "70b", "gpus": "64", "tp": "8", "zero": "1", "mfu": "0.5"}, "mfu"),
    ({"model": "deepseek-v3", "gpus": "256", "ep": "8", "tp": "2", "sequence-parallel": "1", "optimizer": "lion"},
     "optimizer"),
]


@pytest.mark.parametrize("options, option", BAD_REPORT_FIELDS, ids=range(len(BAD_REPORT_FIELDS)))
def test_a_bad_report_field_leaves_the_layouts_figures_live(browser, calculator, options, option):
    open_page(browser, calculator, options)
    assert list(errors(browser)) == [option]
    assert browser.find_element("name", option).get_attribute("aria-invalid") == "true"
    shown = page_values(browser)
    # the layout's figures and the predicted step (its memory by stage too), which read the layout, not the report
    assert all(key.startswith(("per_rank_bytes_per_step.", "layout.", "breakdown.", "memory.")) or key in STEP_KEYS
               for key in shown), shown
    comm = comm_json(options)
    assert {key for key in comm if key.startswith("per_rank_bytes_per_step.")} <= set(shown)
    assert_same(shown, {key: value for key, value in comm.items() if key in shown}, options)


def test_the_bytes_by_group_are_a_bar(browser, calculator):
    options = {**ISSUE, "sequence-parallel": "1"}
    open_page(browser, calculator, options)
    comm = comm_json(options)
    groups = {key.split(".")[1]: value for key, value in comm.items() if key.startswith("per_rank_bytes_per_step.")}
    shown = browser.execute_script(
        "const bar = document.getElementById('comm-bar'); const width = bar.getBoundingClientRect().width;"
        "return {parts: [...bar.querySelectorAll('.segment')].map((s) => s.getBoundingClientRect().width / width),"
        " label: bar.getAttribute('aria-label'), role: bar.getAttribute('role')};")
    total = sum(groups.values())
    assert shown["parts"] == pytest.approx([value / total for value in groups.values()], abs=0.01)
    assert shown["role"] == "img" and "Tensor parallel (TP)" in shown["label"]


@pytest.mark.parametrize("options", LINKS[:5], ids=range(5))
def test_the_layouts_copy_as_command_runs_to_the_pages_figures(browser, calculator, options):
    import shlex

    from derive.comm import build_parser
    from derive.render.page_layout import COMM_COMMAND

    assert build_parser().prog == COMM_COMMAND
    open_page(browser, calculator, options)
    words = shlex.split(browser.find_element("id", "comm-command").text)
    assert words[:3] == ["python", "-m", "derive.comm"]
    data = flattened(json.loads(comm_run([*words[3:], "--json"])))
    shown = page_values(browser)
    layout = [key for key in shown if key.startswith(("per_rank_bytes_per_step.", "layout."))]
    assert layout and all(key in data for key in layout)
    assert_same(shown, {key: data[key] for key in layout}, words)


# ---- the predicted step: derive predict --json ----

#: derive predict's options the page's links carry (--gpu: predict's default where not given).
PREDICT_OPTIONS = ("model", "gpu", "seq", "tp", "pp", "vp", "cp", "ep", "etp", "dp", "gpus", "micro-batch",
                   "global-batch", "precision", "zero", "recompute")
#: Dense and MoE, every parallel dimension, recompute, ZeRO stages, FP8 and FP4 recipes, the issue's own link
#: (sequence parallelism and the distributed optimizer at their defaults: on).
STEP_LINKS = [
    ISSUE,
    {"model": "70b", "gpus": "256", "tp": "8", "pp": "4", "cp": "2", "seq": "8192", "global-batch": "64"},
    {"model": "8b", "gpus": "64", "pp": "4", "vp": "2", "global-batch": "64", "zero": "2", "recompute": "selective"},
    {"model": "mixtral-8x7b", "gpus": "64", "tp": "2", "ep": "8", "zero": "1", "precision": "fp8-delayed",
     "global-batch": "128"},
    {"model": "qwen2.5-7b", "gpus": "16", "tp": "4", "zero": "0", "recompute": "selective", "micro-batch": "2",
     "global-batch": "32", "sequence-parallel": "0", "seq": "4096"},
    {"model": "405b", "gpus": "16384", "tp": "8", "pp": "16", "global-batch": "2048", "seq": "8192",
     "recompute": "full"},
    {"model": "llama3-8b", "gpus": "8", "tp": "2", "recompute": "full"},
    {"model": "qwen3-30b-a3b", "gpu": "b200", "gpus": "16", "ep": "8", "precision": "mxfp8", "global-batch": "64",
     "zero": "3"},
    {"model": "70b", "gpu": "b200", "gpus": "64", "tp": "4", "precision": "nvfp4", "global-batch": "32"},
    LINKS[-1],  # Mixtral t 8 c 4 d 2 e 8 t_E 8: the EP overlap across nodes with t_E = t
]
#: derive predict --json's keys the page shows.
STEP_KEYS = ("step_time_s", "tokens_per_s_per_gpu", "mfu")


def predict_data(options: dict[str, str], *extra: str) -> dict[str, object]:
    """``derive predict ... --json`` for the page's options (and ``extra`` words), as printed."""
    argv = [f"--{o}={options[o]}" for o in PREDICT_OPTIONS if o in options] + sequence_parallel(options)
    return json.loads(predict_run([*argv, *extra, "--json"]))


def predict_json(options: dict[str, str]) -> dict[str, float]:
    data = predict_data(options)
    return {key: value for key, value in flattened(data).items()
            if key in STEP_KEYS or key.startswith("breakdown.")}


@pytest.mark.parametrize("options", STEP_LINKS, ids=range(len(STEP_LINKS)))
def test_the_predicted_step_is_derive_predicts(browser, calculator, options):
    open_page(browser, calculator, options)
    assert errors(browser) == {}
    shown = page_values(browser)
    expected = predict_json(options)
    assert len(expected) == len(STEP_KEYS) + 10
    assert_same(shown, expected, options)
    # the bar holds every nonzero part of the breakdown
    parts = browser.execute_script("return document.querySelectorAll('#step-bar .segment').length;")
    assert parts == sum(1 for key, value in expected.items() if key.startswith("breakdown.") and value > 0)


def test_a_gpu_without_the_recipes_tensor_cores_gets_predicts_line(browser, calculator):
    options = {"model": "8b", "gpu": "a100-80gb", "precision": "fp8-delayed", "dp": "8"}
    open_page(browser, calculator, options)
    line = "--precision: a100-80gb has no FP8 tensor cores"
    with pytest.raises(UsageError, match=line):
        predict_json(options)
    # the line stands in the step's card; the report, which reads --precision too, keeps its figures
    assert browser.find_element("id", "step-refusal").text == line
    assert errors(browser) == {}
    assert not any(key in page_values(browser) for key in STEP_KEYS)


def test_the_token_budget_is_derive_predicts(browser, calculator):
    options = {**STEP_LINKS[1], "token-budget": "15000000000000"}
    open_page(browser, calculator, {key: value for key, value in options.items() if key != "token-budget"})
    assert not {"days", "gpu_hours"} & set(page_values(browser))  # no budget: no budget figures
    open_page(browser, calculator, options)
    assert errors(browser) == {}
    shown = page_values(browser)
    argv = [f"--{o}={options[o]}" for o in PREDICT_OPTIONS if o in options] + sequence_parallel(options)
    expected = json.loads(predict_run([*argv, "--token-budget", options["token-budget"], "--json"]))
    assert expected["days"] > 1 and expected["gpu_hours"] > expected["days"]
    assert_same(shown, {key: expected[key] for key in ("days", "gpu_hours")}, options)
    words = browser.find_element("id", "step-command").text.split()
    assert "--token-budget=15000000000000" in words
    open_page(browser, calculator, {**options, "token-budget": "0"})
    assert "--token-budget" in errors(browser).get("token-budget", "")
    assert not {"days", "gpu_hours", "step_time_s"} & set(page_values(browser))
