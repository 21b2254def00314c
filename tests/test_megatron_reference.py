"""derive.megatron.records against Megatron-LM's own estimator outputs (tests/reference, copied from Megatron-LM runs), exactly.

Every record of both reference files - dense models (megatron_core.json, 1440 records)
and MoE, MLA and MTP models (megatron_moe.json, 400) - is checked with Fraction
equality through the same estimators; the per-function (and per-model) counts are
asserted so that no record is silently left out. Adding the next estimator to
derive.megatron.records (and its name to IMPLEMENTED) is all it takes to check its
records too.
"""
from __future__ import annotations

import json
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from derive.megatron import records
from derive.units import BYTE_UNITS

FOLDER = Path(__file__).resolve().parent / "reference"
DENSE = json.loads((FOLDER / "megatron_core.json").read_text())
MOE = json.loads((FOLDER / "megatron_moe.json").read_text())

#: Records per function in each reference file (its README): 1440 dense, 400 MoE.
RECORDS_PER_FUNCTION = {
    "megatron_core.json": {
        "compute_weight_and_optimizer_memory": 292,
        "compute_activation_memory": 301,
        "compute_activation_memory_without_sp": 287,
        "report_theoretical_memory": 397,
        "num_floating_point_operations": 163,
    },
    "megatron_moe.json": {
        "compute_weight_and_optimizer_memory": 116,
        "report_theoretical_memory": 113,
        "num_floating_point_operations": 75,
        "compute_activation_memory": 55,
        "compute_activation_memory_without_sp": 41,
    },
}
MOE_RECORDS_PER_MODEL = {
    "llama4_maverick": 50, "qwen3_30b_a3b": 49, "deepseek_v2_lite": 47, "qwen2_57b_a14b": 47,
    "mixtral_8x7b": 43, "mixtral_8x22b": 42, "deepseek_v3": 41, "llama4_scout": 41,
    "deepseek_v3_mtp1": 40,
}

#: The estimators derive.megatron.records reproduces so far.
IMPLEMENTED = ("compute_weight_and_optimizer_memory", "compute_activation_memory",
               "compute_activation_memory_without_sp", "report_theoretical_memory",
               "num_floating_point_operations")

FILES = {"megatron_core.json": DENSE["records"], "megatron_moe.json": MOE["records"]}
RECORDS = DENSE["records"]
CHECKED = [(name, r) for name, rows in FILES.items() for r in rows if r["function"] in IMPLEMENTED]
REPORTS = [r for r in RECORDS if r["function"] == "report_theoretical_memory"]


@pytest.mark.parametrize("name, total", [("megatron_core.json", 1440), ("megatron_moe.json", 400)])
def test_reference_files_hold_1440_and_400_records(name, total):
    assert Counter(r["function"] for r in FILES[name]) == RECORDS_PER_FUNCTION[name]
    assert sum(RECORDS_PER_FUNCTION[name].values()) == len(FILES[name]) == total


def test_moe_file_counts_per_model_and_tag():
    assert Counter(r["config"]["model"] for r in MOE["records"]) == MOE_RECORDS_PER_MODEL
    assert MOE["source"]["tag"] == "core_v0.18.0"


def test_every_record_of_each_implemented_function_is_checked():
    assert all(callable(getattr(records, name)) for name in IMPLEMENTED)
    for name in RECORDS_PER_FUNCTION["megatron_core.json"]:
        assert hasattr(records, name) == (name in IMPLEMENTED), name
    for file, counts in RECORDS_PER_FUNCTION.items():
        checked = Counter(r["function"] for name, r in CHECKED if name == file)
        assert checked == {name: counts[name] for name in IMPLEMENTED}


def _exact(value: object) -> bool:
    return isinstance(value, (int, Fraction))


@pytest.mark.parametrize("file, record", CHECKED, ids=lambda x: x if isinstance(x, str) else
                         f"{x['function']}-{x['id']}")
def test_record_exactly(file, record):
    result = getattr(records, record["function"])(record["args"], **record["extra_call_args"])
    if record["function"] == "report_theoretical_memory":
        components = record["result_components_exact"]
        assert all(_exact(part) for part in result)
        assert result == tuple(Fraction(components[name]) for name in
                               ("weight_and_optimizer", "activation", "total"))
        result = result[-1]
    assert _exact(result)
    assert result == Fraction(record["result_exact"])


@pytest.mark.parametrize("record", REPORTS, ids=lambda r: f"report-weights-{r['id']}")
def test_report_weight_component_in_mib(record):
    result = records.compute_weight_and_optimizer_memory(record["args"]) / BYTE_UNITS["MiB"]
    assert result == Fraction(record["result_components_exact"]["weight_and_optimizer"])


def test_report_weight_components_are_all_checked():
    assert len(REPORTS) == RECORDS_PER_FUNCTION["megatron_core.json"]["report_theoretical_memory"]


def test_moe_records_go_through_the_moe_tables():
    weights = [r for r in MOE["records"] if r["function"] == "compute_weight_and_optimizer_memory"]
    assert all(records.model(r["args"])[0].experts for r in weights)


@pytest.mark.parametrize("model", ["mixtral_8x7b", "mixtral_8x22b", "deepseek_v3", "deepseek_v3_mtp1",
                                   "qwen3_30b_a3b"])
def test_total_parameters_at_one_rank_match_megatron_verbose_count(model):
    """Megatron's verbose total (the source block's models entry) = the table at t = p = e = 1, 18 B each."""
    entry = MOE["source"]["models"][model]
    record = next(r for r in MOE["records"] if r["function"] == "compute_weight_and_optimizer_memory"
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


def _record(function: str, model: str = "llama3_70b") -> dict:
    return next(r for name, rows in FILES.items() for r in rows
                if r["function"] == function and r["config"]["model"] == model)


@pytest.mark.parametrize("function, model, changes, extra, field", [
    ("compute_weight_and_optimizer_memory", "llama3_70b", {"num_layers": 0}, {}, "num_layers"),
    ("compute_weight_and_optimizer_memory", "llama3_70b", {"normalization": "BatchNorm"}, {},
     "normalization"),
    ("compute_weight_and_optimizer_memory", "llama3_70b", {"num_experts": 8}, {}, "moe_layer_freq"),
    ("compute_weight_and_optimizer_memory", "llama3_70b", {"swiglu": "yes"}, {}, "swiglu"),
    ("compute_weight_and_optimizer_memory", "llama3_70b",
     {"swiglu": False, "group_query_attention": True, "num_query_groups": 8}, {}, "num_query_groups"),
    ("compute_activation_memory", "llama3_70b", {"seq_length": 0}, {}, "seq_length"),
    ("compute_activation_memory", "llama3_70b", {"ffn_hidden_size": None}, {}, "ffn_hidden_size"),
    ("compute_activation_memory_without_sp", "llama3_70b", {"virtual_pipeline_model_parallel_size": -2},
     {}, "virtual_pipeline_model_parallel_size"),
    ("compute_activation_memory_without_sp", "llama3_70b", {}, {"num_microbatches": 0},
     "num_microbatches"),
    ("report_theoretical_memory", "llama3_70b", {"sequence_parallel": "yes"}, {}, "sequence_parallel"),
    ("report_theoretical_memory", "llama3_70b", {"hybrid_layer_pattern": "M*M*"}, {},
     "hybrid_layer_pattern"),
    ("num_floating_point_operations", "llama3_70b", {"attention_output_gate": None}, {},
     "attention_output_gate"),
    ("num_floating_point_operations", "llama3_70b", {"moe_latent_size": 64}, {}, "moe_latent_size"),
    ("num_floating_point_operations", "llama3_70b", {}, {"batch_size": 0}, "batch_size"),
    ("num_floating_point_operations", "llama3_70b", {}, {"seqlen_squared_sum_in_batch": -1},
     "seqlen_squared_sum_in_batch"),
    ("compute_weight_and_optimizer_memory", "deepseek_v3_mtp1", {"moe_layer_freq": [1] * 5}, {},
     "moe_layer_freq"),
    ("compute_weight_and_optimizer_memory", "deepseek_v3_mtp1", {"world_size": 7}, {}, "world_size"),
    ("compute_weight_and_optimizer_memory", "deepseek_v3_mtp1", {"expert_model_parallel_size": 0}, {},
     "expert_model_parallel_size"),
    ("compute_weight_and_optimizer_memory", "deepseek_v3_mtp1", {"group_query_attention": True}, {},
     "group_query_attention"),
    ("compute_weight_and_optimizer_memory", "deepseek_v3_mtp1", {"moe_ffn_hidden_size": None}, {},
     "moe_ffn_hidden_size"),
    ("compute_weight_and_optimizer_memory", "deepseek_v3_mtp1", {"normalization": "BatchNorm"}, {},
     "normalization"),
    ("num_floating_point_operations", "deepseek_v3_mtp1", {"moe_router_topk": "8"}, {}, "moe_router_topk"),
    ("num_floating_point_operations", "deepseek_v3_mtp1", {"swiglu": False}, {}, "swiglu"),
    ("num_floating_point_operations", "deepseek_v3_mtp1", {"moe_latent_size": 64}, {}, "moe_latent_size"),
])
def test_bad_arguments_name_the_field(function, model, changes, extra, field):
    record = _record(function, model)
    args = {**record["args"], **changes}
    with pytest.raises(ValueError, match=f"^{field}: "):
        getattr(records, function)(args, **{**record["extra_call_args"], **extra})


def test_the_activation_branch_follows_sp_and_selective_recompute():
    branches = Counter()
    for record in REPORTS:
        args = record["args"]
        with_sp = args["sequence_parallel"] and args["recompute_granularity"] == "selective"
        branch = ("compute_activation_memory" if with_sp else "compute_activation_memory_without_sp")
        assert record["activation_branch"] == branch
        branches[branch] += 1
    assert len(branches) == 2
