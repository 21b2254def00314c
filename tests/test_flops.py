"""FLOPs per token, recompute, MFU / HFU and step time against the article's digits and Megatron's own numbers."""
import json
from fractions import Fraction
from pathlib import Path

import pytest
import sympy as sp

from derive.accounts.flops import (
    flops_per_token,
    hfu,
    mfu,
    packed_flops,
    recompute_factor,
    step_time_lower_bound,
)
from derive.architectures.decoder import FAMILIES, GPT, LLAMA, Layout
from derive.architectures.tables import layer_gemms, model_gemms, output_gemms
from derive.architectures.gemms import Gemm, attention_score_gemms, flops
from derive.conventions import (
    CONVENTIONS,
    megatron_num_floating_point_operations,
    six_n,
)
from derive.presets import HARDWARE, LLAMA3_MODELS, model
from derive.symbols import L, V, a, f, g, h, k, s

H100 = HARDWARE["h100"].peak_flops
REFERENCE = Path(__file__).resolve().parent / "reference" / "megatron_core.json"
STEP_TOKENS = 4_194_304  # 2^22, the article's 4M-token global batch


def at(name: str, expr: sp.Expr) -> float:
    """``expr`` at a preset (Model.at: sizes, N and N_GEMM), as a float."""
    return float(model(name).at(expr))


def test_six_n_and_causal_count_per_token_in_gflop():
    # The article, section 6.4: 6N = 48 / 423 / 2435, with causal attention 51 / 449 / 2524 GFLOP.
    six = [round(at(name, six_n()) / 1e9) for name in LLAMA3_MODELS]
    causal = [round(at(name, flops_per_token(LLAMA, "causal")) / 1e9) for name in LLAMA3_MODELS]
    assert six == [48, 423, 2435]
    assert causal == [51, 449, 2524]


def test_one_sequence_on_one_h100():
    bounds = [round(step_time_lower_bound(8192, at(name, flops_per_token()), 1, H100), 2)
              for name in LLAMA3_MODELS]
    assert bounds == [0.43, 3.72, 20.91]


def test_70b_step_on_1024_h100():
    fpt = at("70b", flops_per_token())
    assert round(step_time_lower_bound(STEP_TOKENS, fpt, 1024, H100), 2) == 1.86
    assert round(step_time_lower_bound(STEP_TOKENS, fpt, 1024, H100, mfu=0.4), 2) == 4.65


def test_observed_4_5_s_gives_mfu_and_both_hfus():
    preset = model("70b")
    fpt = at("70b", flops_per_token())
    tps = STEP_TOKENS / 4.5
    assert round(mfu(tps, fpt, 1024, H100), 3) == 0.413
    selective = float(preset.subs(recompute_factor("selective")))
    assert round(hfu(tps, fpt, 1024, H100, selective), 3) == 0.423
    assert round(float(hfu(tps, fpt, 1024, H100, recompute_factor("full"))), 3) == 0.551
    # hardware FLOPs through flops_per_token(recompute=...) give the same HFUs
    assert mfu(tps, at("70b", flops_per_token(recompute="selective")), 1024, H100) == \
        pytest.approx(hfu(tps, fpt, 1024, H100, selective))


def test_15t_tokens_take_193_days_on_1024_and_24_on_8192():
    fpt = at("70b", flops_per_token())
    seconds = step_time_lower_bound(15e12, fpt, 1024, H100, mfu=0.4)
    assert round(seconds / 86400) == 193
    assert round(step_time_lower_bound(15e12, fpt, 8192, H100, mfu=0.4) / 86400) == 24
    # the article's route: 15T / 4M = 3.6 million steps of 4.65 s (192.5 days before rounding)
    steps = 15e12 / STEP_TOKENS
    assert round(steps / 1e6, 1) == 3.6
    step = step_time_lower_bound(STEP_TOKENS, fpt, 1024, H100, mfu=0.4)
    assert round(steps * step / 86400) == 193


def test_6n_is_6_percent_short_of_the_causal_count_for_70b():
    gap = at("70b", flops_per_token()) / at("70b", six_n()) - 1
    assert round(gap, 2) == 0.06


def test_attention_share_is_about_8_percent_at_s_equal_h():
    attention = flops(attention_score_gemms("causal").times(L))
    weights = flops(model_gemms(LLAMA, "none"))
    assert round(at("70b", attention / weights), 2) == 0.08   # s = h = 8192
    assert round(float(sp.Rational(8192, 12 * 8192)), 3) == 0.083    # the s/(12h) estimate


def test_a_weight_gemm_costs_2mnk_per_pass_and_has_a_wgrad():
    gemm = Gemm("w", 1, 5, 7, {"weight"})
    assert [p.name for p in gemm.passes] == ["forward", "dgrad", "wgrad"]
    assert [p.flops for p in gemm.passes] == [70, 70, 70]
    score = Gemm("qk", 1, 5, 7, {"attention_score"})
    assert [p.name for p in score.passes] == ["forward", "dgrad", "dgrad"]
    assert score.wgrad == 0 and score.dgrad == 140


def test_the_tied_gpt_head_is_an_h_to_v_gemm():
    # the head multiplies a token's h-vector by the tied [V, h] embedding: m = 1, n = V, k = h,
    # 2hV FLOPs a pass, 6hV per token over forward, dgrad and wgrad
    (head,) = list(output_gemms(GPT))
    assert head.has("tied") and (head.m, head.n, head.k) == (1, V, h)
    assert flops(output_gemms(GPT)) == 6 * h * V


def test_layer_gemm_shapes_count_every_llama_weight_once():
    # Independent integer count of the 70B layer's multiply-adds per token.
    preset = model("70b")
    hidden, kv, ffn = 8192, 8 * 128, 28672
    weights = layer_gemms(LLAMA, "none")
    assert int(preset.subs(flops(weights, "forward"))) == \
        2 * (hidden * hidden * 2 + hidden * kv * 2 + 3 * hidden * ffn)
    assert int(preset.subs(flops(output_gemms(LLAMA), "forward"))) == 2 * hidden * 128256
    gpt = model("gpt3-175b")
    assert int(gpt.subs(flops(layer_gemms(GPT, "full")))) == 6 * 12 * 12288**2 + 12 * 2048 * 12288


def test_conventions_for_llama3_70b():
    got = {name: round(at("70b", convention("llama")) / 1e9, 1)
           for name, convention in CONVENTIONS.items()}
    assert got == {"6N": 423.3, "6N_GEMM": 417.0, "derive-causal": 449.2, "derive-full": 481.4,
                   "kaplan": 442.9, "palm": 487.7, "narayanan": 457.3,
                   "narayanan-recompute": 607.6, "megatron": 449.2,
                   # 8N; 72Lh^2(1 + s/3h + V/12Lh); Chinchilla's per-operation count (by hand below)
                   "narayanan-8P": 564.4, "korthikanti-selective": 521.7, "hoffmann": 544.5,
                   "torchtitan": 481.4}   # tests/reference/peers_torchtitan.json: 481,442,709,504
    assert all(c.source and c.assumptions for c in CONVENTIONS.values())


def test_full_recompute_is_exactly_four_thirds_and_layers_only_is_less():
    assert recompute_factor("full") == sp.Rational(4, 3)
    assert recompute_factor("none") == 1
    assert 1 < at("70b", recompute_factor("full-layers")) < 4 / 3


def _reference_records():
    return [r for r in json.loads(REFERENCE.read_text())["records"]
            if r["function"] == "num_floating_point_operations"]


def _tokens_and_squares(record):
    extra, args = record["extra_call_args"], record["args"]
    batch, seq = extra["batch_size"], args["seq_length"]
    return (extra.get("total_real_tokens_in_batch", batch * seq),
            extra.get("seqlen_squared_sum_in_batch", batch * seq * seq))


def _values(args):
    groups = args["num_query_groups"] if args["group_query_attention"] else args["num_attention_heads"]
    return {L: args["num_layers"], V: args["padded_vocab_size"], a: args["num_attention_heads"],
            f: args["ffn_hidden_size"], g: groups, h: args["hidden_size"], k: args["kv_channels"]}


def test_megatron_transcription_reproduces_every_reference_record():
    records = _reference_records()
    assert len(records) == 163
    for record in records:
        args = record["args"]
        tokens, squares = _tokens_and_squares(record)
        expr = megatron_num_floating_point_operations(
            tokens, squares, swiglu=args["swiglu"], query_groups=g,
            output_gate=args["attention_output_gate"])
        assert Fraction(str(expr.subs(_values(args)))) == Fraction(record["result_exact"]), record["id"]


def test_derived_gemm_count_reproduces_megatron_where_the_layer_matches():
    matched = 0
    for record in _reference_records():
        args = record["args"]
        flags = (args["swiglu"], args["group_query_attention"], args["attention_output_gate"])
        family = {(True, True, False): "llama", (False, False, False): "gpt"}.get(flags)
        if family is None or (family == "gpt" and args["kv_channels"] * args["num_attention_heads"]
                              != args["hidden_size"]):
            continue
        per_token_expr = flops(model_gemms(FAMILIES[family], "causal", head_dim=k if family == "llama" else None))
        poly = sp.Poly(per_token_expr, s)
        tokens, squares = _tokens_and_squares(record)
        batch = tokens * poly.coeff_monomial(1) + squares * poly.coeff_monomial(s)
        assert Fraction(str(batch.subs(_values(args)))) == Fraction(record["result_exact"]), record["id"]
        matched += 1
    assert matched >= 50


def test_packed_flops_count_scores_by_squared_lengths():
    lengths = [1000, 3000, 4192]
    preset = model("8b")
    whole = sum(preset.subs(flops_per_token(), s=n) * n for n in lengths)
    packed = preset.subs(packed_flops(sum(lengths), sum(n * n for n in lengths)))
    assert packed == whole


def test_hardware_presets_are_dense_bf16():
    assert HARDWARE["h100"].peak_flops == 989e12 and HARDWARE["a100"].peak_flops == 312e12
    assert HARDWARE["h200"].peak_flops == 989e12 and HARDWARE["h200"].memory_bytes == 141 * 10**9
    assert HARDWARE["b200"].peak_flops == 2250e12
    assert all("dense" in hw.source for hw in HARDWARE.values())


@pytest.mark.parametrize("field, call", [
    ("tokens_per_second", lambda: mfu(0, 1, 1, 1)),
    ("flops_per_token", lambda: mfu(1, -1, 1, 1)),
    ("gpus", lambda: mfu(1, 1, 0, 1)),
    ("peak_flops", lambda: mfu(1, 1, 1, sp.Integer(-3))),
    ("recompute_factor", lambda: hfu(1, 1, 1, 1, 0)),
    ("tokens", lambda: step_time_lower_bound(0, 1, 1, 1)),
    ("mfu", lambda: step_time_lower_bound(1, 1, 1, 1, mfu=0)),
    ("mfu", lambda: step_time_lower_bound(1, 1, 1, 1, mfu=1.5)),
    ("mask", lambda: flops_per_token(LLAMA, "sliding")),
    ("recompute", lambda: flops_per_token(LLAMA, "causal", "some")),
    ("family", lambda: flops_per_token(Layout(family="mamba"))),
    ("layout", lambda: flops_per_token("llama")),
    ("head_dim", lambda: model_gemms(GPT, head_dim=k)),
])
def test_bad_input_names_the_field(field, call):
    with pytest.raises(ValueError, match=f"^{field}: "):
        call()


def test_symbolic_inputs_pass_through():
    rate, fpt, gpus, peak = sp.symbols("R F G P", positive=True)
    assert mfu(rate, fpt, gpus, peak) == rate * fpt / (gpus * peak)


def test_paper_conventions_for_llama3_70b_by_hand():
    l, hid, heads, ffn, vocab, seq, n = 80, 8192, 64, 28672, 128256, 8192, 70_553_706_496
    width = heads * (hid // heads)                                   # key_size x num_heads
    per_layer = (6 * hid * width + 4 * seq * width + 3 * heads * seq + 2 * width * hid
                 + 2 * 3 * hid * ffn)                                # SwiGLU: three matrices
    chinchilla = 3 * (2 * vocab * hid + l * per_layer + 2 * hid * vocab)
    assert at("70b", CONVENTIONS["hoffmann"]("llama")) == chinchilla == 544_487_768_064
    assert at("70b", CONVENTIONS["narayanan-8P"]("llama")) == 8 * n
    eq8 = 72 * l * hid**2 + 24 * l * seq * hid + 6 * hid * vocab     # 72Lh^2(1 + s/3h + V/12Lh)
    assert at("70b", CONVENTIONS["korthikanti-selective"]("llama")) == eq8 == 521_700_114_432


def test_sliding_window_keys_are_the_mean_of_min_i_w():
    from derive.architectures.gemms import attention_score_gemms, window_keys
    from derive.symbols import s as seq, w as window
    # query i of s meets min(i, w) keys; the causal convention drops the diagonal's 1/2 per query at w = s
    for s_, w_ in ((4096, 128), (8192, 128), (64, 64), (10, 3)):
        brute = sum(min(i, w_) for i in range(1, s_ + 1)) / s_
        assert float(window_keys().subs({window: w_, seq: s_})) == pytest.approx(brute - w_ / (2 * s_))
    assert float(window_keys().subs({window: 4096, seq: 4096})) == 2048 == 4096 / 2   # the causal s/2
    assert float(window_keys().subs({window: 9000, seq: 4096})) == 2048             # a window past s: causal
    gemms = attention_score_gemms("window")
    assert [g.name for g in gemms] == ["attention.scores (Q K^T), sliding window", "attention.context (P V), sliding window"]


def test_gpt_oss_step_counts_its_sliding_layers_over_the_window():
    # 18 of 36 layers slide over 128 keys (126 on average at s = 4096: 128 - 128^2 / 8192), 18 attend
    # causally (s / 2 = 2048): QK^T and PV are 2 x 2 a k keys forward FLOPs a token per layer, a k = 64 x 64
    from dataclasses import replace
    from derive.accounts.workload import workload
    from derive.hf import published_model
    work = workload(replace(published_model("gpt-oss-120b"), seq=4096))
    scores = {row.name: row for row in work.rows if row.kind == "score"}
    assert scores["attention.scores (Q K^T), sliding window"].n == pytest.approx(126)
    assert scores["attention.scores (Q K^T), sliding window"].count == 18 * 64
    assert scores["attention.scores (Q K^T)"].n == 2048 and scores["attention.scores (Q K^T)"].count == 18 * 64
    forward = sum(row.flops_per_token for row in scores.values())
    assert forward == pytest.approx(18 * 4 * 64 * 64 * (2048 + 126))
    experts = [row for row in work.rows if row.kind == "expert"]
    # 4 of 128 experts a token: gate, up, down [2880, 2880] each, 36 layers
    assert sum(row.flops_per_token for row in experts) == pytest.approx(36 * 4 * 3 * 2 * 2880 * 2880)
