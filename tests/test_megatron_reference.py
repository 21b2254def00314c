"""derive.megatron.records against Megatron-LM's own estimator outputs (tests/reference, copied from Megatron-LM runs), exactly.

Every record of a function that derive.megatron.records implements is checked with
Fraction equality; the per-function counts are asserted so that no record is
silently left out. Adding the next estimator to derive.megatron.records (and its
name to IMPLEMENTED) is all it takes to check its records too.
"""
from __future__ import annotations

import json
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from derive.megatron import records
from derive.units import BYTE_UNITS

REFERENCE = Path(__file__).resolve().parent / "reference" / "megatron_core.json"

#: Records per function in the reference file (its README): 1440 in all.
RECORDS_PER_FUNCTION = {
    "compute_weight_and_optimizer_memory": 292,
    "compute_activation_memory": 301,
    "compute_activation_memory_without_sp": 287,
    "report_theoretical_memory": 397,
    "num_floating_point_operations": 163,
}

#: The estimators derive.megatron.records reproduces so far.
IMPLEMENTED = ("compute_weight_and_optimizer_memory", "compute_activation_memory",
               "compute_activation_memory_without_sp", "report_theoretical_memory",
               "num_floating_point_operations")

RECORDS = json.loads(REFERENCE.read_text())["records"]
CHECKED = [r for r in RECORDS if r["function"] in IMPLEMENTED]
REPORTS = [r for r in RECORDS if r["function"] == "report_theoretical_memory"]


def test_reference_file_holds_1440_records():
    assert Counter(r["function"] for r in RECORDS) == RECORDS_PER_FUNCTION
    assert sum(RECORDS_PER_FUNCTION.values()) == 1440


def test_every_record_of_each_implemented_function_is_checked():
    assert all(callable(getattr(records, name)) for name in IMPLEMENTED)
    for name in RECORDS_PER_FUNCTION:
        assert hasattr(records, name) == (name in IMPLEMENTED), name
    checked = Counter(r["function"] for r in CHECKED)
    assert checked == {name: RECORDS_PER_FUNCTION[name] for name in IMPLEMENTED}


def _exact(value: object) -> bool:
    return isinstance(value, (int, Fraction))


@pytest.mark.parametrize("record", CHECKED, ids=lambda r: f"{r['function']}-{r['id']}")
def test_record_exactly(record):
    estimator = getattr(records, record["function"])
    result = estimator(record["args"], **record["extra_call_args"])
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
    assert len(REPORTS) == RECORDS_PER_FUNCTION["report_theoretical_memory"]


def _args(**changes):
    args = dict(next(r for r in CHECKED if r["config"]["model"] == "llama3_70b")["args"])
    args.update(changes)
    return args


@pytest.mark.parametrize("changes, field", [
    ({"num_layers": 0}, "num_layers"),
    ({"normalization": "BatchNorm"}, "normalization"),
    ({"num_experts": 8}, "moe_layer_freq"),
    ({"swiglu": "yes"}, "swiglu"),
    ({"swiglu": False, "group_query_attention": True, "num_query_groups": 8}, "num_query_groups"),
])
def test_bad_arguments_name_the_field(changes, field):
    with pytest.raises(ValueError, match=f"^{field}: "):
        records.compute_weight_and_optimizer_memory(_args(**changes))


def _record(function: str) -> dict:
    return next(r for r in RECORDS if r["function"] == function
                and r["config"]["model"] == "llama3_70b")


@pytest.mark.parametrize("function, changes, extra, field", [
    ("compute_activation_memory", {"seq_length": 0}, {}, "seq_length"),
    ("compute_activation_memory", {"ffn_hidden_size": None}, {}, "ffn_hidden_size"),
    ("compute_activation_memory_without_sp", {"virtual_pipeline_model_parallel_size": -2}, {},
     "virtual_pipeline_model_parallel_size"),
    ("compute_activation_memory_without_sp", {}, {"num_microbatches": 0}, "num_microbatches"),
    ("report_theoretical_memory", {"sequence_parallel": "yes"}, {}, "sequence_parallel"),
    ("report_theoretical_memory", {"hybrid_layer_pattern": "M*M*"}, {}, "hybrid_layer_pattern"),
    ("num_floating_point_operations", {"attention_output_gate": None}, {}, "attention_output_gate"),
    ("num_floating_point_operations", {"moe_latent_size": 64}, {}, "moe_latent_size"),
    ("num_floating_point_operations", {}, {"batch_size": 0}, "batch_size"),
    ("num_floating_point_operations", {}, {"seqlen_squared_sum_in_batch": -1},
     "seqlen_squared_sum_in_batch"),
])
def test_bad_arguments_of_the_other_estimators_name_the_field(function, changes, extra, field):
    record = _record(function)
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
