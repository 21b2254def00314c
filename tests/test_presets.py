"""Model presets reject shapes that cannot exist."""
import pytest

from derive.model import Model
from derive.presets import hardware, model


@pytest.mark.parametrize("kwargs, field", [
    (dict(layers=0), "layers"),
    (dict(hidden=-4096), "hidden"),
    (dict(vocab=1.5), "vocab"),
    (dict(heads=3), "heads"),       # 3 does not divide 4096
    (dict(kv_heads=5), "kv_heads"),  # 5 does not divide 32
    (dict(family="mamba"), "family"),
])
def test_bad_shapes_name_the_field(kwargs, field):
    shape = dict(name="x", family="llama", layers=32, hidden=4096, heads=32, kv_heads=8,
                 ffn=14336, vocab=128256, seq=8192)
    shape.update(kwargs)
    with pytest.raises(ValueError, match=f"^{field}:"):
        Model(**shape)


def test_aliases_and_unknown_names():
    assert model("70b").name == "llama3-70b"
    with pytest.raises(ValueError, match="^model:"):
        model("llama4")
    with pytest.raises(ValueError, match="^peak:"):
        hardware("tpu")


def test_moe_presets_sit_in_the_one_table():
    """Mixtral 8x7B, DeepSeek-V3 and Qwen3-30B-A3B are Models of the same table, their routing in the layout."""
    from derive.presets import MODELS

    assert list(MODELS)[-3:] == ["mixtral-8x7b", "deepseek-v3", "qwen3-30b-a3b"]
    deepseek = model("deepseek-v3")
    assert (deepseek.name, deepseek.seq, deepseek.layers, deepseek.moe_layers[0]) == ("DeepSeek-V3", 4096, 61, 3)
    # DeepSeek-V3 report, section 2.1.2: sigmoid scores, group-limited top-k (8 groups, 4 kept); one MTP module
    moe = deepseek.layout.moe
    assert (moe.router, moe.normalise_topk, moe.weights_dtype, deepseek.layout.mtp) == ("sigmoid-grouped", True,
                                                                                        "fp32", True)
    assert dict(deepseek.sizes)["n_g"] == 8 and dict(deepseek.sizes)["k_g"] == 4 and dict(deepseek.sizes)["D"] == 1
    # Qwen3-MoE: softmax, the config's norm_topk_prob = true, weights cast to bf16 (Qwen3MoeSparseMoeBlock)
    qwen = model("qwen3-30b-a3b").layout.moe
    assert (qwen.router, qwen.normalise_topk, qwen.weights_dtype) == ("softmax", True, "bf16")
    assert not model("mixtral-8x7b").dense and model("mixtral-8x7b").mtp_parameters == 0
    assert model("llama3-70b").dense
