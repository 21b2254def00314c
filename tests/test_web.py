"""formulas/index.html: its arithmetic is derive's expressions printed as JavaScript, and nothing else.

The generated functions run in Node and must equal exact evaluation (ints and Fractions); the
hand-written script may hold no number but 0, no eval, no Function, no HTML
parsing; the Content-Security-Policy allows exactly the page's inline scripts
and no network request. The page in a real browser: tests/test_web_browser.py.
"""
import base64
import hashlib
import json
import math
import random
import re
import shutil
import subprocess
from fractions import Fraction
from html.parser import HTMLParser

import pytest
from conftest import after_render, missing_tool

from derive.printing.python import arguments, exact_function
from derive.formulas import REPORT_ONLY, form
from derive.hf import from_config, published_config, published_names, read_shape
from derive.hf_families import DENSE
from derive.render.__main__ import ROOT
from derive.render.page_config import PASTED
from cli_lines import cli_message
from derive.comm import main as comm_main
from derive.predict import main as predict_main
from derive.render.page_forms import FORMULAS, page_models
from derive.render.web import (
    CALCULATOR,
    HAND_WRITTEN,
    calculator_data,
)
from derive.render.page_assets import csp_hash, inline_script, script_json

#: Sizes drawn for the shape symbols and counts; floats for the peak, MFU and step time.
INTEGER_RANGE = (1, 200_000)
FLOAT_SYMBOLS = {"P": (1e12, 3e15), "MFU_target": (0.05, 1.0), "t_step": (0.01, 100.0)}


def node() -> str:
    path = shutil.which("node")
    if path is None:
        missing_tool("node")
    return path


def random_environment(rng: random.Random, names: set[str]) -> dict[str, float]:
    return {name: (rng.uniform(*FLOAT_SYMBOLS[name]) if name in FLOAT_SYMBOLS
                   else rng.randint(*INTEGER_RANGE)) for name in sorted(names)}


def exact_fraction(value: int | float) -> int | Fraction:
    """A drawn value as an exact number: a float by its exact binary value (as derive.evaluation.exact_number)."""
    return Fraction(value) if isinstance(value, float) else value


def page_script() -> tuple[str, list[dict[str, object]]]:
    """(the page's generated script, the dense report's formulas' data) as the session's render wrote them
    (derive.render.web.calculator_data reads its kept page data: the script is derived once per run)."""
    code, data = calculator_data()
    return code, data["formulas"]


@after_render
def test_generated_functions_equal_sympy_on_random_inputs(tmp_path):
    """The page's JavaScript = each expression's exact value (ints and Fractions: derive.printing.python's
    exact_function, compiled once per distinct expression; the variants share 590 of them)."""
    code, formulas = page_script()
    rng = random.Random(19)
    cases = []
    exact = {}
    for formula, data in zip(FORMULAS, formulas):
        assert data["key"] == formula.key
        for values, expr in formula.variants(page_models()):
            variant = data["variants"]["|".join(values)]
            if expr not in exact:
                exact[expr] = exact_function(expr)
            names = [symbol.name for symbol in arguments(expr)]
            for _ in range(4):
                env = random_environment(rng, set(names))
                expected = exact[expr](*(exact_fraction(env[name]) for name in names))
                nan = isinstance(expected, float) and math.isnan(expected)
                assert nan or isinstance(expected, (int, Fraction)), (formula.key, values, expected)
                cases.append({"function": variant["function"],
                              "args": [env[name] for name in variant["args"]],
                              # NaN: no figure at these values (JSON null, as JSON.stringify(NaN))
                              "expected": None if nan else float(expected),
                              "key": formula.key,
                              "values": list(values)})
    assert len(cases) >= 4 * 500
    script = tmp_path / "run.js"
    script.write_text(code
                      + "const cases = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'));\n"
                      + "const values = cases.map((c) => DERIVE_FUNCTIONS[c.function](...c.args));\n"
                      + "console.log(JSON.stringify(values));\n")
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    run = subprocess.run([node(), str(script), str(tmp_path / "cases.json")], capture_output=True,
                         text=True, timeout=120, check=True)
    got = json.loads(run.stdout)
    wrong = [(case["key"], case["values"], case["expected"], value) for case, value in zip(cases, got)
             if not (value is None if case["expected"] is None
                     else value == pytest.approx(case["expected"], rel=1e-12))]
    assert not wrong, wrong[:5]


@after_render
def test_generated_functions_cover_every_report_figure():
    _, formulas = page_script()
    keys = [f["key"] for f in formulas]
    assert keys[:6] == ["parameters", "gemm_parameters", "fp8_parameters", "fp8_tensors",
                        "bytes_per_parameter", "state.params"]
    assert len(keys) == 26 and len(set(keys)) == 26
    state = next(f for f in formulas if f["key"] == "state.resident")
    # 10 precisions (5 FP8 / FP4) x 6 optimizers x ZeRO 0-3; Adam's mixed-precision row is the
    # paper's 16N (ZeRO, 5.1); MXFP8 adds 2 x (1 + 1/32) bytes per quantised parameter to Megatron's 18N
    assert len(state["variants"]) == 240
    assert state["variants"]["bf16|adam|0"]["tex"] == "16 N"
    assert state["variants"]["bf16|adam|3"]["tex"] == r"\frac{16 N}{d}"
    assert state["variants"]["mxfp8|adam|0"]["tex"] == r"18 N + \frac{33 N_{8}}{16}"


def js_without_strings_and_comments(text: str) -> str:
    """JavaScript with string literals, regex literals (none here but /_/g), and comments blanked."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', text)
    text = re.sub(r"'(?:[^'\\\n]|\\.)*'", "''", text)
    return re.sub(r"/(?:[^/\\\n]|\\.)+/[gimsuy]*", "/re/", text)


@pytest.mark.parametrize("path", HAND_WRITTEN, ids=lambda path: path.name)
def test_the_hand_written_scripts_hold_no_numbers_and_no_code_from_text(path):
    source = path.read_text()
    code = js_without_strings_and_comments(source)
    numbers = re.findall(r"(?<![\w$.])(\d+(?:\.\d*)?(?:e[+-]?\d+)?)", code)
    assert set(numbers) <= {"0"}, f"numbers typed into {path.name}: {sorted(set(numbers))}"
    for banned in ("eval(", "Function(", "innerHTML", "outerHTML", "insertAdjacentHTML",
                   "document.write", "setTimeout(", "setInterval(", "fetch(", "XMLHttpRequest"):
        assert banned not in source, banned
    assert "textContent" in CALCULATOR.read_text() and "DERIVE_FUNCTIONS[" in CALCULATOR.read_text()


@after_render
def test_the_generated_script_is_only_functions_of_symbols():
    code, _ = page_script()
    # the page's generated scripts one after another (the report's formulas first, then the layout's, the
    # step's, the stages' and the planner's), each a comment line, one array of functions and its end
    scripts = re.split(r"\n(?=// )", code.strip())
    assert len(scripts) == 5 and scripts[0].splitlines()[1] == "const DERIVE_FUNCTIONS = ["
    # expressions only: comparisons and logic of a Piecewise condition (==, !=, <=, >=, &&, ||, !),
    # never a bare = (an assignment)
    entry = re.compile(r"  function \(([A-Za-z0-9_, ]*)\) \{ return "
                       r"(?:[A-Za-z0-9_ .*/()+,<>?:-]|==|!=|<=|>=|&&|\|\||!(?!=))+; \},")
    for script in scripts:
        lines = script.splitlines()
        assert lines[0].startswith("// Generated by ") and re.fullmatch(r"const DERIVE_[A-Z]+(_[A-Z]+)* = \[", lines[1])
        assert lines[-1] == "];" and len(lines) > 3
        for line in lines[2:-1]:
            assert entry.fullmatch(line), line
    assert "Math.ceil" in code and "Math.pow" in code


def test_the_page_data_cannot_close_its_script_tag():
    text = script_json({"name": "</script><script>alert(1)</script>", "amp": "&"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text)["name"] == "</script><script>alert(1)</script>"
    with pytest.raises(ValueError, match="script"):
        inline_script("let a = '</script>';")


#: (where the page keeps a message, the argv derive report refuses with it, the values marked): every
#: source of the page's lines (the message table, argparse, Request, Model, figures, derive.hf, the MoE report).
PAGE_LINES = [
    (("fields", "micro-batch", "syntax"), ["--micro-batch=zq"], {"text": "'zq'"}),
    (("fields", "tp", "range"), ["--tp=-7"], {"text": "'-7'"}),
    (("fields", "zero", "range"), ["--zero=77"], {"text": "'77'"}),
    (("fields", "mfu", "range"), ["--mfu=7"], {"text": "'7'"}),
    (("fields", "step-time", "syntax"), ["--step-time=zq"], {"text": "'zq'"}),
    (("fields", "profile", "unknown"), ["--profile=zq"], {"text": "'zq'"}),
    (("fields", "moe-profile", "unknown"), ["--moe-profile=zq"], {"text": "'zq'"}),
    (("fields", "precision", "unknown"), ["--precision=zq"], {"text": "'zq'"}),
    (("fields", "optimizer", "unknown"), ["--optimizer=zq"], {"text": "'zq'"}),
    (("fields", "model", "unknown"), ["--model=zq"], {"text": "'zq'"}),
    (("fields", "gpu", "unknown"), ["--gpu=zq"], {"text": "'zq'"}),
    *((("fields", "budget", failure), [f"--budget={text}"], {"text": repr(text)}) for failure, text in
      {"syntax": "zq", "range": "0GB", "small": "0.0001KB", "large": "9007199254740.993KB"}.items()),
    (("fields", "budget", "hardware"), ["--budget=h200"], {"name": "h200"}),
    (("fields", "peak", "unknown"), ["--peak=zq"], {"text": "'zq'"}),
    (("fields", "peak", "range"), ["--peak=-7"], {"text": "'-7'"}),
    (("fields", "peak", "overflow"), ["--model=llama3-8b", "--peak=5e-324"], {"key": "time.one_sequence"}),
    (("fields", "tokens", "alone"), ["--tokens=8"], {}),
    (("fields", "zero", "alone"), ["--zero=2"], {"zero": "2"}),
    (("fields", "kv-heads", "no_gqa"), ["--model=gpt3-1.3b", "--kv-heads=1"], {"name": "gpt3-1.3b"}),
    (("fields", "layers", "parameters"), ["--layers=1099511627776", "--hidden=8", "--heads=1", "--ffn=8", "--vocab=8"], {}),
    (("fields", "seq", "parameters"), ["--model=1.3b", "--seq=1125899906842624"], {}),
    (("fields", "micro-batch", "activations"), ["--model=llama3-8b", "--micro-batch=1000000000000"],
     {"key": "activations.per_layer_fused"}),
    (("fields", "kv-heads", "divides"), ["--layers=2", "--hidden=1022117", "--heads=1009", "--kv-heads=1013",
                                         "--ffn=5", "--vocab=9"], {"kv-heads": "1013", "heads": "1009"}),
    (("fields", "vocab", "required"), ["--layers=8", "--hidden=8", "--heads=8", "--ffn=8"], {}),
    (("moe", "refused", "zero"), ["--model=mixtral-8x7b", "--zero=1"], {}),
    (("moe", "dense_only", "etp"), ["--model=llama3-8b", "--etp=2"], {}),
    (("moe", "divides", "world"), ["--model=deepseek-v3", "--ep=4", "--dp=3"], {"divisor": "4", "dividend": "3"}),
    (("moe", "precision"), ["--model=mixtral-8x7b", "--precision=zq"], {"text": "'zq'"}),
    (("moe", "fp8_profile"), ["--model=mixtral-8x7b", "--precision=mxfp8", "--moe-profile=eager"],
     {"precision": "mxfp8", "profile": "eager"}),
    (("refused_models", "gpt-oss-120b"), ["--model=gpt-oss-120b"], {}),
]


@after_render
@pytest.mark.parametrize("where, argv, marked", PAGE_LINES, ids=lambda x: "-".join(x) if isinstance(x, tuple) else None)
def test_the_page_says_what_the_cli_says(where, argv, marked):
    # the page's lines come from derive.options.messages and the library, not from running the CLI: each
    # must still be derive report's own line for the same input, its values marked
    data = calculator_data()[1]
    fields = {field["option"]: field["messages"] for field in data["fields"]}
    found = {"fields": fields, "moe": data["moe"]["messages"], "refused_models": data["moe"]["refused_models"]}
    for key in where:
        found = found[key]
    assert found == cli_message(argv, marked)


@after_render
def test_the_cli_line_helper_refuses_a_report():
    with pytest.raises(ValueError, match="not one error line"):
        cli_message(["--model", "8b"], {})
    data = calculator_data()[1]
    fields = {field["option"]: field for field in data["fields"]}
    assert fields["heads"]["messages"]["divides"] == "--heads: {heads} does not divide hidden = {hidden}"
    assert fields["zero"]["messages"]["range"] == \
        "argument --zero: must be a ZeRO stage 0, 1, 2 or 3, got {text}"
    assert fields["zero"]["messages"]["alone"] == "--zero: ZeRO-{zero} needs dp, the ranks it shards over"
    assert fields["tokens"]["messages"]["alone"] == "--tokens: the step bound needs gpus too"
    assert fields["mfu"]["default"] == "" and fields["mfu"]["fallback"] == "0.4" and fields["budget"]["default"] == "70GiB"


class Page(HTMLParser):
    """The page's inline scripts, its CSP, and every URL-bearing attribute."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.scripts, self.csp, self.urls, self._in_script = [], None, [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy":
            self.csp = attrs["content"]
        if tag == "script":
            self._in_script = attrs.get("type", "classic")
            self.scripts.append([self._in_script, ""])
        self.urls += [value for name, value in attrs.items() if name in ("src", "href", "action")]

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = None

    def handle_data(self, data):
        if self._in_script is not None:
            self.scripts[-1][1] += data


def test_the_page_allows_its_own_scripts_and_no_network(fresh):
    page = Page()
    page.feed((fresh / "index.html").read_text())
    executed = [text for kind, text in page.scripts if kind == "classic"]
    assert len(executed) == 10  # KaTeX, the generated functions, parse.js, config.js, moe.js, layout.js,
    # step.js, stages.js, calculator.js, plan.js
    directives = dict(d.strip().split(" ", 1) for d in page.csp.split(";"))
    assert directives["default-src"] == "'none'" and directives["base-uri"] == "'none'"
    assert directives["script-src"].split() == [csp_hash(text) for text in executed]
    assert "unsafe-eval" not in page.csp and "http" not in page.csp
    assert directives["font-src"] == "data:"
    assert all(url.startswith(("#", "?")) for url in page.urls), page.urls
    # the hash is the standard one: base64 of SHA-256 over the script's UTF-8 text
    assert csp_hash("a") == "'sha256-" + base64.b64encode(hashlib.sha256(b"a").digest()).decode() + "'"


def test_the_page_carries_the_sheet(fresh):
    text = (fresh / "index.html").read_text()
    assert text.count('<section id="') >= 13
    assert "<svg" in text and 'data-key="fit.gpus_for_state"' in text
    assert '<span class="tex">6 + \\frac{12}{d}</span>' in text
    assert str(ROOT) not in text  # no path of this machine


#: Text a user might type or a link might carry, per kind of field: numbers at the edges of 2^53,
#: 2^100 and the float range; other scripts' digits (Arabic-Indic, Devanagari, full-width) and
#: Unicode spaces, which Python's int() and float() take and the CLI, like the page, refuses.
PIECES = ["0", "1", "7", "-3", "+4", "12", "3.5", ".5", "5.", "1e3", "2E-2", "1_000", "1__0", "_1",
          "inf", "-Infinity", "nan", "NaN", "0x10", " 8 ", "\t9\n", "", "GB", "GiB", "KB", "TiB", "MB",
          "h100", "a100", "b200", "bf16", "adam", "gpt", "8b", "llama3-70b", "x", "'", '"', "\\",
          "<b>", "\x01", "\x7f", "é", "1.0", "0.4", "-0", "1e-400", "1e400", "3 GB", "1.5TB",
          "\u0663", "\u0660", "\u0967", "\uff13", "\uff10", "\u00a0", "\u2003", "\u3000", "\x1c", "\x85",
          "\ufeff", "\x0b", "\x0c", "H100", "\u212a", "9007199254740993", "9007199254740992",
          "99999999999999999999", "5e-324", "1e-300", "1e30", "1.3e30", "1267650600228229401496703205376",
          "9007199254740.993", "9007199254740.992", "0.99999999999999999999", "8192"]


COMM_PREFIX = "python -m derive.comm: error: "
PREDICT_PREFIX = "python -m derive.predict: error: "


def random_texts(rng: random.Random, count: int) -> list[str]:
    return [("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 3))) or "0")
            for _ in range(count)]


@after_render
def test_the_page_parses_every_field_as_the_cli_does(tmp_path):
    """Random text in every field: the page accepts what the CLI accepts, else shows its line."""
    _, data = calculator_data()
    rng = random.Random(1912)
    base = ["--model=llama3-8b"]
    # The fields a field needs beside it (derive.report.Request), so only its own text can fail.
    partners = {"tokens": ["--gpus=8"], "gpus": ["--tokens=8"], "mfu": ["--tokens=8", "--gpus=8"],
                "step-time": ["--tokens=1", f"--gpus={2**53}"], "dp": ["--zero=1"],
                "zero": ["--dp=8"]}
    layout = [field for field in data["fields"] if field["option"] in data["layout"]["fields"]]
    cases = [(field, text) for field in data["fields"]
             if field["option"] not in ("model", "heads", "kv-heads") and field not in layout
             for text in random_texts(rng, 100)]
    cases += [(next(f for f in data["fields"] if f["option"] == "model"), text)
              for text in random_texts(rng, 100)]
    # the layout's own options (derive comm's), after the report's: a set flag takes any text
    cases += [(field, text) for field in layout if field["kind"] != "flag" for text in random_texts(rng, 100)]
    script = tmp_path / "parse.js"
    script.write_text(HAND_WRITTEN[0].read_text() + """
const [data, cases] = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
const parse = DeriveParse(data);
const fields = new Map(data.fields.map((field) => [field.option, field]));
console.log(JSON.stringify(cases.map(([option, text]) => parse.parseField(fields.get(option), text))));
""")
    (tmp_path / "cases.json").write_text(json.dumps([data, [(f["option"], t) for f, t in cases]]))
    run = subprocess.run([node(), str(script), str(tmp_path / "cases.json")], capture_output=True,
                         text=True, timeout=120, check=True)
    wrong, refused = [], []
    moe_options = set(data["moe"]["messages"]["dense_only"])   # only the MoE report reads them
    for (field, text), page in zip(cases, json.loads(run.stdout)):
        moe = field["option"] in moe_options
        argv = [f"--{field['option']}={text}"] + ([] if field["option"] == "model" else
                                                   ["--model=deepseek-v3"] if moe else base)
        argv += partners.get(field["option"], [])
        if field["option"] == "hidden":  # one head of any width: only --hidden's own text can fail
            argv += ["--heads=1", "--kv-heads=1"]
        try:
            if field["option"] in data["layout"]["fields"]:  # the layout's own options: derive comm's
                cli = cli_message([f"--{field['option']}={text}", *base], {}, comm_main, COMM_PREFIX)
            elif field["option"] in data["step"]["fields"]:  # the step card's own options: derive predict's
                cli = cli_message([f"--{field['option']}={text}", *base, "--gpus=8", "--no-memory-check"], {},
                                  predict_main, PREDICT_PREFIX)
            else:
                cli = cli_message(argv, {})
        except ValueError:
            cli = None  # the CLI took it
        if moe and cli is not None and " does not divide the " in cli:
            cli = None  # the field reads; the model's sizes refuse the layout (moe.js, the browser test)
        if field["option"] in data["layout"]["fields"] and cli is not None and not cli.startswith("argument "):
            cli = None  # the field reads; the layout's rules refuse the size (layout.js, test_web_layout.py)
        if field["option"] == "zero" and cli is not None and cli.startswith("--dp:"):
            cli = None  # stage 0 took, and then refused the partner --dp
        overflow = [f["messages"]["overflow"] for f in data["fields"] if "overflow" in f["messages"]]
        if cli is not None and (refused_by_count(field, cli) or any(
                re.fullmatch(re.escape(line).replace(r"\{key\}", r"[\w.]+"), cli) for line in overflow)):
            refused.append((field["option"], text))
            cli = None  # the field reads; the model's counts refuse it (calculator.js, the browser test)
        if page.get("error") != cli:
            wrong.append((field["option"], text, page, cli))
    assert len(cases) >= 1500
    assert not wrong, wrong[:5]
    assert refused and len(refused) < len(cases) // 10, refused[:5]


def refused_by_count(field: dict, line: str) -> bool:
    """Whether ``line`` is the field's refusal of a derived count past its bound (parameters or activations)."""
    return any(re.fullmatch(re.escape(field["messages"][kind]).replace(r"\{key\}", r"[\w.]+"), line)
               for kind in ("parameters", "activations") if kind in field["messages"])


# ---- a pasted config.json: config.js applies derive.hf's tables, as `--config pasted.json` ----

def read_configs_in_node(tmp_path, data: dict, texts: list[str]) -> list[dict]:
    """config.js's reading of each text (parse.js and config.js as the page runs them)."""
    script = tmp_path / "config.js"
    script.write_text(HAND_WRITTEN[0].read_text() + HAND_WRITTEN[1].read_text() + """
const [data, texts] = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
const reader = DeriveConfig(data, DeriveParse(data));
console.log(JSON.stringify(texts.map((text) => reader.read(text))));
""")
    (tmp_path / "texts.json").write_text(json.dumps([data, texts]))
    run = subprocess.run([node(), str(script), str(tmp_path / "texts.json")], capture_output=True,
                         text=True, timeout=120, check=True)
    return json.loads(run.stdout)


def cli_on_pasted(folder, text: str) -> str | None:
    """The CLI's error line for `--config pasted.json` holding ``text`` (run in ``folder``), or None."""
    (folder / PASTED).write_text(text, encoding="utf-8")
    try:
        return cli_message([f"--config={PASTED}"], {})
    except ValueError:
        return None  # the CLI took it


#: Values a config field may hold that no reader should take as a size or a flag.
HOSTILE_VALUES = ["8", 8.0, True, False, -1, 0, [8], {"a": 1}, 1e20, 1e-7, -0.0, "<b>x</b>", 1.5,
                  2**60, "\u00e9\n", [], {}]


def mutated_configs(rng: random.Random) -> list[str]:
    """Shipped configs of the page's families with fields removed, retyped, or made inconsistent."""
    texts = []
    for name in published_names():
        config = published_config(name)
        family = DENSE.get(config["model_type"])
        if family is None:
            continue
        texts.append(json.dumps(config))
        read = [n for _, r in family.sizes.items() for n in r.names]
        read += list(family.config_flags()) + (list(family.head_dim.names) if family.head_dim else [])
        for field in read:
            texts.append(json.dumps({k: v for k, v in config.items() if k != field}))
            texts.append(json.dumps({**config, field: None}))
            for value in rng.sample(HOSTILE_VALUES, 4):
                texts.append(json.dumps({**config, field: value}))
        heads = config.get("num_attention_heads", config.get("n_head"))
        texts.append(json.dumps({**config, "num_key_value_heads": heads + 1}))
        texts.append(json.dumps({**config, "num_key_value_heads": 3, "num_attention_heads": 6}))
        texts.append(json.dumps({**config, "hidden_size": 1000, "n_embd": 1000, "head_dim": None}))
        texts.append(json.dumps({**config, "head_dim": 64, "hidden_size": 64 * heads}))
        texts.append(json.dumps({**config, "_name_or_path": "<script>x</script>", "vocab_size": "v"}))
        texts.append(json.dumps({**config, "model_type": config["model_type"].upper()}))
        texts.append(json.dumps(config, indent=2).replace('"vocab_size": ', '"vocab_size": 1e0 * 0 + '))
    texts += ["", "{", "zq", "[]", "5", '"llama"', "null", "{}", '{"model_type": null}',
              '{"model_type": 5}', '{"model_type": ["llama"]}', '{"model_type": "mamba"}',
              '{"model_type": "llama", "hidden_size": 1.0e2}', '{"model_type": "llama"}',
              '{"model_type": "llama", "model_type": "gpt2", "n_embd": 64, "n_head": 4}',
              '{"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 9, '
              '"n_positions": 16, "n_inner": -0}',
              '{"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 9, '
              '"n_positions": 16, "tie_word_embeddings": "yes", "__proto__": {"n_inner": 1}}']
    return texts


@after_render
def test_a_pasted_config_is_read_as_from_config_reads_it(tmp_path, monkeypatch):
    """Every shipped config of the page's families and hundreds of broken ones: same shape or same line."""
    _, data = calculator_data()
    texts = mutated_configs(random.Random(1919))
    page = read_configs_in_node(tmp_path, data, texts)
    monkeypatch.chdir(tmp_path)
    models = page_models()
    wrong, shapes, errors = [], 0, 0
    for text, got in zip(texts, page):
        cli = cli_on_pasted(tmp_path, text)
        if "error" in got or cli is not None:
            errors += 1
            same = got.get("error") == cli
            if cli is not None and cli.endswith(")") and " is not JSON (" in cli:
                # the detail is the JSON parser's own words: Python's json module, or the browser's
                same = got.get("error", "").split(" (")[0] == cli.split(" (")[0]
            if not same:
                wrong.append((text[:80], got, cli))
            continue
        parsed = json.loads(text)
        if not got["dense"]:
            assert parsed["model_type"] not in DENSE
            continue
        shapes += 1
        shape = read_shape(parsed)
        expected = {field: shape[field] for field in got["sizes"]}
        model = from_config(PASTED)  # the file cli_on_pasted wrote: named as --config names it
        if (got["sizes"], got["headDim"], got["extra"]) != (expected, shape["head_dim"], shape.get("sizes", {})) \
                or form(models[got["form"]]) != form(model) \
                or got["name"] != model.name:
            wrong.append((text[:80], got, expected, shape["head_dim"]))
    assert shapes >= 10 and errors >= 300
    assert not wrong, "\n".join(map(repr, wrong[:6]))


@after_render
def test_the_page_takes_pasted_config_messages_from_the_cli():
    messages = calculator_data()[1]["config"]["messages"]
    assert messages["missing"] == "--config: {path}: {field}: missing from the {model_type} config"
    assert messages["dense_only"].startswith("--config: derive's saved-tensor tables do not model {model_type} layers")
    assert "{name}" in messages["dense_only"] and "{model_type}" in messages["dense_only"]
    assert messages["layer"].startswith("--profile: {profile} is transformers' Llama")


def run_parse(tmp_path, body: str, payload: object) -> object:
    """parse.js's DeriveParse(data) in Node, ``body`` run on the JSON ``payload``; its printed JSON."""
    script = tmp_path / "run.js"
    script.write_text(HAND_WRITTEN[0].read_text() + "\nconst [data, input] = JSON.parse(require('fs')"
                      ".readFileSync(process.argv[2], 'utf8'));\nconst parse = DeriveParse(data);\n"
                      + body)
    (tmp_path / "input.json").write_text(json.dumps([calculator_data()[1], payload]))
    run = subprocess.run([node(), str(script), str(tmp_path / "input.json")], capture_output=True,
                         text=True, timeout=120, check=True)
    return json.loads(run.stdout)


def test_the_page_formats_numbers_as_python_does(tmp_path):
    """The step-time line's numbers (derive.report.FASTER_FORMATS): ties go to even on the exact value."""
    rng = random.Random(53)
    values = [1.015625, 12.625, 2.5, 1.125, 0.5, 999999.5, 9.9995, 1e-300, 5e-324, 1e300, 1e16,
              1.7976931348623157e308, 0.0001, 123456.5]
    values += [10 ** rng.uniform(-320, 308) for _ in range(400)]
    values += [rng.randint(1, 2**20) / 2 ** rng.randint(0, 12) for _ in range(400)]
    cases = [(value, spec) for value in values for spec in (".6g", ".4g", ".0%", ".3g", ".2%")]
    got = run_parse(tmp_path, "console.log(JSON.stringify(input.map(([v, s]) => parse.pyFormat(v, s))));",
                    cases)
    assert format(1.015625, ".6g") == "1.01562" and format(12.625, ".4g") == "12.62"  # ties to even
    wrong = [(value, spec, format(value, spec), text) for (value, spec), text in zip(cases, got)
             if format(value, spec) != text]
    assert not wrong, wrong[:5]


def test_digits_python_reads_but_the_cli_refuses_are_refused_by_the_page(tmp_path):
    """int() reads Arabic-Indic and full-width digits and any integer; the CLI, like the page, takes ASCII up to 2^53."""
    assert int("\u0663") == 3 and float("\uff13.\u0665") == 3.5 and int(" 8\u2003") == 8
    texts = ["\u0663", "\uff13", " 8\u2003", "9007199254740993", "9007199254740992", "8"]
    got = run_parse(tmp_path, "const field = data.fields.find((f) => f.option === 'tokens');\n"
                    "console.log(JSON.stringify(input.map((t) => parse.parseField(field, t))));", texts)
    for text, page in zip(texts, got):
        try:
            cli = cli_message(["--model=llama3-8b", "--gpus=1", f"--tokens={text}"], {})
        except ValueError:
            cli = None
        assert page.get("error") == cli, text
    assert [page.get("value") for page in got] == [None, None, None, None, 2**53, 8]
    assert got[0]["error"] == "argument --tokens: must be a positive integer up to 2^53, got '\u0663'"
    assert got[2]["error"].endswith("got ' 8\\u2003'")


class Flowchart(HTMLParser):
    """The page's saved-tensor flowchart: (node id, class, style, lines) in order."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.nodes, self._inside, self._span = [], False, False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "figure" and attrs.get("class") == "flowchart":
            self._inside = True
        elif self._inside and tag == "li" and "data-node" in attrs:
            self.nodes.append((attrs["data-node"], attrs["data-class"], attrs["style"], []))
        elif self._inside and tag == "span" and self.nodes:
            self._span = True

    def handle_endtag(self, tag):
        if tag == "figure":
            self._inside = False
        self._span = self._span and tag != "span"

    def handle_data(self, data):
        if self._span:
            self.nodes[-1][3].append(data)


def test_the_page_draws_the_sheets_flowchart_without_mermaid(fresh):
    """The activation section's chart (sheet.md's Mermaid block) as HTML from the same Flowchart: the article's 34 = 10 + 24."""
    from derive.render.sections.activations import saved_tensor_flowchart

    chart, _ = saved_tensor_flowchart()
    page = Flowchart()
    page.feed((fresh / "index.html").read_text())
    assert [(node, cls, lines) for node, cls, _, lines in page.nodes] == \
        [(n.id, n.cls, n.label.split("\n")) for n in chart.nodes]
    # an ordered list shows the chart's edges exactly: each node leads to the next
    assert list(chart.edges) == [(a.id, b.id) for a, b in zip(chart.nodes, chart.nodes[1:])]

    def h_per_token(cls):
        return sum(int(n or 1) for _, c, _, lines in page.nodes if c == cls for line in lines
                   for n in re.findall(r": (\d*)h B/token", line))
    assert (h_per_token("full"), h_per_token("tp")) == (10, 24)
    styles = {cls: style for _, cls, style, _ in page.nodes}
    assert styles["tp"] == "background:#DBEAFE;border-color:#1D4ED8"  # the Mermaid classDef's colours
    assert "mermaid" not in (fresh / "index.html").read_text().lower()


@after_render
def test_the_transformers_figure_stays_out_of_the_page():
    # saved_for_backward_bytes exists only under the CLI's hf-sdpa / hf-eager profiles
    assert REPORT_ONLY == ("saved_for_backward_bytes",)
    assert "saved_for_backward_bytes" not in {data["key"] for data in page_script()[1]}
    assert all(formula.key not in REPORT_ONLY for formula in FORMULAS)
