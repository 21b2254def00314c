"""Parameter counts against the article's and the papers' published numbers."""
from hypothesis import given
from hypothesis import strategies as st

from derive.architectures.decoder import LLAMA
from derive.architectures.tables import model_parameters
from derive.model import Model
from derive.presets import MODELS


def test_llama3_parameter_counts_exact():
    # The article prints 8.03 / 70.55 / 405.85 B; the exact counts are Meta's.
    assert MODELS["llama3-8b"].parameters == 8_030_261_248
    assert MODELS["llama3-70b"].parameters == 70_553_706_496
    assert MODELS["llama3-405b"].parameters == 405_853_388_800


def test_llama3_parameter_counts_to_article_digits():
    printed = {"llama3-8b": 8.03, "llama3-70b": 70.55, "llama3-405b": 405.85}
    for name, billions in printed.items():
        assert round(MODELS[name].parameters / 1e9, 2) == billions


def test_gpt3_175b_is_about_175b():
    assert round(MODELS["gpt3-175b"].parameters / 1e9) == 175


def test_n_gemm_70b_is_69_50b_and_1_5_percent_short():
    model = MODELS["llama3-70b"]
    assert round(model.gemm_parameters / 1e9, 2) == 69.50
    layers = model.subs(model_parameters(LLAMA).where("gemm", "layer").numel())
    head = model.subs(model_parameters(LLAMA).where("output").numel())
    assert round(float(layers) / 1e9, 2) == 68.45   # the article: 68.45 B in the layers
    assert round(float(head) / 1e9, 2) == 1.05      # and 1.05 B in the output head
    assert round(1 - model.gemm_parameters / model.parameters, 3) == 0.015


@given(
    layers=st.integers(1, 200),
    heads_per_kv=st.integers(1, 8),
    kv_heads=st.integers(1, 16),
    head_dim=st.sampled_from([32, 64, 128]),
    ffn=st.integers(1, 70000),
    vocab=st.integers(1, 300000),
)
def test_llama_count_matches_an_independent_integer_count(layers, heads_per_kv, kv_heads,
                                                          head_dim, ffn, vocab):
    heads = heads_per_kv * kv_heads
    hidden = heads * head_dim
    model = Model("x", "llama", layers, hidden, heads, kv_heads, ffn, vocab, 2048)
    # Plain-integer count of the Llama layout, as Meta's reference model.py lays it out.
    kv = kv_heads * head_dim
    per_layer = hidden * hidden * 2 + hidden * kv * 2 + 3 * hidden * ffn + 2 * hidden
    assert model.parameters == layers * per_layer + 2 * vocab * hidden + hidden


def test_gpt_count_matches_an_independent_integer_count():
    # GPT-3 XL through Megatron's layout: 24 layers, h = 2048, V = 50257, s = 2048, tied.
    hidden, layers, vocab, seq = 2048, 24, 50257, 2048
    per_layer = (2 * hidden) + (3 * hidden * hidden + 3 * hidden) + (hidden * hidden + hidden) \
        + (2 * hidden) + (4 * hidden * hidden + 4 * hidden) + (4 * hidden * hidden + hidden)
    expected = layers * per_layer + vocab * hidden + seq * hidden + 2 * hidden
    assert MODELS["gpt3-1.3b"].parameters == expected
