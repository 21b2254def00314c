"""The plan of an MoE model (derive.planning.experts): the candidate set against a brute-force enumeration, memory by
hand, the presets ranked."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from derive.hf import published_model
from derive.planning.experts import rank_layers
from derive.planning.search import plan
from derive.presets import MODELS
from derive.symbols import E, L, a, f, f_E, g, s

GPUS = 16
#: The layout fields of a candidate, in the order the brute force writes them.
KEYS = ("t", "p", "v", "c", "e", "etp", "d", "b", "zero", "recompute")


def preset_plan(name: str, gpus: int, tokens: int, **options) -> object:
    """The plan of the MoE preset ``name`` (derive.planning.search.plan of its Model)."""
    return plan(MODELS[name], gpus, tokens, **options)


def _brute_force(entry, gpus: int, max_context: int) -> set[tuple]:
    """Every (t, p, v, c, e, t_E, d, b, ZeRO, recompute) that divides, written out with no helper of derive.planning.

    t divides the query and kv heads and the dense FFN width f; c divides s (at most max_context); t c p
    divides the GPUs; p v <= L, v > 1 only at p > 1, v <= 8; t_E is 1 or t and divides f_E; e divides E
    and t_E e divides t c d (Megatron-Core's expert grid over tp x cp x dp); b in 1, 2, 4, 8; ZeRO 0-3
    (Megatron's DDP, distributed optimizer, Megatron-FSDP optim_grads and optim_grads_params).
    """
    n = entry.values
    found = set()
    for t, c, p in itertools.product(range(1, gpus + 1), repeat=3):
        if n[a] % t or n[g] % t or n[f] % t or n[s] % c or c > max_context or gpus % (t * c * p):
            continue
        d = gpus // (t * c * p)
        for v in range(1, 9):
            if p * v > n[L] or (v > 1 and p == 1):
                continue
            for etp, e in itertools.product({1, t}, range(1, n[E] + 1)):
                if n[f_E] % etp or n[E] % e or (t * c * d) % (etp * e):
                    continue
                for b, zero, recompute in itertools.product((1, 2, 4, 8), range(4), ("none", "selective", "full")):
                    found.add((t, p, v, c, e, etp, d, b, zero, recompute))
    return found


@pytest.mark.parametrize("name,max_context", [("mixtral-8x7b", 16), ("qwen3-30b-a3b", 4)])
def test_candidates_are_exactly_the_brute_force_set(name, max_context):
    c = preset_plan(name, GPUS, GPUS * 32768, max_context=max_context).columns
    planned = {tuple(str(c[k][i]) if k == "recompute" else int(c[k][i]) for k in KEYS) for i in range(c["t"].size)}
    assert len(planned) == c["t"].size  # no duplicates
    assert planned == _brute_force(MODELS[name], GPUS, max_context)


def test_most_loaded_rank_by_hand():
    # Mixtral 8x7B on 64 GPUs, 64 sequences of 32768 tokens: t = c = 1, p = 2, e = 8, t_E = 1, d = 32, b = 1
    # (m = 2), distributed optimizer (ZeRO-1), full recompute. Per layer: attention 4096 x (4096 + 2 x 1024 + 4096),
    # router 4096 x 8, two norms; 8 experts of 3 x 4096 x 14336. Each rank builds 16 layers and holds 1/8 of
    # their experts; experts' optimizer state over the expert data-parallel group t c d / (t_E e) = 4 ranks,
    # the rest over d c = 32: 2 + 4 + 12/4 and 2 + 4 + 12/32 bytes per parameter.
    layer = 4096 * (4096 + 2 * 1024 + 4096) + 4096 * 8 + 2 * 4096
    experts = 16 * 8 * 3 * 4096 * 14336 // 8
    embedding = head = 32000 * 4096
    token, vocab = 32768 * 4096 * 2, 32768 * 32000 * 4   # one bf16 [s, b, h]; the fp32 logits
    ids = 32768 * 8                                      # int64 token ids

    def allocated(request: int) -> int:
        # CUDACachingAllocator, a request of 10 MiB or more: 512-byte blocks out of a segment rounded up to
        # 2 MiB, split off only when more than 1 MiB of it remains (c10/cuda/CUDACachingAllocator.cpp)
        assert request >= 10 * 2**20
        size = -(-request // 512) * 512
        segment = -(-size // 2**21) * 2**21
        return size if segment - size > 2**20 else segment

    def states(others: int, experts: int) -> int:
        # one buffer per state and group: bf16 parameters, fp32 gradients whole; fp32 master, exp_avg and
        # exp_avg_sq sharded over d c = 32 (non-expert) or t c d / (t_E e) = 4 (experts)
        return sum(allocated(size) for count, shards in ((others, 32), (experts, 4))
                   for size in (2 * count, 4 * count, *(4 * count // shards,) * 3))
    # the activation tensors (256 MiB layer inputs, the 4000 MiB logits) are whole multiples of 2 MiB and the
    # 256 KiB token ids a small-pool block of 512-byte multiples: the allocator adds nothing to them
    # rank 0: 16 layers + embedding, 1F1B holds min(p, m) = 2 micro-batches of 16 layer inputs and token ids
    first = states(16 * layer + embedding, experts) + 2 * (16 * token + ids)
    # rank 1 = p - 1: 16 layers + final norm + head, one micro-batch of 16 layer inputs, the norm and head
    # inputs and the fp32 logits
    last = states(16 * layer + 4096 + head, experts) + 16 * token + 2 * token + vocab
    result = preset_plan("mixtral-8x7b", 64, 64 * 32768, max_context=1)
    c = result.columns
    layout = ((c["t"] == 1) & (c["p"] == 2) & (c["v"] == 1) & (c["e"] == 8) & (c["etp"] == 1) & (c["b"] == 1)
              & (c["zero"] == 1))
    memory = {policy: c["memory_per_gpu"][layout & (c["recompute"] == policy)]
              for policy in ("none", "selective", "full")}
    pick = layout & (c["recompute"] == "full")
    assert pick.sum() == 1 and c["m"][pick][0] == 2
    assert memory["full"][0] == pytest.approx(max(first, last), abs=1)
    # it fits; it is ranked exactly when no other recompute / ZeRO variant of the layout beats it
    assert c["feasible"][pick][0] and (result.ranks()[pick][0] >= 1) != result.dominated()[pick][0]
    # selective recompute keeps every row of the fused table (flash attention: no score matrix), full keeps less
    assert memory["none"][0] == memory["selective"][0] > memory["full"][0]


def test_each_zero_stage_shards_its_states_over_its_group():
    # Mixtral 8x7B whole on each of 64 GPUs (t = p = c = 1, d = 64), e = 8: a rank holds the 1,605,636,096
    # non-expert parameters (32 layers of attention 4096 x 10240, router 4096 x 8 and two norms; embedding and
    # untied head 32000 x 4096; final norm) and 1/8 of the experts, 32 x 3 x 4096 x 14336. Megatron shards the
    # non-expert states over d c = 64 ranks and the experts' over t c d / (t_E e) = 8: from ZeRO 0 to 1 the 12
    # bytes of fp32 master and moments, 1 to 2 the 4 of the fp32 gradient (Megatron-FSDP optim_grads), 2 to 3 the
    # 2 of the bf16 parameter (optim_grads_params); each shard keeps 1/64 or 1/8 of them
    others = 32 * (4096 * 10240 + 4096 * 8 + 2 * 4096) + 2 * 32000 * 4096 + 4096
    experts = 32 * 3 * 4096 * 14336
    assert others == 1_605_636_096

    def saved(per_parameter: int) -> float:   # each of ten state buffers may round up by up to 2 MiB
        return per_parameter * (others * (1 - 1 / 64) + experts * (1 - 1 / 8))
    c = preset_plan("mixtral-8x7b", 64, 64 * 32768, max_context=1).columns
    pick = ((c["p"] == 1) & (c["t"] == 1) & (c["e"] == 8) & (c["etp"] == 1) & (c["b"] == 1)
            & (c["recompute"] == "full"))
    memory = [c["memory_per_gpu"][pick & (c["zero"] == zero)][0] for zero in range(4)]
    assert [memory[0] - memory[1], memory[1] - memory[2], memory[2] - memory[3]] == pytest.approx(
        [saved(12), saved(4), saved(2)], abs=10 * 2**21)


def test_deepseek_dense_layers_sit_on_the_first_ranks():
    # DeepSeek-V3: 61 layers, the first 3 dense. p = 16: chunks of ceil(61/16) = 4 layers, rank 0 builds layers
    # 0-3 (3 dense, 1 MoE), rank 1 layers 4-7 (4 MoE). p = 32: chunks of 2, rank 0 builds layers 0-1 (2 dense),
    # rank 1 layers 2-3 (1 dense, 1 MoE), the last 62-63, counted as the most loaded chunk's 2 (MoE). p = 2,
    # v = 4: chunks of ceil(61/8) = 8, rank 0 builds virtual stages 0, 2, 4, 6: layers 0-7, 16-23, 32-39, 48-55
    # (3 dense, 29 MoE); the last rank 8-15, 24-31, 40-47 and 56-60, counted as 4 x 8 (uneven stages): 32 MoE
    def at(rank, p, v):
        return tuple(int(x) for x in rank_layers(rank, 61, 58, np.array(p), np.array(v)))
    assert at("first", 16, 1) == (3, 1) and at("middle", 16, 1) == (0, 4) and at("last", 16, 1) == (0, 4)
    assert at("first", 32, 1) == (2, 0) and at("middle", 32, 1) == (1, 1) and at("last", 32, 1) == (0, 2)
    assert at("first", 2, 4) == (3, 29) and at("last", 2, 4) == (0, 32)


@pytest.mark.parametrize("name,gpus,tokens", [("mixtral-8x7b", 64, 64 * 32768),
                                               ("qwen3-30b-a3b", 64, 1024 * 32768),
                                               ("deepseek-v3", 1024, 15360 * 4096)])
def test_moe_presets_plan_and_rank_by_predicted_time(name, gpus, tokens):
    result = preset_plan(name, gpus, tokens)
    c, order = result.columns, result.order()
    feasible = int(c["feasible"].sum())
    assert feasible > 0
    assert np.any(c["e"][c["feasible"]] > 1)
    # the whole space is reached, not only its 1F1B, c = 1 corner; c > 1 over MLA (DeepSeek-V3) is refused as
    # derive comm and derive predict refuse it, under REASONS' "context"
    mla = name == "deepseek-v3"
    for axis in ("v", "zero", *(() if mla else ("c",))):
        assert np.any(c[axis][c["feasible"]] > 1)
    assert np.any(c["c"] > 1) and np.all((c["reason"] == "context") == ((c["c"] > 1) & mla))
    assert set(c["recompute"][c["feasible"]]) == {"none", "selective", "full"}
    ranked = result.ranked()
    times = c["step_time"][ranked]
    assert np.all(np.diff(times) >= 0) and np.all(np.isfinite(times))
    best = order[0]
    assert sum(c["breakdown"][best].values()) == pytest.approx(c["step_time"][best])
    low, high = result.usable    # fits under the high end; tight above the low end
    assert np.all(c["memory_per_gpu"][c["feasible"]] <= high)
    assert np.array_equal(result.tight(), c["feasible"] & (c["memory_per_gpu"] > low))
    assert np.all(c["memory_per_gpu"][c["reason"] == "memory"] > high)
    assert np.all(c["m"][c["feasible"] & (c["v"] > 1)] % c["p"][c["feasible"] & (c["v"] > 1)] == 0)
    ranks = result.ranks()[ranked]
    assert ranks[0] == 1 and set(np.diff(ranks)) <= {0, 1}
    assert np.all(result.ranks()[order[ranked.size:]] == 0)


def test_one_row_is_predict_of_its_layout():
    # the planner's columns give what derive.accounts.prediction.predict gives the row's Parallelism
    from derive.accounts.prediction import predict
    from derive.parallelism import Parallelism
    from derive.systems import system
    result = preset_plan("mixtral-8x7b", 64, 64 * 32768)
    c = result.columns
    row = result.order()[0]
    layout = Parallelism(tp=int(c["t"][row]), pp=int(c["p"][row]), vp=int(c["v"][row]), cp=int(c["c"][row]),
                         ep=int(c["e"][row]), etp=int(c["etp"][row]), dp=int(c["d"][row]),
                         micro_batch=int(c["b"][row]), global_batch=64, zero=int(c["zero"][row]),
                         recompute=str(c["recompute"][row]), sequence_parallel=int(c["t"][row]) > 1)
    # timed on the shipped config's model (transformers' Mixtral), as derive predict --model mixtral-8x7b times it
    timed = published_model("mixtral-8x7b-v0.1", seq=32768)
    assert predict(timed, layout, system("h100")).step_time_s == pytest.approx(c["step_time"][row])


def test_an_moe_model_not_a_preset_names_the_field():
    # DeepSeek-V2-Lite's shipped config has routed experts but is not one of the MoE presets the planner plans
    with pytest.raises(ValueError, match="^model: deepseek-v2-lite is not one of the MoE presets"):
        plan(published_model("deepseek-v2-lite"), 8, 8 * 4096)


def test_a_sequence_past_exact_counts_names_the_field():
    # Mixtral at s = 2^52: one unsplit GPU's 32 layer inputs alone at b = 8 are 32 x 2^52 x 8 x 4096 x 2 bytes
    with pytest.raises(ValueError, match="^seq: the activations of one unsplit GPU"):
        preset_plan("mixtral-8x7b", 64, 2**53, seq=2**52)


@pytest.mark.parametrize("option,value", [("--placement", "deepspeed-zero1"), ("--profile", "gpt"),
                                          ("--precision", "fp8-delayed")])
def test_options_the_moe_planner_cannot_honour_are_one_line(option, value, capsys):
    from derive.plan import main
    code = main(["--model", "mixtral-8x7b", "--gpus", "16", "--tokens", str(16 * 32768), option, value])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and f"error: {option}: the MoE planner" in err


def test_json_lists_every_layout_in_rank_order_and_exits_1_when_none_fits(capsys):
    import json

    from derive.plan import main
    assert main(["--model", "mixtral-8x7b", "--gpus", "64", "--tokens", str(64 * 32768), "--max-cp", "1",
                 "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    layouts = document["layouts"]
    fitting = [layout for layout in layouts if layout["feasible"] and not layout["dominated"]]
    assert layouts[0]["rank"] == 1 and fitting and all(layout["rank"] for layout in fitting)
    assert all(layout["rank"] is None for layout in layouts if layout["dominated"])
    assert [layout["step_time"] for layout in fitting] == sorted(layout["step_time"] for layout in fitting)
    assert {"t", "p", "v", "c", "e", "etp", "d", "b", "m", "recompute", "zero", "memory_per_gpu",
            "breakdown", "tight", "reason"} <= set(layouts[0])
    assert {layout["c"] for layout in layouts} == {1} and "no_layout_fits" not in document
    # Mixtral's 46.7 billion parameters do not fit on 8 GPUs of 80 GB at any layout: exit 1 with the reason
    assert main(["--model", "mixtral-8x7b", "--gpus", "8", "--tokens", str(8 * 32768), "--json"]) == 1
    assert "no layout fits in memory" in json.loads(capsys.readouterr().out)["no_layout_fits"]


def test_context_parallelism_over_mla_is_refused_as_derive_comm_refuses_it(capsys):
    # derive comm refuses c > 1 over multi-head latent attention (its ledger has no CP rows for MLA); derive predict
    # and predict_columns refuse it in the same words, and the planner counts such layouts under that reason
    from derive.accounts.comm import collectives
    from derive.accounts.prediction import predict, predict_columns
    from derive.parallelism import Parallelism
    from derive.planning.ranking import REASONS
    from derive.predict import main
    from derive.systems import system
    small = published_model("deepseek-v2-lite", seq=4096)   # MLA, 64 routed experts
    layout = Parallelism(tp=1, cp=2, dp=4, ep=4, etp=1, micro_batch=1, global_batch=4)
    line = "cp: context parallelism over multi-head latent attention (deepseek-v2-lite) is not modelled"
    for refused in (lambda: collectives(small, layout), lambda: predict(small, layout, system("h100"))):
        with pytest.raises(ValueError, match=f"^{line.replace('(', '[(]').replace(')', '[)]')}$"):
            refused()
    columns = {name: np.array([value]) for name, value in dict(t=1, p=1, v=1, c=2, d=4, b=1, m=1, e=4, etp=1).items()}
    with pytest.raises(ValueError, match="^cp: context parallelism over multi-head latent attention"):
        predict_columns(small, Parallelism(), columns, system("h100"))
    assert main(["--model", "deepseek-v3", "--gpu", "h100", "--gpus", "16", "--cp", "2", "--ep", "8",
                 "--json"]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "--cp: context parallelism over multi-head latent attention (deepseek-v3) is not modelled")
    # c = 1 is timed as before
    assert predict(small, Parallelism(dp=4, ep=4, micro_batch=1, global_batch=4), system("h100")).step_time_s > 0
    assert REASONS["context"] == "context parallelism over multi-head latent attention is not modelled"
    result = preset_plan("deepseek-v3", 256, 256 * 4096, max_context=2)
    c = result.columns
    assert np.any(c["c"] == 2)
    assert np.array_equal(c["reason"] == "context", c["c"] > 1)
    assert not np.any(c["feasible"] & (c["c"] > 1)) and np.all(np.isnan(c["step_time"][c["c"] > 1]))
