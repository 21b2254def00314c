"""python -m derive.predict: the JSON object the bar reads, exit 2 on layouts that cannot run."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from derive.accounts.efficiency import calibrated
from derive.predict import main
from derive.systems import system

CONFIGS = Path(__file__).resolve().parents[1] / "derive" / "configs"
BAR = ["--model", "llama3-70b", "--gpu", "h100", "--gpus", "64", "--tp", "4", "--pp", "4", "--vp", "5",
       "--cp", "2", "--seq", "8192", "--micro-batch", "1", "--global-batch", "256", "--precision", "bf16",
       "--recompute", "selective", "--json"]


def _json(capsys, argv):
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_the_bar_command(capsys):
    data = _json(capsys, BAR)
    assert {"step_time_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu", "breakdown"} <= set(data)
    assert sum(data["breakdown"].values()) == pytest.approx(data["step_time_s"])
    # 256 sequences of 8192 tokens over 64 GPUs in one step
    assert data["tokens_per_s_per_gpu"] == pytest.approx(256 * 8192 / 64 / data["step_time_s"])
    assert 0.2 < data["mfu"] < 0.7
    assert data["layout"]["dp"] == 2 and data["layout"]["micro_batches"] == 128


def test_architecture_and_moe_config(capsys):
    gpt = _json(capsys, ["--architecture", "layers=24,hidden=2048,ffn=8192,heads=16,vocab=50257,mlp=gelu",
                         "--seq", "2048", "--gpu", "a100-80gb", "--gpus", "8", "--global-batch", "64", "--json"])
    assert gpt["step_time_s"] > 0 and gpt["gpus"] == 8
    moe = _json(capsys, ["--config", str(CONFIGS / "qwen3-30b-a3b.json"), "--seq", "4096", "--gpu", "h200",
                         "--gpus", "32", "--tp", "2", "--ep", "8", "--global-batch", "128", "--json"])
    # t_E 2 x e 8 = 16 GPUs (t_E = t, Megatron's default): the all-to-all leaves the HGX board and hides behind
    # the other micro-batch's computation Megatron pairs it with (ep-a2a-overlap-across-nodes, on by default),
    # all but each all-to-all's excess over its pair; without that rule it is all exposed
    assert moe["layout"]["etp"] == 2 and 0 < moe["breakdown"]["ep"]
    rules = "dp-reduce-with-backward,param-gather-with-forward,tp-async-backward,pp-send-with-compute"
    exposed = _json(capsys, ["--config", str(CONFIGS / "qwen3-30b-a3b.json"), "--seq", "4096", "--gpu", "h200",
                             "--gpus", "32", "--tp", "2", "--ep", "8", "--global-batch", "128",
                             "--overlap", rules, "--json"])
    assert exposed["breakdown"]["ep"] > 3 * moe["breakdown"]["ep"] and exposed["step_time_s"] > moe["step_time_s"]
    fp8 = _json(capsys, ["--model", "llama3-8b", "--gpu", "b200", "--gpus", "8", "--global-batch", "64",
                         "--precision", "fp8-current", "--json"])
    assert fp8["layout"]["precision"] == "fp8-current"


@pytest.mark.parametrize("argv, option", [
    (["--model", "llama3-70b", "--gpus", "48", "--tp", "3"], "--tp"),
    (["--model", "llama3-70b", "--gpus", "60", "--tp", "8"], "--gpus"),
    (["--model", "llama3-405b", "--gpus", "8", "--tp", "8"], "--gpus"),          # does not fit
    (["--model", "llama3-8b", "--gpus", "8", "--gpu", "a100-80gb", "--precision", "mxfp8"], "--precision"),
    (["--model", "llama3-8b", "--gpus", "8", "--gpu", "h100", "--precision", "mxfp8"], "--precision"),  # Blackwell's
    (["--model", "llama3-8b", "--gpus", "8", "--gpu", "v100"], "--gpu"),
    (["--model", "llama3-8b", "--gpus", "64", "--pp", "64"], "--pp"),
    (["--architecture", "layers=2,hidden=64", "--seq", "128", "--gpus", "1"], "--architecture"),
    (["--architecture", "layers=2,hidden=64,ffn=128,heads=4,vocab=100,mlp=relu", "--seq", "128"], "--architecture"),
    (["--model", "llama3-8b", "--gpus", "8", "--overlap", "magic"], "--overlap"),
    (["--model", "nope", "--gpus", "8"], "--model"),
    (["--model", "llama3-8b", "--gpus", "8", "--expert-op-fuser"], "--expert-op-fuser"),  # no routed experts
    (["--model", "llama3-8b", "--gpus", "8", "--recompute-modules", "layernorm"], "--recompute-modules"),
    (["--model", "qwen3-30b-a3b", "--gpus", "8", "--ep", "8", "--recompute-modules", "core_attn"],
     "--recompute-modules"),
    (["--model", "qwen3-30b-a3b", "--gpus", "8", "--ep", "8", "--recompute", "full", "--recompute-modules",
      "moe_act"], "--recompute-modules"),
    (["--model", "qwen3-30b-a3b", "--gpus", "8", "--ep", "8", "--recompute-modules", ","], "--recompute-modules"),
])
def test_layouts_that_cannot_run_exit_2_with_one_line(capsys, argv, option):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and option in err and "Traceback" not in err


def test_expert_op_fuser_drops_the_eager_expert_bias_and_clamp(capsys):
    """--expert-op-fuser: GPT-OSS's element-wise time loses exactly the eager bias and clamp kernels' bytes.

    Counted here from Megatron's code (megatron/core/transformer/moe/experts.py, TEGroupedMLP._apply_bias;
    megatron/core/fusions/fused_bias_geglu.py, weighted_bias_quick_geglu_impl): the bias writes b * p (1),
    reads two and writes one for t + b * p (3), reads and writes the cat (2), and its backward's two products
    read two and write one each (6): 12 k_E h elements a token; the clamp reads and writes each half (2 + 2),
    reads both halves and writes both into the cat (4), backward 3 + 3 + 4: 18 k_E f_E.
    """
    argv = ["--model", "gpt-oss-120b", "--gpu", "b200", "--gpus", "8", "--ep", "8", "--global-batch", "64",
            "--seq", "4096", "--json"]
    eager, fused = _json(capsys, argv), _json(capsys, [*argv, "--expert-op-fuser"])
    assert (eager["layout"]["expert_op_fuser"], fused["layout"]["expert_op_fuser"]) == (False, True)
    hidden = expert_ffn = 2880  # GPT-OSS 120B's config.json: hidden_size, intermediate_size
    active, layers, tokens_per_gpu = 4, 36, 64 * 4096 // 8  # experts_per_token, num_hidden_layers; p = t = 1
    elements = tokens_per_gpu * layers * (12 * active * hidden + 18 * active * expert_ffn)
    gpu = system("b200")
    seconds = elements * 2 / (calibrated().memory * gpu.hbm_bandwidth)  # BF16 bytes at the element-wise rate
    assert eager["breakdown"]["memory_bound"] - fused["breakdown"]["memory_bound"] == pytest.approx(seconds)
    assert {k: v for k, v in eager["breakdown"].items() if k != "memory_bound"} == pytest.approx(
        {k: v for k, v in fused["breakdown"].items() if k != "memory_bound"})


def test_recompute_modules_on_the_command_line(capsys):
    argv = ["--model", "gpt-oss-120b", "--gpu", "b200", "--gpus", "8", "--ep", "8", "--global-batch", "64",
            "--seq", "4096", "--json"]
    plain, again = _json(capsys, argv), _json(capsys, [*argv, "--recompute-modules", "moe_act, layernorm"])
    assert (plain["layout"]["recompute_modules"], again["layout"]["recompute_modules"]) == ([], ["layernorm", "moe_act"])
    # the pre-MLP norm (2 h) and the activation with its clamp (11 k_E f_E) re-run: 132,480 BF16 elements a token
    # a layer (tests/test_step_recompute_modules.py counts them), 36 layers, 32,768 tokens a GPU
    seconds = 32768 * 36 * 132480 * 2 / (calibrated().memory * system("b200").hbm_bandwidth)
    assert again["breakdown"]["memory_bound"] - plain["breakdown"]["memory_bound"] == pytest.approx(seconds)


LLAMA3_PAPER = ["--model", "llama3-405b", "--gpu", "h100", "--gpus", "16384", "--tp", "8", "--pp", "16",
                "--vp", "8", "--seq", "8192", "--micro-batch", "1", "--global-batch", "2048",
                "--sequence-parallel", "--zero", "1"]


def test_llama3_paper_pipeline_needs_balanced_stages_and_does_not_fit_unrecomputed(capsys):
    # p v = 128 > L = 126: only the balanced split (L + 2 slots, Dubey et al. 2024 section 3.3.2) runs it
    assert main(LLAMA3_PAPER) == 2
    assert "--pp: pp x vp = 16 x 8 exceeds the 126 layer slots" in capsys.readouterr().err
    # balanced, no recompute, 128 slots in 128 chunks of one: rank 0's first chunk is the embedding
    # and rank 15's last the loss, so they hold 7 layers; rank 1 holds 8 layers of 398,491,648
    # parameters per TP rank (h(h + 2 g k) + h^2 + 3hf over 8, two norms) at 6 + 12/128 bytes and,
    # warming up 2 x 14 + 7 x 16 >= 16 x 8 chunks, all 16 micro-batches x 8 layers of 508.5 MiB
    # each (the llama-fused rows at t = 8, SP on): the most loaded rank (rank 0 needs 72.9 GiB)
    states = 8 * 398_491_648 * (6 + 12 / 128)
    activations = 16 * 8 * 508.5 * 2**20
    assert main([*LLAMA3_PAPER, "--balanced"]) == 2
    err = capsys.readouterr().err
    assert f"needs {(states + activations) / 2**30:.2f} GiB" in err and "81.65 GiB" in err
    assert "HBM of a h100 (datasheet: 80 GB)" in err
    data = _json(capsys, [*LLAMA3_PAPER, "--balanced", "--recompute", "full", "--json"])
    assert data["layout"]["micro_batches"] == 16


@pytest.mark.parametrize("argv", [BAR, ["--model", "gpt3-175b", "--gpu", "a100-80gb", "--gpus", "1024", "--tp", "8",
                                        "--pp", "8", "--seq", "2048", "--global-batch", "1536", "--json"]])
def test_token_budget_days_and_gpu_hours(capsys, argv):
    plain = _json(capsys, argv)
    assert "days" not in plain and "gpu_hours" not in plain
    budget = 2 * 10**12
    data = _json(capsys, [*argv, "--token-budget", str(budget)])
    layout, seq = data["layout"], int(argv[argv.index("--seq") + 1])
    # the run's throughput from predict's own figures: b m d sequences of s tokens per step over the step's seconds
    tokens_per_step = layout["micro_batch"] * layout["micro_batches"] * layout["dp"] * seq
    assert tokens_per_step == layout["global_batch"] * seq
    seconds = budget / (tokens_per_step / data["step_time_s"])
    assert data["gpus"] == layout["tp"] * layout["pp"] * layout["cp"] * layout["dp"]
    assert data["days"] == pytest.approx(seconds / 86_400, rel=1e-12)
    assert data["gpu_hours"] == pytest.approx(data["gpus"] * seconds / 3_600, rel=1e-12)
    assert data["step_time_s"] == plain["step_time_s"]


def test_token_budget_text_line(capsys):
    assert main([*BAR[:-1], "--token-budget", "15000000000000"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("  15,000,000,000,000 tokens: ") and line.endswith(" GPU-hours")


@pytest.mark.parametrize("value", ["0", "-5", "many", "1.5", str(2**53 + 1)])
def test_bad_token_budget_exits_2_with_one_line(capsys, value):
    with pytest.raises(SystemExit) as raised:
        main([*BAR, "--token-budget", value])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--token-budget" in err


@pytest.mark.parametrize("argv, verdict", [
    (["--model", "70b", "--gpu", "h100", "--tp", "8", "--pp", "4", "--gpus", "64", "--global-batch", "128"], "fits"),
    # DeepSeek-V3's 671 B parameters over 64 H100s: far above the 80 GB, noted (an MoE layout is not refused)
    (["--model", "deepseek-v3", "--gpu", "h100", "--gpus", "64", "--ep", "64", "--seq", "4096",
      "--global-batch", "64"], "above the HBM"),
])
def test_the_text_says_what_the_memory_check_says(capsys, argv, verdict):
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    line = capsys.readouterr().out.splitlines()[2]
    gib = data["memory"]["per_gpu"] / 2**30
    assert line == f"  memory: {data['conventions']['memory']}"
    assert line.startswith(f"  memory: {gib:.2f} GiB on the most loaded rank") and verdict in line
    assert (gib < 80e9 / 2**30) == (verdict == "fits")
