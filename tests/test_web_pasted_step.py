"""A pasted config.json gets the step card and memory by stage: ``derive predict --config pasted.json --json``'s figures.

The paste's step is its architecture's, traced with every size a symbol (derive.render.page_paste) and set from
the sizes config.js reads; every step_time_s, tokens_per_s_per_gpu, mfu, breakdown.*, memory.* (and, with a token
budget, days and gpu_hours) key the page shows must be predict's for a file holding the pasted text (exactly the
keys predict prints, to 1e-12), the copied command must be that command, and a bad paste or a layout that does not
fit gets predict's own line. Same browser set-up as test_web_browser.py.
"""
import json
import shlex

import pytest
from test_web_browser import browser, calculator, errors, open_page, page  # noqa: F401 (fixtures)
from test_web_layout import PREDICT_OPTIONS, STEP_KEYS, assert_same, flattened, page_values, sequence_parallel
from test_web_stages import cli_memory, memory_keys

from derive.hf import published_config
from derive.options.messages import UsageError
from derive.predict import run as predict_run
from derive.render.page_config import PASTED

pytestmark = pytest.mark.xdist_group("web_browser")

#: (a shipped config, the fields changed, pasted; the layout): Llama 3 at p = 4 with selective recompute; Qwen2.5
#: (attention biases) resized, with CP and FP8; Gemma 2 (a fixed head width, soft-capping) fully sharded and
#: recomputed on an H200; Qwen3 0.6B (tied embeddings) with FP32 gradients and ZeRO-2; GPT-NeoX with a sequential
#: residual (an architecture no page name has) interleaved over p = 8; GPT-2 (learned positions, the GPT family's
#: materialised attention); Llama 3 with biases and tied embeddings and a token budget; OLMo 2 in MXFP8 on a B200.
PASTES = [
    ("meta-llama-3-8b", {}, {"gpus": "32", "tp": "2", "pp": "4", "global-batch": "64", "recompute": "selective"}),
    ("qwen2.5-7b", {"num_hidden_layers": 20, "intermediate_size": 14336},
     {"gpus": "16", "tp": "2", "cp": "2", "zero": "1", "precision": "fp8-delayed", "seq": "8192"}),
    ("gemma-2-9b", {}, {"gpus": "16", "pp": "2", "zero": "3", "recompute": "full", "gpu": "h200",
                        "global-batch": "32"}),
    ("qwen3-0.6b", {}, {"gpus": "4", "tp": "2", "micro-batch": "2", "global-batch": "8",
                        "precision": "bf16-fp32grad", "zero": "2"}),
    ("gpt-neox-20b", {"use_parallel_residual": False},
     {"gpus": "64", "tp": "2", "pp": "8", "vp": "2", "global-batch": "64", "zero": "1"}),
    ("gpt2", {}, {"gpus": "8", "tp": "2", "pp": "2", "zero": "1", "global-batch": "16", "sequence-parallel": "1"}),
    ("meta-llama-3-8b", {"attention_bias": True, "mlp_bias": True, "tie_word_embeddings": True},
     {"gpus": "32", "tp": "4", "pp": "2", "global-batch": "64", "token-budget": "1000000000000"}),
    ("olmo-2-1124-7b", {}, {"gpus": "64", "tp": "2", "pp": "4", "vp": "2", "global-batch": "64", "zero": "3",
                            "precision": "mxfp8", "gpu": "b200"}),
]


def predict_argv(path, options: dict[str, str]) -> list[str]:
    """derive predict's words for ``--config path`` and the page's ``options`` (its own --token-budget too)."""
    argv = [f"--config={path}", *(f"--{o}={options[o]}" for o in PREDICT_OPTIONS if o in options and o != "model")]
    budget = [f"--token-budget={options['token-budget']}"] if "token-budget" in options else []
    return argv + sequence_parallel(options) + budget


def predict_of_paste(text: str, options: dict[str, str], folder, *extra: str) -> dict[str, object]:
    """derive predict --config pasted.json --json with ``options``, the file holding ``text``, flattened."""
    path = folder / PASTED
    path.write_text(text)
    return flattened(json.loads(predict_run([*predict_argv(path, options), *extra, "--json"])))


def step_keys(data: dict[str, object]) -> dict[str, object]:
    """predict's figures the step card and the stages show."""
    return {key: value for key, value in data.items()
            if key in STEP_KEYS or key.startswith("breakdown.") or key in ("days", "gpu_hours")} | cli_memory(data)


@pytest.mark.parametrize("name, changed, layout", PASTES, ids=[f"{name}-{i}" for i, (name, _, _) in enumerate(PASTES)])
def test_a_pasted_config_gets_predicts_step_and_memory(browser, calculator, tmp_path, name, changed, layout):
    text = json.dumps({**published_config(name), **changed})
    open_page(browser, calculator, {"config": text, **layout})
    assert errors(browser) == {}
    shown = page_values(browser)
    expected = step_keys(predict_of_paste(text, layout, tmp_path))
    assert len([key for key in expected if key.startswith("breakdown.")]) == 10
    assert ("days" in expected) == ("token-budget" in layout)
    assert sorted(memory_keys(shown)) == sorted(cli_memory(expected)), layout
    assert set(expected) <= set(shown)
    assert_same(shown, expected, layout)
    assert browser.find_element("id", "step-refusal").get_attribute("hidden") is not None
    # the copied command is predict's for that file, and its JSON the page's figures
    words = shlex.split(browser.find_element("id", "step-command").text)
    assert words[:3] == ["python", "-m", "derive.predict"] and f"--config={PASTED}" in words
    argv = [word.replace(f"--config={PASTED}", f"--config={tmp_path / PASTED}") for word in words[3:]]
    assert step_keys(flattened(json.loads(predict_run([*argv, "--json"])))) == expected


#: A paste whose layout predict refuses as not fitting (Qwen2.5 7B's unsharded state on 8 ranks of t = 4, p = 2).
NOT_FITTING = ("qwen2.5-7b", {"gpus": "16", "tp": "4", "pp": "2", "recompute": "selective", "zero": "2"})


def test_a_paste_that_does_not_fit_gets_predicts_line(browser, calculator, tmp_path):
    name, layout = NOT_FITTING
    text = json.dumps(published_config(name))
    with pytest.raises(UsageError) as refused:
        predict_of_paste(text, layout, tmp_path)
    open_page(browser, calculator, {"config": text, **layout})
    assert errors(browser) == {}
    assert browser.find_element("id", "step-refusal").text == str(refused.value)
    shown = page_values(browser)
    assert_same(shown, step_keys(predict_of_paste(text, layout, tmp_path, "--no-memory-check")), layout)


#: Pastes predict refuses, each with its line: a size that is no integer, a size missing, a layout the paste's heads
#: do not divide.
BAD_PASTES = [
    (json.dumps({**published_config("gemma-2-9b"), "vocab_size": "zq"}), {"dp": "8"}, "config"),
    (json.dumps({k: v for k, v in published_config("meta-llama-3-8b").items() if k != "num_attention_heads"}),
     {"dp": "8"}, "config"),
    (json.dumps(published_config("qwen2.5-7b")), {"tp": "8", "dp": "2"}, "tp"),
]


@pytest.mark.parametrize("text, layout, option", BAD_PASTES, ids=range(len(BAD_PASTES)))
def test_a_bad_paste_gets_predicts_line_and_no_step(browser, calculator, tmp_path, monkeypatch, text, layout, option):
    monkeypatch.chdir(tmp_path)  # the page's messages name the file pasted.json, as predict does given that path
    (tmp_path / PASTED).write_text(text)
    with pytest.raises(UsageError) as refused:
        predict_run([*predict_argv(PASTED, layout), "--json"])
    open_page(browser, calculator, {"config": text, **layout})
    assert errors(browser) == {option: " ".join(str(refused.value).split())}
    shown = page_values(browser)
    assert not [key for key in shown if key in STEP_KEYS or key.startswith(("breakdown.", "memory."))]
    assert browser.find_element("id", "step").get_attribute("hidden") is not None
