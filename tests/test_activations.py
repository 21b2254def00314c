"""Activation ledgers against the article's numbers, PyTorch's saved tensors and Megatron's estimator."""
import pytest
import sympy as sp

from derive.accounts.activations import (
    article_layer_bytes,
    article_model_bytes,
    first_stage_activation_bytes,
    layer_activation_bytes,
    layer_activations,
    logits_bytes,
    model_activation_bytes,
    step_timeline,
)
from derive.architectures.operations.edges import llama_edges_saved
from derive.architectures.saved import (
    LAYER_PROFILES,
    gpt_layer_saved,
    layer_saved,
    llama_layer_saved,
)
from derive.presets import model
from derive.symbols import BY_NAME, L, N, V, a, b, f, g, h, s, t

GB = 1e9


def _gb(name, expr, **extra):
    return float(model(name).subs(expr, **extra)) / GB


@pytest.mark.parametrize("name, fused, materialised", [
    ("8b", 1.14, 11.88), ("70b", 2.28, 23.76), ("405b", 4.56, 47.51),
])
def test_article_per_layer(name, fused, materialised):
    # the article, section 4.3 and the sample output of cli.py (s = 8192, b = 1)
    assert round(_gb(name, article_layer_bytes("fused"), b=1), 2) == fused
    assert round(_gb(name, article_layer_bytes("materialised"), b=1), 2) == materialised


@pytest.mark.parametrize("name, total", [("8b", 42.81), ("70b", 188.84), ("405b", 581.29)])
def test_article_all_layers_plus_logits(name, total):
    assert round(_gb(name, article_model_bytes("fused"), b=1), 2) == total


def test_70b_at_micro_batch_4_is_about_730_gb():
    # the article, section 4.3: 182 GB of layer activations at b = 1, 730 GB at b = 4
    assert round(_gb("70b", article_model_bytes("fused", logits=False), b=1)) == 183
    assert round(_gb("70b", article_model_bytes("fused", logits=False), b=4), -1) == 730


def test_score_term_is_320_for_70b():
    scores = layer_activations("gpt").where("score_matrix").bytes() / (s * b * h)
    assert model("70b").subs(scores) == 320


def test_logits_6_3_gb():
    assert round(_gb("70b", logits_bytes(), b=1), 1) == 6.3
    assert model("8b").subs(logits_bytes(), b=1) == 6 * 8192 * 128256


# --- PyTorch 2.13 CPU eager, bf16, saved_tensors_hooks, dedup by storage, parameters and
# --- buffers excluded (scratch measurement, not part of the package; issue 8 automates it).
GPT_SHAPE = {"s": 16, "b": 3, "h": 64, "a": 4, "f": 256}
LLAMA_SHAPE = {"s": 16, "b": 3, "h": 64, "a": 4, "g": 2, "f": 160}


def _at(ledger, shape):
    values = {BY_NAME[k]: v for k, v in shape.items()}
    return [int(row.bytes.subs(values)) for row in ledger]


def test_gpt_table_matches_pytorch_eager_cpu():
    # measured: 120192 bytes (materialised, native_dropout) and 105600 (SDPA, CPU flash kernel);
    # CPU native_layer_norm keeps mean/rstd in bf16
    assert sum(_at(gpt_layer_saved("materialised", statistics_dtype="bf16"), GPT_SHAPE)) == 120192
    assert sum(_at(gpt_layer_saved("fused", statistics_dtype="bf16"), GPT_SHAPE)) == 105600
    measured = [6144, 96, 96, 6144, 18432, 6144, 3072, 6144, 6144, 3072, 6144, 96, 96, 6144,
                24576, 24576, 3072]
    # in the measurement Q, K and V are views of one [s, b, 3h] storage: merge those three rows
    table = gpt_layer_saved("materialised", statistics_dtype="bf16")
    qkv = sum(_at(table.filter(lambda row: row.name in ("Q", "K", "V")), GPT_SHAPE))
    rest = _at(table.filter(lambda row: row.name not in ("Q", "K", "V")), GPT_SHAPE)
    assert sorted(rest + [qkv]) == sorted(measured)


def test_llama_eager_matches_pytorch_eager_cpu():
    measured = [12288, 192, 12288, 6144, 3072, 6144, 3072, 768, 6144, 12288, 192, 12288, 6144,
                15360, 15360, 15360, 15360]
    assert sorted(_at(llama_layer_saved("eager"), LLAMA_SHAPE)) == sorted(measured)
    assert sum(measured) == 142464


# Per-layer bytes / sbh, computed by hand from the tensor lists above (statistics ignored):
#   eager: 2 norms x (4h fp32 input + 4h fp32 normalised) + 2h qkv input + 2h q + 2h_kv k
#          + 2h_kv v + 2h output + 2h w1/w3 input + 4 x 2f (gate, SiLU, up, w2 input)
#   fused: 2 x 2h norm inputs + 2h qkv input + 2h q + 4h_kv k, v + 2h output + 2h fc1 input
#          + 4f fc1 output + 2f fc2 input
@pytest.mark.parametrize("name, eager, fused, megatron", [
    ("8b", 53, 34, 32),
    ("70b", sp.Rational(105, 2), sp.Rational(67, 2), 32),
    ("405b", sp.Rational(201, 4), sp.Rational(127, 4), 31),
])
def test_llama_profile_coefficients(name, eager, fused, megatron):
    per_sbh = {arch: model(name).subs(layer_activation_bytes(arch, softmax_statistics=False)
                                      / (s * b * h)) for arch in ("llama-eager", "llama-fused")}
    assert per_sbh == {"llama-eager": eager, "llama-fused": fused}
    gpt_selective = layer_activation_bytes("gpt", recompute="selective") / (s * b * h)
    assert model(name).subs(gpt_selective) == megatron  # Megatron's 18 + 4f/h at the Llama shape


@pytest.mark.parametrize("name, extra", [
    ("8b", sp.Rational(8 + 4 * 32, 4096)), ("70b", sp.Rational(8 + 4 * 64, 8192)),
    ("405b", sp.Rational(8 + 4 * 128, 16384)),
])
def test_llama_statistics_add_8_plus_4a_over_h(name, extra):
    for arch in ("llama-eager", "llama-fused"):
        full = layer_activation_bytes(arch, norm_statistics=True)
        bare = layer_activation_bytes(arch, softmax_statistics=False)
        assert model(name).subs((full - bare) / (s * b * h)) == extra


def test_every_row_is_shardable_or_replicated():
    for arch in LAYER_PROFILES:
        for attention in ("materialised", "fused"):
            for row in layer_saved(arch, attention):
                assert row.has("tp_shardable") != row.has("replicated"), row.name


def test_korthikanti_table2_at_gpt3_175b_t8():
    # GPT-3 175B, s = 2048, t = 8: (10 + 24/8) = 13 and 34/8 bytes per sbh, scores aside
    gpt = model("175b")
    tp_selective = layer_activation_bytes("gpt", tensor_parallel=t, recompute="selective")
    tp_sp_selective = layer_activation_bytes("gpt", tensor_parallel=t, sequence_parallel=True,
                                             recompute="selective")
    assert gpt.subs(tp_selective / (s * b * h), t=8) == 13
    assert gpt.subs(tp_sp_selective / (s * b * h), t=8) == sp.Rational(34, 8)
    full = layer_activation_bytes("gpt", recompute="full")
    assert gpt.subs(full, b=1) == 2 * 2048 * 12288


def test_selective_recompute_changes_nothing_under_fused_attention():
    assert layer_activation_bytes("gpt", "fused", recompute="selective") == \
        layer_activation_bytes("gpt", "fused")


@pytest.mark.parametrize("args, result", [
    # Megatron-LM core_v0.18.0 compute_activation_memory, tests/reference records 672, 484, 496
    (dict(s=2048, b=1, h=8192, f=28672, L=80, p=1, v=None, V=128256, t=1), 44084248576),
    (dict(s=2048, b=1, h=2048, f=8192, L=24, p=4, v=None, V=50432, t=2), 1719697408),
    (dict(s=2048, b=1, h=2048, f=8192, L=24, p=4, v=2, V=50432, t=2), 2364583936),
])
def test_first_stage_matches_megatron_compute_activation_memory(args, result):
    expr = first_stage_activation_bytes("gpt", recompute="selective", tensor_parallel=args["t"],
                                        sequence_parallel=True, pipeline=args["p"],
                                        virtual=args["v"])
    values = {BY_NAME[k]: val for k, val in args.items() if k not in ("p", "v", "t")}
    assert expr.subs(values) == result


def test_model_bytes_scale_with_layers():
    per_layer = layer_activation_bytes("llama-fused")
    assert sp.expand(model_activation_bytes("llama-fused", logits=False) - L * per_layer) == 0
    assert model("8b").subs(model_activation_bytes("llama-fused") - L * per_layer, b=1) == \
        6 * 8192 * 128256


def test_llama_edges_keep_eight_rows_counted_by_hand():
    # s = 8, b = 2, h = 32, V = 100: token ids int64 8bs = 128; final RMSNorm fp32 upcast 4bsh = 2048,
    # fp32 inverse RMS 4bs = 64, fp32 normalised input 4bsh = 2048; head input bf16 2bsh = 1024;
    # log-probabilities bf16 2bsV = 3200; targets int64 8bs = 128; 0-d total weight bf16 = 2
    rows = {row.name: int(row.bytes.subs({s: 8, b: 2, h: 32, V: 100})) for row in llama_edges_saved()}
    assert rows == {"embedding: token ids": 128, "norm input (fp32 upcast)": 2048, "norm rstd": 64,
                    "norm normalised (fp32)": 2048, "output: head input": 1024,
                    "loss: log-probabilities": 3200, "loss: targets": 128, "loss: total weight": 2}
    assert llama_edges_saved().bytes().subs({s: 8, b: 2, h: 32, V: 100}) == 8642


def test_accumulated_gradients_are_full_at_the_end_of_forward():
    # micro-batch 2 onwards of m > 1: the bf16 gradient buffer (2N) is already there in forward
    plain = step_timeline("gpt", "fused")
    accumulated = step_timeline("gpt", "fused", accumulated_gradients=True)
    assert sp.expand(accumulated.end_of_forward - plain.end_of_forward) == 2 * N
    assert accumulated.end_of_backward == plain.end_of_backward
    assert sp.expand(accumulated.end_of_forward - accumulated.simple_sum) == 0


def test_step_timeline_70b():
    # the article, section 2.2: at b = 1 with flash attention, 182 GB of activations at the end
    # of forward against 141 GB of bf16 gradients at the end of backward
    llama = model("70b")
    n = llama.parameters
    line = step_timeline("gpt", "fused", softmax_statistics=False, logits=False)
    values = dict(b=1, N=n)
    forward = float(llama.subs(line.end_of_forward.subs(f, 4 * h), **values))
    backward = float(llama.subs(line.end_of_backward, **values))
    resident = 14 * n  # 2 bytes bf16 parameters + 12 bytes optimizer (ZeRO's K)
    assert round((forward - resident) / GB) == 183
    assert round((backward - resident) / GB, 2) == 141.11
    peak = float(llama.subs(line.peak.subs(f, 4 * h), **values))
    total = float(llama.subs(line.simple_sum.subs(f, 4 * h), **values))
    assert peak == forward and total == pytest.approx(forward + 2 * n)


@pytest.mark.parametrize("call, field", [
    (lambda: layer_saved("mamba"), "profile"),
    (lambda: layer_saved("gpt", "paged"), "attention_kernel"),
    (lambda: llama_layer_saved("compiled"), "profile"),
    (lambda: layer_activation_bytes(recompute="some"), "recompute"),
])
def test_bad_input_names_the_field(call, field):
    with pytest.raises(ValueError, match=f"^{field}: "):
        call()


def test_gqa_kv_rows_scale_with_g():
    eager = llama_layer_saved("eager")
    kv = eager["k after RoPE"].bytes + eager["v"].bytes
    assert sp.expand(kv - 4 * s * b * g * h / a) == 0
    assert V not in layer_activation_bytes("llama-eager").free_symbols
