"""An MoE model's memory by pipeline stage (derive.planning.expert_stages) and derive predict --json's memory object.

Mixtral 8x7B's stages at t 2, p 2, e 4 are counted by hand from its config's shapes (derive/configs/mixtral-8x7b-v0.1.json:
h 4096, 32 layers, 32 heads, 8 KV heads of 128, 8 experts of FFN 14336, vocabulary 32000, untied embeddings). Over
layouts of every choice the stages read, predict's stages add up to its per_gpu and per_gpu is the MoE planner's most
loaded rank (derive.planning.experts.rank_memory, unrounded: a numpy evaluation of the same rank terms, summed in
its own order at its own layer counts).
"""
import json
from dataclasses import replace

import numpy as np
import pytest

from derive.names import named_model
from derive.planning.experts import rank_layers, rank_memory
from derive.predict import run
from derive.verdicts import MEMORY

#: Mixtral 8x7B's config.json shapes.
H, LAYERS, HEADS, KV_HEADS, HEAD_DIM, EXPERTS, EXPERT_FFN, VOCAB = 4096, 32, 32, 8, 128, 8, 14336, 32000


def test_mixtral_stages_counted_by_hand():
    s, b, t, e, t_E, d = 4096, 1, 2, 4, 2, 4  # t_E = t (--etp's default); EDP = t c d / (t_E e) = 1
    data = json.loads(run(["--model", "mixtral-8x7b", "--seq", str(s), "--gpus", "16", "--tp", str(t), "--pp", "2",
                           "--ep", str(e), "--zero", "1", "--recompute", "full", "--global-batch", "16", "--json"]))
    assert data["layout"]["etp"] == t_E and data["layout"]["dp"] == d
    # one layer on one rank: Q, K, V, O over t; the two RMSNorms and the router whole (Megatron's TE spec
    # duplicates them); the 8 experts' three matrices over t_E e
    attention = H * (HEADS * HEAD_DIM + 2 * KV_HEADS * HEAD_DIM) + HEADS * HEAD_DIM * H
    per_layer = attention // t + 2 * H + H * EXPERTS
    experts = EXPERTS * 3 * H * EXPERT_FFN // (t_E * e)
    layers = LAYERS // 2  # each of the two stages builds 16 layers, all MoE
    first = layers * per_layer + VOCAB * H // t  # the vocabulary-parallel embedding
    last = layers * per_layer + H + VOCAB * H // t  # the final norm and the untied head
    stages = data["memory"]["stages"]
    assert set(stages) == {"first", "last"}
    for stage, rest in (("first", first), ("last", last)):
        held = layers * experts
        # Megatron's distributed optimizer: bf16 parameters and fp32 gradients whole, the fp32 master copy and
        # Adam's two moments (12 bytes) over d c = 4 ranks for the rest, over EDP = 1 for the experts
        assert stages[stage]["params"] == 2 * (rest + held)
        assert stages[stage]["grads"] == 4 * (rest + held)
        assert stages[stage]["optimizer"] == 12 * rest / d + 12 * held
    # full recompute keeps each layer's bf16 input, sharded over t by sequence parallelism; rank 0 holds p = 2
    # micro-batches (1F1B warm-up) with their int64 token ids (sharded as every saved row), rank 1 one and the
    # output edge once: the final norm's and head's bf16 inputs and the fp32 logits over t
    layer_input = s * b * H * 2 // t
    assert stages["first"]["activations"] == 2 * (layers * layer_input + s * b * 8 // t)
    assert stages["last"]["activations"] == layers * layer_input + 2 * layer_input + s * b * VOCAB * 4 // t
    assert data["memory"]["per_gpu"] == max(sum(parts.values()) for parts in stages.values())


#: MoE layouts over p = 1, 2, > 2 (interleaved), t, e, t_E, c, ZeRO 0-3 and recompute none / selective / full, four models.
LAYOUTS = [
    ["--model", "mixtral-8x7b", "--seq", "4096", "--gpus", "16", "--tp", "2", "--ep", "8", "--zero", "0"],
    ["--model", "qwen3-30b-a3b", "--seq", "8192", "--gpus", "32", "--pp", "2", "--ep", "8", "--micro-batch", "2",
     "--global-batch", "64", "--recompute", "full"],
    ["--model", "deepseek-v3", "--gpus", "1024", "--tp", "2", "--pp", "8", "--ep", "64", "--global-batch", "8192",
     "--recompute", "full"],
    ["--model", "deepseek-v3", "--gpus", "512", "--tp", "2", "--pp", "4", "--vp", "2", "--ep", "32", "--etp", "1",
     "--zero", "1", "--global-batch", "512"],
    ["--model", "qwen3-235b-a22b", "--seq", "8192", "--gpus", "96", "--tp", "4", "--pp", "3", "--cp", "2",
     "--ep", "8", "--etp", "1", "--zero", "1", "--recompute", "selective", "--global-batch", "12"],
    ["--model", "qwen1.5-moe-a2.7b", "--gpus", "32", "--tp", "2", "--pp", "4", "--ep", "2", "--zero", "3",
     "--global-batch", "32"],
]


@pytest.mark.parametrize("argv", LAYOUTS, ids=range(len(LAYOUTS)))
def test_stages_add_up_to_the_planners_most_loaded_rank(argv):
    data = json.loads(run([*argv, "--json"]))
    memory, layout = data["memory"], data["layout"]
    stages = memory["stages"]
    expected = {"single"} if layout["pp"] == 1 else {"first", "last"} | ({"middle"} if layout["pp"] > 2 else set())
    assert set(stages) == expected
    assert all(list(parts) == ["params", "grads", "optimizer", "activations"] for parts in stages.values())
    assert memory["per_gpu"] == max(sum(parts.values()) for parts in stages.values())
    entry = named_model(data["model"], moe=True)[0]
    if "--seq" in argv:
        entry = replace(entry, seq=int(argv[argv.index("--seq") + 1]))
    values = {name: np.array([layout[key]]) for name, key in (("t", "tp"), ("p", "pp"), ("v", "vp"), ("c", "cp"),
                                                                  ("d", "dp"), ("e", "ep"), ("t_E", "etp"),
                                                                  ("b", "micro_batch"), ("m", "micro_batches"))}
    values["s"] = np.array([entry.seq])
    ranks = {"single": "whole", "first": "first", "middle": "middle", "last": "last"}
    planner = {stage: float(rank_memory(entry, layout["zero"], layout["recompute"], ranks[stage], values,
                                        rounded=False)[0]) for stage in stages}
    for stage, parts in stages.items():
        assert sum(parts.values()) == pytest.approx(planner[stage], rel=1e-12, abs=0), (argv, stage)
    assert memory["per_gpu"] == pytest.approx(max(planner.values()), rel=1e-12, abs=0)
    # the planner's, rounded as the caching allocator hands each buffer and tensor out, is never less
    rounded = max(float(rank_memory(entry, layout["zero"], layout["recompute"], ranks[stage], values)[0])
                  for stage in stages)
    assert rounded >= memory["per_gpu"]


def test_rank_layers_at_deepseek_v3():
    # DeepSeek-V3's 61 layers, the first 3 dense, at p 8: chunks of 8; rank 0 builds 3 dense and 5 MoE, rank 1
    # and rank 7 eight MoE (the last chunk counted full, as a dense model's most loaded chunk); at p 16, v 2: 2
    # per chunk, rank 1 the third dense layer and one MoE
    p8, p16, v1, v2 = np.array([8]), np.array([16]), np.array([1]), np.array([2])

    def built(rank, p, v):
        return tuple(int(np.asarray(count).ravel()[0]) for count in rank_layers(rank, 61, 58, p, v))
    assert [built(rank, p8, v1) for rank in ("first", "middle", "last")] == [(3, 5), (0, 8), (0, 8)]
    assert [built(rank, p16, v2) for rank in ("first", "middle")] == [(2, 2), (1, 3)]
    assert built("whole", None, None) == (3, 58)


def test_without_sequence_parallelism_the_saved_tensors_are_whole_on_each_tensor_rank():
    # Mixtral at t 2, p 2, e 1 (expert parallelism with t > 1 would need sequence parallelism): the states are the
    # same either way; under full recompute rank 0 keeps each layer's whole bf16 input and the whole int64 token ids
    s, b = 4096, 1
    argv = ["--model", "mixtral-8x7b", "--seq", str(s), "--gpus", "16", "--tp", "2", "--pp", "2", "--zero", "1",
            "--recompute", "full", "--global-batch", "16", "--json"]
    on, off = (json.loads(run([*argv, flag]))["memory"]["stages"] for flag in ("--sequence-parallel",
                                                                            "--no-sequence-parallel"))
    assert all(on[stage][part] == off[stage][part] for stage in on for part in ("params", "grads", "optimizer"))
    assert off["first"]["activations"] == 2 * (LAYERS // 2 * s * b * H * 2 + s * b * 8)
    assert on["first"]["activations"] == off["first"]["activations"] / 2


#: Options the MoE rank terms do not cover, and the reason predict's note gives.
UNCOVERED = [
    (["--precision", "mxfp8", "--gpu", "b200"], "mxfp8: the MoE accounts count bf16 states and activations only"),
    (["--capacity-factor", "1"], "--capacity-factor: the MoE accounts count dropless routing"),
    (["--pp", "2", "--balanced"], "--balanced: the MoE accounts split the layers unbalanced"),
    (["--recompute-modules", "moe_act"], "--recompute-modules: the MoE accounts recompute whole layers only"),
    (["--expert-op-fuser"], "--expert-op-fuser: the MoE accounts save the eager expert kernels' tensors"),
]


@pytest.mark.parametrize("extra, reason", UNCOVERED, ids=range(len(UNCOVERED)))
def test_a_layout_the_rank_terms_do_not_cover_is_not_checked(extra, reason):
    data = json.loads(run(["--model", "qwen3-30b-a3b", "--seq", "4096", "--gpus", "16", "--ep", "8", *extra, "--json"]))
    assert "memory" not in data
    assert data["conventions"]["memory"].startswith(f"not checked ({reason}")


def test_an_moe_layout_above_the_hbm_is_noted_not_refused():
    # Mixtral at s 32768 on 8 H100s, e 8, no recompute: 346.37 GiB on the one rank, above the 80 GB (74.51 GiB)
    data = json.loads(run(["--model", "mixtral-8x7b", "--gpus", "8", "--ep", "8", "--json"]))
    assert data["memory"]["per_gpu"] > 80e9
    assert data["conventions"]["memory"].endswith(": " + MEMORY["over_hbm"])
    assert data["step_time_s"] > 0
