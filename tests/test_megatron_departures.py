"""Megatron's weight-count departures, sized at the Llama 3 presets and GPT-3 against hand counts."""
import sympy as sp

from derive.identities import megatron as departures
from derive.megatron import padded_vocab
from derive.presets import model
from derive.symbols import V, t


def test_padded_vocabulary_of_llama3_grows_from_t_4():
    assert [padded_vocab(128256, n) for n in (1, 2, 4, 8)] == [128256, 128256, 128512, 129024]
    assert padded_vocab(V, t).subs({V: 50257, t: 1}) == 50304


def test_sizes_for_llama3_70b_at_t8_p4():
    sizes = departures.sizes(model("70b").values)
    # 768 padding rows, input embedding and untied head, width 8192.
    assert sizes["padded vocabulary grows with t"] == -(129024 - 128256) * 8192 * 2
    assert sizes["final norm counted on the first stage"] == sp.Rational(-8192, 4)
    assert sizes["linear biases not counted"] == 0
    assert sizes["learned position embedding not counted"] == 0
    assert sizes["fp16 counted at bf16's 18 bytes"] == 20 - 18
    assert sizes["fp16 distributed optimizer counted at 6 + 12/d"] == sp.Rational(4 * 8 + 16 - 6 * 8 - 12, 8)


def test_gpt3_175b_biases_and_positions():
    gpt = model("175b").values
    sizes = departures.sizes(gpt, family="gpt")
    hidden = 12288
    # QKV 3h, projection h, fc1 4h, fc2 h biases per layer.
    assert sizes["linear biases not counted"] == 3 * hidden + hidden + 4 * hidden + hidden
    assert sizes["learned position embedding not counted"] == 2048 * hidden
