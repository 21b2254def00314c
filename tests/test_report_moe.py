"""`derive --moe`: the MoE report's numbers against hand counts, and its errors."""
from __future__ import annotations

import json
from fractions import Fraction

import pytest

from derive.moe_presets import moe_model, moe_model_from_config
from derive.cli import main, run
from derive.report_moe import MoELayout, moe_figures

MIXTRAL = {"model_type": "mixtral", "hidden_size": 4096, "num_attention_heads": 32,
           "num_key_value_heads": 8, "num_hidden_layers": 32, "intermediate_size": 14336,
           "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000,
           "max_position_embeddings": 32768, "tie_word_embeddings": False}


def test_mixtral_first_stage_by_hand():
    """t = 8, e = 8, p = 4: 8 layers of (attention/8 + norms + router + 8 experts/8) + embedding/8."""
    layer = (2 * 4096 * 4096 + 2 * 4096 * 1024) // 8 + 2 * 4096 + 4096 * 8 + 8 * 3 * 4096 * 14336 // 8
    expected = 8 * layer + 32000 * 4096 // 8
    values = moe_figures(moe_model("mixtral-8x7b"), MoELayout(tp=8, ep=8, pp=4, dp=32))
    assert values["stage_parameters"] == expected == 1_467_940_864
    assert values["expert_data_parallel"] == 32
    assert values["state_bytes_plain"] == 18 * expected
    assert values["state_bytes"] == expected * Fraction(6 * 32 + 12, 32)  # d = EDP = 32 here
    # e = 4, d = 8: experts are data-parallel over EDP = t d / (t_E e) = 16 ranks, the rest over d = 8
    skewed = moe_figures(moe_model("mixtral-8x7b"), MoELayout(tp=8, ep=4, pp=4, dp=8))
    experts = 8 * 8 * 3 * 4096 * 14336 // 4
    others = expected - 8 * 8 * 3 * 4096 * 14336 // 8
    assert skewed["expert_data_parallel"] == 16
    assert skewed["stage_expert_parameters"] == experts
    assert skewed["state_bytes"] == others * Fraction(6 * 8 + 12, 8) + experts * Fraction(6 * 16 + 12, 16)


def test_config_reader_matches_the_preset():
    assert moe_model_from_config(MIXTRAL).parameters == moe_model("mixtral-8x7b").parameters
    with pytest.raises(ValueError, match="^num_local_experts: "):
        moe_model_from_config({k: v for k, v in MIXTRAL.items() if k != "num_local_experts"})
    with pytest.raises(ValueError, match="^model_type: "):
        moe_model_from_config({**MIXTRAL, "model_type": "llama"})


def test_cli_text_and_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(MIXTRAL))
    text = run(["--moe", str(path), "--tp", "8", "--ep", "8", "--pp", "4", "--dp", "32"])
    assert "46.70 B" in text and "12.88 B" in text and "1.468 B parameters" in text
    data = json.loads(run(["--moe", "deepseek-v3", "--json"]))
    assert data["DeepSeek-V3"]["active_parameters"] == 37_552_282_624
    assert data["DeepSeek-V3"]["parameters"] == 671_026_404_352


@pytest.mark.parametrize("argv, option", [
    (["--moe", "deepseek-v3", "--tp", "3"], "--tp"),
    (["--moe", "deepseek-v3", "--ep", "8", "--dp", "4"], "--ep"),
    (["--moe", "deepseek-v3", "--ep", "3"], "--ep"),
    (["--moe", "nope"], "--moe"),
    (["--moe", "missing.json"], "--moe"),
])
def test_bad_options_are_one_line(argv, option, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"derive: error: {option}: ") and err.count("\n") == 1


def test_config_of_an_moe_model_gets_the_moe_report(tmp_path):
    path = tmp_path / "mixtral.json"
    path.write_text(json.dumps(MIXTRAL))
    data = json.loads(run(["--config", str(path), "--json", "--tp", "8", "--ep", "8", "--pp", "4",
                           "--dp", "32"]))
    assert data["mixtral"]["stage_parameters"] == 1_467_940_864
    assert data["mixtral"]["active_parameters"] == 12_879_925_248
