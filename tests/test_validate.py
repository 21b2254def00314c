"""derive.validate: the ledgers against what PyTorch's autograd keeps and its flop counter counts."""
import json
import subprocess
import sys

import pytest
import sympy as sp

from derive import validate
from derive.validate import __main__ as cli
from derive.validate import measured_flops, measured_saved_bytes, predicted_saved_bytes

GPT = dict(s=8, b=2, h=32, a=4, g=4, f=128)
LLAMA = dict(s=8, b=2, h=32, a=4, g=2, f=48)


@pytest.mark.parametrize("kind, shape", [
    ("gpt-eager", GPT),
    ("gpt-eager", dict(s=6, b=3, h=40, a=5, g=5, f=160)),
    ("llama-eager", LLAMA),
    ("llama-eager", dict(s=10, b=1, h=48, a=6, g=3, f=72)),
])
def test_predicted_equals_measured(kind, shape):
    assert predicted_saved_bytes(kind, shape) == measured_saved_bytes(kind, shape)


def test_gpt_layer_is_korthikanti_plus_bf16_layernorm_statistics():
    s, b, h, a = 8, 2, 32, 4
    paper = s * b * h * (34 + 5 * a * s // h)       # Korthikanti et al. 2022, eq. (1): 19968
    statistics = 2 * 2 * s * b * 2                  # two LayerNorms x (mean, rstd), bf16 on CPU
    assert paper + statistics == 20096
    assert measured_saved_bytes("gpt-eager", GPT) == 20096
    assert predicted_saved_bytes("gpt-eager", GPT) == 20096


def test_llama_layer_hand_count():
    s, b, h, a, g, f = 8, 2, 32, 4, 2, 48
    d = h // a
    rms_norm = 4 * s * b * h + 4 * s * b + 4 * s * b * h   # fp32 upcast, fp32 rstd, fp32 x*rstd
    attention = 2 * s * b * h + 2 * b * a * s * d + 2 * 2 * b * g * s * d + 4 * b * a * s + 2 * s * b * h
    mlp = 2 * s * b * h + 4 * 2 * s * b * f                 # input; gate, up, silu(gate), product
    assert 2 * rms_norm + attention + mlp == 19840
    assert measured_saved_bytes("llama-eager", LLAMA) == 19840


def test_flop_counter_sees_full_scores_and_no_cpu_flash_attention():
    s, b, h, a, f = 8, 2, 32, 4, 128
    gemms = 6 * s * b * (3 * h * h + h * h + 2 * h * f)
    scores = 3 * 2 * 2 * b * a * s * s * (h // a)          # QK^T and PV, fwd + 2 bwd, not halved
    assert measured_flops("gpt-eager", GPT) == gemms + scores == 1228800
    g, f = 2, 48
    llama_gemms = 6 * s * b * (2 * h * h + 2 * h * g * h // a + 3 * h * f)
    assert measured_flops("llama-eager", LLAMA) == llama_gemms == 737280  # flash counted as 0
    from derive.validate.measure import measured_flops as count
    math_total, by_op = count("llama-eager", LLAMA, math_attention=True)
    assert by_op["aten.bmm"] == 3 * 2 * 2 * b * a * s * s * (h // a) == 49152
    assert math_total == llama_gemms + 49152


def test_bad_shape_names_the_field():
    with pytest.raises(ValueError, match="^a: "):
        predicted_saved_bytes("gpt-eager", dict(GPT, a=5))
    with pytest.raises(ValueError, match="^s: "):
        predicted_saved_bytes("llama-eager", dict(LLAMA, s=0))
    with pytest.raises(ValueError, match="^g: "):
        predicted_saved_bytes("gpt-eager", dict(GPT, g=2))
    with pytest.raises(ValueError, match="^kind: "):
        predicted_saved_bytes("bert", GPT)
    with pytest.raises(ValueError, match="^L: "):
        predicted_saved_bytes("llama-model", LLAMA)


def test_a_ledger_off_by_one_byte_fails(monkeypatch, capsys):
    monkeypatch.setattr(cli, "GRID", {"gpt-eager": (GPT,)})
    monkeypatch.setattr(cli, "predicted_saved_bytes", lambda kind, shape: 20097)
    assert cli.main(["--kind", "gpt-eager"]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_cli_json_reports_every_kind_and_the_counter_caveat(capsys):
    # in process (the module's main): a subprocess would spend its time importing torch again
    assert cli.main(["--json", "--kind", "llama-model"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["failed"] == 0 and report["passed"] == len(cli.GRID["llama-model"])
    assert any("flash" in note for note in report["notes"])
    first = report["results"][0]
    assert len(first["pairs"]) == first["predicted_tensors"] == len(first["measured_tensors"])
    assert first["pairs"][0]["ledger"] and first["pairs"][0]["saved_by"] == ["EmbeddingBackward0.indices"]
    kept = {(row["dtype"], tuple(row["shape"])) for row in first["measured_tensors"]}
    assert ("int64", (2, 8)) in kept                     # embedding ids
    assert ("bf16", (16, 50)) in kept                    # log-probabilities, b*s x V
    assert ("bf16", ()) in kept                          # nll_loss total_weight
    assert set(validate.KINDS) == {"gpt-eager", "llama-eager", "llama-model"} | {
        f"hf-{family}-{kernel}" for family in ("llama", "mistral", "qwen3")
        for kernel in ("sdpa", "eager")}


def test_torch_stays_out_of_the_check():
    code = "import sys, derive.check, derive.identities as i; i.all_identities(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_pairing_reports_what_either_side_lacks():
    from derive.validate.measure import saved_tensors
    from derive.validate.predicted import Row, predicted_rows

    predicted = predicted_rows("gpt-eager", GPT)
    fp32_stats = [Row(r.name, r.shape, "fp32", r.numel, 4 * r.numel) if r.numel == 16 else r
                  for r in predicted]                                   # a CUDA-style ledger
    pairs, missing, extra = cli.pair(fp32_stats, saved_tensors("gpt-eager", GPT))
    assert len(pairs) == 15 and len(missing) == 4 and len(extra) == 4
    assert {row.dtype for row in missing} == {"fp32"} and {row.dtype for row in extra} == {"bf16"}
    assert {name for row in extra for name in row.saved_by} == {
        "NativeLayerNormBackward0.result1", "NativeLayerNormBackward0.result2"}


def test_transformers_profiles_against_the_eager_profile_by_hand():
    # transformers 5.23 (modeling_llama.py), read by hand: LlamaRMSNorm casts x * rstd to bf16 before
    # the scale (2 bytes where nn.RMSNorm keeps 4), for each of the layer's two norms; the rest of an
    # sdpa layer is the eager profile's, with the two multiplies of the SiLU product in another order.
    from derive.accounts.activations import layer_activation_bytes
    from derive.symbols import a, b, g, h, s

    hf = layer_activation_bytes("llama-hf-sdpa", "fused")
    assert sp.expand(hf - layer_activation_bytes("llama-eager", "fused")) == -2 * 2 * s * b * h
    # eager attention: repeat_kv keeps K and V at a heads, an fp32 softmax and bf16 probabilities
    # [b, a, s, s] instead of g-head K and V and the fp32 logsumexp [b, a, s]
    # (away from g = b = 1, where repeat_kv's copy is a view: tests/test_hf_exact.py)
    eager = layer_activation_bytes("llama-hf-eager", "fused").subs(g, 2)
    d = h / a
    assert sp.simplify(eager - hf.subs(g, 2) - (2 * 2 * b * a * s * d - 2 * 2 * b * 2 * s * d
                                                + (4 + 2) * b * a * s * s - 4 * b * a * s)) == 0


def test_qwen3_q_k_norm_rows():
    from derive.architectures.saved import llama_layer_saved
    from derive.symbols import a, b, g, h, s

    extra = (llama_layer_saved("hf-sdpa", qk_norm=True).bytes()
             - llama_layer_saved("hf-sdpa").bytes())
    d = h / a   # per head: fp32 input, fp32 rstd per head, bf16 normalised
    assert sp.expand(extra - ((4 + 2) * b * s * (a + g) * d + 4 * b * s * (a + g))) == 0
    with pytest.raises(ValueError, match="^qk_norm:"):
        llama_layer_saved("eager", qk_norm=True)
