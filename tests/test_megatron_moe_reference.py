"""derive.megatron.records against Megatron-LM's estimators on MoE, MLA and MTP models (tests/reference/megatron_moe.json).

Every one of the 400 records is checked with Fraction equality; the
per-function and per-model counts are asserted so no record is left out.
"""
from __future__ import annotations

import json
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from derive.megatron import records

REFERENCE = Path(__file__).resolve().parent / "reference" / "megatron_moe.json"
DATA = json.loads(REFERENCE.read_text())
RECORDS = DATA["records"]

#: Records per function and per model in the reference file.
RECORDS_PER_FUNCTION = {
    "compute_weight_and_optimizer_memory": 116,
    "report_theoretical_memory": 113,
    "num_floating_point_operations": 75,
    "compute_activation_memory": 55,
    "compute_activation_memory_without_sp": 41,
}
RECORDS_PER_MODEL = {
    "llama4_maverick": 50, "qwen3_30b_a3b": 49, "deepseek_v2_lite": 47, "qwen2_57b_a14b": 47,
    "mixtral_8x7b": 43, "mixtral_8x22b": 42, "deepseek_v3": 41, "llama4_scout": 41,
    "deepseek_v3_mtp1": 40,
}


def test_reference_file_holds_400_records():
    assert Counter(r["function"] for r in RECORDS) == RECORDS_PER_FUNCTION
    assert Counter(r["config"]["model"] for r in RECORDS) == RECORDS_PER_MODEL
    assert len(RECORDS) == 400
    assert DATA["source"]["tag"] == "core_v0.18.0"


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: f"{r['function']}-{r['id']}")
def test_record_exactly(record):
    result = getattr(records, record["function"])(record["args"], **record["extra_call_args"])
    if record["function"] == "report_theoretical_memory":
        parts = record["result_components_exact"]
        assert result == tuple(Fraction(parts[name])
                               for name in ("weight_and_optimizer", "activation", "total"))
        result = result[-1]
    assert isinstance(result, (int, Fraction))
    assert result == Fraction(record["result_exact"])


def test_moe_records_go_through_the_moe_tables():
    weights = [r for r in RECORDS if r["function"] == "compute_weight_and_optimizer_memory"]
    assert all(records.model(r["args"])[0].experts for r in weights)


@pytest.mark.parametrize("model", ["mixtral_8x7b", "mixtral_8x22b", "deepseek_v3", "deepseek_v3_mtp1",
                                   "qwen3_30b_a3b"])
def test_total_parameters_at_one_rank_match_megatron_verbose_count(model):
    """Megatron's verbose total (the source block's models entry) = the table at t = p = e = 1, 18 B each."""
    entry = DATA["source"]["models"][model]
    record = next(r for r in RECORDS if r["function"] == "compute_weight_and_optimizer_memory"
                  and r["config"]["model"] == model)
    args = {**record["args"], "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1,
            "expert_model_parallel_size": 1, "expert_tensor_parallel_size": 1, "world_size": 1,
            "data_parallel_size": 1, "use_distributed_optimizer": False,
            "padded_vocab_size": entry["vocab_size_unpadded"]}
    # Megatron's most loaded shard at one rank is the whole model (MTP block included), 18 bytes each
    shard = records.compute_weight_and_optimizer_memory(args) / 18
    printed = [line for line in entry["megatron_verbose_parameter_report_tp1_pp1_ep1"]["printed"]
               if "most loaded shard" in line][0]
    assert round(float(shard) / 1e9, 4) == float(printed.split()[-1])
    if "parameters_exact" in entry["megatron_verbose_parameter_report_tp1_pp1_ep1"]:
        assert shard == int(entry["megatron_verbose_parameter_report_tp1_pp1_ep1"]["parameters_exact"])


def _args(function: str, **changes):
    record = next(r for r in RECORDS if r["function"] == function
                  and r["config"]["model"] == "deepseek_v3_mtp1")
    return {**record["args"], **changes}, record["extra_call_args"]


@pytest.mark.parametrize("function, changes, field", [
    ("compute_weight_and_optimizer_memory", {"moe_layer_freq": [1] * 5}, "moe_layer_freq"),
    ("compute_weight_and_optimizer_memory", {"world_size": 7}, "world_size"),
    ("compute_weight_and_optimizer_memory", {"expert_model_parallel_size": 0},
     "expert_model_parallel_size"),
    ("compute_weight_and_optimizer_memory", {"group_query_attention": True}, "group_query_attention"),
    ("compute_weight_and_optimizer_memory", {"moe_ffn_hidden_size": None}, "moe_ffn_hidden_size"),
    ("compute_weight_and_optimizer_memory", {"normalization": "BatchNorm"}, "normalization"),
    ("num_floating_point_operations", {"moe_router_topk": "8"}, "moe_router_topk"),
    ("num_floating_point_operations", {"swiglu": False}, "swiglu"),
    ("num_floating_point_operations", {"moe_latent_size": 64}, "moe_latent_size"),
])
def test_bad_arguments_name_the_field(function, changes, field):
    args, extra = _args(function, **changes)
    with pytest.raises(ValueError, match=f"^{field}: "):
        getattr(records, function)(args, **extra)
