"""Every account on a model read from its config; the saved-tensor accounts of MoE / MLA layers refuse instead of guessing."""
import json

import pytest

from derive.accounts.activations import layer_activation_bytes, model_layer_options
from derive.accounts.flops import flops_per_token
from derive.accounts.state import state_bytes
from derive.architectures.decoder import LLAMA
from derive.hf import published_config, published_model
from derive.cli import main, run
from derive.symbols import k


def test_qwen3_flops_per_token_by_hand():
    # Qwen3-0.6B: tied embedding (the head GEMM), 28 layers, a = 16 heads of k = 128 (h/a = 64).
    # GEMM parameters: N less the norms (2h per layer, q/k norms 2k per layer, the final h).
    qwen = published_model("qwen3-0.6b", seq=4096)
    gemm = 596_049_920 - (28 * (2 * 1024 + 2 * 128) + 1024)
    assert qwen.gemm_parameters == gemm
    causal = 6 * gemm + 6 * 28 * 4096 * 16 * 128   # QK^T and PV: 3 passes x 2 x (s/2) x a k each
    assert qwen.at(flops_per_token(qwen.architecture, "causal")) == causal


def test_layout_and_family_flops_agree_where_both_exist():
    llama = published_model("meta-llama-3-8b")
    for mask in ("causal", "full", "none"):
        assert llama.at(flops_per_token(llama.architecture, mask)) == llama.at(
            flops_per_token(LLAMA, mask))


def test_states_of_a_config_model():
    gemma = published_model("gemma-2-9b")
    assert gemma.at(state_bytes("bf16", "adam").total) == 16 * 9_241_705_984


def test_activation_profiles_use_the_configs_head_width():
    qwen = published_model("qwen3-0.6b", seq=4096)
    options = model_layer_options(qwen, "llama-hf-sdpa")
    assert options == {"head_dim": k, "qk_norm": True}
    layer = qwen.at(layer_activation_bytes("llama-hf-sdpa", "fused", norm_statistics=True,
                                           **options), b=1)
    # by hand, one micro-batch of s = 4096 tokens (transformers 5.23, modeling_qwen3.py):
    t, h, a, g, d, f = 4096, 1024, 16, 8, 128, 3072
    norm = lambda width, groups=1: (4 + 2) * t * width + 4 * t * groups   # fp32 in, bf16 out, rstd
    attention = 2 * t * h + 2 * t * (a + 2 * g) * d + 4 * a * t + 2 * t * a * d
    mlp = 2 * t * h + 4 * 2 * t * f
    assert layer == 2 * norm(h) + norm(a * d, a) + norm(g * d, g) + attention + mlp
    assert model_layer_options(qwen, "gpt") == {}
    assert model_layer_options(published_model("mistral-7b-v0.1"), "llama-hf-eager") == {
        "qk_norm": False}
    # Gemma 2's four norms and OLMo 2's post-norms are not the profile's layer: refused
    for name in ("gemma-2-9b", "olmo-2-1124-7b", "phi-3-mini-4k-instruct"):
        with pytest.raises(ValueError, match="^profile: llama-hf-sdpa"):
            model_layer_options(published_model(name), "llama-hf-sdpa")


def test_moe_and_mla_flops_by_hand_and_saved_tensors_refuse():
    # the FLOP account reads an MoE / MLA layout's table as a dense one's: DeepSeek-V3's config
    # (no MTP modules in transformers' model), s = 4096: 6 x the active GEMM parameters (the
    # 37,552,282,624 active of its report and Megatron's count, less the input embedding
    # [V, h] and the norms: two [h] per layer, the q / kv latent norms [r_q], [r_kv], the final
    # [h]) plus QK^T and PV of 128 heads of width 128 + 64 and 128 over s/2 keys in 61 layers
    deepseek = published_model("deepseek-v3")
    norms = 61 * (2 * 7168 + 1536 + 512) + 7168
    gemm = 37_552_282_624 - 129_280 * 7168 - norms
    assert deepseek.at(flops_per_token(deepseek.architecture), s=4096) == (
        6 * gemm + 3 * 61 * 4096 * 128 * (128 + 64 + 128))
    with pytest.raises(ValueError, match=r"^model: deepseek-v3 \(deepseek_v3\) has MoE / MLA layers, which "
                                         "the dense tables do not hold; the MoE report counts"):
        model_layer_options(deepseek, "llama-hf-sdpa")
    # a family the MoE tables do not model either: the message names it and the families they take
    for name, family in (("gpt-oss-120b", "gpt_oss"), ("deepseek-v2-lite", "deepseek_v2")):
        with pytest.raises(ValueError, match=f"^model: derive's saved-tensor tables do not model {family} layers "
                                             f"\\({name}; the MoE tables take mixtral, qwen2_moe, qwen3_moe, "
                                             "deepseek_v3\\); only its parameters"):
            model_layer_options(published_model(name), "llama-hf-sdpa")


def test_report_config(tmp_path, capsys):
    path = tmp_path / "qwen3-0.6b.json"
    path.write_text(json.dumps(published_config("qwen3-0.6b")))
    figures = json.loads(run(["--config", str(path), "--seq", "4096", "--json"]))
    (name, values), = figures.items()
    assert name == "qwen3-0.6b (custom)"
    assert values["parameters"]["value"] == 596_049_920
    assert values["flops.per_token_causal"]["value"] == 6 * 595_984_384 + 6 * 28 * 4096 * 16 * 128
    moe = tmp_path / "deepseek.json"
    moe.write_text(json.dumps(published_config("deepseek-v3")))
    assert main(["--config", str(moe)]) == 0          # an MoE config gets the report's MoE rows
    assert "active per token 37.55 B" in capsys.readouterr().out
    assert main(["--config", str(tmp_path / "absent.json")]) == 2
    assert "--config:" in capsys.readouterr().err
