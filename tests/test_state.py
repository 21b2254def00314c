"""Resident training state against the article's, ZeRO's and Megatron's numbers."""
import pytest
import sympy as sp

from derive.accounts.state import (
    bytes_per_parameter,
    resident_bytes,
    state_bytes,
    state_ledger,
)
from derive.conventions.megatron import distributed_optimizer_bytes_per_parameter
from derive.presets import MODELS
from derive.symbols import N, d


def _at(model_name, expr):
    return float(MODELS[model_name].at(expr))


def test_bf16_adamw_is_16_bytes_per_parameter_with_two_moments():
    # AdamW keeps the same state as Adam (Loshchilov & Hutter 2019 only move the weight decay):
    # bf16 params 2 + bf16 grads 2 + fp32 master 4 + fp32 exp_avg 4 + fp32 exp_avg_sq 4 = 16
    held = state_bytes("bf16", "adamw")
    assert (held.params, held.grads, held.optimizer) == (2 * N, 2 * N, 12 * N)
    assert resident_bytes("bf16", "adamw") == 16 * N
    moments = state_ledger("bf16", "adamw").where("optimizer")
    assert sorted(t.bytes / N for t in moments) == [4, 4, 4]


def test_resident_state_at_16_bytes_per_parameter():
    assert round(_at("llama3-8b", resident_bytes("bf16", "adam")) / 1e9, 2) == 128.48
    assert round(_at("llama3-70b", resident_bytes("bf16", "adam")) / 1e12, 2) == 1.13
    assert round(_at("llama3-405b", resident_bytes("bf16", "adam")) / 1e12, 2) == 6.49


def test_1_13_tb_is_fourteen_80_gb_cards():
    assert int(_at("llama3-70b", resident_bytes("bf16", "adam")) // 80e9) == 14


def test_resident_state_70b_at_18_bytes_per_parameter():
    held = state_bytes("bf16-fp32grad", "adam")
    assert round(_at("llama3-70b", held.total) / 1e12, 2) == 1.27
    assert round(_at("llama3-70b", held.grads) / 1e9, 2) == 282.21


def test_70b_accounts():
    held = state_bytes("bf16", "adam")
    assert round(_at("llama3-70b", held.params) / 1e9, 2) == 141.11
    assert round(_at("llama3-70b", held.grads) / 1e9, 2) == 141.11
    assert round(_at("llama3-70b", held.optimizer) / 1e9, 2) == 846.64


@pytest.mark.parametrize("stage, gigabytes", [(0, 120), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_paper_example(stage, gigabytes):
    # Rajbhandari et al. 2020, Figure 1: Psi = 7.5B, N_d = 64, K = 12.
    held = resident_bytes("fp16", "adam", zero_stage=stage)
    value = float(held.subs({N: 7_500_000_000, d: 64})) / 1e9
    assert round(value, 1) == gigabytes


@pytest.mark.parametrize("precision, plain, at_d8", [
    ("fp16", 20, sp.Rational(6)),        # 4 + 16/8
    ("bf16", 18, sp.Rational(15, 2)),    # 6 + 12/8
    ("fp32", 16, sp.Rational(9)),        # 8 + 8/8
])
def test_megatron_distributed_optimizer_table(precision, plain, at_d8):
    assert distributed_optimizer_bytes_per_parameter(precision, distributed=False) == plain
    assert distributed_optimizer_bytes_per_parameter(precision).subs(d, 8) == at_d8


@pytest.mark.parametrize("precision, optimizer, per_param", [
    ("bf16", "sgd-momentum", 12),               # 2 + 2 + 4 master + 4 momentum
    ("bf16", "sgd", 8),                         # 2 + 2 + 4 master
    ("fp32", "sgd", 8),                         # 4 + 4
    ("fp32", "sgd-momentum", 12),               # 4 + 4 + 4
    ("bf16", "adam-8bit", sp.Rational(321, 32)),  # 2 + 2 + 4 + 1 + 1 + 2 * 4/256
])
def test_bytes_per_parameter_other_optimizers(precision, optimizer, per_param):
    assert bytes_per_parameter(precision, optimizer) == per_param


def test_fp32_gradient_recipe_keeps_no_persistent_bf16_gradient():
    ledger = state_ledger("bf16-fp32grad", "adam")
    transient = ledger.where("transient")
    assert len(transient) == 1 and transient.bytes() == 2 * N
    assert ledger.where("grads", "resident").bytes() == 4 * N


@pytest.mark.parametrize("call, field", [
    (lambda: state_ledger("bf8", "adam"), "precision"),
    (lambda: state_ledger("bf16", "adafactor"), "optimizer"),
    (lambda: resident_bytes("bf16", "adam", zero_stage=4), "zero_stage"),
    (lambda: distributed_optimizer_bytes_per_parameter("int8"), "precision"),
])
def test_bad_input_names_the_field(call, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        call()
