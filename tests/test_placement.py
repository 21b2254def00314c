"""Framework placements against the article (16-18 bytes), Megatron's table and ZeRO's Figure 1."""
import pytest
import sympy as sp

from derive.accounts.framework_placements import PLACEMENTS, stage_placements
from derive.accounts.placement import (
    placement_bytes,
    placement_bytes_per_parameter,
    placement_ledger,
    placement_table,
    transient_bytes,
)
from derive.presets import MODELS
from derive.symbols import L, N, d


@pytest.mark.parametrize("name, per_param", [
    ("megatron", 18),                  # megatron theoretical_memory_usage: 18 bytes/parameter
    ("deepspeed-bf16-optimizer", 18),  # bf16 + fp32 grad buffer + fp32 master + Adam
    ("deepspeed-zero0", 16),
    ("deepspeed-zero1", 16),
    ("deepspeed-zero2", 16),
    ("deepspeed-zero3", 16),
    ("torchtitan-fsdp2", 16),          # the article: 4 + 4 + 8, fp32 shard is the master
])
def test_unsharded_totals(name, per_param):
    assert placement_bytes_per_parameter(name) == per_param
    assert 16 <= placement_bytes_per_parameter(name) <= 18


@pytest.mark.parametrize("name, at_d8", [
    ("megatron", sp.Rational(15, 2)),                  # dist_optimizer.md: 6 + 12/d
    ("deepspeed-bf16-optimizer", sp.Rational(15, 2)),
    ("deepspeed-zero0", 16),
    ("deepspeed-zero1", sp.Rational(11, 2)),           # 4 + 12/8
    ("deepspeed-zero2", sp.Rational(15, 4)),           # 2 + 14/8
    ("deepspeed-zero3", 2),
    ("torchtitan-fsdp2", 2),
])
def test_sharded_at_eight_ranks(name, at_d8):
    assert placement_bytes_per_parameter(name, sharded=True).subs(d, 8) == at_d8
    assert placement_bytes_per_parameter(name, sharded=True, ranks=8) == at_d8


@pytest.mark.parametrize("stage, gigabytes", [(1, 31.4), (2, 16.6), (3, 1.9)])
def test_deepspeed_stages_reproduce_zero_figure_1(stage, gigabytes):
    # Rajbhandari et al. 2020, Figure 1: Psi = 7.5B, N_d = 64, K = 12 (bf16 has fp16's sizes).
    held = placement_bytes(f"deepspeed-zero{stage}", sharded=True)
    assert round(float(held.subs({N: 7_500_000_000, d: 64})) / 1e9, 1) == gigabytes


def test_llama_70b_megatron_unsharded_is_the_articles_1_27_tb():
    llama = MODELS["llama3-70b"]
    assert round(float(llama.at(placement_bytes("megatron"))) / 1e12, 2) == 1.27


def test_fsdp2_keeps_no_resident_bf16_copy():
    ledger = placement_ledger("torchtitan-fsdp2", sharded=True)
    assert {t.dtype for t in ledger.where("resident")} == {"fp32"}
    gathered = ledger.where("gathered")
    assert len(gathered) == 1 and gathered.bytes() == 2 * N / L
    assert gathered.where("transient").bytes() == gathered.bytes()


def test_fsdp2_transients_are_one_layer_each():
    # bf16 gathered params (2) + bf16 unsharded grads (2) + fp32 reduce-scatter input (4) per layer.
    assert transient_bytes("torchtitan-fsdp2", sharded=True) == 8 * N / L


def test_megatron_main_grad_is_fp32_and_unsharded():
    ledger = placement_ledger("megatron", sharded=True)
    grads = ledger.where("grads", "resident")
    assert [t.dtype for t in grads] == ["fp32"] and grads.bytes() == 4 * N
    assert ledger.where("grads", "transient").bytes() == 2 * N / L


def test_bf16_optimizer_keeps_a_full_fp32_gradient_buffer():
    ledger = placement_ledger("deepspeed-bf16-optimizer", sharded=True)
    assert ledger.where("grads", "resident").bytes() == 4 * N          # not divided by d
    assert ledger.where("optimizer").bytes() == 12 * N / d
    assert transient_bytes("deepspeed-bf16-optimizer") == 2 * N     # bf16 grads until backward ends


def test_zero_stage_step_copy_is_an_fp32_partition():
    assert transient_bytes("deepspeed-zero2", sharded=True) == 4 * N / d
    assert transient_bytes("deepspeed-zero2") == 4 * N                  # d = 1


def test_megatron_fsdp_shards_grads_then_params():
    # optim_grads: bf16 parameters whole (2), fp32 main grads + fp32 master + two fp32 moments over d
    # (4 + 4 + 8); optim_grads_params: all 18 over d; one layer's fp32 gradient bucket in flight,
    # and under optim_grads_params one layer's gathered bf16 parameters
    assert placement_bytes_per_parameter("megatron-fsdp-optim-grads", sharded=True) == 2 + 16 / d
    assert placement_bytes_per_parameter("megatron-fsdp-optim-grads-params", sharded=True) == 18 / d
    assert transient_bytes("megatron-fsdp-optim-grads", sharded=True) == 4 * N / L
    assert transient_bytes("megatron-fsdp-optim-grads-params", sharded=True) == 6 * N / L
    assert stage_placements("megatron") == {0: "megatron", 1: "megatron", 2: "megatron-fsdp-optim-grads",
                                            3: "megatron-fsdp-optim-grads-params"}
    assert stage_placements("torchtitan-fsdp2") == {0: "torchtitan-fsdp2", 3: "torchtitan-fsdp2"}


def test_table_rows():
    rows = {row["placement"]: row for row in placement_table()}
    assert set(rows) == set(PLACEMENTS) and len(rows) == 10
    megatron = rows["megatron"]
    assert megatron["bytes_per_parameter"] == 18
    assert megatron["sharded_bytes_per_parameter"] == 6 + 12 / d
    assert [t["sharded"] for t in megatron["tensors"]] == [False, False, True, True, True, False]
    assert [t["lifetime"] for t in megatron["tensors"]].count("transient") == 1
    fsdp = rows["torchtitan-fsdp2"]
    assert sum(t["sharded_bytes_per_parameter"] for t in fsdp["tensors"]
               if t["lifetime"] == "resident") == 16 / d
    assert all(row["source"] for row in rows.values())


@pytest.mark.parametrize("call", [
    lambda: placement_ledger("colossalai"),
    lambda: placement_bytes_per_parameter("fsdp1"),
])
def test_unknown_placement(call):
    with pytest.raises(ValueError, match=r"^placement: "):
        call()
