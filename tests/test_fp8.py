"""FP8 recipes: states, saved tensors, GEMM dtypes and traffic against values computed by hand from shapes."""
import json
from fractions import Fraction

import pytest
import sympy as sp

from derive.__main__ import main as derive_main
from derive.accounts.activations import layer_activation_bytes
from derive.accounts.state import FP8_PRECISIONS, resident_bytes, state_ledger
from derive.claims import CLAIMS, all_claims, evaluate
from derive.conventions.fp8 import (
    dispatch_bytes_per_element,
    flops_by_dtype,
    gather_ratio,
    gemm_dtype,
    gemm_peak,
    gradient_reduction_dtype,
    mfu_peak,
)
from derive.presets import model
from derive.recipes import RECIPES, blocks_divide, combine_dtype, dispatch_dtype, recipe

# Llama 3 70B (Dubey et al. 2024, Table 3; the released config's V = 128256), by hand.
H, KV, F, L, V = 8192, 8 * 128, 28672, 80, 128256
LAYER_MATRICES = [(H, H), (H, KV), (H, KV), (H, H), (H, F), (H, F), (F, H)]
N8 = L * sum(r * c for r, c in LAYER_MATRICES)            # 68,451,041,280
N8_TENSORS = L * len(LAYER_MATRICES)                       # 560
N70 = N8 + 2 * V * H + (2 * L + 1) * H                     # embedding, head, norms


def at_70b(expr):
    return Fraction(str(model("llama3-70b").at(expr)))


def test_llama3_70b_counts_by_hand():
    assert model("llama3-70b").fp8_weights == (N8, N8_TENSORS) == (68_451_041_280, 560)
    assert model("llama3-70b").parameters == N70


@pytest.mark.parametrize("precision, by_hand", [
    # Megatron's 18 plus the FP8 weight and its transpose (1 + 1 byte) on the layer matrices
    ("fp8-current", 18 * N70 + 2 * N8 + 4 * N8_TENSORS),
    # plus, per GEMM, 5 FP8 tensors' fp32 scale and 1024-step fp32 amax history (TE defaults)
    ("fp8-delayed", 18 * N70 + 2 * N8 + 4 * N8_TENSORS + 5 * (1 + 1024) * 4 * N8_TENSORS),
    # two MXFP8 copies, each 1 byte + one E8M0 byte per 32 elements
    ("mxfp8", 18 * N70 + 2 * (N8 + N8 // 32)),
    # two copies, each 1 byte + one fp32 per 128 x 128 block
    ("fp8-blockwise", 18 * N70 + 2 * (N8 + 4 * (N8 // (128 * 128)))),
    # two E2M1 copies (half a byte), one E4M3 byte per 16 x 16 block, one fp32 per tensor each
    ("nvfp4", 18 * N70 + 2 * (N8 // 2 + N8 // 256 + 4 * N8_TENSORS)),
])
def test_resident_bytes_of_llama3_70b(precision, by_hand):
    assert at_70b(resident_bytes(precision, "adam")) == by_hand


def test_the_b_per_param_rows_at_70b():
    assert float(at_70b(resident_bytes("fp8-current", "adam")) / N70) == pytest.approx(19.9404, abs=1e-4)
    assert float(at_70b(resident_bytes("mxfp8", "adam")) / N70) == pytest.approx(20.0010, abs=1e-4)


def test_fp8_param_gather_drops_the_bf16_copy_of_the_layer_matrices():
    # bf16 copy only for embedding, head, norms; FP8 parameters + transpose; scale_inv per tensor
    by_hand = 2 * (N70 - N8) + 16 * N70 + 2 * N8 + 4 * N8_TENSORS
    assert at_70b(resident_bytes("fp8-current", "adam", fp8_param_gather=True)) == by_hand
    names = state_ledger("fp8-current", fp8_param_gather=True).names
    assert "bf16 parameters (not quantised)" in names


def test_deepseek_v3_bf16_moments():
    # fp32 master and gradients (4 + 4), bf16 params (2), bf16 moments (2 + 2), block-wise copies
    by_hand = 14 * N70 + 2 * (N8 + 4 * (N8 // 16384))
    assert at_70b(resident_bytes("fp8-blockwise", "adamw-bf16")) == by_hand


def test_zero3_shards_the_fp8_copies_but_not_the_delayed_scaling_buffers():
    d = sp.Symbol("d", positive=True, integer=True)
    held = resident_bytes("fp8-delayed", "adam", zero_stage=3, ranks=d)
    meta = 5 * (1 + 1024) * 4 * N8_TENSORS
    assert sp.expand(at_70b(held.subs(d, 1)) - at_70b(resident_bytes("fp8-delayed", "adam"))) == 0
    assert model("llama3-70b").at(sp.limit(held, d, sp.oo)) == meta


def test_every_llama3_matrix_is_tiled_by_every_block():
    for name in ("llama3-8b", "llama3-70b", "llama3-405b"):
        m = model(name)
        for row in m.parameter_rows.where("gemm", "layer"):
            shape = tuple(int(m.subs(size)) for size in row.shape)
            for rule in RECIPES.values():
                assert blocks_divide(shape, rule.weight) and blocks_divide(shape, rule.activation)
    assert blocks_divide((100, 128), recipe("mxfp8").weight)
    assert not blocks_divide((128, 100), recipe("mxfp8").weight)
    assert not blocks_divide((100, 128), recipe("fp8-blockwise").weight)


def test_saved_llama3_70b_layer_by_hand():
    s, b, a = 8192, 1, 64
    sbh = s * b * H
    # bf16 rows kept: layer input, q, k, v, attention output, pre-MLP input, fc1 output (2f)
    bf16 = 2 * (sbh + sbh + 2 * s * b * KV + sbh + sbh + s * b * 2 * F)
    # FP8 rows: linear_qkv input, linear_proj's copy of the attention output, fc1 input, fc2 input
    fp8 = sbh + sbh + sbh + s * b * F
    options = dict(softmax_statistics=False)
    plain = model("llama3-70b").at(layer_activation_bytes("llama-fused", **options), b=1)
    assert plain == bf16 + 2 * (sbh + sbh + s * b * F)          # today's three linear inputs in bf16
    current = layer_activation_bytes("llama-fused", recipe="fp8-current", **options)
    assert model("llama3-70b").at(current, b=1) == bf16 + fp8 + 4 * 4
    mx = layer_activation_bytes("llama-fused", recipe="mxfp8", **options)
    assert model("llama3-70b").at(mx, b=1) == bf16 + fp8 + fp8 // 32
    nv = layer_activation_bytes("llama-fused", recipe="nvfp4", **options)
    assert model("llama3-70b").at(nv, b=1) == bf16 + fp8 // 2 + fp8 // 16 + 4 * 4
    assert a == 64  # the shape the rows read (h / a = 128)


def test_full_recompute_keeps_the_bf16_layer_input_only():
    assert layer_activation_bytes("llama-fused", recompute="full", recipe="mxfp8") == \
        layer_activation_bytes("llama-fused", recompute="full")


def test_the_eager_profiles_refuse_a_recipe():
    with pytest.raises(ValueError, match="^profile: "):
        layer_activation_bytes("llama-eager", recipe="fp8-current")
    with pytest.raises(ValueError, match="^recipe: "):
        layer_activation_bytes("llama-fused", recipe="fp8")


def test_gemm_dtypes():
    assert gemm_dtype("nvfp4", "linear") == "fp4"
    for name in FP8_PRECISIONS:
        assert gemm_dtype(name, "linear") == ("fp4" if name == "nvfp4" else "fp8")
        assert gemm_dtype(name, "attention") == gemm_dtype(name, "head") == "bf16"
        assert gemm_dtype(name, "router") == "bf16"
        assert gemm_dtype(name, "linear", layer=0, layers=80, bf16_edge_layers=1) == "bf16"
        assert gemm_dtype(name, "linear", layer=79, layers=80, bf16_edge_layers=1) == "bf16"
        assert gemm_dtype(name, "linear", layer=1, layers=80, bf16_edge_layers=1) != "bf16"
    assert gemm_dtype("bf16", "linear") == "bf16" and gemm_dtype("fp32", "linear") == "fp32"
    for args, field in ((("fp8", "linear"), "precision"), (("mxfp8", "conv"), "gemm")):
        with pytest.raises(ValueError, match=f"^{field}: "):
            gemm_dtype(*args)
    with pytest.raises(ValueError, match="^layer: "):
        gemm_dtype("mxfp8", "linear", bf16_edge_layers=1)


def test_peaks_and_mfu_conventions():
    assert gemm_peak("fp8-current", "linear", "h100") == 1979e12
    assert gemm_peak("fp8-current", "attention", "h100") == 989e12
    assert mfu_peak("bf16-peak", "b200") == 2250e12 and mfu_peak("fp8-peak", "b200") == 4500e12
    assert gemm_peak("nvfp4", "linear", "b200") == 9000e12
    with pytest.raises(ValueError, match="^peak: "):
        gemm_peak("fp8-current", "linear", "a100")


def test_fp8_flops_of_a_70b_token_are_six_n8():
    split = flops_by_dtype("mxfp8", model("llama3-70b").architecture)
    assert model("llama3-70b").at(split["fp8"]) == 6 * N8


def test_traffic_ratios_by_hand():
    assert gather_ratio("fp8-current") == Fraction(1, 2)
    assert gather_ratio("mxfp8") == Fraction(1 + Fraction(1, 32), 2)
    assert gather_ratio("fp8-blockwise") == Fraction(1 + Fraction(4, 128 * 128), 2)
    assert gather_ratio("fp8-current", fp8_param_gather=False) == 1
    assert gather_ratio("nvfp4") == Fraction(Fraction(1, 2) + Fraction(1, 256), 2)
    assert dispatch_bytes_per_element("fp8-blockwise") == 1 + Fraction(4, 128)
    assert dispatch_bytes_per_element("mxfp8") == 2
    assert dispatch_dtype("fp8-blockwise") == "fp8" and combine_dtype("fp8-blockwise") == "bf16"
    assert gradient_reduction_dtype("mxfp8") == "fp32"


def test_fp8_param_gather_needs_an_fp8_precision():
    with pytest.raises(ValueError, match="^fp8_param_gather: "):
        state_ledger("bf16", fp8_param_gather=True)


def test_transformer_engine_memory_example_by_hand():
    mib = 2**20
    # weight 2 + script's input 2 + FP8 weight (column-wise) 1 + FP8 input 1 + output 2 MiB;
    # DelayedScaling: amax history 1024 x 5 fp32 (20480 B), scales 5 fp32 and two scale_inv,
    # each small request rounded to 512 B by the caching allocator
    by_hand = 8 * mib + 20480 + 512 + 512 + 512
    all_claims()
    verdict = evaluate(CLAIMS["te.memory.fp8-forward-printed"])
    assert verdict.status == "holds" and verdict.derived == Fraction(by_hand, mib)


def derive_out(capsys, *argv: str) -> str:
    """What ``python -m derive *argv`` prints (its main, in this process); it must exit 0."""
    assert derive_main(list(argv)) == 0
    return capsys.readouterr().out


def test_cli_takes_the_fp8_precisions(capsys):
    figures = json.loads(derive_out(capsys, "report", "--model", "70b", "--precision", "mxfp8", "--json"))["llama3-70b"]
    assert figures["fp8_parameters"]["value"] == N8
    assert Fraction(str(figures["state.resident"]["value"])) == 18 * N70 + 2 * (N8 + N8 // 32)


def test_report_shows_the_fp8_copies_and_the_fp8_layer(capsys):
    figures = json.loads(derive_out(capsys, "report", "--model", "70b", "--precision", "fp8-current",
                                    "--profile", "llama-fused", "--json"))["llama3-70b"]
    assert figures["state.fp8_copies"]["value"] == 2 * N8 + 4 * N8_TENSORS
    s, b, a = 8192, 1, 64
    sbh = s * b * H
    bf16 = 2 * (4 * sbh + 2 * s * b * KV + s * b * 2 * F)
    fp8 = 3 * sbh + s * b * F
    logsumexp = 4 * b * a * s
    assert figures["activations.per_layer_fp8"]["value"] == bf16 + fp8 + 16 + logsumexp
    text = derive_out(capsys, "report", "--model", "70b", "--precision", "fp8-current", "--profile", "llama-fused")
    assert "560 layer matrices quantised" in text and "fp8-current's quantised linear inputs" in text
    plain = derive_out(capsys, "report", "--model", "70b")
    assert "quantised" not in plain and "FP8" not in plain


def test_the_communication_ledger_gathers_the_bf16_copy_under_an_fp8_precision():
    from derive.accounts.comm import per_rank_bytes_per_step
    from derive.parallelism import Parallelism

    layout = dict(tp=8, pp=4, dp=8, zero=3)
    fp8 = per_rank_bytes_per_step(model("llama3-70b"), Parallelism(**layout, precision="mxfp8"))
    megatron = per_rank_bytes_per_step(model("llama3-70b"), Parallelism(**layout, precision="bf16-fp32grad"))
    bf16 = per_rank_bytes_per_step(model("llama3-70b"), Parallelism(**layout, precision="bf16"))
    assert fp8 == megatron            # FP8 caches do not travel; fp32 gradients as Megatron's bf16
    assert fp8["dp"] > bf16["dp"] and fp8["tp"] == bf16["tp"]


def test_the_sheets_b_per_param_table_is_exact():
    # formulas/tables.json: fp8-current with --fp8-param-gather keeps 18 B/param plus 4 B of scale per
    # layer matrix: Llama 3 8B has 32 x 7 = 224 matrices over N = 8,030,261,248 parameters, so the
    # value is 18 + 896/N = 1129255495/62736416, not a rounded 18
    from pathlib import Path
    tables = json.loads((Path(__file__).resolve().parents[1] / "formulas" / "tables.json").read_text())
    rows = tables["tables"]["fp8_bytes_per_parameter"]["rows"]
    row = next(r for r in rows if r["recipe"] == "fp8-current, --fp8-param-gather")
    assert Fraction(row["llama3-8b"]) == 18 + Fraction(4 * 32 * 7, 8_030_261_248)
