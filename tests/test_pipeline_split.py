"""derive.accounts.pipeline_split and the balanced memory accounts: every rank's exact layers.

The chunks are enumerated by hand and by a schedule simulation written here (Megatron's
get_schedule_table and warm-up counts, megatron/core/pipeline_parallel/schedules.py), not by derive.
"""
from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
import sympy as sp

from derive import stage_accounts, sweep
from derive.accounts.activations import layer_activations
from derive.accounts.pipeline_split import chunk_contents, most_layers, rank_layers, stage_in_flight, stage_layers
from derive.presets import model
from derive.symbols import BY_NAME, L, m, p, v

GiB = 2**30


def test_six_layers_on_two_ranks_of_two_chunks_by_hand():
    # 6 + 2 = 8 slots, 4 chunks of 2; chunk j of rank r is virtual stage 2 j + r
    assert chunk_contents(6, 2, 2, True) == [[["embedding", 0], [3, 4]], [[1, 2], [5, "loss"]]]
    assert rank_layers("first", True, 6, 2, 2) == 3 and rank_layers("last", True, 6, 2, 2) == 3
    # not balanced: 6 slots, chunks of 3/2 do not divide; 8 layers, chunks of 2, each rank 4 layers
    assert chunk_contents(8, 2, 2, False) == [[[0, 1], [4, 5]], [[2, 3], [6, 7]]]
    with pytest.raises(ValueError, match="pipeline"):
        chunk_contents(6, 2, 2, False)


@pytest.mark.parametrize("pipeline, virtual", [(2, 1), (3, 1), (4, 2), (3, 3), (16, 8), (5, 2)])
def test_rank_layers_agree_with_the_enumerated_chunks(pipeline, virtual):
    for per_chunk in (1, 2, 3):
        layers = pipeline * virtual * per_chunk - 2
        if layers < 1:
            continue
        held = [sum(isinstance(slot, int) for chunk in rank for slot in chunk)
                for rank in chunk_contents(layers, pipeline, virtual, True)]
        assert sum(held) == layers
        assert held[0] == rank_layers("first", True, layers, pipeline, virtual)
        assert held[-1] == rank_layers("last", True, layers, pipeline, virtual)
        assert max(held) == (rank_layers("middle", True, layers, pipeline, virtual) if pipeline > 2 else held[0])
        assert max(held) == most_layers(True, layers, pipeline, virtual)  # the step model's and ledger's


def _peak_layers(layers_per_chunk: list[int], rank: int, pipeline: int, virtual: int, micro: int) -> int:
    """Most layer-micro-batches one rank holds over Megatron's (interleaved) 1F1B step, simulated."""
    if virtual == 1:
        table = [(mb, 0) for mb in range(micro)]
        warmup = pipeline - rank - 1
    else:
        table = [(mb, chunk) for start in range(0, micro, pipeline) for chunk in range(virtual)
                 for mb in range(start, min(start + pipeline, micro))]
        warmup = 2 * (pipeline - rank - 1) + (virtual - 1) * pipeline
    warmup = min(warmup, len(table))
    backward = [(mb, virtual - 1 - chunk) for mb, chunk in table]
    held, peak, done = 0, 0, 0
    for step, (_, chunk) in enumerate(table):
        held += layers_per_chunk[chunk]
        peak = max(peak, held)
        if step >= warmup:
            held -= layers_per_chunk[backward[done][1]]
            done += 1
    return peak


def _held(rank: str, at: dict) -> sp.Expr:
    """derive's held layer-micro-batches of ``rank``: in-flight chunks x its layers per chunk."""
    layers = (L / (p * v)).xreplace(stage_layers(rank, True, activations=True))
    return (stage_in_flight(rank) * layers).xreplace(at)


def test_held_layers_cover_the_simulated_schedule_and_equal_it_where_exact():
    exact = 0
    for pipeline, virtual, per_chunk, groups in itertools.product((2, 3, 4), (1, 2, 3), (1, 2), (1, 2, 3)):
        micro = pipeline * groups
        layers = pipeline * virtual * per_chunk - 2
        if layers < 1:
            continue
        chunks = chunk_contents(layers, pipeline, virtual, True)
        at = {L: layers, p: pipeline, v: virtual, m: micro}
        ranks = {"first": 0, "last": pipeline - 1, **({"middle": 1} if pipeline > 2 else {})}
        for name, index in ranks.items():
            per = [sum(isinstance(slot, int) for slot in chunk) for chunk in chunks[index]]
            simulated = _peak_layers(per, index, pipeline, virtual, micro)
            counted = _held(name, at)
            assert counted >= simulated, (name, pipeline, virtual, per_chunk, micro)
            in_flight = stage_in_flight(name).xreplace(at)
            if virtual == 1 or in_flight == micro * virtual or (name == "last" and micro == pipeline):
                assert counted == simulated, (name, pipeline, virtual, per_chunk, micro)
                exact += 1
    assert exact > 50


# ---- Llama 3 405B, the paper's layout (Dubey et al. 2024, Table 4 and section 3.3.2) ----

LAYOUT = {"s": 8192, "b": 1, "t": 8, "p": 16, "v": 8, "d": 128, "c": 1, "m": 16}
H, F, KV, VOCAB = 16384, 53248, 8 * 128, 128256
#: One layer's parameters on one of t = 8 ranks: q, o (h x h), k, v (h x 1024), three h x f, two norms.
LAYER = (2 * H * H + 2 * H * KV + 3 * H * F) // 8 + 2 * H
EMBEDDING = VOCAB * H // 8
#: Megatron's bf16 weight and fp32 gradient per parameter, fp32 master and two moments over d = 128.
STATE = sp.Integer(2 + 4) + sp.Rational(12, 128)


def _per_layer_bytes() -> int:
    """One layer's saved bytes per micro-batch at t = 8, SP on: the llama-fused rows, summed here."""
    at = {BY_NAME[k]: value for k, value in {"s": 8192, "b": 1, "t": 8}.items()} | model("405b").values
    total = sum(row.bytes.xreplace(at) for row in layer_activations("llama-fused", "fused", BY_NAME["t"], True, "none"))
    return int(total)


def test_the_llama_fused_layer_of_405b_keeps_31_78_sbh_over_t():
    per_layer = _per_layer_bytes()
    assert per_layer / (8192 * H / 8) == pytest.approx(31.78, abs=0.005)
    assert per_layer / 2**20 == pytest.approx(508.5, abs=0.05)


def test_405b_paper_layout_every_rank_by_hand():
    entry = replace(model("405b"), seq=8192)
    per_layer = _per_layer_bytes()
    # rank 0: its first chunk is the embedding slot, 7 layers and the embedding; 2 x 15 + 7 x 16 + 1
    # chunks warm up, more than the step's 16 x 8: every chunk of every micro-batch held, 16 x 7 layers
    first = (7 * LAYER + EMBEDDING) * STATE + 16 * 7 * per_layer
    # rank 15: its last chunk is the loss slot; 7 x 16 + 1 chunks held, one of them the loss chunk:
    # 112 layer-micro-batches, plus the final norm's and the head's bf16 inputs (s/t tokens under SP)
    # and the fp32 logits V/t wide; its states: 7 layers, the output matrix (V h / t) and the final norm
    last = (7 * LAYER + EMBEDDING + H) * STATE + 112 * per_layer + 8192 * (2 * 2 * H // 8 + 4 * VOCAB // 8)
    # rank 1: 8 layers, no edge, 2 x 14 + 7 x 16 + 1 >= 128 chunks in flight: all 16 x 8 held
    middle = 8 * LAYER * STATE + 16 * 8 * per_layer
    terms = stage_accounts.accounts(entry.architecture, "llama-fused", "none", "megatron", True, balanced=True)
    columns = sweep.evaluate(entry, {k: np.array([x]) for k, x in LAYOUT.items()}, "none", 1,
                             names=("first_rank_bytes", "last_rank_bytes", "middle_rank_bytes", "memory_per_gpu"),
                             balanced=True)
    token_ids = 16 * 8192 * 8 // 8  # 16 micro-batches of int64 token ids on rank 0, s / t each (SP)
    assert columns["first_rank_bytes"][0] == pytest.approx(float(first + token_ids), abs=1)
    assert columns["last_rank_bytes"][0] == pytest.approx(float(last), abs=1)
    assert columns["middle_rank_bytes"][0] == pytest.approx(float(middle), abs=1)
    assert columns["memory_per_gpu"][0] == columns["middle_rank_bytes"][0]
    assert [round(float(x) / GiB, 2) for x in (first, last, middle)] == [72.94, 73.49, 81.65]
    # the old account: 8 layers and the embedding on rank 0, all 128 chunks of 8 layers
    unbalanced_style = (8 * LAYER + EMBEDDING) * STATE + 16 * 8 * per_layer
    assert round(float(unbalanced_style) / GiB, 2) == 83.15
    assert terms.balanced


def test_unbalanced_accounts_keep_the_even_split():
    entry = replace(model("405b"), seq=8192)
    layout = {**LAYOUT, "v": 4}  # 126 layers in 64 chunks: ceil = 2 per chunk, 8 on the first rank
    per_layer = _per_layer_bytes()
    columns = sweep.evaluate(entry, {k: np.array([x]) for k, x in layout.items()}, "none", 1,
                             names=("memory_per_gpu",))
    # rank 0 holds min(2 x 15 + 3 x 16 + 1, 64) = 64 chunks of 2 layers
    first = (8 * LAYER + EMBEDDING) * STATE + 64 * 2 * per_layer + 64 // 4 * 8192 * 8 // 8
    assert columns["memory_per_gpu"][0] == pytest.approx(float(first), abs=1)


def test_the_planner_judges_the_405b_paper_layout_on_its_middle_rank():
    # derive plan --model 405b --gpus 16384 --tokens 16777216 --seq 8192 --fit high: the paper's
    # layout without recompute is over the H100's usable high end on rank 1 (8 layers, every chunk
    # of the step in flight), not on rank 0 (7 layers); with full recompute it fits
    from derive.planning.search import plan
    result = plan(replace(model("405b"), seq=8192), 16384, 16_777_216, fit="high")
    c = result.columns
    paper = ((c["t"] == 8) & (c["p"] == 16) & (c["v"] == 8) & (c["c"] == 1) & (c["d"] == 128)
             & (c["b"] == 1) & (c["zero"] == 1) & (c["balanced"] == 1))
    none, full = paper & (c["recompute"] == "none"), paper & (c["recompute"] == "full")
    middle = 8 * LAYER * STATE + 16 * 8 * _per_layer_bytes()
    # plus the caching allocator's rounding of the rank's state buffers: a few MiB
    assert 0 <= c["memory_per_gpu"][none][0] - float(middle) < 8 * 2**20
    assert c["reason"][none][0] == "memory" and c["memory_per_gpu"][none][0] > result.usable[1]
    assert c["feasible"][full][0]
    # issue 32 asks for the top ten; the paper's layout ranks 8th, 7 % behind the best, at ZeRO-2 (Megatron-FSDP's
    # optim_grads: the paper's FSDP shards gradients and optimizer states) without recompute, tight. Four of the
    # eleven layouts once above it were selective-recompute twins of others, slower with the same memory (flash
    # attention saves no score matrix to spare): the planner no longer ranks such dominated variants
    # (derive.planning.ranking.Plan.dominated). It was 19th before each NCCL call paid its ring latency (derive.accounts.comm_time.call_latency): FSDP over d c = 8,192
    # ranks with no pipeline (t 2, c 4, d 2,048, ZeRO-3) gathers once per layer, 126 calls of 51 ms each, and
    # fell out of the top twenty. What stays above it halves the bubble with c = 2-8 (m = 32) or halves the
    # exposed tensor-parallel bytes with t = 4; the context ring there stays hidden behind (c - 1)/c of each
    # pass's attention (1,024-2,048 tokens a rank at c = 4-8)
    runs = ((c["t"] == 8) & (c["p"] == 16) & (c["c"] == 1) & (c["d"] == 128)) & c["feasible"]
    ranks, order = result.ranks(), result.order()
    best = next(row for row in order if runs[row])
    assert ranks[best] <= 10 and c["zero"][best] == 2 and c["recompute"][best] == "none"
    assert c["step_time"][best] <= 1.07 * c["step_time"][order[0]]
    above = order[:list(order).index(best)]
    twin = (runs & (c["v"] == c["v"][best]) & (c["b"] == c["b"][best]) & (c["zero"] == c["zero"][best])
            & (c["balanced"] == c["balanced"][best]) & (c["recompute"] == "selective"))
    assert not result.dominated()[above].any() and twin.any() and result.dominated()[twin].all()
    assert all(c["p"][row] > 1 and (c["c"][row] > 1 or c["t"][row] < 8) for row in above)
    # the no-pipeline FSDP layouts: each pays its per-layer gather latency, more than a second behind the paper's
    fsdp = c["feasible"] & (c["p"] == 1) & (c["zero"] == 3) & (c["c"] == 4) & (c["t"] == 2)
    assert fsdp.any() and (c["step_time"][fsdp] > c["step_time"][best] + 1.0).all()
    assert result.tight()[best] and result.usable[0] < c["memory_per_gpu"][best] <= result.usable[1]
    # what ranks above it is explained by its breakdown, which sums to its step time: the layout's own
    # parts (bubble, exposed tp / cp / dp / pp communication) win more than the step difference, or the
    # layout has no pipeline (p = 1) and so no slowest stage: the paper's busiest stage holds 8 of the
    # 126 layers (7.875 a stage) and the head, so its compute is above an even share by that much
    layout_parts = ("bubble", "tp", "cp", "ep", "dp", "pp")
    paper_parts = sum(c["breakdown"][best][part] for part in layout_parts)
    for row in order[:list(order).index(best)]:
        gain = paper_parts - sum(c["breakdown"][row][part] for part in layout_parts)
        if gain < c["step_time"][best] - c["step_time"][row] - 1e-9:
            assert c["p"][row] == 1
            even_share = c["breakdown"][best]["compute"] * 7.875 / 8
            assert even_share * 0.97 < c["breakdown"][row]["compute"] < even_share
        assert sum(c["breakdown"][row].values()) == pytest.approx(c["step_time"][row], rel=1e-12)
        assert c["step_time"][row] <= c["step_time"][best]
