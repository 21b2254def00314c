"""Megatron's weight-count departures, sized at the Llama 3 presets and GPT-3 against hand counts."""
import sympy as sp

from derive.identities import megatron as departures
from derive.megatron.tables import padded_vocab
from derive.presets import model
from derive.symbols import BY_NAME, V, t


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


def test_activation_departures_for_llama3_70b_at_t8_b1():
    sizes = departures.sizes(model("70b").values)
    s, h, a, f, kv, vocab, t = 8192, 8192, 64, 28672, 1024, 128256, 8
    # three [b, a, s, s] score tensors: softmax 2, dropout mask 1, dropout output 2 bytes
    assert sizes["no 5as/h score term"] == 5 * a * s * s // t
    # fused Llama layer 12 + 4h_kv/h + 6f/h vs Megatron's 18 + 4f/h, all over t (SP)
    assert sizes["GQA, head width and SwiGLU ignored (Llama fused profile)"] == s * (2 * f + 4 * kv - 6 * h) // t
    assert sizes["GQA, head width and SwiGLU ignored (Llama eager profile)"] == s * (6 * h + 4 * kv + 4 * f) // t
    # 10 + 24/t is f = 4h: two [s, f] MLP tensors of 2 bytes each, over t
    assert sizes["without-SP path ignores f"] == 4 * s * (f - 4 * h) // t
    assert sizes["SP path: logits at 4 bytes, not 2 + 4"] == 2 * s * vocab // t
    assert sizes["without-SP path: logits at 2 bytes, not 2 + 4"] == 4 * s * vocab // t
    assert sizes["without-SP path: final norm input not counted"] == 2 * s * h
    assert sizes["full recompute reported as 10 + 24/t"] == 2 * s * h - s * h * (10 + 24 // t)


def test_every_departure_is_registered_as_a_departing_identity():
    from derive.identities import all_identities

    names = {entry.name: entry for entry in all_identities()}
    for entry in departures.DEPARTURES:
        kind = "weights" if entry.topic == departures.TOPIC else "activations"
        assert names[f"Megatron {kind}: {entry.name}"].holds is False


def test_head_width_counts_for_a_gemma_like_layer():
    # h = 3072, a = 16 heads of width k = 256 (a k = 4096 != h), g = 16, f = 24576, t = 1, b = 1
    values = {"h": 3072, "a": 16, "g": 16, "k": 256, "f": 24576, "s": 8192, "t": 1, "b": 1}
    entry = next(e for e in departures.DEPARTURES if e.name.startswith("GQA, head width") and
                 "fused" in e.name)
    size = entry.difference.subs({BY_NAME[n]: v for n, v in values.items()})
    s, h, ak, gk, f = 8192, 3072, 16 * 256, 16 * 256, 24576
    # fused: norm inputs 2h, qkv and fc1 inputs 2h, q and attention output 2ak, k and v 2gk,
    # fc1 output 4f, fc2 input 2f; Megatron: 18h + 4f
    fused = s * (2 * h + 2 * h + 2 * h + 2 * h + 2 * ak + 2 * ak + 2 * gk + 2 * gk + 4 * f + 2 * f)
    assert size == fused - s * (18 * h + 4 * f)
