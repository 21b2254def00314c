"""DeepSpeed 0.19.8's ZeRO-2 / ZeRO-3 estimators (tests/reference/peers_deepspeed.json), reproduced by derive."""
import sympy as sp

from derive.accounts.host import GPUS_PER_NODE, host_peak_per_node
from derive.accounts.framework_placements import MODULE_PARAMS, SUB_GROUP_SIZE, ZERO3_DEFAULTS
from derive.accounts.placement import host_bytes, placement_bytes, transient_bytes
from derive.presets import MODELS
from derive.symbols import N, d
from peers_reference import reference, unreproduced

DATA = reference("deepspeed")


def _estimates(stage, model="llama3-70b"):
    return [r for r in DATA["records"] if r.get("stage") == stage and r["model"] == model]


def test_every_number_is_reproduced_or_explained_by_a_departure():
    checked, wrong = unreproduced("deepspeed")
    assert wrong == []
    assert checked == 1603       # 8 models x 9 layouts x (2 ZeRO-2 x 2 + 6 ZeRO-3 x 3) + 14 counts


def test_versions_are_the_pinned_ones():
    assert DATA["versions"]["deepspeed"] == "0.19.8"


def test_zero2_equals_the_placement_with_its_fp32_gradient_transient():
    # the measurement: 2N + 18N/d = resident 2N + 14N/d plus the fp32 copy of the partition
    for record in _estimates(2):
        kw = record["kwargs"]
        if kw["cpu_offload"]:
            continue
        ranks = kw["num_gpus_per_node"] * kw["num_nodes"]
        held = placement_bytes("deepspeed-zero2", sharded=True) + transient_bytes("deepspeed-zero2", sharded=True)
        assert record["result"]["gpu_mem"] == sp.floor(held.subs({N: kw["total_params"], d: ranks}))


def test_zero3_exceeds_the_resident_placement_by_2n_over_d_plus_4vh():
    llama = MODELS["llama3-70b"]
    vh = llama.vocab * llama.hidden
    checked = 0
    for record in _estimates(3):
        kw = record["kwargs"]
        ranks = kw["num_gpus_per_node"] * kw["num_nodes"]
        if kw["cpu_offload"] or 18 * kw["total_params"] % ranks:
            continue                               # (DeepSpeed's int() rounds the rest down)
        resident = placement_bytes("deepspeed-zero3", sharded=True).subs({N: kw["total_params"], d: ranks})
        assert record["result"]["gpu_mem"] - resident == sp.Rational(2 * kw["total_params"], ranks) + 4 * vh
        checked += 1
    assert checked == 18


def test_largest_layer_is_the_embedding_for_llama_3():
    counts = {r["model"]: r["result"] for r in DATA["records"] if "estimate" not in r["call"]}
    llama = MODELS["llama3-8b"]
    assert counts["llama3-8b"]["largest_layer_params"] == llama.vocab * llama.hidden   # 525,336,576
    assert counts["llama3-8b"]["total_params"] == llama.parameters


def test_zero3_sub_group_buffer_follows_its_knob():
    n, ranks = MODELS["llama3-8b"].parameters, 8
    sub_group = transient_bytes("deepspeed-zero3", sharded=True).subs({N: n, d: ranks, MODULE_PARAMS: 0})
    at_default = sub_group.subs(ZERO3_DEFAULTS)
    whole = sub_group.subs({**ZERO3_DEFAULTS, SUB_GROUP_SIZE: n})
    assert whole - at_default == 4 * (sp.Rational(n, ranks) - 10**9)   # N/d > 1e9: capped at sub_group_size


def test_offload_moves_the_optimizer_to_host_memory():
    assert placement_bytes("deepspeed-zero2-offload", sharded=True) == 2 * N
    assert host_bytes("deepspeed-zero2-offload", sharded=True) == 16 * N / d
    assert host_bytes("deepspeed-zero3-offload-params", sharded=True) == 18 * N / d
    assert host_bytes("deepspeed-zero3", sharded=True) == 0
    # before partitioning, each of G processes builds the fp32 model: DeepSpeed's 4 N G x 1.5 (no offload)
    record = next(r for r in _estimates(2) if not r["kwargs"]["cpu_offload"])
    kw = record["kwargs"]
    peak = host_peak_per_node("deepspeed-zero2").subs({N: kw["total_params"],
                                                       GPUS_PER_NODE: kw["num_gpus_per_node"]})
    assert record["result"]["cpu_mem"] == sp.Rational(3, 2) * peak
