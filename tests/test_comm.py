"""The communication ledger against byte counts worked out by hand from the models' shapes."""
from fractions import Fraction

import pytest
import sympy as sp

from derive.accounts.collectives import sent_factor
from derive.accounts.comm import collectives, per_rank_bytes_per_step, symbolic_collectives
from derive.architectures.decoder import LLAMA
from derive.hf import published_model
from derive.parallelism import Parallelism
from derive.presets import model
from derive.symbols import d, t

#: Llama 3 70B (meta-llama-3-70b config.json): h, f, heads, kv heads, layers, vocabulary.
H70, F70, A70, G70, L70, V70 = 8192, 28672, 64, 8, 80, 128256
#: The bar's layout: t 8, p 4, d 32, s 8192, b 1, 512 sequences per step -> m = 512 / 32 = 16.
BAR = dict(tp=8, pp=4, dp=32, micro_batch=1, global_batch=512, precision="bf16", zero=1)


def _rows(found):
    return {row.name: row for row in found}


def test_llama3_70b_tensor_parallel_all_reduce_by_hand():
    rows = _rows(collectives(model("llama3-70b"), Parallelism(**BAR)))
    activation = 8192 * 1 * H70 * 2                     # s b h bf16 bytes
    row = rows["tp.attention.all-reduce"]
    assert row.payload == activation == 134_217_728
    assert row.sent == activation * 2 * 7 // 8           # ring: 2(t-1)/t
    assert row.count == 16 * (L70 // 4)                  # m micro-batches x 20 layers on the stage
    assert (row.pass_, row.group, row.ranks) == ("forward", "tp", 8)


def test_llama3_70b_bar_per_rank_bytes_by_hand():
    totals = per_rank_bytes_per_step(model("llama3-70b"), Parallelism(**BAR))
    m, layers, activation = 16, L70 // 4, 8192 * H70 * 2
    all_reduce = activation * 2 * 7 // 8
    loss = 8192 * 4 * 2 * 7 // 8                          # [s, b] fp32 statistics, all-reduced
    # 4 all-reduces per layer (2 forward, 2 backward), the head's input gradient, 3 loss all-reduces
    assert totals["tp"] == (4 * layers + 1) * m * all_reduce + 3 * m * loss
    # a middle stage sends its activation forward and a gradient backward per micro-batch
    assert totals["pp"] == 2 * m * activation
    # the last stage's parameters, split over t = 8 (norms whole), as bf16 gradients and parameters
    head = A70 and H70 // A70
    layer = (2 * H70 * H70 + 2 * H70 * G70 * head + 3 * H70 * F70) // 8 + 2 * H70
    params = layers * layer + H70 * V70 // 8 + H70
    assert totals["dp"] == 2 * (2 * params * 31 // 32)    # reduce-scatter + all-gather, (d-1)/d each
    assert (totals["cp"], totals["ep"]) == (0, 0)


def test_dp_all_reduce_from_n_and_fp32_grads_double_it():
    llama = model("llama3-8b")
    plain = per_rank_bytes_per_step(llama, Parallelism(dp=8))["dp"]
    assert plain == 2 * llama.parameters * 2 * 7 // 8 == 2 * 8_030_261_248 * 2 * 7 // 8
    fp32 = per_rank_bytes_per_step(llama, Parallelism(dp=8, precision="bf16-fp32grad"))["dp"]
    assert fp32 == 2 * plain


def test_zero3_gathers_per_micro_batch_and_reshard_off_drops_the_backward_gather():
    llama = model("llama3-8b")
    n = llama.parameters
    rows = _rows(collectives(llama, Parallelism(dp=4, zero=3, global_batch=8)))
    assert rows["dp.params.forward.all-gather"].count == 2
    assert rows["dp.params.backward.all-gather"].sent == 2 * n * 3 // 4
    kept = _rows(collectives(llama, Parallelism(dp=4, zero=3, reshard_after_forward=False)))
    assert "dp.params.backward.all-gather" not in kept
    zero2 = per_rank_bytes_per_step(llama, Parallelism(dp=4, zero=2))["dp"]
    zero3 = per_rank_bytes_per_step(llama, Parallelism(dp=4, zero=3))["dp"]
    assert Fraction(zero3, zero2) == Fraction(3, 2)


def test_sequence_parallel_pairs_and_megatron_regather():
    llama = model("llama3-70b")
    rows = _rows(collectives(llama, Parallelism(tp=8, dp=1, sequence_parallel=True)))
    activation = 8192 * H70 * 2
    assert rows["tp.mlp.all-gather"].sent == activation * 7 // 8
    assert rows["tp.mlp.backward.regather"].pass_ == "backward"
    plain = per_rank_bytes_per_step(llama, Parallelism(tp=8))["tp"]
    sp_ = per_rank_bytes_per_step(llama, Parallelism(tp=8, sequence_parallel=True))["tp"]
    # + 2 re-gathers per layer of (t-1)/t s b h; the embedding's reduce-scatter and its backward
    # all-gather move its all-reduce's bytes; the head's input gathered forward and reduce-scattered
    # backward moves its all-reduce's bytes; the norm weights' gradients (2 per layer and the final
    # norm, bf16) all-reduced over t
    norms = (2 * L70 + 1) * H70 * 2 * 2 * 7 // 8
    assert sp_ - plain == 2 * L70 * activation * 7 // 8 + norms


def test_pipeline_interleaving_and_scatter_gather():
    llama = model("llama3-70b")
    base = _rows(collectives(llama, Parallelism(tp=8, pp=4, dp=1, global_batch=8)))
    inter = _rows(collectives(llama, Parallelism(tp=8, pp=4, vp=2, dp=1, global_batch=8)))
    assert inter["pp.forward.send"].count == 2 * base["pp.forward.send"].count == 16
    split = _rows(collectives(llama, Parallelism(tp=8, pp=4, dp=1, scatter_gather=True)))
    assert split["pp.forward.send"].payload == 8192 * H70 * 2 // 8
    assert split["pp.received.all-gather"].group == "tp"


def test_context_parallel_405b_ring_and_all_gather():
    llama = model("llama3-405b")
    layout = dict(tp=8, pp=16, cp=16, dp=8, global_batch=16)
    ring = _rows(collectives(llama, Parallelism(**layout)))
    # K and V: s/c tokens x 8 kv heads / t x 128 wide, bf16
    chunk = 2 * (8192 // 16) * (8 // 8) * 128 * 2
    assert ring["cp.kv.send"].payload == chunk
    assert ring["cp.kv.send"].count == 15 * 2 * 8      # c - 1 steps x m = 2 x ceil(126 / 16) layers
    gathered = _rows(collectives(llama, Parallelism(**layout, cp_comm="all_gather")))
    assert gathered["cp.kv.all-gather"].sent * gathered["cp.kv.all-gather"].count \
        == ring["cp.kv.send"].sent * ring["cp.kv.send"].count


def test_expert_parallel_mixtral_dispatch_by_hand():
    mixtral = published_model("mixtral-8x7b-v0.1")
    found = per_rank_bytes_per_step(mixtral, Parallelism(ep=4, dp=8))
    assert set(found) == {"dp", "tp", "pp", "cp", "ep", "edp"}
    tokens = mixtral.seq * 1                              # s b tokens, top-2 copies of width 4096, bf16
    a2a = tokens * 2 * 4096 * 2 * 3 // 4                  # (e-1)/e leave the rank
    assert found["ep"] == 4 * 32 * a2a                     # dispatch + combine, forward and backward, 32 layers
    assert found["edp"] > 0                                # experts reduced over 8 / 4 = 2 ranks


def test_algorithm_factors():
    assert sp.simplify(sent_factor("all-reduce", d) - 2 * (d - 1) / d) == 0
    assert sent_factor("all-gather", 4) == sp.Rational(3, 4)
    assert sent_factor("all-reduce", 8, "tree") == 2
    assert sent_factor("all-reduce", 8, "nvls") == 1
    assert sent_factor("reduce-scatter", 8, "tree") == sp.Rational(7, 8)   # trees serve all-reduce only
    with pytest.raises(ValueError, match="algorithm"):
        sent_factor("all-reduce", 8, "butterfly")


def test_symbolic_rows_are_in_the_layout_symbols():
    rows = _rows(symbolic_collectives(LLAMA, Parallelism(sequence_parallel=True)))
    assert rows["tp.attention.all-gather"].sent.has(t)
    assert {row.group for row in rows.values()} >= {"tp", "pp", "cp", "dp"}


@pytest.mark.parametrize("fields, field", [
    (dict(tp=0), "tp"), (dict(dp=4, global_batch=6), "global_batch"), (dict(vp=2), "vp"),
    (dict(pp=4, vp=2, global_batch=6), "vp"), (dict(ep=3, dp=4), "ep"), (dict(zero=4), "zero"),
    (dict(precision="fp8"), "precision"), (dict(recompute="some"), "recompute"),
    (dict(tp=2, ep=2, dp=2), "sequence_parallel"), (dict(sequence_parallel=1), "sequence_parallel"),
    (dict(capacity_factor=-1), "capacity_factor"),
])
def test_bad_layouts_name_the_field(fields, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        Parallelism(**fields)


@pytest.mark.parametrize("fields, field", [
    (dict(tp=16), "tp"), (dict(tp=3), "tp"), (dict(pp=81, dp=1), "pp"), (dict(pp=41, vp=2, dp=1, global_batch=41), "pp"), (dict(cp=3), "cp"),
    (dict(ep=2, dp=2), "ep"),
])
def test_layouts_that_do_not_divide_the_model(fields, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        collectives(model("llama3-70b"), Parallelism(**fields))


def test_etp_must_divide_the_expert_width():
    with pytest.raises(ValueError, match="^etp: 3 does not divide the expert FFN width f_E = 14336"):
        Parallelism(tp=8, etp=3, dp=3, sequence_parallel=True).check(published_model("mixtral-8x7b-v0.1"))


def test_tp_must_divide_the_ffn_width():
    from dataclasses import replace
    odd = replace(model("llama3-8b"), ffn=14335)
    with pytest.raises(ValueError, match="^tp: 2 does not divide the FFN width"):
        Parallelism(tp=2).check(odd)


def test_layout_properties():
    layout = Parallelism(**BAR)
    assert (layout.gpus, layout.micro_batches, layout.etp) == (1024, 16, 8)


def test_hsdp_shards_within_groups_and_all_reduces_the_shard_across_replicas():
    llama = model("llama3-8b")
    n = llama.parameters
    rows = _rows(collectives(llama, Parallelism(dp=8, zero=3, dp_shard=4)))
    assert rows["dp.params.forward.all-gather"].ranks == 4
    assert rows["dp.params.forward.all-gather"].sent == 2 * n * 3 // 4
    # the bf16 gradient shard (2N/4 bytes) all-reduced over 2 replicas: 2(2-1)/2 of it
    assert rows["dp.grads.replicas.all-reduce"].sent == 2 * n // 4
    with pytest.raises(ValueError, match="^dp_shard:"):
        Parallelism(dp=8, zero=1, dp_shard=4)
    with pytest.raises(ValueError, match="^dp_shard:"):
        Parallelism(dp=8, zero=3, dp_shard=3)


def test_tied_embedding_gradients_all_reduced_between_first_and_last_stage():
    gpt = model("gpt3-175b")                             # word embeddings tied to the head
    rows = _rows(collectives(gpt, Parallelism(tp=8, pp=8, dp=1, global_batch=8)))
    row = rows["pp.embedding-grads.all-reduce"]
    assert (row.ranks, row.payload) == (2, 50257 * 12288 // 8 * 2)   # V h / t bf16 gradients
    assert row.sent == row.payload                                  # two ranks: 2(2-1)/2


def test_zero3_with_pipeline_and_full_recompute_repeats_forward_collectives():
    llama = model("llama3-70b")
    rows = collectives(llama, Parallelism(tp=8, pp=4, dp=2, zero=3, recompute="full", global_batch=8))
    forward = {row.name for row in rows if row.pass_ == "forward"}
    again = {row.name for row in rows if row.pass_ == "recompute"}
    assert {"tp.attention.all-reduce", "tp.mlp.all-reduce"} <= again <= forward
    assert "pp.forward.send" not in again


def test_pytorch_sequence_parallel_keeps_the_gathered_input():
    llama = model("llama3-70b")
    megatron = per_rank_bytes_per_step(llama, Parallelism(tp=8, sequence_parallel=True))["tp"]
    pytorch = per_rank_bytes_per_step(llama, Parallelism(tp=8, sequence_parallel=True, sp_regather=False))["tp"]
    assert megatron - pytorch == 2 * L70 * 8192 * H70 * 2 * 7 // 8   # two re-gathers per layer, m = 1


def test_selective_recompute_repeats_only_the_context_parallel_exchange():
    llama = model("llama3-70b")
    rows = collectives(llama, Parallelism(tp=8, cp=2, dp=1, recompute="selective"))
    assert {row.name for row in rows if row.pass_ == "recompute"} == {"cp.kv.send"}
    assert not [row for row in collectives(llama, Parallelism(tp=8, recompute="selective"))
                if row.pass_ == "recompute"]


def test_a_family_name_is_not_a_layout():
    # the accounts take a decoder Layout (decoder.LLAMA), and a name gets one line naming the argument
    from derive.accounts.comm import symbolic_collectives
    from derive.parallelism import Parallelism
    with pytest.raises(ValueError, match="^architecture: a decoder Layout"):
        symbolic_collectives("llama", Parallelism())
