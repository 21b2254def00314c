"""derive.plan_moe: the MoE candidate set against a brute-force enumeration, the expert memory by hand, the presets plan."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from derive.moe_presets import MOE_MODELS
from derive.plan import MICRO_BATCHES
from derive.plan_moe import moe_layouts, plan_moe
from derive.symbols import E, L, a, f_E, g

GPUS = 16


def _brute_force(entry, gpus: int) -> set[tuple]:
    """Every (t, p, e, t_E, d, b, zero) that divides, written out: t_E in {1, t}, t_E e | t d (c = 1)."""
    sizes = entry.values
    found = set()
    for t, p, e in itertools.product(range(1, gpus + 1), range(1, gpus + 1), range(1, sizes[E] + 1)):
        if sizes[a] % t or sizes[g] % t or gpus % (t * p) or p > sizes[L] or sizes[E] % e:
            continue
        d = gpus // (t * p)
        for etp in {1, t}:
            if sizes[f_E] % etp or (t * d) % (etp * e):
                continue
            for b, zero in itertools.product(MICRO_BATCHES, (0, 1)):
                found.add((t, p, e, etp, d, b, zero))
    return found


@pytest.mark.parametrize("name", ["mixtral-8x7b", "qwen3-30b-a3b"])
def test_candidates_are_exactly_the_brute_force_set(name):
    entry = MOE_MODELS[name]
    c = moe_layouts(entry, GPUS)
    planned = {tuple(int(c[k][i]) for k in ("t", "p", "e", "etp", "d", "b", "zero")) for i in range(c["t"].size)}
    assert len(planned) == c["t"].size
    assert planned == _brute_force(entry, GPUS)


def test_expert_states_shard_over_the_expert_data_parallel_group():
    # Mixtral 8x7B on 8 GPUs, t = p = 1, e = 8: the expert data-parallel group t d / (t_E e) is 1, so
    # ZeRO-1 shards only the 1,605,636,096 non-expert parameters (32 layers of attention 4096 x 6144 +
    # 4096 x 4096, router 4096 x 8, two norms; embedding and untied head 32000 x 4096; final norm)
    # over d = 8: 6 + 12/8 instead of 18 bytes each, every other term equal
    others = 32 * (4096 * 6144 + 4096 * 4096 + 4096 * 8 + 2 * 4096) + 2 * 32000 * 4096 + 4096
    assert others == 1_605_636_096
    result = plan_moe("mixtral-8x7b", 8, 8 * 32768)
    c = result.columns
    pick = (c["t"] == 1) & (c["p"] == 1) & (c["e"] == 8) & (c["b"] == 1)
    plain, sharded = (c["memory_per_gpu"][pick & (c["zero"] == zero)][0] for zero in (0, 1))
    assert plain - sharded == pytest.approx(others * (18 - 7.5), abs=1)


@pytest.mark.parametrize("name,gpus,tokens", [("mixtral-8x7b", 64, 64 * 32768),
                                               ("qwen3-30b-a3b", 64, 1024 * 4096),
                                               ("deepseek-v3", 2048, 15360 * 4096)])
def test_moe_presets_plan_and_rank_by_predicted_time(name, gpus, tokens):
    result = plan_moe(name, gpus, tokens)
    c, order = result.columns, result.order()
    feasible = int(c["feasible"].sum())
    assert feasible > 0
    assert np.all(c["e"][order[:feasible]] >= 1) and np.any(c["e"][c["feasible"]] > 1)
    times = c["step_time"][order[:feasible]]
    assert np.all(np.diff(times) >= 0) and np.all(np.isfinite(times))
    best = order[0]
    assert sum(c["breakdown"][best].values()) == pytest.approx(c["step_time"][best])
    low, high = result.usable    # fits under the high end; tight above the low end
    assert np.all(c["memory_per_gpu"][c["feasible"]] <= high)
    assert np.array_equal(result.tight(), c["feasible"] & (c["memory_per_gpu"] > low))
    assert np.all(c["memory_per_gpu"][c["reason"] == "memory"] > high)
    ranks = result.ranks()[order[:feasible]]
    assert ranks[0] == 1 and set(np.diff(ranks)) <= {0, 1}


def test_unknown_moe_model_names_the_field():
    with pytest.raises(ValueError, match="^model:"):
        plan_moe("mixtral-8x22b", 8, 8 * 4096)
