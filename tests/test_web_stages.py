"""formulas/index.html shows memory per GPU by pipeline stage and predict's fit verdict, against derive predict --json.

Every memory.* data-key the page shows must be predict's (``memory.per_gpu``, ``memory.stages.<stage>.<part>``,
dotted), exactly the keys it prints, to 1e-12; one stacked bar per stage; a layout predict refuses as not fitting
shows predict's own line in the step card, marks the step's figures (predict prints them only with
--no-memory-check) and keeps the stages. MoE models too (derive.planning.expert_stages): an MoE layout above the
HBM is noted, not refused, and one predict does not check (an FP8 recipe) has no stage figure. Same browser
set-up as test_web_browser.py.
"""

import pytest
from test_web_browser import browser, calculator, errors, open_page, page  # noqa: F401 (fixtures)
from test_web_layout import ISSUE, STEP_KEYS, assert_same, flattened, page_values
from test_web_layout import predict_data as predict

from derive.options.messages import UsageError

pytestmark = pytest.mark.xdist_group("web_browser")

#: Dense presets and shipped configs over p = 1, 2, 4, 16, interleaving, CP, ZeRO 0-3, recompute, FP8 / FP4 recipes
#: and GPUs; MoE presets and shipped configs over p = 1, 2, 4, 8, interleaving, CP, e, t_E, ZeRO 0-3, recompute,
#: sequence parallelism off and a layout above the HBM (noted, not refused).
LINKS = [
    {"model": "70b", "gpus": "64", "tp": "8", "pp": "4"},
    {"model": "llama3-70b", "gpus": "64", "tp": "8", "pp": "4", "cp": "2", "zero": "1", "global-batch": "16"},
    {"model": "gpt3-175b", "gpus": "1024", "tp": "8", "pp": "16", "vp": "2", "global-batch": "512",
     "recompute": "full"},
    {"model": "8b", "gpus": "8", "precision": "fp8-delayed", "zero": "3"},
    {"model": "8b", "gpus": "64", "pp": "4", "vp": "2", "global-batch": "64", "zero": "2", "recompute": "selective"},
    {"model": "qwen2.5-7b", "gpus": "16", "tp": "4", "pp": "2", "zero": "0", "micro-batch": "2", "global-batch": "32",
     "seq": "2048"},
    {"model": "70b", "gpu": "b200", "gpus": "64", "tp": "4", "pp": "2", "precision": "nvfp4", "global-batch": "32"},
    {"model": "gemma-2-9b", "gpus": "8", "pp": "2", "global-batch": "16", "gpu": "h200"},
    {"model": "405b", "gpus": "16384", "tp": "8", "pp": "16", "global-batch": "2048", "seq": "8192",
     "recompute": "full", "sequence-parallel": "1"},
    {"model": "gpt2", "gpus": "2", "pp": "2", "precision": "bf16-fp32grad", "zero": "1"},
    ISSUE,
    {"model": "mixtral-8x7b", "gpus": "8", "ep": "8", "global-batch": "8"},
    {"model": "qwen3-30b-a3b", "gpus": "32", "tp": "2", "pp": "4", "vp": "2", "ep": "4", "etp": "1", "zero": "0",
     "global-batch": "64", "seq": "8192", "recompute": "full"},
    {"model": "mixtral-8x7b-v0.1", "gpus": "32", "tp": "2", "pp": "2", "sequence-parallel": "0", "zero": "1",
     "global-batch": "32", "seq": "4096"},
    {"model": "qwen1.5-moe-a2.7b", "gpus": "16", "pp": "2", "cp": "2", "ep": "4", "zero": "3", "global-batch": "16"},
    {"model": "qwen3-235b-a22b", "gpu": "b200", "gpus": "256", "tp": "4", "pp": "4", "ep": "16", "etp": "1",
     "seq": "4096", "global-batch": "256", "recompute": "selective"},
]
#: The MoE models of LINKS.
MOE_MODELS = {"deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b", "mixtral-8x7b-v0.1", "qwen1.5-moe-a2.7b", "qwen3-235b-a22b"}
#: MoE layouts predict does not check (an FP8 recipe): no stage figure.
MOE_LINKS = [{"model": "mixtral-8x7b", "gpus": "64", "tp": "2", "ep": "8", "zero": "1", "precision": "fp8-delayed",
              "global-batch": "128"}]
#: A layout predict refuses: 7B parameters' unsharded state on 8 ranks of t = 4, p = 2 needs more than an H100's HBM.
NOT_FITTING = {"model": "qwen2.5-7b", "gpus": "16", "tp": "4", "pp": "2", "recompute": "selective", "zero": "2"}


def memory_keys(shown: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in shown.items() if key.startswith("memory.")}


def cli_memory(data: dict[str, object]) -> dict[str, object]:
    """predict's memory figures the page shows (the usable low end is its bars' marker and note, not a figure)."""
    return {key: value for key, value in memory_keys(flattened(data)).items() if key != "memory.usable_low_end"}


def stage_bars(browser) -> list[dict[str, object]]:
    return browser.execute_script(
        "return [...document.querySelectorAll('#stage-bars .stage')].map((stage) => {"
        "  const bar = stage.querySelector('.bar'); const width = bar.getBoundingClientRect().width;"
        "  const budget = bar.querySelector('.budget');"
        "  return {title: stage.querySelector('h4').textContent, label: bar.getAttribute('aria-label'),"
        "          parts: [...bar.querySelectorAll('.segment')].map((s) => s.getBoundingClientRect().width / width),"
        "          budget: budget && (budget.getBoundingClientRect().left - bar.getBoundingClientRect().left) / width};"
        "});")


@pytest.mark.parametrize("options", LINKS, ids=range(len(LINKS)))
def test_each_stage_is_predicts(browser, calculator, options):
    open_page(browser, calculator, options)
    assert errors(browser) == {}
    data = predict(options)
    shown = page_values(browser)
    expected = cli_memory(data)
    assert sorted(memory_keys(shown)) == sorted(expected), options
    assert_same(shown, expected, options)
    if options["model"] in MOE_MODELS:  # the same sums of the same terms: to the last digit
        assert {key: float(shown[key]) for key in expected} == expected, options
    # one bar per stage predict prints, a segment per part, all on one scale with the usable low end marked
    stages = data["memory"]["stages"]
    bars = stage_bars(browser)
    assert len(bars) == len(stages)
    scale = max(data["memory"]["per_gpu"], data["memory"]["usable_low_end"])
    for bar, parts in zip(bars, stages.values()):
        assert bar["parts"] == pytest.approx([value / scale for value in parts.values()], abs=0.01)
        assert bar["budget"] == pytest.approx(data["memory"]["usable_low_end"] / scale, abs=0.01)
    assert browser.find_element("id", "stage-note").text == data["conventions"]["memory"]
    # predict refused none of these: the step card shows no refusal (an MoE layout above the HBM is noted)
    assert browser.find_element("id", "step-refusal").get_attribute("hidden") is not None


@pytest.mark.parametrize("options", MOE_LINKS, ids=range(len(MOE_LINKS)))
def test_an_unchecked_moe_layout_has_no_stage_figures_as_predict_has_none(browser, calculator, options):
    open_page(browser, calculator, options)
    assert "memory" not in predict(options)
    assert memory_keys(page_values(browser)) == {}
    assert browser.find_element("id", "stages").get_attribute("hidden") is not None


def test_a_layout_that_does_not_fit_shows_predicts_line(browser, calculator):
    with pytest.raises(UsageError) as refused:
        predict(NOT_FITTING)
    open_page(browser, calculator, NOT_FITTING)
    assert errors(browser) == {}
    assert browser.find_element("id", "step-refusal").text == str(refused.value)
    # the step's figures are predict's with --no-memory-check, marked; its bar is not drawn; the stages stay
    data = predict(NOT_FITTING, "--no-memory-check")
    shown = page_values(browser)
    assert_same(shown, {key: value for key, value in flattened(data).items()
                        if key in STEP_KEYS or key.startswith("breakdown.")}, NOT_FITTING)
    marked = browser.execute_script(
        "return [...document.querySelectorAll('.figure.refused:not([hidden]) output')].map((e) => e.dataset.key);")
    assert set(marked) == {key for key in shown if key in STEP_KEYS or key.startswith(("breakdown.", "days", "gpu_"))}
    assert browser.execute_script("return document.querySelectorAll('#step-bar .segment').length;") == 0
    assert_same(shown, cli_memory(data), NOT_FITTING)
    assert browser.find_element("id", "stage-note").text == str(refused.value)
    # the same layout on an H200 (141 GB) fits: nothing is marked
    open_page(browser, calculator, {**NOT_FITTING, "gpu": "h200"})
    assert browser.execute_script("return document.querySelectorAll('.figure.refused').length;") == 0
    assert browser.find_element("id", "step-refusal").get_attribute("hidden") is not None


def test_the_stage_bars_fit_375_px(browser, calculator):
    open_page(browser, calculator, LINKS[2])
    browser.set_window_size(375, 812)
    try:
        assert len(stage_bars(browser)) == 3
        assert browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth") <= 0
        widths = browser.execute_script(
            "return [...document.querySelectorAll('#stage-bars .bar')].map((bar) => bar.getBoundingClientRect().right);")
        assert max(widths) <= 375
    finally:
        browser.set_window_size(1280, 1000)
