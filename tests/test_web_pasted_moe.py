"""A pasted MoE config.json shows the MoE report: ``derive report --config pasted.json --json``'s figures.

config.js reads the paste as derive.hf_families' MoE readers and derive.presets.moe_from_config do and gives its
sizes to the named MoE model with the same Layout (derive.render.page_moe_paste); every figure the page shows must be
the CLI's for a file holding the pasted text, at the same --tp --ep --etp --pp --dp, precision and profile (exactly
the keys the CLI prints, integers to the last digit, floats to 1e-12), and the copied command must be that command.
A config the CLI refuses keeps the CLI's line. Same browser set-up as test_web_browser.py.
"""
import json
import shlex

import pytest
from test_web_browser import browser, calculator, cli_on_file, errors, open_page, page  # noqa: F401 (fixtures)
from test_web_layout import MOE_REPORT, assert_same, data_parallel, page_values

from derive.cli import run as report_run
from derive.hf import published_config
from derive.render.page_config import PASTED
from derive.render.page_moe_paste import NO_FORM

pytestmark = pytest.mark.xdist_group("web_browser")

#: (a shipped config, the fields changed, the page's options): each MoE family the MoE report takes at two layouts
#: (tensor, expert, expert-tensor and pipeline parallel, FP8 recipes, the eager profile, a --seq), and three resized
#: pastes (fewer layers, experts, a narrower model; DeepSeek with fewer dense layers and expert groups).
PASTES = [
    ("mixtral-8x7b-v0.1", {}, {"gpus": "64", "tp": "2", "ep": "8", "seq": "4096"}),
    ("mixtral-8x7b-v0.1", {}, {"pp": "4", "dp": "2", "precision": "mxfp8", "micro-batch": "2", "seq": "8192"}),
    ("qwen1.5-moe-a2.7b", {}, {"tp": "2", "ep": "4", "dp": "4", "seq": "4096"}),
    ("qwen1.5-moe-a2.7b", {}, {"pp": "2", "ep": "2", "etp": "2", "dp": "4", "moe-profile": "eager"}),
    ("qwen3-30b-a3b", {}, {"tp": "4", "ep": "16", "dp": "16", "seq": "4096", "precision": "fp8-delayed"}),
    ("qwen3-30b-a3b", {}, {"gpus": "32", "pp": "4", "ep": "8"}),
    ("deepseek-v3", {}, {"gpus": "1024", "tp": "2", "pp": "8", "ep": "64", "seq": "4096"}),
    ("deepseek-v3", {}, {"pp": "16", "ep": "8", "dp": "8", "precision": "fp8-blockwise", "seq": "4096"}),
    ("mixtral-8x7b-v0.1", {"num_hidden_layers": 8, "num_local_experts": 4, "hidden_size": 2048,
                           "intermediate_size": 5632}, {"tp": "2", "ep": "4", "dp": "4", "seq": "2048"}),
    ("mixtral-8x7b-v0.1", {"num_hidden_layers": 8, "num_local_experts": 4, "hidden_size": 2048,
                           "intermediate_size": 5632}, {"pp": "2", "dp": "2", "micro-batch": "4"}),
    ("deepseek-v3", {"num_hidden_layers": 12, "first_k_dense_replace": 1, "n_routed_experts": 64, "n_group": 4,
                     "topk_group": 2}, {"tp": "4", "ep": "16", "dp": "16", "seq": "4096"}),
    ("deepseek-v3", {"num_hidden_layers": 12, "first_k_dense_replace": 1, "n_routed_experts": 64, "n_group": 4.0,
                     "topk_group": 2}, {"pp": "4", "ep": "8", "dp": "8", "precision": "mxfp8", "seq": "4096"}),
    ("qwen3-30b-a3b", {"num_hidden_layers": 24, "num_experts": 64, "num_experts_per_tok": 4},
     {"tp": "2", "ep": "8", "dp": "8"}),
    # one switch away from a named model: a form of the paste's own (derive.render.page_moe_paste.pasted_moe_layouts)
    ("deepseek-v3", {"num_nextn_predict_layers": 0}, {"tp": "2", "pp": "4", "ep": "32", "dp": "32", "seq": "4096"}),
    ("deepseek-v3", {"q_lora_rank": None, "num_hidden_layers": 27, "first_k_dense_replace": 1,
                     "n_routed_experts": 64, "num_experts_per_tok": 6, "n_group": 1, "topk_group": 1},
     {"ep": "8", "dp": "8", "precision": "mxfp8", "seq": "4096"}),
    ("deepseek-v3", {"n_shared_experts": 0, "attention_bias": False}, {"pp": "8", "ep": "16", "dp": "16"}),
    ("qwen3-30b-a3b", {"norm_topk_prob": False}, {"tp": "2", "ep": "4", "dp": "4", "moe-profile": "eager"}),
    ("qwen1.5-moe-a2.7b", {"qkv_bias": False}, {"pp": "2", "ep": "4", "dp": "4", "precision": "fp8-current"}),
]


def moe_argv(path, options: dict[str, str]) -> list[str]:
    """derive report's words for ``--config path`` and the page's ``options`` (its --dp: the layout's d c)."""
    argv = [f"--config={path}", *(f"--{o}={options[o]}" for o in MOE_REPORT if o in options and o != "model")]
    dp = data_parallel(options)
    return argv + ([f"--dp={dp * int(options.get('cp', 1))}"] if dp is not None else [])


def report_of(path, options: dict[str, str]) -> dict[str, object]:
    """The MoE report's JSON for ``--config path`` at ``options``: its one model's figures."""
    (figures,) = json.loads(report_run([*moe_argv(path, options), "--json"])).values()
    return figures


@pytest.mark.parametrize("name, changed, options", PASTES, ids=[f"{name}-{i}" for i, (name, _, _) in enumerate(PASTES)])
def test_a_pasted_moe_config_shows_the_moe_reports_figures(browser, calculator, tmp_path, name, changed, options):
    text = json.dumps({**published_config(name), **changed}, indent=2)
    path = tmp_path / PASTED
    path.write_text(text)
    expected = report_of(path, options)
    open_page(browser, calculator, {"config": text, **options})
    assert errors(browser) == {}
    shown = page_values(browser)
    assert sorted(shown) == sorted(expected)  # exactly the report's keys: no stale comm, step or stage figure
    assert_same(shown, expected, options)
    for card in ("comm", "step", "stages"):
        assert browser.find_element("id", card).get_attribute("hidden") is not None, card
    assert browser.find_element("id", "paste-moe-note").get_attribute("hidden") is None
    config = json.loads(text)
    experts = next(config[field] for field in ("num_local_experts", "num_experts", "n_routed_experts") if field in config)
    assert f" · {experts} experts, {config['num_experts_per_tok']} per token" in browser.find_element("id", "model-facts").text
    # the copied command is the report's for that file, and its JSON the page's figures
    words = shlex.split(browser.find_element("id", "command").text)
    assert words[:2] == ["derive", "report"] and f"--config={PASTED}" in words
    argv = [word.replace(f"--config={PASTED}", f"--config={path}") for word in words[2:]]
    (again,) = json.loads(report_run([*argv, "--json"])).values()
    assert again == expected


#: Pastes the CLI refuses, each with its line: a dense-only MoE family (DeepSeek-V2, GPT-OSS), more experts per token
#: than experts, a non-integer, a missing or bad DeepSeek field, Qwen dense layers, tied embeddings, a bad kv-head count.
def _mixtral(**changed):
    return json.dumps({**published_config("mixtral-8x7b-v0.1"), **changed})


def _without(name, field):
    return json.dumps({k: v for k, v in published_config(name).items() if k != field})


BAD_PASTES = [
    (json.dumps(published_config("deepseek-v2-lite")), "deepseek_v2"),
    (json.dumps(published_config("gpt-oss-120b")), "gpt_oss"),
    (_mixtral(num_experts_per_tok=9), "top-k over the experts"),
    (_mixtral(num_experts_per_tok=2.5), "a non-integer top-k"),
    (_mixtral(num_local_experts=True), "a bool as the experts"),
    (_without("mixtral-8x7b-v0.1", "num_local_experts"), "no experts"),
    (_mixtral(num_key_value_heads=5), "kv heads"),
    (_mixtral(tie_word_embeddings=True), "tied"),
    (_mixtral(num_hidden_layers=70000), "too many layers"),
    (json.dumps({**published_config("qwen3-30b-a3b"), "mlp_only_layers": [3]}), "a dense Qwen layer"),
    (json.dumps({**published_config("qwen3-30b-a3b"), "mlp_only_layers": [48]}), "a layer past the last"),
    (json.dumps({**published_config("qwen1.5-moe-a2.7b"), "decoder_sparse_step": 2}), "a sparse step"),
    (json.dumps({**published_config("qwen1.5-moe-a2.7b"), "shared_expert_intermediate_size": "x"}), "a shared width"),
    (_without("deepseek-v3", "n_group"), "no expert groups"),
    (json.dumps({**published_config("deepseek-v3"), "topk_group": 2.5}), "a fractional group top-k"),
    (json.dumps({**published_config("deepseek-v3"), "first_k_dense_replace": 62}), "dense layers past the last"),
    (json.dumps({**published_config("deepseek-v3"), "n_shared_experts": -1}), "negative shared experts"),
    (_without("deepseek-v3", "kv_lora_rank"), "no MLA rank"),
]


@pytest.mark.parametrize("text, case", BAD_PASTES, ids=[case for _, case in BAD_PASTES])
def test_a_pasted_moe_config_the_cli_refuses_keeps_its_line(browser, calculator, tmp_path, monkeypatch, text, case):
    monkeypatch.chdir(tmp_path)
    open_page(browser, calculator, {"config": text})
    assert errors(browser) == {"config": cli_on_file(tmp_path, text, {})}
    assert page_values(browser) == {}


def test_an_moe_paste_whose_layout_no_named_model_has_is_said_plainly(browser, calculator, tmp_path):
    # Qwen3-MoE with attention biases and no top-k renormalisation (two switches from Qwen3-30B-A3B): the CLI
    # reports it, the page holds no expressions for that Layout
    text = json.dumps({**published_config("qwen3-30b-a3b"), "attention_bias": True, "norm_topk_prob": False})
    path = tmp_path / PASTED
    path.write_text(text)
    assert report_of(path, {})["parameters"] > 0
    open_page(browser, calculator, {"config": text})
    line = errors(browser)["config"]
    assert line.startswith(NO_FORM.split("{")[0]) and "qwen3-30b-a3b" in line
    assert page_values(browser) == {}


def test_a_layout_the_moe_report_refuses_gets_its_line(browser, calculator, tmp_path, monkeypatch):
    # t = 3 does not divide Mixtral's 32 heads: the MoE report's own line, on --tp
    monkeypatch.chdir(tmp_path)
    text = _mixtral()
    (tmp_path / PASTED).write_text(text)
    open_page(browser, calculator, {"config": text, "tp": "3"})
    with pytest.raises(Exception) as refused:
        report_run([f"--config={PASTED}", "--tp=3", "--json"])
    assert errors(browser) == {"tp": " ".join(str(refused.value).split())}
