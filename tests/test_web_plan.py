"""formulas/index.html plans a training run as ``derive plan --json`` ranks it, in a real browser.

For dense questions small and large (llama3-8b on 64 GPUs to Llama 3 405B on 16,384, GPT-3 175B on A100s,
FP8, a model with its own architecture) and MoE presets (Qwen3-30B-A3B, Mixtral; one where nothing fits), the
page's planner (templates/html/plan.js) must give exactly the
CLI's candidates with even pipeline stages (the page has no --balanced; MoE plans have none) and each one's verdict, the same
ranked layouts in the same order with the same memory and shared ranks, and the same predicted step times
(the step card's traced functions: within a few units in the last place of numpy's). The table's data-keys
are the JSON's keys under ``layouts.N``; Load puts a layout into the form, the link and the step card.
Same browser set-up as test_web_browser.py.
"""
import json
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest
from test_web_browser import browser, calculator, open_page, page  # noqa: F401 (fixtures)

from derive.options.models import named
from derive.plan import record as plan_record
from derive.planning.ranking import shared_ranks
from derive.predict import run as predict_run

# No xdist group: these tests need the render, so they run after the others (conftest's _render_last), spread
# over both workers, each with its one chromium (conftest's ``chromium``), while test_web_browser.py's group
# holds the worker that renders.

#: Page links that ask derive plan's question: --tokens is --global-batch x --seq.
QUESTIONS = [
    {"model": "llama3-8b", "gpus": "64", "global-batch": "128", "seq": "8192"},
    {"model": "llama3-405b", "gpus": "16384", "global-batch": "2048", "seq": "8192"},
    {"model": "gpt3-175b", "gpu": "a100-80gb", "gpus": "1024", "global-batch": "1536", "seq": "2048"},
    {"model": "qwen3-0.6b", "gpus": "8", "global-batch": "64", "seq": "4096"},
    {"model": "70b", "gpus": "256", "global-batch": "512", "seq": "8192", "precision": "fp8-delayed"},
    {"model": "gemma-2-9b", "gpus": "32", "global-batch": "96"},
    # MoE presets (derive.planning.experts: e and t_E crossed in, no balanced pipelines), and one where nothing fits
    {"model": "qwen3-30b-a3b", "gpus": "8", "global-batch": "64", "seq": "4096"},
    {"model": "mixtral-8x7b", "gpus": "16", "global-batch": "64", "seq": "4096"},
    {"model": "mixtral-8x7b", "gpus": "8", "global-batch": "4"},
]
#: The layout's fields of derive plan --json a row of the page carries.
KEYS = ("t", "p", "v", "c", "d", "b", "m", "recompute", "zero")
#: Step times: the page's generated JavaScript against numpy's columns (derive.accounts.prediction.predict_columns);
#: the largest difference measured on these questions is 7e-16.
STEP_REL = 2e-15


def plan_argv(options: dict[str, str]) -> list[str]:
    """derive plan's options for the page's question, as the card's command writes them."""
    seq = int(options["seq"]) if "seq" in options else named(options["model"], moe=True)[0].seq
    return ["--model", options["model"], "--gpus", options["gpus"], "--tokens", str(int(options["global-batch"]) * seq),
            "--seq", str(seq), "--gpu", options.get("gpu", "h100"), "--precision", options.get("precision", "bf16"),
            "--json"]


def cli_plan(options: dict[str, str]) -> dict:
    """derive plan --json for the page's question: the object its text is written from (derive.plan.record;
    the text itself, json's indented dump of it, is tests/test_plan.py's)."""
    return plan_record(plan_argv(options))


def page_plan(browser) -> dict:
    """The page's plan of the form's question: every candidate with its verdict, the ranked rows in order."""
    return browser.execute_script(
        "const r = DerivePlanner.plan(DerivePlanner.question());"
        "const pick = (x) => ({t: x.t, p: x.p, v: x.v, c: x.c, d: x.d, b: x.b, m: x.m, recompute: x.recompute,"
        " zero: x.zero, e: x.e, etp: x.etp, reason: x.reason, memory: x.memory, time: x.time, rank: x.rank});"
        "return {rows: r.rows.map(pick), ranked: r.ranked.map(pick)};")


@pytest.mark.parametrize("options", QUESTIONS, ids=[q["model"] + "-" + q["gpus"] for q in QUESTIONS])
def test_the_pages_plan_is_derive_plans(browser, calculator, options):
    expected = cli_plan(options)
    open_page(browser, calculator, options)
    shown = page_plan(browser)
    even = [row for row in expected["layouts"] if not row.get("balanced")]
    keys = KEYS + (("e", "etp") if "e" in even[0] else ())
    # the candidates and their verdicts (REASONS' words in the JSON, keys on the page)
    words = {"": "", **{key: text for key, text in
                        json.loads(browser.execute_script("return document.getElementById('derive-data').textContent"))
                        ["plan"]["reasons"].items()}}
    assert sorted((*(row[key] for key in keys if key != "m"), row["reason"]) for row in even) == \
        sorted((*(row[key] for key in keys if key != "m"), words[row["reason"]]) for row in shown["rows"])
    # the ranked layouts in order, their memory, ranks (shared as derive.planning.ranking.shared_ranks shares them)
    ranked = [row for row in even if row["rank"] is not None]
    assert bool(ranked) == ("no_layout_fits" not in expected), options
    assert [tuple(row[key] for key in keys) for row in ranked] == \
        [tuple(row[key] for key in keys) for row in shown["ranked"]]
    assert [row["memory_per_gpu"] for row in ranked] == [round(row["memory"]) for row in shown["ranked"]]
    times = np.array([row["step_time"] for row in ranked], dtype=float)
    ranks = shared_ranks(times, np.arange(times.size), np.ones(times.size, dtype=bool))
    assert ranks.tolist() == [row["rank"] for row in shown["ranked"]]
    for row, page_row in zip(ranked, shown["ranked"]):
        assert page_row["time"] == pytest.approx(row["step_time"], rel=STEP_REL, abs=0), row


def table(browser) -> dict[str, str]:
    """data-key -> data-value of the planner's table."""
    return dict(browser.execute_script(
        "return [...document.querySelectorAll('#plan-rows output[data-key]')].map((e) => [e.dataset.key, e.dataset.value]);"))


def test_the_table_carries_derive_plans_keys_and_loads_a_layout(browser, calculator):
    options = QUESTIONS[0]
    expected = [row for row in cli_plan(options)["layouts"] if row["rank"] is not None and not row["balanced"]]
    open_page(browser, calculator, options)
    browser.find_element("id", "plan-button").click()
    # the card's command is the question the table answers (derive plan --json, whose rows it holds)
    assert browser.find_element("id", "plan-command").text.split() == ["python", "-m", "derive.plan", *plan_argv(options)]
    shown = table(browser)
    rows = browser.execute_script("return document.querySelectorAll('#plan-rows tr').length;")
    assert rows == 10
    for n, row in enumerate(expected[:rows]):
        for key in KEYS:
            assert shown[f"layouts.{n}.{key}"] == str(row[key]), (n, key)
        assert int(shown[f"layouts.{n}.memory_per_gpu"]) == row["memory_per_gpu"]
        assert float(shown[f"layouts.{n}.step_time"]) == pytest.approx(row["step_time"], rel=STEP_REL, abs=0)
        for part, seconds in row["breakdown"].items():
            assert float(shown[f"layouts.{n}.breakdown.{part}"]) == pytest.approx(seconds, rel=1e-12, abs=1e-18)
    # Load: the third row's layout in the form and the link; the step card predicts it as derive predict does
    browser.find_elements("css selector", "#plan-rows button")[2].click()
    row = expected[2]
    query = parse_qs(urlparse(browser.current_url).query)
    fields = {"tp": "t", "pp": "p", "vp": "v", "cp": "c", "micro-batch": "b", "recompute": "recompute", "zero": "zero"}
    for option, key in fields.items():
        assert browser.execute_script(f"return document.forms['calculator-form'].elements['{option}'].value;") \
            == str(row[key]), option
        if str(row[key]) not in ("1", "none"):  # the link leaves out a field at its default
            assert query[option] == [str(row[key])], option
    step = float(browser.execute_script(
        "return document.querySelector('output[data-key=\"step_time_s\"]').dataset.value;"))
    assert step == float(shown["layouts.2.step_time"])
    argv = ["--model", options["model"], "--gpus", options["gpus"], "--global-batch", options["global-batch"],
            "--seq", options["seq"], *(word for option, key in fields.items() for word in (f"--{option}", str(row[key])))]
    argv += ["--sequence-parallel"] if row["t"] > 1 else []
    assert step == pytest.approx(json.loads(predict_run([*argv, "--json"]))["step_time_s"], rel=1e-12, abs=0)


@pytest.mark.parametrize("options, line", [
    ({"model": "qwen1.5-moe-a2.7b", "gpus": "64", "global-batch": "128"}, "model"),
    ({"model": "deepseek-v3", "gpus": "64", "global-batch": "128", "precision": "fp8-delayed"}, "expert_precision"),
    ({"model": "llama3-8b", "gpu": "b200", "gpus": "64", "global-batch": "128"}, "gpu"),
    ({"model": "llama3-8b", "gpus": "64"}, "question"),
    ({"model": "llama3-8b", "gpus": "64", "global-batch": "128", "precision": "fp16"}, "precision"),
])
def test_a_question_the_page_cannot_plan_says_why(browser, calculator, options, line):
    open_page(browser, calculator, options)
    browser.find_element("id", "plan-button").click()
    lines = json.loads(browser.execute_script("return document.getElementById('derive-data').textContent"))["plan"]["lines"]
    assert browser.execute_script("return document.getElementById('plan-status').textContent;") == \
        lines[line].replace("{precision}", options.get("precision", ""))
    assert browser.execute_script("return document.getElementById('plan-table').hidden;")


def test_the_table_keeps_the_page_within_375_px(browser, calculator):
    open_page(browser, calculator, QUESTIONS[3])
    browser.set_window_size(375, 812)
    try:
        browser.find_element("id", "plan-button").click()
        assert browser.execute_script("return document.querySelectorAll('#plan-rows tr').length;") == 10
        # the table scrolls inside its own box (.table); the page never scrolls sideways
        assert browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth") <= 0
    finally:
        browser.set_window_size(1280, 1000)
