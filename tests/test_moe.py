"""MoE, MLA and MTP tables: parameter counts, states, FLOPs and activations against published numbers."""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
import sympy as sp

from derive.accounts.experts import (EXPERT_DATA_PARALLEL, moe_resident_bytes,
                                     model_parallel_share, moe_layer_activations)
from derive.architectures.gemms import flops
from derive.architectures.decoder import moe_layout
from derive.architectures.tables import model_gemms, model_parameters
from derive.architectures.saved import moe_layer_saved
from derive.identities import experts as expert_departures
from derive.presets import MODELS as PRESETS
from derive.symbols import d, e, t, t_E

REFERENCE = json.loads((Path(__file__).resolve().parent / "reference" / "megatron_moe.json").read_text())
MODELS = REFERENCE["source"]["models"]


def test_published_totals():
    """transformers / Megatron totals (issue 14, the reference's verbose counts)."""
    assert PRESETS["mixtral-8x7b"].parameters == 46_702_792_704
    assert PRESETS["deepseek-v3"].parameters == 671_026_404_352
    # Megatron counts no q/k norms: 48 layers x 2 norms x head_dim 128 fewer
    assert PRESETS["qwen3-30b-a3b"].parameters == int(MODELS["qwen3_30b_a3b"][
        "megatron_verbose_parameter_report_tp1_pp1_ep1"]["parameters_exact"]) + 48 * 2 * 128


def test_active_parameters():
    """Mixtral paper: 12.9B active (Megatron prints 12.88); DeepSeek-V3: 37.55B without the MTP module."""
    assert round(PRESETS["mixtral-8x7b"].active_parameters / 1e9, 2) == 12.88
    assert PRESETS["deepseek-v3"].active_parameters == 37_552_282_624
    assert round(PRESETS["deepseek-v3"].active_parameters / 1e9, 2) == 37.55
    assert round(PRESETS["qwen3-30b-a3b"].active_parameters / 1e9, 1) == 3.4  # "A3B": 3.3B + edges


def test_mtp_module_against_megatron_count():
    """Megatron's 682,533,690,368 with one MTP layer omits eh_proj [2h, h] and the three norms."""
    model = PRESETS["deepseek-v3"]
    h = 7168
    assert model.parameters + model.mtp_parameters - (2 * h * h + 3 * h) == 682_533_690_368


def test_deepseek_v3_flops_per_token_at_4096():
    """6 N_active_GEMM + 3 L s a (d_qk + k_v): N_active_GEMM = active - input embedding - norms."""
    model = PRESETS["deepseek-v3"]
    features = moe_layout("mla", shared=True, router="sigmoid-grouped")
    derived = model.subs(flops(model_gemms(features)), s=4096)
    norms = 61 * 2 * 7168 + 7168 + 61 * (1536 + 512)
    active_gemm = 37_552_282_624 - 129280 * 7168 - norms
    by_hand = 6 * active_gemm + 3 * 61 * 4096 * 128 * (192 + 128)
    assert derived == by_hand
    assert round(int(derived) / 1e9, 1) == 250.4
    # Megatron's count (with MTP: + the MTP layer, its projection and norms, a second logit GEMM)
    record = next(r for r in REFERENCE["records"] if r["function"] == "num_floating_point_operations"
                  and r["config"]["model"] == "deepseek_v3_mtp1" and r["args"]["seq_length"] == 4096
                  and not r["extra_call_args"].get("seqlen_squared_sum_in_batch"))
    tokens = record["extra_call_args"]["batch_size"] * 4096
    per_token = Fraction(record["result_exact"]) / tokens
    padded = record["args"]["padded_vocab_size"]
    mtp = moe_layout("mla", shared=True, mtp=True, router="sigmoid-grouped")
    ours = model.subs(flops(model_gemms(mtp)), s=4096, V=padded)
    router = 6 * (58 + 1) * 256 * 7168
    latent_norms = 6 * 62 * (1536 + 512) + 6 * 3 * 7168
    assert per_token == ours - router + latent_norms


def test_states_per_gpu_reduce_to_megatron():
    """Experts over t_E e with EDP = t d/(t_E e); 18 or 6 + 12/d elsewhere (README of the reference)."""
    table = model_parallel_share(model_parameters(moe_layout("gqa")))
    values = {t: 8, e: 8, t_E: 1, d: 16}
    assert EXPERT_DATA_PARALLEL.xreplace(values) == 16
    model = PRESETS["mixtral-8x7b"]
    experts = model.subs(table.where("routed_expert").numel(), t=8, e=8, t_E=1)
    assert experts == 32 * 8 * 3 * 4096 * 14336 // 8
    held = model.subs(moe_resident_bytes(table, "bf16-fp32grad", "adam", zero_stage=1), t=8, e=8, t_E=1, d=16)
    others = model.subs(table.without("routed_expert").numel(), t=8, e=8, t_E=1)
    assert held == experts * Fraction(6 * 16 + 12, 16) + others * Fraction(6 * 16 + 12, 16)
    with pytest.raises(ValueError, match="^router: "):
        moe_layout("gqa", router="top1")


def test_departures_are_sized_for_deepseek_and_mixtral():
    deepseek = PRESETS["deepseek-v3"]
    sizes = expert_departures.sizes(deepseek.values, deepseek.layout)
    h, L, p_ = 7168, 61, 4
    latents = 7168 * 1536 + 1536 + 7168 * (512 + 64) + 512
    assert sizes["MLA down projections and latent norms divided by t"] == Fraction(L, p_) * latents * Fraction(7, 8)
    assert sizes["MTP projection and norms not counted"] == 2 * h * h + 3 * h
    assert sizes["router GEMM not counted"] == 6 * 58 * 256 * h
    assert sizes["shared-expert gate GEMM not counted"] is None
    mixtral = PRESETS["mixtral-8x7b"]
    sizes = expert_departures.sizes(mixtral.values, mixtral.layout)
    assert sizes["router GEMM not counted"] == 6 * 32 * 8 * 4096
    assert sizes["MTP block counted on the first stage"] is None
    assert sizes["activation estimators ignore MoE (GQA layer)"] > 0


def test_fused_moe_rows_by_hand():
    """Mixtral fused MoE layer, t = 1: k_E copies of each token through the experts, s = 1, b = 1."""
    rows = moe_layer_saved("fused", moe_layout("gqa"))
    model = PRESETS["mixtral-8x7b"]
    per_token = model.subs(rows.bytes(), s=1, b=1)
    h, a, g, k, E, top_k, f = 4096, 32, 8, 128, 8, 2, 14336
    attention = 2 * h + 4 + 2 * h + 2 * (a * k + 2 * g * k + a * k) + 4 * a
    norm = 2 * h + 4
    router = 2 * h + 4 * E + E + 4 * (2 * E + 1)   # input, fp32 scores, bool map, int32 row_id_map
    experts = top_k * (2 * h + 4 + 2 * 2 * f + 2 * f)
    assert per_token == attention + norm + router + experts
    capped = moe_layer_saved("fused", moe_layout("gqa"), capacity_factor=sp.Rational(5, 4))
    assert model.subs(capped.bytes(), s=1, b=1) - per_token == sp.Rational(1, 4) * experts
    with pytest.raises(ValueError, match="^capacity_factor: "):
        moe_layer_saved("eager", moe_layout("gqa"), capacity_factor=2)


def test_expert_tokens_gather_over_expert_tp():
    rows = moe_layer_activations("fused", moe_layout("gqa"), tensor_parallel=t)
    split = rows.where("expert_hidden").bytes()
    assert sp.simplify(split.subs(t_E, 1) * 8 - split.subs(t_E, 8)) == 0


def test_sheet_section_sizes_the_departures():
    from derive.render.sections.experts import moe_section
    section = moe_section()
    assert set(section.tables) == {"moe_models", "moe_parameters", "moe_saved", "moe_departures"}
    rows = {row["departure"].value: row for row in section.tables["moe_departures"].rows}
    assert rows["router GEMM not counted"]["deepseek-v3"].value == 6 * 58 * 256 * 7168
    assert rows["router GEMM not counted"]["mixtral-8x7b"].value == 6 * 32 * 8 * 4096
    models = {row["model"].value: row for row in section.tables["moe_models"].rows}
    assert models["DeepSeek-V3"]["active"].value == 37_552_282_624


def test_moe_step_timeline():
    """End of backward = the resident states (16 B/param at bf16 + Adam, no ZeRO); end of forward adds activations."""
    from derive.accounts.experts import moe_first_stage_activation_bytes, moe_step_timeline
    model = PRESETS["mixtral-8x7b"]
    share = model_parallel_share(model_parameters(model.layout))
    timeline = moe_step_timeline(model.layout, share, precision="bf16", zero_stage=0, tensor_parallel=1)
    at = dict(t=1, e=1, t_E=1, d=1, b=1)
    assert model.subs(timeline.end_of_backward, **at) == 16 * 46_702_792_704
    activations = moe_first_stage_activation_bytes("fused", model.layout, 1, False, 1)
    assert model.subs(timeline.end_of_forward - timeline.end_of_backward, **at) == \
        model.subs(activations, **at) - 2 * 46_702_792_704
