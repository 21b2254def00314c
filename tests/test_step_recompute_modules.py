"""Megatron's --recompute-modules layernorm / moe_act in the step model, counted by hand from Megatron's code.

megatron/core/transformer/transformer_layer.py (core_v0.15.0): under selective granularity "layernorm" checkpoints the
pre-MLP norm (a separate TENorm in an MoE layer of the TE spec, gpt_layer_specs.py) with CheckpointWithoutOutput, so
the backward re-runs it: it reads the token (h) and writes its normalised copy (h). moe/experts.py: "moe_act" re-runs
``bias_act_func``: reads fc1's output (both GLU halves, 2 k_E f_E) and writes k_E f_E; GPT-OSS's clamp inside it
(fused_bias_geglu.py, weighted_bias_quick_geglu_impl) re-runs its eager forward: each half read and written (2 + 2),
both read and their concatenation written (2 + 2): 8 k_E f_E.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from derive.accounts.compute_time import module_recompute_elements
from derive.accounts.efficiency import calibrated
from derive.accounts.prediction import predict
from derive.accounts.step_layout import Layout
from derive.accounts.workload import workload
from derive.heldout import heldout_runs
from derive.names import named_model
from derive.parallelism import Parallelism
from derive.systems import system

LAYOUT = Layout(1, 1, 1, 1, 8, 8, 1, 1, 8, False, 1, "none", "bf16")


def _modules(*names: str) -> Layout:
    return replace(LAYOUT, recompute_modules=frozenset(names))


def test_gpt_oss_modules_by_hand():
    work = workload(named_model("gpt-oss-120b", moe=True)[0])
    h, k_e, f_e = 2880, 4, 2880  # the config's hidden_size, experts_per_token, intermediate_size; 36 MoE layers of 36
    assert module_recompute_elements(work, _modules("layernorm")) == 2 * h
    assert module_recompute_elements(work, _modules("moe_act")) == 3 * k_e * f_e + 8 * k_e * f_e
    assert module_recompute_elements(work, _modules("layernorm", "moe_act")) == 2 * h + 11 * k_e * f_e == 132480
    assert module_recompute_elements(work, LAYOUT) == 0.0


def test_qwen3_moe_act_has_no_clamp_and_dense_models_recompute_nothing():
    work = workload(named_model("qwen3-30b-a3b", moe=True)[0])
    assert module_recompute_elements(work, _modules("layernorm", "moe_act")) == 2 * 2048 + 3 * 8 * 768 == 22528
    assert module_recompute_elements(workload(named_model("llama3-8b")[0]), _modules("layernorm")) == 0.0


def test_modules_refused_by_name():
    work = workload(named_model("qwen3-30b-a3b", moe=True)[0])
    with pytest.raises(ValueError, match="recompute_modules"):
        module_recompute_elements(work, _modules("core_attn"))
    with pytest.raises(ValueError, match="recompute_modules.*selective"):
        module_recompute_elements(work, replace(_modules("moe_act"), recompute="full"))


def test_predicted_step_pays_the_rerun_at_hbm_speed():
    entry = named_model("gpt-oss-120b", moe=True)[0]
    layout = Parallelism(ep=8, dp=8, micro_batch=1, global_batch=64)
    b200 = system("b200")
    plain = predict(entry, layout, b200)
    again = predict(entry, layout, b200, recompute_modules=("layernorm", "moe_act"))
    tokens = 64 * entry.seq // 8  # one rank's tokens a step (t = p = 1)
    seconds = tokens * 36 * 132480 * 2 / (calibrated().memory * b200.hbm_bandwidth)  # BF16 elements, 36 layers
    assert again.breakdown["memory_bound"] - plain.breakdown["memory_bound"] == pytest.approx(seconds)
    assert again.breakdown["compute"] == plain.breakdown["compute"] and again.hfu == pytest.approx(
        plain.hfu * plain.step_time_s / again.step_time_s)  # no GEMM re-runs: the same FLOPs over a longer step


def test_heldout_rows_whose_recipes_recompute_modules():
    runs = {run.label: run for run in heldout_runs()[0]}
    modules = {label for label, run in runs.items() if run.recompute_modules}
    # GB200 / B200 / H100 BF16 from 26.02 to 26.04.01, less 26.02.01's B200 (its row's EP 8 is not v0.3.1's cell)
    assert modules == {f"{release} GPT OSS 120B BF16 64 DGX-{gpu}"
                       for release in ("26.02", "26.02.01", "26.04", "26.04.01")
                       for gpu in ("GB200", "B200", "H100")} - {"26.02.01 GPT OSS 120B BF16 64 DGX-B200"}
    assert all(runs[label].recompute_modules == {"layernorm", "moe_act"} for label in modules)
    assert "modules recomputed" in runs["26.04 GPT OSS 120B BF16 64 DGX-H100"].assumptions
