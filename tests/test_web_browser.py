"""formulas/index.html in a real browser: Debian's chromium, headless, driven by Selenium.

Every figure the page shows must equal ``python -m derive report --json`` to 1e-12,
for configurations loaded by link and typed into the form; bad input shows the
CLI's own line; hostile links run nothing and inject nothing; the page makes no
network request. chromium and chromium-driver come from apt (tests/install_renderers.sh).

One browser serves the run (conftest's ``chromium``; ``browser`` gives it to each module). The whole page (its formula sheet typeset by KaTeX, seconds
a load) is opened only where the sheet matters; links open ``calculator``, the same page
without the sheet (the same form, data, scripts and policy), and the form test loads it
once and drives every configuration through the fields.
"""
import json
from pathlib import Path
from urllib.parse import urlencode

import pytest
from conftest import DESKTOP, PHONE  # noqa: F401 (the page tests' window sizes)

from derive.hf import published_config
from derive.render.page_config import PASTED
from cli_lines import cli_message
from derive.cli import run

#: One worker runs this module under make test's --dist loadgroup: its module fixtures are built once.
pytestmark = pytest.mark.xdist_group("web_browser")

#: Configurations as CLI long options (each loaded by link and through the form).
CONFIGURATIONS = [
    {"model": "llama3-8b"},
    {"model": "70b", "tokens": "4194304", "gpus": "1024", "step-time": "4.5"},
    {"model": "405b", "precision": "bf16-fp32grad", "profile": "llama-fused", "budget": "80GB"},
    {"model": "gpt3-175b", "zero": "3", "dp": "64", "micro-batch": "4"},
    {"model": "gpt3-1.3b", "optimizer": "sgd", "precision": "fp32", "profile": "gpt"},
    {"model": "8b", "optimizer": "adam-8bit", "zero": "2", "dp": "8", "budget": "h100"},
    {"model": "70b", "precision": "fp16-megatron", "zero": "1", "dp": "16", "peak": "a100"},
    {"model": "70b", "precision": "mxfp8", "optimizer": "adamw-bf16", "zero": "3", "dp": "64"},
    {"layers": "12", "hidden": "768", "heads": "12", "ffn": "3072", "vocab": "50257", "seq": "1024",
     "precision": "fp8-delayed"},
    {"model": "405b", "tokens": "16777216", "gpus": "16384", "mfu": "0.38", "peak": "b200"},
    {"model": "70b", "tokens": "1000000", "gpus": "512", "step-time": "2.25", "peak": "1.5e15"},
    {"model": "llama3-70b", "seq": "32768", "micro-batch": "2", "profile": "llama-eager"},
    {"model": "8b", "heads": "64", "kv-heads": "16", "budget": "24GiB"},
    {"layers": "12", "hidden": "768", "heads": "12", "ffn": "3072", "vocab": "50257", "seq": "1024"},
    {"layers": "48", "hidden": "6144", "heads": "48", "kv-heads": "8", "ffn": "16384",
     "vocab": "32000", "zero": "3", "dp": "128", "tokens": "2097152", "gpus": "128"},
    {"model": "175b", "precision": "fp16", "optimizer": "adamw", "budget": "a100", "mfu": "1",
     "tokens": "1048576", "gpus": "256"},
    {"model": "1.3b", "precision": "bf16", "optimizer": "sgd-momentum", "micro-batch": "16"},
    {"model": "405b", "zero": "3", "dp": "1024", "budget": "0.5TB", "profile": "article"},
    {"model": "gpt3-175b", "tokens": "3145728", "gpus": "1024", "step-time": "12",
     "profile": "gpt", "peak": "h200"},
    {"model": "llama3-8b", "vocab": "32000", "ffn": "11008", "profile": "llama-fused"},
    {"model": "70b", "micro-batch": "8", "seq": "4096", "budget": "141GB", "peak": "h200"},
    {"layers": "2", "hidden": "64", "heads": "4", "ffn": "256", "vocab": "1000", "seq": "16",
     "tokens": "64", "gpus": "1", "step-time": "0.001", "mfu": "0.5", "precision": "fp32"},
    {"model": "8b", "tokens": "4194304", "gpus": "64", "step-time": "30", "zero": "1",
     "dp": "64", "optimizer": "adamw"},
    {"model": "70b", "profile": "llama-hf-sdpa", "seq": "4096"},
    {"model": "8b", "budget": " H100 ", "peak": "A100", "zero": "1", "dp": "8"},
    {"model": "gpt3-1.3b", "heads": "16"},
    # the edges: counts near their bounds (N under 2^48, activations under 2^53 bytes), 2^53 ranks,
    # the largest budget, a slow step
    {"model": "8b", "micro-batch": "65536", "budget": "9007199254740.992KB"},
    {"layers": "1000", "hidden": "131072", "heads": "1", "ffn": "131072",
     "vocab": "1000", "zero": "3", "dp": "9007199254740992"},
    {"model": "70b", "tokens": "1048576", "gpus": "8", "step-time": "1015.625", "peak": "1267650600228229401496703205376"},
    {"model": "405b", "profile": "llama-hf-eager", "micro-batch": "2", "hidden": "16384",
     "heads": "64", "kv-heads": "16"},
]

#: (option, bad text): the page's message must be the CLI's line for it.
BAD_INPUTS = [
    ("model", "llama4"), ("micro-batch", "0"), ("micro-batch", "two"), ("tokens", "-5"),
    ("gpus", "1.5"), ("precision", "bf8"), ("optimizer", "lion"), ("zero", "4"), ("zero", "x"),
    ("profile", "eager"), ("budget", "80"), ("budget", "0GiB"), ("peak", "v100"), ("peak", "-1e15"),
    ("mfu", "1.2"), ("mfu", "much"), ("step-time", "0"), ("step-time", "inf"), ("dp", "1e3"),
    ("heads", "7"), ("kv-heads", "3"), ("seq", "it's"),
    # Python's int() would read these (other scripts' digits, 2^53 + 1 past a float): the CLI refuses
    ("micro-batch", "\u0663"), ("seq", "\uff18\uff11\uff19\uff12"), ("tokens", "9007199254740993"),
    ("budget", "9007199254740.993KB"), ("budget", "0.00099999999999999999999KB"), ("budget", "\u0667\u0660GB"),
    ("peak", "1e31"), ("step-time", "1e16"), ("mfu", "0.\u0665"), ("micro-batch", "\u20038"),
]

#: Hostile links: markup and script in every kind of field.
HOSTILE = [
    {"model": "<img src=x onerror=window.__pwned=1>"},
    {"model": "<script>window.__pwned=1</script>"},
    {"model": "llama3-8b", "precision": "\"><svg onload=window.__pwned=1>"},
    {"model": "llama3-8b", "budget": "<iframe srcdoc='<script>parent.__pwned=1</script>'>"},
    {"model": "llama3-8b", "peak": "javascript:window.__pwned=1"},
    {"model": "{{7*7}}</output><b id=injected>x</b>"},
]


def cli_json(options: dict[str, str]) -> dict[str, float]:
    """What ``python -m derive report --json`` says for ``options`` (the one model's figures)."""
    argv = [word for option, text in options.items() for word in (f"--{option}", text)]
    report = json.loads(run([*argv, "--json"]))
    (figures,) = report.values()
    # "seq" is the input the figures are computed at, with where it came from; the page has it as a field
    return {key: figure["value"] for key, figure in figures.items() if key != "seq"}


def cli_error(options: dict[str, str]) -> str:
    """The CLI's one error line for ``options``, without the 'derive: error: ' prefix."""
    return cli_message([f"--{option}={text}" for option, text in options.items()], {})


@pytest.fixture(scope="module")
def browser(chromium):
    """The run's one headless chromium (conftest's ``chromium``), as a module of page tests starts it: at
    the desktop width, with a console log that holds only this module's entries."""
    if chromium.get_window_size() != {"width": DESKTOP[0], "height": DESKTOP[1]}:
        chromium.set_window_size(*DESKTOP)
    chromium.get_log("browser")         # read: what earlier modules' pages logged is theirs
    yield chromium


@pytest.fixture(scope="module")
def page(fresh) -> Path:
    return fresh / "index.html"


@pytest.fixture(scope="module")
def calculator(page, tmp_path_factory) -> Path:
    """index.html without the formula sheet (its <nav id="sheet"> to </main>): the calculator as it ships."""
    html = page.read_text(encoding="utf-8")
    start, end = html.index('<nav id="sheet"'), html.index("</main>")
    path = tmp_path_factory.mktemp("calculator") / "index.html"
    path.write_text(html[:start] + html[end:], encoding="utf-8")
    return path


def open_page(browser, page: Path, options: dict[str, str]) -> None:
    browser.get(page.as_uri() + ("?" + urlencode(options) if options else ""))


#: The layout's figures (derive comm's and derive predict's keys, held to them in test_web_layout.py): left out here.
LAYOUT_KEYS = ("per_rank_bytes_per_step.", "layout.")


def shown_figures(browser) -> dict[str, float]:
    """data-key -> data-value of every report figure on the page; exactly those rows are visible."""
    pairs = browser.execute_script(
        "return [...document.querySelectorAll('output[data-key][data-value]')]"
        ".filter((e) => !/^(comm|step):/.test(e.closest('.figure').dataset.figure))"
        ".map((e) => [e.dataset.key, e.dataset.value]);")
    visible = browser.execute_script(
        "return [...document.querySelectorAll('.figure')].filter((row) => row.offsetParent !== null)"
        ".map((row) => row.dataset.figure).filter((key) => !/^(comm|step):/.test(key));")
    assert sorted(visible) == sorted(key for key, _ in pairs)
    return {key: float(value) for key, value in pairs}


def assert_same_figures(shown: dict[str, float], expected: dict[str, float]) -> None:
    assert sorted(shown) == sorted(expected)
    for key, value in expected.items():
        assert shown[key] == pytest.approx(value, rel=1e-12, abs=0), key


def errors(browser) -> dict[str, str]:
    return browser.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('.error')]"
        ".filter((e) => !e.hidden).map((e) => [e.id.slice('error-'.length), e.textContent]));")


@pytest.mark.parametrize("options", CONFIGURATIONS, ids=range(len(CONFIGURATIONS)))
def test_a_link_shows_the_reports_figures(browser, calculator, options):
    open_page(browser, calculator, options)
    assert errors(browser) == {}
    assert_same_figures(shown_figures(browser), cli_json(options))
    # the form holds the link's values, and the share link gives them back
    for option, text in options.items():
        assert browser.find_element("name", option).get_attribute("value") == text
    assert browser.execute_script("return document.getElementById('share-link').search") \
        == "?" + browser.current_url.split("?", 1)[1]


def type_configuration(browser, options: dict[str, str]) -> None:
    """Set the form to ``options`` (every other field back to the CLI's default), then send the
    input event typing ends with: the form listens to it and reads every field."""
    browser.execute_script(
        "const form = document.getElementById('calculator-form');"
        "let last = null;"
        "for (const f of JSON.parse(document.getElementById('derive-data').textContent).fields) {"
        "  const field = form.elements[f.option], text = arguments[0][f.option] ?? f.default;"
        "  if (field.value !== text) { field.value = text; last = field; }"
        "}"
        "if (last) last.dispatchEvent(new Event('input', {bubbles: true}));", options)


def test_the_form_shows_the_reports_figures(browser, calculator):
    open_page(browser, calculator, {})
    addresses = []
    for options in CONFIGURATIONS:
        type_configuration(browser, options)
        assert errors(browser) == {}, options
        shown = shown_figures(browser)
        assert_same_figures(shown, cli_json(options))
        addresses.append((browser.current_url.split("?", 1)[1], shown))
    # the address bar follows the form: opening it shows the same figures
    for query, shown in addresses:
        browser.get(calculator.as_uri() + "?" + query)
        assert shown_figures(browser) == shown, query


#: (options, the field the CLI names): rules between fields (derive.report.Request, derive.cli.models).
PAIRED = [
    ({"model": "llama3-8b", "tokens": "4096"}, "tokens"),
    ({"model": "llama3-8b", "mfu": "0.5"}, "mfu"),
    ({"model": "llama3-8b", "step-time": "3"}, "step-time"),
    ({"model": "llama3-8b", "zero": "3"}, "zero"),
    ({"model": "gpt3-175b", "kv-heads": "8"}, "kv-heads"),
    ({"model": "llama3-8b", "budget": "B200"}, "budget"),
    ({"model": "llama3-8b", "budget": "0.0001KB"}, "budget"),
    # steps faster than the hardware allows: the page would show an MFU above 100 %
    ({"model": "llama3-8b", "tokens": "4194304", "gpus": "8", "step-time": "1.5"}, "step-time"),
    ({"model": "405b", "tokens": "16777216", "gpus": "16384", "step-time": "0.015625", "peak": "b200"},
     "step-time"),
    ({"layers": "2", "hidden": "64", "heads": "4", "ffn": "256", "vocab": "1000", "seq": "16",
      "tokens": "64", "gpus": "1", "step-time": "1e-12"}, "step-time"),
    # counts past their bounds: N past 2^48 (the first largest field named), activations past 2^53 bytes
    ({"layers": "9007199254740992", "hidden": "4096", "heads": "32", "ffn": "9007199254740992",
      "vocab": "9007199254740992", "tokens": "9007199254740992", "gpus": "1",
      "step-time": "9007199254740992"}, "layers"),
    ({"layers": "2", "hidden": "4096", "heads": "32", "ffn": "9007199254740992", "vocab": "8"}, "ffn"),
    ({"model": "gpt3-1.3b", "seq": "1125899906842624"}, "seq"),
    ({"model": "8b", "micro-batch": "9007199254740992", "budget": "9007199254740.992KB"}, "micro-batch"),
    ({"model": "8b", "seq": "100000000"}, "seq"),
    # figures out of float range, blamed on the option as the CLI does
    ({"model": "llama3-8b", "peak": "5e-324"}, "peak"),
    ({"model": "llama3-8b", "tokens": "8", "gpus": "8", "step-time": "5e-324"}, "step-time"),
    ({"model": "llama3-8b", "tokens": "9007199254740992", "gpus": "1", "mfu": "5e-324"}, "mfu"),
]


@pytest.mark.parametrize("options, option", PAIRED, ids=range(len(PAIRED)))
def test_fields_that_need_each_other_show_the_clis_line(browser, calculator, options, option):
    open_page(browser, calculator, options)
    assert errors(browser) == {option: cli_error(options)}
    assert shown_figures(browser) == {}


@pytest.mark.parametrize("option, text", BAD_INPUTS)
def test_bad_input_shows_the_clis_line_next_to_the_field(browser, calculator, option, text):
    base = {} if option in ("model",) else {"model": "llama3-8b"}
    if option in ("heads", "kv-heads"):
        base = {"layers": "4", "hidden": "64", "heads": "4", "ffn": "128", "vocab": "100"}
    options = {**base, option: text}
    open_page(browser, calculator, options)
    assert errors(browser) == {option: cli_error(options)}
    assert shown_figures(browser) == {}


def test_counts_near_their_bound_keep_every_digit(browser, calculator):
    """N just under 2^48 is shown with every digit, as the CLI's JSON integer (past it the page refuses)."""
    options = CONFIGURATIONS[[i for i, c in enumerate(CONFIGURATIONS) if c.get("hidden") == "131072"][0]]
    open_page(browser, calculator, options)
    expected = cli_json(options)
    # N = 1000 (4 h^2 + 3 h f + 2 h) + 2 V h + h at h = f = 2^17, V = 1000
    assert expected["parameters"] == 120_259_608_707_072
    assert browser.find_element("css selector", 'output[data-key="parameters"]').text == "120,259,608,707,072"
    open_page(browser, calculator, {"model": "llama3-8b"})
    assert browser.find_element("css selector", 'output[data-key="parameters"]').text == \
        f"{cli_json({'model': 'llama3-8b'})['parameters']:,}"


def test_a_missing_custom_size_is_the_clis_required_line(browser, calculator):
    options = {"layers": "4", "hidden": "64", "ffn": "128", "vocab": "100"}
    open_page(browser, calculator, options)
    assert errors(browser) == {"heads": cli_error(options)}


@pytest.mark.parametrize("options", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_links_run_nothing_and_inject_nothing(browser, calculator, options):
    open_page(browser, calculator, options)
    state = browser.execute_script(
        "return {pwned: window.__pwned, imgs: document.images.length,"
        " iframes: document.querySelectorAll('iframe, main b, #injected').length,"
        " scripts: document.scripts.length, svgs: document.querySelectorAll('svg').length};")
    assert state["pwned"] is None and state["imgs"] == 0 and state["iframes"] == 0
    assert state["scripts"] == 11  # the data block, KaTeX, the generated functions, parse.js, config.js, moe.js,
    # layout.js, step.js, stages.js, calculator.js, plan.js
    assert state["svgs"] == 0  # the calculator draws none (the sheet's figures are cut): none from the link
    shown = errors(browser)
    assert len(shown) == 1
    (option, line), = shown.items()
    assert line == cli_error(options) and "\n" not in line
    assert browser.find_element("name", option).get_attribute("value") == options[option]
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0


def test_each_formula_is_one_click_away_in_the_sheets_latex(browser, page):
    from selenium.webdriver.support.wait import WebDriverWait

    open_page(browser, page, {"model": "70b", "tokens": "4194304", "gpus": "1024", "step-time": "4.5"})
    summaries = browser.find_elements("css selector", ".figure:not([hidden]) summary")
    # 22 + N_8 and n_8 (the FP8 figures show under FP8 precisions) + the layout's 3 sizes and 5 groups' bytes
    # + the predicted step's 3 figures and 10 parts + its memory: the one stage's 4 parts and the most loaded rank
    assert len(summaries) == 50
    browser.execute_script("for (const summary of arguments[0]) summary.click();", summaries)
    # each click opens its details; the toggle event that typesets the formula follows the clicks
    WebDriverWait(browser, 60).until(lambda browser: browser.execute_script(
        "return document.querySelectorAll('.figure details[open] .formula .katex').length") == 50)
    rendered = browser.execute_script(
        "return [...document.querySelectorAll('.figure details[open] .formula')]"
        ".map((e) => [e.closest('.figure').dataset.figure, e.querySelector('.katex') !== null,"
        " e.querySelector('annotation').textContent]);")
    assert len(rendered) == 50 and all(ok for _, ok, _ in rendered)
    annotations = {key: tex for key, _, tex in rendered}
    # the sheet's LaTeX (derive/printing/latex.py); a figure that later ones name shows its symbol
    assert annotations["state.params"] == "2 N"
    # the layout's: 1024 GPUs over t = p = c = 1 (derive.parallelism.Parallelism.gpus = t p c d)
    assert annotations["comm:layout.dp"] == r"\frac{G}{c p t}"
    assert annotations["state.resident"] == r"M_{\mathrm{state}} = 16 N"
    assert annotations["fit.gpus_for_state"] == \
        r"\left\lceil{\frac{M_{\mathrm{state}}}{M_{\mathrm{GPU}}}}\right\rceil"
    assert browser.execute_script("return document.querySelectorAll('.katex-error').length") == 0
    assert browser.execute_script("return document.querySelectorAll('main .tex .katex').length") > 200


def test_screenshots_at_desktop_and_phone_width(browser, page, tmp_path_factory):
    folder = tmp_path_factory.mktemp("screenshots")
    options = {"model": "70b", "tokens": "4194304", "gpus": "1024", "step-time": "4.5"}
    open_page(browser, page, options)
    for name, (width, height) in (("desktop", DESKTOP), ("phone", PHONE)):
        browser.set_window_size(width, height)   # the page lays itself out again at each width
        path = folder / f"{name}.png"
        assert browser.save_screenshot(str(path))
        assert path.stat().st_size > 10_000
        # nothing wider than the screen but the tables and figures, which scroll on their own
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, (name, overflow)
    browser.set_window_size(*DESKTOP)
    logs = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert logs == []


# ---- a pasted config.json ----

#: (shipped config, options): pasted, each must show `derive.report --config that.json --json`.
PASTES = [
    ("gemma-2-9b", {}),
    ("gpt2", {"profile": "gpt", "zero": "3", "dp": "8", "micro-batch": "4"}),
    ("qwen3-0.6b", {"profile": "llama-hf-sdpa", "seq": "4096", "tokens": "1048576", "gpus": "64",
                    "step-time": "2.5"}),
    ("phi-3-mini-4k-instruct", {"precision": "bf16-fp32grad", "profile": "llama-fused"}),
    ("gpt-neox-20b", {"heads": "32", "budget": "h100"}),
    ("olmo-2-1124-7b", {"optimizer": "adam-8bit", "profile": "llama-eager"}),
    # --gpus = dp: a paste's layout is checked as a name's is (derive comm --config), and 256 GPUs would not be 16 x 1
    ("qwen2.5-7b", {"zero": "1", "dp": "16", "peak": "a100", "tokens": "4194304", "gpus": "16"}),
    ("gemma-3-1b-pt", {"kv-heads": "2", "seq": "2048"}),
]


def paste(browser, text: str) -> None:
    """Put ``text`` in the config field as a paste does (one input event)."""
    field = browser.find_element("name", "config")
    browser.execute_script(
        "arguments[0].value = arguments[1];"
        " arguments[0].dispatchEvent(new Event('input', {bubbles: true}));", field, text)


def cli_on_file(folder: Path, text: str, options: dict[str, str]) -> str:
    """The CLI's error line for `--config pasted.json` holding ``text``, run in ``folder``."""
    (folder / PASTED).write_text(text, encoding="utf-8")
    return cli_message([f"--config={PASTED}", *(f"--{o}={t}" for o, t in options.items())], {})


@pytest.mark.parametrize("name, options", PASTES, ids=[name for name, _ in PASTES])
def test_a_pasted_config_shows_the_reports_figures(browser, calculator, tmp_path, name, options):
    path = tmp_path / f"{name}.json"
    text = json.dumps(published_config(name), indent=2)
    path.write_text(text)
    open_page(browser, calculator, options)
    paste(browser, text)
    assert errors(browser) == {}
    assert browser.find_element("name", "model").get_attribute("value") == ""
    expected = cli_json({"config": str(path), **options})
    assert_same_figures(shown_figures(browser), expected)
    # the link carries the pasted text: opening it shows the same figures
    shown = shown_figures(browser)
    browser.get(browser.current_url)
    assert browser.find_element("name", "config").get_attribute("value") == text
    assert shown_figures(browser) == shown


#: A config name that is markup and script.
HOSTILE_NAME = "<script>window.__pwned=1</script><img src=x onerror=window.__pwned=1><b id=injected>"


def injected(browser) -> dict:
    return browser.execute_script(
        "return {pwned: window.__pwned, imgs: document.images.length, scripts: document.scripts.length,"
        " injected: document.querySelectorAll('#injected, main b, iframe').length};")


@pytest.mark.parametrize("name, options, field", [
    ("meta-llama-3-8b", {}, None),                                 # taken: the name is text
    ("deepseek-v2-lite", {}, "config"),                            # MLA: the dense report refuses
    ("gemma-2-9b", {"profile": "llama-hf-eager"}, "profile"),      # a Llama-only profile
])
def test_a_pasted_config_is_data(browser, calculator, tmp_path, monkeypatch, name, options, field):
    text = json.dumps({**published_config(name), "_name_or_path": HOSTILE_NAME})
    open_page(browser, calculator, options)
    paste(browser, text)
    assert injected(browser) == {"pwned": None, "imgs": 0, "scripts": 11, "injected": 0}
    monkeypatch.chdir(tmp_path)
    if field is None:
        assert errors(browser) == {}
        line = browser.find_element("id", "model-line").text
        assert line.startswith(HOSTILE_NAME + ": layers=32 ")
    else:
        assert errors(browser) == {field: cli_on_file(tmp_path, text, options)}
        assert HOSTILE_NAME in errors(browser)[field]
        assert shown_figures(browser) == {}


#: Broken pastes: (text, what is wrong), each the CLI's line for the same file.
BAD_PASTES = [
    (json.dumps({**published_config("mistral-7b-v0.1"), "num_key_value_heads": 5}), "kv heads"),
    (json.dumps({**published_config("gpt2"), "n_embd": True}), "a bool as a size"),
    (json.dumps({**published_config("qwen2.5-7b"), "hidden_size": "3584"}), "a string as a size"),
    (json.dumps({k: v for k, v in published_config("phi-3-mini-4k-instruct").items()
                 if k != "vocab_size"}), "a missing size"),
    ('["<img src=x onerror=window.__pwned=1>"]', "no object"),
    ('{"model_type": "<script>window.__pwned=1</script>"}', "an unknown family"),
]


@pytest.mark.parametrize("text, case", BAD_PASTES, ids=[case for _, case in BAD_PASTES])
def test_a_bad_paste_shows_the_clis_line(browser, calculator, tmp_path, monkeypatch, text, case):
    open_page(browser, calculator, {})
    paste(browser, text)
    monkeypatch.chdir(tmp_path)
    assert errors(browser) == {"config": cli_on_file(tmp_path, text, {})}
    assert injected(browser) == {"pwned": None, "imgs": 0, "scripts": 11, "injected": 0}
    assert shown_figures(browser) == {}


def test_text_that_is_not_json_shows_the_clis_line_with_the_browsers_detail(browser, calculator, tmp_path,
                                                                            monkeypatch):
    open_page(browser, calculator, {})
    paste(browser, '{"model_type": "llama",')
    monkeypatch.chdir(tmp_path)
    cli = cli_on_file(tmp_path, '{"model_type": "llama",', {})
    shown = errors(browser)["config"]
    # the words in parentheses are the JSON parser's: Python's json module, or the browser's
    assert shown.split(" (")[0] == cli.split(" (")[0] == "--config: pasted.json: config: 'pasted.json' is not JSON"
