"""`derive --moe`: the report's MoE rows against hand counts, and their errors."""
from __future__ import annotations

import json
from fractions import Fraction

import pytest

from derive.cli import main, run
from derive.presets import MODELS, moe_from_config
from derive.report import MoELayout, moe_figures

MIXTRAL = {"model_type": "mixtral", "hidden_size": 4096, "num_attention_heads": 32,
           "num_key_value_heads": 8, "num_hidden_layers": 32, "intermediate_size": 14336,
           "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000,
           "max_position_embeddings": 32768, "tie_word_embeddings": False}


def test_mixtral_first_stage_by_hand():
    """t = 8, e = 8, p = 4: 8 layers of (attention/8 + norms + router + 8 experts/8) + embedding/8."""
    layer = (2 * 4096 * 4096 + 2 * 4096 * 1024) // 8 + 2 * 4096 + 4096 * 8 + 8 * 3 * 4096 * 14336 // 8
    expected = 8 * layer + 32000 * 4096 // 8
    values = moe_figures(MODELS["mixtral-8x7b"], MoELayout(tp=8, ep=8, pp=4, dp=32))
    assert values["stage_parameters"] == expected == 1_467_940_864
    assert values["expert_data_parallel"] == 32
    assert values["state_bytes_plain"] == 18 * expected
    assert values["state_bytes"] == expected * Fraction(6 * 32 + 12, 32)  # d = EDP = 32 here
    # e = 4, d = 8: experts are data-parallel over EDP = t d / (t_E e) = 16 ranks, the rest over d = 8
    skewed = moe_figures(MODELS["mixtral-8x7b"], MoELayout(tp=8, ep=4, pp=4, dp=8))
    experts = 8 * 8 * 3 * 4096 * 14336 // 4
    others = expected - 8 * 8 * 3 * 4096 * 14336 // 8
    assert skewed["expert_data_parallel"] == 16
    assert skewed["stage_expert_parameters"] == experts
    assert skewed["state_bytes"] == others * Fraction(6 * 8 + 12, 8) + experts * Fraction(6 * 16 + 12, 16)


def test_config_reader_matches_the_preset():
    assert moe_from_config(MIXTRAL).parameters == MODELS["mixtral-8x7b"].parameters
    with pytest.raises(ValueError, match="^num_local_experts: "):
        moe_from_config({k: v for k, v in MIXTRAL.items() if k != "num_local_experts"})
    with pytest.raises(ValueError, match="^model_type: "):
        moe_from_config({**MIXTRAL, "model_type": "llama"})


def test_cli_text_and_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(MIXTRAL))
    text = run(["--moe", str(path), "--tp", "8", "--ep", "8", "--pp", "4", "--dp", "32"])
    assert "46.70 B" in text and "12.88 B" in text and "1.468 B parameters" in text
    data = json.loads(run(["--moe", "deepseek-v3", "--json"]))
    assert data["DeepSeek-V3"]["active_parameters"] == 37_552_282_624
    assert data["DeepSeek-V3"]["parameters"] == 671_026_404_352


@pytest.mark.parametrize("argv, option", [
    (["--moe", "deepseek-v3", "--tp", "3"], "--tp"),
    (["--moe", "deepseek-v3", "--ep", "8", "--dp", "4"], "--ep"),
    (["--moe", "deepseek-v3", "--ep", "3"], "--ep"),
    (["--moe", "nope"], "--moe"),
    (["--moe", "missing.json"], "--moe"),
    (["--model", "mixtral-8x7b", "--precision", "fp32"], "--precision"),
    (["--model", "mixtral-8x7b", "--precision", "fp9"], "--precision"),
    (["--model", "mixtral-8x7b", "--precision", "fp8-current", "--moe-profile", "eager"], "--precision"),
])
def test_bad_options_are_one_line(argv, option, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"derive: error: {option}: ") and err.count("\n") == 1


def test_qwen2_moe_counts_its_qkv_biases():
    """transformers' Qwen2MoeForCausalLM of Qwen1.5-MoE-A2.7B holds 14,315,784,192 parameters (counted on the
    meta device): the MoE rows read the config's own layout, q, k and v biases included (the MoE report
    before the one Model counted 24 layers x 3 x 2048 fewer)."""
    data = json.loads(run(["--model", "qwen1.5-moe-a2.7b", "--json"]))["qwen1.5-moe-a2.7b"]
    assert data["parameters"] == 14_315_784_192


def test_config_of_an_moe_model_gets_the_moe_report(tmp_path):
    path = tmp_path / "mixtral.json"
    path.write_text(json.dumps(MIXTRAL))
    data = json.loads(run(["--config", str(path), "--json", "--tp", "8", "--ep", "8", "--pp", "4",
                           "--dp", "32"]))
    assert data["mixtral"]["stage_parameters"] == 1_467_940_864
    assert data["mixtral"]["active_parameters"] == 12_879_925_248


# Mixtral 8x7B at s = 4096, b = 1, t = e = 1, one MoE layer (fused profile), bytes per token by hand:
# norms' inputs and the two normed tensors (attention input, router input) 2h each, q and the
# attention output 2ak each, k and v 2gk each, two fp32 rstd, fp32 logsumexp 4a, fp32 router
# scores 4E, routing map E, int32 row_id_map 4(2E + 1), k_E permuted tokens 2k_E h, fp32
# probabilities 4k_E, fc1 output 2 k_E 2f_E, fc2 input 2 k_E f_E.
H, A_K, G_K, A, E_, K_E, F_E, T = 4096, 32 * 128, 8 * 128, 32, 8, 2, 14336, 4096
BF16_PER_TOKEN = (4 * 2 * H + 2 * 2 * A_K + 2 * 2 * G_K + 2 * 4 + 4 * A + 4 * E_ + E_ + 4 * (2 * E_ + 1)
                  + 2 * K_E * H + 4 * K_E + 2 * K_E * 2 * F_E + 2 * K_E * F_E)


def test_mixtral_layer_under_fp8_by_hand():
    """fp8-current: the attention input, permuted tokens and fc2 input lose a byte per element,
    linear_proj's FP8 copy of the attention output adds one; fp32 scale_inv: one for each of the two
    attention inputs, one per expert for each of the two GroupedLinear inputs; MXFP8: 33/32 bytes."""
    data = json.loads(run(["--model", "mixtral-8x7b", "--seq", "4096", "--json", "--precision", "fp8-current"]))
    mixtral = data["Mixtral 8x7B"]
    assert BF16_PER_TOKEN == 241_916
    assert mixtral["layer_saved_bytes"] == BF16_PER_TOKEN * T == 990_887_936
    fp8 = (BF16_PER_TOKEN - H + A_K - K_E * H - K_E * F_E) * T + 4 * (2 + 2 * 8)
    assert mixtral["layer_saved_bytes_fp8"] == fp8 == 839_893_064
    # cached FP8 weight and transpose of the 32 layers' q, k, v, o and 8 x 3 expert matrices, fp32 scale each
    n_8 = 32 * (2 * H * A_K + 2 * H * G_K + 8 * 3 * H * F_E)
    assert mixtral["fp8_weight_bytes"] == 2 * n_8 + 4 * 32 * (4 + 8 * 3) == 92_878_671_360
    # first stage: 32 such layers and the token ids (int64)
    assert mixtral["activation_bytes_fp8"] == 32 * fp8 + 8 * T
    mx = json.loads(run(["--model", "mixtral-8x7b", "--seq", "4096", "--json", "--precision", "mxfp8"]))
    saved = (H + K_E * H + K_E * F_E) * T          # the elements re-typed; A_K * T copied
    assert mx["Mixtral 8x7B"]["layer_saved_bytes_fp8"] == (
        BF16_PER_TOKEN * T - 2 * saved + Fraction(33, 32) * (saved + A_K * T)) == 845_660_160
    assert "layer_saved_bytes" not in json.loads(run(["--model", "mixtral-8x7b", "--json"]))["Mixtral 8x7B"]


def test_fp8_text_report_and_tensor_parallel_scales():
    text = run(["--model", "mixtral-8x7b", "--seq", "4096", "--precision", "fp8-current"])
    assert "  FP8 weight copies" in text and "(fp8-current: the layer matrices' cached FP8" in text and "800.98 MiB under fp8-current (bf16: 944.98 MiB" in text
    # t = 2 with SP halves every saved row but not the per-tensor scales (2 + 2 x 8/e of them); every
    # rank holds a shard of each attention matrix (its own scale) and 8/e = 2 experts' matrices
    data = json.loads(run(["--model", "mixtral-8x7b", "--seq", "4096", "--json", "--precision", "fp8-current",
                           "--tp", "2", "--ep", "4", "--dp", "4"]))["Mixtral 8x7B"]
    assert data["layer_saved_bytes"] == 990_887_936 // 2
    assert data["layer_saved_bytes_fp8"] == (839_893_064 - 72) // 2 + 4 * (2 + 2 * 2)
    rank = 32 * ((2 * H * A_K + 2 * H * G_K) // 2 + 2 * 3 * H * F_E)
    assert data["fp8_weight_bytes"] == 2 * rank + 4 * 32 * (4 + 2 * 3)


def test_deepseek_v3_layer_saving_under_fp8():
    """MLA + a shared expert (s = 4096): the two down projections each keep an FP8 copy of the
    7168-wide input (no saving), the up projections' latents (1536 + 512) and the 8 x (7168 + 2048)
    expert inputs and the shared fc2 input (2048) lose a byte per element, linear_proj (128 x 128)
    and the shared fc1 (7168) add an FP8 copy; seven fp32 scales and 256 per GroupedLinear input."""
    data = json.loads(run(["--model", "deepseek-v3", "--json", "--precision", "fp8-current"]))["DeepSeek-V3"]
    per_token = 1536 + 512 + 8 * (7168 + 2048) + 2048 - 128 * 128 - 7168
    assert data["layer_saved_bytes"] - data["layer_saved_bytes_fp8"] == per_token * 4096 - 4 * (7 + 2 * 256) \
        == 222_296_036


def test_the_pages_moe_report_world_is_predicts_rule():
    # The MoE report has no --cp; its world is t p d. The page gives it the layout's d c as its d (Megatron's dp-cp
    # group: templates/html/calculator.js moeDp, and the copy-as-command's --dp), so its world rule holds exactly
    # where derive.parallelism's does: t_E e divides t c d. Mixtral (8 experts, f_E 14336), t c d p over 64 GPUs.
    import itertools

    from derive.parallelism import Parallelism
    model = MODELS["mixtral-8x7b"]
    seen = set()
    for t, c, p, e, etp in itertools.product((1, 2, 4, 8), (1, 2, 4), (1, 2), (1, 2, 4, 8), (1, 2, 4, 8)):
        d = 64 // (t * c * p)
        try:
            Parallelism(tp=t, pp=p, cp=c, dp=d, ep=e, etp=etp, sequence_parallel=t > 1, micro_batch=1,
                        global_batch=d * p).check(model)
            parallel = True
        except ValueError as error:
            assert str(error).startswith("ep: etp x ep"), error
            parallel = False
        try:
            MoELayout(tp=t, ep=e, etp=etp, pp=p, dp=d * c).check(model)
            report = True
        except ValueError as error:
            assert "does not divide the world (tp pp dp)" in str(error), error
            report = False
        assert report == parallel == ((t * c * d) % (etp * e) == 0), (t, c, p, d, e, etp)
        seen.add(parallel)
    assert seen == {True, False}
    # the page's issue: t 8 c 4 d 2, e 8 t_E 8: 64 | 64, though not | t d = 16
    MoELayout(tp=8, ep=8, etp=8, pp=1, dp=2 * 4).check(model)
    with pytest.raises(ValueError, match=r"^--ep: 64 does not divide the world \(tp pp dp\) \(16\)$"):
        MoELayout(tp=8, ep=8, etp=8, pp=1, dp=2).check(model)
