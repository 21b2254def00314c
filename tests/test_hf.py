"""derive.hf.from_config: published configs give the published parameter totals; bad configs name the field.

Totals are the primary sources' (derive/configs/SOURCES.md): exact figures where a paper or
Megatron-LM's estimator prints one, the model cards' rounded figures otherwise; hand counts
are written out from each family's modeling file.
"""
import contextlib
import io
import json

import pytest

from derive.cli import main
from derive.hf import from_config, published_config, published_model, published_names
from derive.hf_families import FAMILIES
from derive.presets import MODELS
from derive.validate.hf import Case, compare

EXACT = {
    # Black et al. 2022, GPT-NeoX-20B: An Open-Source Autoregressive Language Model, Table 1
    "gpt-neox-20b": 20_554_567_680,
    # Megatron-LM core_v0.18.0's estimator (shared reference README): same tensors, no MTP
    "mixtral-8x7b-v0.1": 46_702_792_704,
    "deepseek-v3": 671_026_404_352,
}

#: model card figures: (N in billions, decimals the card gives; cards round or truncate)
ROUNDED = {
    "qwen2.5-7b": (7.61, 2), "qwen3-8b": (8.2, 1), "qwen3-0.6b": (0.6, 1),
    "gemma-3-1b-pt": (1.0, 1), "phi-3-mini-4k-instruct": (3.8, 1), "olmo-2-1124-7b": (7.3, 1),
    "qwen1.5-moe-a2.7b": (14.3, 1), "deepseek-v2-lite": (15.7, 1), "qwen3-30b-a3b": (30.5, 1),
    "gpt2": (0.124, 3), "qwen3-235b-a22b": (235, 0), "gpt-oss-120b": (117, 0),
}


def test_at_least_twelve_published_configs_cover_every_family():
    names = published_names()
    assert len(names) >= 12
    assert {published_config(name)["model_type"] for name in names} == set(FAMILIES)


@pytest.mark.parametrize("name, total", EXACT.items())
def test_exact_published_totals(name, total):
    assert published_model(name).parameters == total


@pytest.mark.parametrize("name, figure", ROUNDED.items())
def test_model_card_totals(name, figure):
    assert _card(published_model(name).parameters, *figure)


def _card(count: int, billions: float, decimals: int) -> bool:
    """Whether a card's figure is ``count`` rounded or truncated to ``decimals`` (in billions)."""
    return 0 <= count / 1e9 - billions + 0.5 * 10**-decimals < 1.5 * 10**-decimals


def test_qwen3_30b_is_megatron_plus_the_qk_norms():
    # Megatron's estimator prints 30,532,110,336 (shared reference README); its count has no
    # q/k norms: 48 layers x (q_norm + k_norm) x head_dim 128.
    assert published_model("qwen3-30b-a3b").parameters == 30_532_110_336 + 48 * 2 * 128


def test_active_parameters():
    # DeepSeek-V3: 37.55 B (issue 15's figure; the report's "37B activated")
    assert published_model("deepseek-v3").active_parameters == 37_552_282_624
    mixtral = published_model("mixtral-8x7b-v0.1")
    # by hand: per layer attention 2*4096*(4096+1024), 2 of 8 experts, router 4096*8, two norms
    layer = 2 * 4096 * (4096 + 1024) + 2 * 3 * 4096 * 14336 + 4096 * 8 + 2 * 4096
    assert mixtral.active_parameters == 32 * layer + 2 * 32000 * 4096 + 4096
    assert _card(published_model("qwen1.5-moe-a2.7b").active_parameters, 2.7, 1)
    assert _card(published_model("qwen3-30b-a3b").active_parameters, 3.3, 1)
    dense = published_model("gemma-2-9b")
    assert dense.active_parameters == dense.parameters


def test_llama3_presets_come_from_their_configs():
    # The Llama 3 paper's Table 3 shapes, and the totals derive's hand-written table gave
    for name, total in (("llama3-8b", 8_030_261_248), ("llama3-70b", 70_553_706_496),
                        ("llama3-405b", 405_853_388_800)):
        preset = MODELS[name]
        assert preset.layout is not None and preset.model_type == "llama"
        assert preset.parameters == total and preset.seq == 8192


def test_hand_counts_of_three_layouts():
    gpt2 = published_model("gpt2")       # tied wte, wpe [1024, 768], biases everywhere
    h, layer = 768, 4 * 768 + (768 * 2304 + 2304) + (768 * 768 + 768) + 2 * (768 * 3072) + 3072 + 768
    assert gpt2.parameters == 12 * layer + 50257 * h + 1024 * h + 2 * h == 124_439_808
    gemma = published_model("gemma-2-9b")  # four norms per layer, tied, head_dim 256 != 3584/16
    layer = 3584 * 4096 * 2 + 3584 * 2048 * 2 + 3 * 3584 * 14336 + 4 * 3584
    assert gemma.parameters == 42 * layer + 256000 * 3584 + 3584
    phi = published_model("phi-3-mini-4k-instruct")  # fused qkv and gate_up
    layer = 3072 * 3 * 3072 + 3072 * 3072 + 3072 * 2 * 8192 + 8192 * 3072 + 2 * 3072
    assert phi.parameters == 32 * layer + 2 * 32064 * 3072 + 3072


def test_path_and_name(tmp_path):
    path = tmp_path / "mistral-7b" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(published_config("mistral-7b-v0.1")))
    model = from_config(path)
    assert model.name == "mistral-7b" and model.seq == 32768
    assert from_config(path, seq=4096).seq == 4096
    other = tmp_path / "my-model.json"
    other.write_text(json.dumps(published_config("gpt2")))
    assert from_config(other).name == "my-model"


def _bad(**changes):
    return {**published_config("qwen3-30b-a3b"), **changes}


@pytest.mark.parametrize("config, field", [
    (dict(model_type="mamba"), "model_type"),
    (dict(hidden_size=1), "model_type"),                       # no model_type at all
    (_bad(hidden_size=None), "hidden_size"),
    (_bad(num_key_value_heads=5), "num_key_value_heads"),
    (_bad(num_experts_per_tok=200), "num_experts_per_tok"),
    (_bad(mlp_only_layers=[48]), "mlp_only_layers"),
    (_bad(head_dim=0), "head_dim"),
    (_bad(tie_word_embeddings="yes"), "tie_word_embeddings"),
    ({**published_config("deepseek-v3"), "first_k_dense_replace": 62}, "first_k_dense_replace"),
    ({**published_config("deepseek-v3"), "kv_lora_rank": None}, "kv_lora_rank"),
    ({**published_config("gpt2"), "n_head": 7}, "n_head"),
    ({**published_config("mistral-7b-v0.1"), "head_dim": None, "num_attention_heads": 24,
      "num_key_value_heads": 8}, "num_attention_heads"),
])
def test_bad_configs_name_the_field(config, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        from_config(config)


def test_unknown_model_type_lists_the_known_ones():
    with pytest.raises(ValueError, match="deepseek_v3"):
        from_config({"model_type": "mamba"})


def test_unreadable_paths_name_the_config(tmp_path):
    with pytest.raises(ValueError, match="^config:"):
        from_config(tmp_path / "absent.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(ValueError, match="^config:"):
        from_config(broken)
    with pytest.raises(ValueError, match="^config:"):
        published_config("gpt5")


def test_gpt_oss_120b_by_hand_and_against_transformers():
    # openai/gpt-oss-120b's config: h 2880, 36 layers, 64 query heads and 8 kv heads of head_dim 64 (not
    # h / a = 45), q, k, v, o biases, one sink per head, a router Linear [h, E] + [E], 128 experts of width
    # 2880 with biases (gate_up [E, h, 2f] + [E, 2f], down [E, f, h] + [E, h]), untied embedding
    h, f, E, a, g, d, V, L = 2880, 2880, 128, 64, 8, 64, 201088, 36
    attention = h * a * d + a * d + 2 * (h * g * d + g * d) + a * d * h + h + a
    router = h * E + E
    experts = E * (h * 2 * f + 2 * f + f * h + h)
    layer = attention + router + experts + 2 * h
    model = published_model("gpt-oss-120b")
    assert model.parameters == L * layer + 2 * V * h + h == 116_829_156_672  # the card's "117B"
    # active: 4 of 128 experts; the card's "5.1B active" leaves the input embedding out
    active = L * (attention + router + experts * 4 // E + 2 * h) + 2 * V * h + h
    assert model.active_parameters == active == 5_711_982_912
    assert _card(active - V * h, 5.1, 1)
    sizes = dict(model.sizes)
    assert (sizes["w"], sizes["L_w"], sizes["E"], sizes["k_E"], model.head_dim) == (128, 18, 128, 4, 64)
    # transformers' GptOssForCausalLM on the meta device, tensor by tensor (derive.validate.hf)
    result = compare(Case("gpt_oss", "published", published_config("gpt-oss-120b")))
    assert result["passed"] and result["transformers_parameters"] == 116_829_156_672, result


def test_gpt_oss_saved_tensors_are_refused_in_one_line():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["--model", "gpt-oss-120b"]) == 2
    assert err.getvalue().count("\n") == 1 and "gpt_oss" in err.getvalue()
