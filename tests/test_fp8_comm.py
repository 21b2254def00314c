"""FP8 rows of the communication ledger against byte counts worked out by hand from the models' shapes."""
import json

import pytest

from derive.accounts.comm import collectives, per_rank_bytes_per_step
from derive.comm import main
from derive.hf import published_model
from derive.parallelism import Parallelism
from derive.predict import main as predict_main
from derive.presets import model

#: Llama 3 70B (meta-llama-3-70b config.json): h, f, heads, kv heads, layers, vocabulary.
H, F, A, G, L, V = 8192, 28672, 64, 8, 80, 128256
HEAD_DIM = H // A
#: The quantised matrices of one layer: W_q, W_o (h x h), W_k, W_v (h x g k), gate, up, down (h x f).
LAYER_MATRICES = 2 * H * H + 2 * H * G * HEAD_DIM + 3 * H * F
MATRICES = L * LAYER_MATRICES
TENSORS = 7 * L
#: Everything else: two RMSNorm weights per layer, the final norm, the embedding and the untied head.
NORMS = 2 * H * L + H
REST = NORMS + 2 * V * H


def _rows(found):
    return {row.name: row for row in found}


def test_the_hand_counts_are_the_models():
    assert model("llama3-70b").fp8_weights == (MATRICES, TENSORS) == (68_451_041_280, 560)
    assert model("llama3-70b").parameters == MATRICES + REST


def test_zero1_gather_under_fp8_current_with_fp8_param_gather():
    rows = _rows(collectives(model("llama3-70b"), Parallelism(dp=32, zero=1, precision="fp8-current",
                                                              fp8_param_gather=True)))
    gather = rows["dp.params.all-gather"]
    payload = MATRICES * 1 + TENSORS * 4 + REST * 2     # FP8 matrices, one fp32 scale_inv each, the rest bf16
    assert gather.payload == payload == 72_656_373_952
    assert gather.sent == payload * 31 // 32 == 70_385_862_266
    # gradients are reduced as fp32 main gradients, FP8 or not
    assert rows["dp.grads.reduce-scatter"].payload == (MATRICES + REST) * 4


def test_without_the_flag_the_gather_stays_bf16():
    plain = _rows(collectives(model("llama3-70b"), Parallelism(dp=32, zero=1, precision="fp8-current")))
    assert plain["dp.params.all-gather"].payload == (MATRICES + REST) * 2


def test_mxfp8_zero3_gathers_e8m0_block_scales_twice_per_micro_batch():
    rows = _rows(collectives(model("llama3-70b"), Parallelism(dp=8, zero=3, precision="mxfp8",
                                                              fp8_param_gather=True, global_batch=16)))
    payload = MATRICES + MATRICES // 32 + REST * 2      # one E8M0 byte per 32 elements
    for name in ("dp.params.forward.all-gather", "dp.params.backward.all-gather"):
        assert rows[name].payload == payload == 74_795_466_752
        assert rows[name].count == 2                    # m = 16 / 8
    assert rows["dp.grads.reduce-scatter"].payload == (MATRICES + REST) * 4


def test_tensor_parallel_share_keeps_one_scale_per_matrix():
    rows = _rows(collectives(model("llama3-70b"), Parallelism(tp=8, dp=4, zero=1, precision="fp8-current",
                                                              fp8_param_gather=True)))
    # a t-shard of every matrix, still 560 matrices (and scales) on the rank; norms replicated
    payload = MATRICES // 8 + TENSORS * 4 + (NORMS + 2 * V * H // 8) * 2
    assert rows["dp.params.all-gather"].payload == payload


def test_the_ledger_and_the_state_count_the_same_matrices():
    llama = model("llama3-70b")
    bf16 = _rows(collectives(llama, Parallelism(dp=2, zero=1, precision="fp8-delayed")))
    fp8 = _rows(collectives(llama, Parallelism(dp=2, zero=1, precision="fp8-delayed", fp8_param_gather=True)))
    saved = bf16["dp.params.all-gather"].payload - fp8["dp.params.all-gather"].payload
    n8, tensors = llama.fp8_weights                     # the state accounts' N_8, n_8
    assert saved == n8 * (2 - 1) - 4 * tensors          # delayed-scaling history is a module buffer, not gathered


def test_fp8_blockwise_dispatches_fp8_and_combines_bf16_on_mixtral():
    mixtral = published_model("mixtral-8x7b-v0.1")
    rows = _rows(collectives(mixtral, Parallelism(ep=4, dp=8, precision="fp8-blockwise")))
    elements = mixtral.seq * 1 * 2 * 4096               # s b tokens, top-2 copies of width 4096
    fp8 = elements * 1 + elements // 128 * 4            # FP8 data plus one fp32 scale per 1 x 128 tile
    assert fp8 == 276_824_064
    assert rows["ep.dispatch.all-to-all"].payload == fp8
    assert rows["ep.combine.backward.all-to-all"].payload == fp8      # gradients into the experts
    assert rows["ep.combine.all-to-all"].payload == elements * 2
    assert rows["ep.dispatch.backward.all-to-all"].payload == elements * 2
    assert rows["ep.dispatch.all-to-all"].sent == fp8 * 3 // 4
    totals = per_rank_bytes_per_step(mixtral, Parallelism(ep=4, dp=8, precision="fp8-blockwise"))
    assert totals["ep"] == 32 * (2 * fp8 + 2 * elements * 2) * 3 // 4


def test_per_tensor_recipes_dispatch_bf16():
    mixtral = published_model("mixtral-8x7b-v0.1")
    rows = _rows(collectives(mixtral, Parallelism(ep=4, dp=8, precision="fp8-current")))
    assert rows["ep.dispatch.all-to-all"].payload == mixtral.seq * 2 * 4096 * 2


@pytest.mark.parametrize("fields", [dict(zero=1, precision="bf16"), dict(zero=0, precision="fp8-current"),
                                    dict(zero=1, precision="fp8-current", fp8_param_gather=1)])
def test_fp8_param_gather_misuse_names_the_field(fields):
    with pytest.raises(ValueError, match="^fp8_param_gather: "):
        Parallelism(dp=2, **{"fp8_param_gather": True, **fields})


def test_cli_json(capsys):
    argv = ["--model", "llama3-70b", "--dp", "32", "--precision", "fp8-current", "--fp8-param-gather",
            "--zero", "1", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["layout"]["fp8_param_gather"] is True
    row = next(r for r in data["collectives"] if r["name"] == "dp.params.all-gather")
    assert row["sent"] == (MATRICES + TENSORS * 4 + REST * 2) * 31 // 32


@pytest.mark.parametrize("argv", [["--precision", "bf16", "--zero", "1"], ["--precision", "fp8-current", "--zero", "0"]])
def test_cli_misuse_exits_2_with_one_line(capsys, argv):
    assert main(["--model", "llama3-70b", "--dp", "32", "--fp8-param-gather", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--fp8-param-gather" in err and "Traceback" not in err


def test_predict_takes_the_flag_and_gathers_less(capsys):
    argv = ["--model", "llama3-70b", "--gpu", "h100", "--gpus", "512", "--tp", "8", "--pp", "4",
            "--global-batch", "512", "--precision", "fp8-current", "--zero", "1", "--json"]
    assert predict_main(argv) == 0
    plain = json.loads(capsys.readouterr().out)
    assert predict_main([*argv, "--fp8-param-gather"]) == 0
    gathered = json.loads(capsys.readouterr().out)
    assert gathered["step_time_s"] < plain["step_time_s"]


def test_fp32_training_gathers_fp32_parameters():
    rows = _rows(collectives(model("llama3-70b"), Parallelism(dp=32, zero=1, precision="fp32")))
    assert rows["dp.params.all-gather"].payload == (MATRICES + REST) * 4
