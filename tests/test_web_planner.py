"""formulas/index.html plans by model name: every name --model takes, MoE included, in a real browser.

Each link must show exactly the figures of ``derive report --model NAME ... --json`` (data-key =
its JSON key, data-value = the raw number), the model's facts at the top and its memory per GPU
as a stacked bar; bad layouts show the CLI's own line. Same browser set-up as test_web_browser.py.
"""
import json

import pytest
from test_web_browser import browser, calculator, cli_error, errors, open_page, page  # noqa: F401 (fixtures)

from derive.names import model_names
from derive.render.page_models import page_names
from derive.cli import run

# No xdist group: these tests need the render, so they run after the others (conftest's _render_last), spread
# over both workers, each with its one chromium (conftest's ``chromium``), while test_web_browser.py's group
# holds the worker that renders.


#: The layout's options the report does not take (the page's layout part reads them: test_web_layout.py).
LAYOUT_ONLY = ("cp", "vp", "global-batch", "sequence-parallel", "recompute")


def report_json(options: dict[str, str]) -> dict[str, float]:
    """``derive report ... --json`` for one model: its figures by key (the dense report's values unwrapped)."""
    argv = [word for option, text in options.items() if option not in LAYOUT_ONLY for word in (f"--{option}", text)]
    (figures,) = json.loads(run([*argv, "--json"])).values()
    return {key: figure["value"] if isinstance(figure, dict) else figure
            for key, figure in figures.items() if key != "seq"}


def page_figures(browser) -> dict[str, float]:
    """data-key -> data-value of every figure shown; each key once, exactly the visible rows."""
    pairs = browser.execute_script(
        "return [...document.querySelectorAll('output[data-key][data-value]')]"
        ".filter((e) => !/^(comm|step):/.test(e.closest('.figure').dataset.figure))"  # the layout's: test_web_layout.py
        ".map((e) => [e.dataset.key, e.dataset.value, e.closest('.figure').offsetParent !== null]);")
    assert all(visible for _, _, visible in pairs)
    keys = [key for key, _, _ in pairs]
    assert len(keys) == len(set(keys)), keys
    return {key: float(value) for key, value, _ in pairs}


def assert_matches_cli(browser, options: dict[str, str]) -> dict[str, float]:
    shown = page_figures(browser)
    expected = report_json(options)
    assert sorted(shown) == sorted(expected), options
    for key, value in expected.items():
        assert shown[key] == pytest.approx(value, rel=1e-12, abs=0), (options, key)
    return shown


#: MoE names with layouts over every size the MoE report takes (tp, ep, etp, pp, dp, b, s, profile, FP8).
MOE_LINKS = [
    {"model": "deepseek-v3", "tp": "2", "pp": "8", "ep": "64", "dp": "64", "sequence-parallel": "1"},
    {"model": "deepseek-v3"},
    {"model": "mixtral-8x7b", "tp": "2", "ep": "8", "dp": "8", "micro-batch": "2", "seq": "4096",
     "sequence-parallel": "1"},
    {"model": "qwen3-30b-a3b", "moe-profile": "eager", "pp": "4", "ep": "8", "dp": "8"},
    {"model": "mixtral-8x7b-v0.1", "precision": "mxfp8", "tp": "4", "dp": "2"},
    {"model": "qwen1.5-moe-a2.7b", "precision": "fp8-delayed", "tp": "2", "pp": "2", "ep": "4", "etp": "2", "sequence-parallel": "1",
     "dp": "4"},
    {"model": "qwen3-235b-a22b", "tp": "4", "pp": "4", "ep": "16", "dp": "16", "seq": "8192",
     "sequence-parallel": "1"},
    {"model": "deepseek-v3", "precision": "nvfp4", "tp": "8", "pp": "16", "ep": "8", "dp": "8",
     "sequence-parallel": "1"},
]


def test_every_name_the_cli_takes_is_on_the_page(browser, calculator):
    """Each preset, alias, MoE preset and shipped config by name: the CLI's figures or its refusal."""
    assert set(page_names()) == set(model_names())
    for name, kind in page_names().items():
        open_page(browser, calculator, {"model": name})
        if kind == "refused":
            assert errors(browser) == {"model": cli_error({"model": name})}
            assert page_figures(browser) == {}
        else:
            assert errors(browser) == {}, name
            assert_matches_cli(browser, {"model": name})


#: Dense shipped configs with the dense report's options (their shape overridden too).
DENSE_CONFIG_LINKS = [
    {"model": "qwen2.5-7b", "zero": "3", "dp": "16", "micro-batch": "2"},
    {"model": "gemma-2-9b", "seq": "4096", "precision": "bf16-fp32grad"},
    {"model": "gpt2", "profile": "gpt", "tokens": "524288", "gpus": "8", "step-time": "1.5"},
    {"model": "qwen3-8b", "heads": "16", "kv-heads": "8"},
    # --gpu: its bf16 peak and usable budget where --peak and --budget are not given
    {"model": "70b", "gpu": "h200", "tokens": "4194304", "gpus": "1024"},
    {"model": "70b", "gpu": "B200", "budget": "80GB", "zero": "1", "dp": "8"},
    {"model": "8b", "gpu": "gb300", "peak": "a100", "tokens": "1048576", "gpus": "64", "mfu": "0.5"},
]


@pytest.mark.parametrize("options", MOE_LINKS + DENSE_CONFIG_LINKS,
                         ids=[f"moe-{i}" for i in range(len(MOE_LINKS))]
                         + [f"config-{i}" for i in range(len(DENSE_CONFIG_LINKS))])
def test_a_link_shows_the_reports_figures(browser, calculator, options):
    """An MoE model's link shows the MoE report's figures, a shipped config's the dense report's."""
    open_page(browser, calculator, options)
    assert errors(browser) == {}
    assert_matches_cli(browser, options)


#: (options, the field the CLI names): the MoE report's refusals, and the dense report's of MoE options.
MOE_REFUSALS = [
    ({"model": "deepseek-v3", "tp": "3"}, "tp"),                        # heads 128
    ({"model": "mixtral-8x7b", "tp": "16"}, "tp"),                      # kv heads 8
    ({"model": "deepseek-v3", "ep": "3"}, "ep"),                        # 256 experts
    ({"model": "deepseek-v3", "etp": "3", "dp": "3"}, "etp"),           # expert width 2048
    ({"model": "deepseek-v3", "ep": "8", "dp": "4"}, "ep"),             # the world t p d
    ({"model": "mixtral-8x7b", "budget": "80GB"}, "budget"),
    ({"model": "deepseek-v3", "layers": "8"}, "layers"),
    ({"model": "deepseek-v3", "precision": "fp32"}, "precision"),
    ({"model": "deepseek-v3", "precision": "mxfp8", "moe-profile": "eager"}, "precision"),
    ({"model": "qwen2.5-7b", "moe-profile": "fused"}, "moe-profile"),
    ({"model": "70b", "gpu": "v100"}, "gpu"),
]


@pytest.mark.parametrize("options, option", MOE_REFUSALS, ids=range(len(MOE_REFUSALS)))
def test_a_bad_layout_shows_the_clis_line_on_its_field(browser, calculator, options, option):
    open_page(browser, calculator, options)
    assert errors(browser) == {option: cli_error(options)}
    assert page_figures(browser) == {}


def test_the_models_facts_are_at_the_top(browser, calculator):
    # DeepSeek-V3 report, Table 1 / section 2: 671B total, 37B activated per token, 61 layers
    # (the first 3 dense), 256 routed experts of which 8 per token
    open_page(browser, calculator, {"model": "deepseek-v3"})
    facts = browser.find_element("id", "model-facts").text
    assert facts == ("DeepSeek-V3 · 671,026,404,352 parameters · 37,552,282,624 active per token · "
                     "61 layers (58 MoE) · 256 experts, 8 per token")
    # Llama 3 70B: 80 layers (Dubey et al. 2024, Table 3), N as the report counts it
    open_page(browser, calculator, {"model": "70b"})
    assert browser.find_element("id", "model-facts").text == \
        f"llama3-70b · {report_json({'model': '70b'})['parameters']:,} parameters · 80 layers"


def bar(browser) -> dict:
    return browser.execute_script(
        "const bar = document.getElementById('memory-bar');"
        "const width = bar.getBoundingClientRect().width;"
        "return {parts: [...bar.querySelectorAll('.segment')].map((s) => s.getBoundingClientRect().width / width),"
        " budget: bar.querySelector('.budget') && (bar.querySelector('.budget').getBoundingClientRect().left"
        "   - bar.getBoundingClientRect().left) / width,"
        " label: bar.getAttribute('aria-label'), role: bar.getAttribute('role'),"
        " legend: [...document.querySelectorAll('#memory-legend li')].map((li) => li.textContent)};")


def test_memory_per_gpu_is_a_stacked_bar_against_the_budget(browser, calculator):
    options = {"model": "70b", "zero": "3", "dp": "64", "budget": "80GB"}
    open_page(browser, calculator, options)
    figures = report_json(options)
    shown = bar(browser)
    parts = [figures[key] for key in ("state.params", "state.grads", "state.optimizer",
                                      "activations.all_layers_and_logits")]
    scale = max(sum(parts), 80e9)
    assert shown["parts"] == pytest.approx([part / scale for part in parts], abs=0.01)
    assert shown["budget"] == pytest.approx(80e9 / scale, abs=0.01)
    assert shown["role"] == "img" and "Gradients" in shown["label"]
    assert shown["legend"][-1].endswith("against a budget of 74.51 GiB per GPU")   # 80 GB = 74.51 GiB
    # an MoE model: states and activations of the first stage, per GPU; the MoE report takes no budget
    options = {"model": "deepseek-v3", "tp": "2", "pp": "8", "ep": "64", "dp": "64", "sequence-parallel": "1"}
    open_page(browser, calculator, options)
    figures, shown = report_json(options), bar(browser)
    total = figures["state_bytes"] + figures["activation_bytes"]
    assert shown["parts"] == pytest.approx([figures["state_bytes"] / total, figures["activation_bytes"] / total],
                                           abs=0.01)
    assert shown["budget"] is None
    assert shown["legend"][-1] == "Total 75.49 GiB (this report takes no budget)"


def test_labels_are_words_first_and_the_page_fits_375_px(browser, calculator):
    open_page(browser, calculator, {"model": "deepseek-v3", "tp": "2", "pp": "8", "ep": "64", "dp": "64", "sequence-parallel": "1"})
    label = browser.execute_script("return document.querySelector('label[for=\"option-tp\"]').textContent")
    assert label == "Tensor parallel (TP) --tp"
    assert browser.execute_script(
        "return document.querySelector('label[for=\"option-micro-batch\"]').textContent") == \
        "Micro-batch size --micro-batch"
    browser.set_window_size(375, 812)
    try:
        assert browser.execute_script("return document.documentElement.scrollWidth - window.innerWidth") <= 0
        # no label breaks inside a word: each word of a label sits on one line
        broken = browser.execute_script(
            "const out = [];"
            "for (const label of document.querySelectorAll('.field label')) {"
            "  const range = document.createRange();"
            "  for (const node of label.childNodes) {"
            "    const text = node.textContent; let at = 0;"
            "    for (const word of text.split(' ')) {"
            "      const target = node.nodeType === 3 ? node : node.firstChild;"
            "      if (word && target) { range.setStart(target, at); range.setEnd(target, at + word.length);"
            "        if (range.getClientRects().length > 1) out.push(word); }"
            "      at += word.length + 1; } } }"
            "return out;")
        assert broken == []
    finally:
        browser.set_window_size(1280, 1000)


#: Dense configurations over every form of the fit line (derive.verdicts.FIT): unsharded, ZeRO that fits or
#: not, a state too large at any rank count, activations that never fit; budgets typed, decimal and by GPU.
VERDICTS = [
    {"model": "70b"},
    {"model": "70b", "zero": "3", "dp": "64"},
    {"model": "405b", "zero": "1", "dp": "8", "budget": "80GB"},
    {"model": "8b", "budget": "h100"},
    {"model": "8b", "zero": "3", "dp": "8", "budget": " A100 "},
    {"model": "405b", "zero": "3", "dp": "2", "budget": "1GiB"},
    {"model": "405b", "zero": "2", "dp": "4", "budget": "50GB", "micro-batch": "64"},
    {"model": "qwen2.5-7b", "zero": "2", "dp": "16", "budget": "0.5TB"},
    {"model": "70b", "gpu": "h200", "zero": "3", "dp": "16"},
    {"model": "405b", "gpu": "a100-40gb"},
]


def cli_fit_line(options: dict[str, str]) -> str:
    """The fit line of ``derive report``'s text for ``options``."""
    argv = [f"--{option}={text}" for option, text in options.items()]
    (line,) = [line for line in run(argv).splitlines() if line.startswith("  fit at ")]
    return line.strip()


@pytest.mark.parametrize("options", VERDICTS, ids=range(len(VERDICTS)))
def test_the_fit_verdict_is_the_clis_line_word_for_word(browser, calculator, options):
    open_page(browser, calculator, options)
    shown = browser.find_element("id", "fit-verdict")
    assert shown.get_attribute("role") == "status"
    assert shown.text == cli_fit_line(options)


def test_an_moe_report_has_no_fit_line(browser, calculator):
    open_page(browser, calculator, {"model": "deepseek-v3"})
    assert browser.execute_script("return document.getElementById('fit-verdict').hidden") is True


#: Configurations whose "copy as command" must run and give the page's figures (MoE, dense, a shipped
#: config, a budget with spaces the shell must quote, the page's own model when the form names none).
COMMANDS = [
    {"model": "deepseek-v3", "tp": "2", "pp": "8", "ep": "64", "dp": "64", "sequence-parallel": "1"},
    {"model": "qwen3-30b-a3b", "moe-profile": "eager", "pp": "4", "ep": "8", "dp": "8", "seq": "4096"},
    {"model": "70b", "zero": "3", "dp": "64", "budget": " A100 ", "tokens": "4194304", "gpus": "1024"},
    {"model": "gemma-2-9b", "precision": "mxfp8", "micro-batch": "2"},
    {},
]


@pytest.mark.parametrize("options", COMMANDS, ids=range(len(COMMANDS)))
def test_copy_as_command_runs_to_the_pages_figures(browser, calculator, options):
    import shlex

    open_page(browser, calculator, options)
    text = browser.find_element("id", "command").text
    words = shlex.split(text)
    assert words[:2] == ["derive", "report"]
    report = json.loads(run([*words[2:], "--json"]))
    (figures,) = report.values()
    expected = {key: figure["value"] if isinstance(figure, dict) else figure
                for key, figure in figures.items() if key != "seq"}
    shown = page_figures(browser)
    assert sorted(shown) == sorted(expected)
    for key, value in expected.items():
        assert shown[key] == pytest.approx(value, rel=1e-12, abs=0), (text, key)
    button = browser.find_element("id", "copy-command")
    assert button.text == "Copy as command" and button.get_attribute("type") == "button"


def test_a_hostile_value_is_one_quoted_word_of_the_command(browser, calculator):
    import shlex

    hostile = "'; rm -rf ~ #$(id)"
    open_page(browser, calculator, {"model": "8b", "budget": hostile})
    words = shlex.split(browser.find_element("id", "command").text)
    assert words == ["derive", "report", "--model=8b", f"--budget={hostile}"]


def test_a_heading_over_no_figure_is_hidden(browser, calculator):
    def headings() -> list[str]:
        return browser.execute_script(
            "return [...document.querySelectorAll('.figure-group')].filter((g) => !g.hidden)"
            ".map((g) => g.querySelector('h3').textContent);")

    open_page(browser, calculator, {"model": "deepseek-v3"})
    assert headings() == ["Mixture of Experts", "Layout and communication per rank", "Predicted step time",
                          "Memory per GPU by pipeline stage"]
    open_page(browser, calculator, {"model": "70b"})
    assert headings() == ["Model and state", "Activations", "FLOPs and time", "Fit",
                          "Layout and communication per rank", "Predicted step time", "Memory per GPU by pipeline stage"]
    open_page(browser, calculator, {"model": "70b", "tokens": "4194304", "gpus": "1024", "step-time": "4.5"})
    assert "Observed step" in headings()
