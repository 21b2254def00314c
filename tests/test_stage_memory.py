"""Memory per GPU by pipeline stage (derive.planning.stage_memory) and derive predict --json's memory object.

The stages' parts must add up to the most loaded rank that predict checks (derive.planning.memory.memory_per_gpu,
derive.sweep's compiled integer-column path: an independent evaluation of the same accounts), the state parts
must be Megatron's bytes per parameter over the stage's parameters counted by hand, and the JSON must hold the
stages the layout has.
"""
import json

import pytest

from derive.names import named_model
from derive.options.layout import parallelism_from
from derive.options.messages import UsageError
from derive.planning.memory import memory_per_gpu
from derive.planning.stage_memory import stage_memory
from derive.predict import build_parser, run
from derive.verdicts import MEMORY

#: Layouts over every choice the stages read: p = 1, 2, 4, 16, interleaving, context parallelism, ZeRO 0-3,
#: recompute, an FP8 and the FP4 recipe, a balanced split, the GPT profile and a shipped config.
LAYOUTS = [
    ["--model", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "4"],
    ["--model", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "4", "--cp", "2", "--zero", "1"],
    ["--model", "gpt3-175b", "--gpus", "1024", "--tp", "8", "--pp", "16", "--vp", "2", "--global-batch", "512",
     "--recompute", "full"],
    ["--model", "8b", "--gpus", "8", "--precision", "fp8-delayed", "--zero", "3"],
    ["--model", "qwen2.5-7b", "--gpus", "16", "--tp", "4", "--pp", "2", "--recompute", "selective", "--zero", "2"],
    ["--model", "70b", "--gpus", "64", "--tp", "4", "--pp", "4", "--balanced", "--global-batch", "64"],
    ["--model", "70b", "--gpus", "64", "--tp", "4", "--pp", "2", "--precision", "nvfp4", "--gpu", "b200",
     "--global-batch", "32"],
    ["--model", "gemma-2-9b", "--gpus", "8", "--pp", "2", "--zero", "0", "--global-batch", "16"],
]


def layout_of(argv: list[str]):
    args = build_parser().parse_args(argv)
    entry = named_model(args.model, moe=True)[0]
    return entry, parallelism_from(args, entry)


@pytest.mark.parametrize("argv", LAYOUTS, ids=range(len(LAYOUTS)))
def test_the_stages_add_up_to_the_rank_predict_checks(argv):
    entry, layout = layout_of(argv)
    stages = stage_memory(entry, layout)
    totals = {stage: sum(parts.values()) for stage, parts in stages.items()}
    expected = {1: {"single"}, 2: {"first", "last"}}.get(layout.pp, {"first", "middle", "last"})
    assert set(stages) == expected
    # the ranks derive.stage_accounts compares: the edges, and rank 1 where the split is balanced
    compared = [totals[stage] for stage in totals if stage != "middle" or layout.balanced]
    assert max(compared) == pytest.approx(memory_per_gpu(entry, layout), rel=1e-12)
    fp8 = layout.precision.startswith(("fp8", "mxfp8", "nvfp4"))
    assert all(("fp8_copies" in parts) == fp8 for parts in stages.values())


def test_the_states_are_megatrons_bytes_per_parameter_of_the_stage():
    # Llama 3 70B (h 8192, f 28672, 64 heads, 8 KV heads of 128, V 128256; Dubey et al. 2024, Table 3) at t = 8,
    # p = 4: rank 0 holds 20 layers, each its GEMM matrices over t and two norm vectors whole, and the embedding
    # over t (vocabulary-parallel); Megatron's mixed precision (param_and_grad_buffer.py, distrib_optimizer.py):
    # bf16 parameters 2 B, fp32 gradients 4 B, fp32 master and Adam's two moments 4 + 4 + 4 B per parameter.
    entry, layout = layout_of(["--model", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "4", "--zero", "0"])
    h, f, kv, vocab = 8192, 28672, 8 * 128, 128256
    gemms = 2 * h * h + 2 * h * kv + 3 * h * f
    first = 20 * (gemms // 8 + 2 * h) + vocab * h // 8
    middle = 20 * (gemms // 8 + 2 * h)
    last = middle + h + vocab * h // 8  # the final norm, the output head over t
    stages = stage_memory(entry, layout)
    for stage, count in (("first", first), ("middle", middle), ("last", last)):
        assert (stages[stage]["params"], stages[stage]["grads"], stages[stage]["optimizer"]) == \
            (2 * count, 4 * count, 12 * count), stage
    # ZeRO-1 (the distributed optimizer) shards the optimizer's 12 B over the d = 2 data-parallel ranks
    _, sharded = layout_of(["--model", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "4", "--zero", "1"])
    assert stage_memory(entry, sharded)["first"]["optimizer"] == 12 * first / 2
    # with context parallelism the distributed optimizer shards over d c ranks, the data-parallel group with
    # context-parallel ranks (parallel_state.get_data_parallel_group(with_context_parallel=True)):
    # 64 GPUs at t 8, p 4, c 2 leave d = 1, so over 2 ranks, not over d c c = 4 (nor whole)
    _, context = layout_of(["--model", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "4", "--cp", "2",
                            "--zero", "1"])
    assert (context.dp, context.cp) == (1, 2)
    assert stage_memory(entry, context)["first"]["optimizer"] == 12 * first / 2
    assert memory_per_gpu(entry, context) >= 2 * first + 4 * first + 12 * first / 2


def test_predict_json_carries_the_stages():
    data = json.loads(run(["--model", "llama3-70b", "--gpus", "64", "--tp", "8", "--pp", "4", "--json"]))
    memory = data["memory"]
    assert set(memory["stages"]) == {"first", "middle", "last"}
    assert set(memory["stages"]["first"]) == {"params", "grads", "optimizer", "activations"}
    assert memory["per_gpu"] == max(sum(memory["stages"][stage].values()) for stage in ("first", "last"))
    assert memory["usable_low_end"] < 80e9
    assert data["conventions"]["memory"].endswith(": " + MEMORY["fits"])
    # an MoE model's under an FP8 recipe is not checked, with why (derive.planning.expert_stages.unmodelled)
    moe = json.loads(run(["--model", "mixtral-8x7b", "--gpus", "64", "--tp", "2", "--ep", "8", "--precision",
                          "fp8-delayed", "--json"]))
    assert "memory" not in moe
    assert moe["conventions"]["memory"] == MEMORY["not_checked"].format(
        reason="fp8-delayed: the MoE accounts count bf16 states and activations only, no FP8 recipe")


def test_a_layout_that_does_not_fit_is_refused_in_the_tables_words():
    argv = ["--model", "qwen2.5-7b", "--gpus", "16", "--tp", "4", "--pp", "2", "--recompute", "selective",
            "--zero", "2"]
    with pytest.raises(UsageError) as refused:
        run([*argv, "--json"])
    needed = json.loads(run([*argv, "--json", "--no-memory-check"]))["memory"]["per_gpu"]
    assert needed > 80e9
    assert str(refused.value) == MEMORY["does_not_fit"].format(needed=f"{needed / 2**30:.2f} GiB", gpu="h100",
                                                               hbm="80 GB")
