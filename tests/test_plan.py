"""derive.plan: the feasibility of each layout agrees with its exact per-layout accounts; the CLI."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from derive import stage_accounts, sweep
from derive.accounts import pipeline_split
from derive.accounts.activations import layer_activations
from derive.accounts.allocator import allocated_bytes
from derive.accounts.budget import usable_bytes
from derive.accounts.placement import placement_ledger
from derive.hf import from_config
from derive.plan import main
from derive.planning.ranking import REASONS
from derive.planning.search import plan
from derive.presets import model
from derive.symbols import BY_NAME, L, N, c, d, p, t, v

#: One worker runs this module under make test's --dist loadgroup: its module fixtures are built once.
pytestmark = pytest.mark.xdist_group("plan")

CONFIGS = Path(__file__).resolve().parents[1] / "derive" / "configs"

TOKENS_70B = 4 * 2**20


@pytest.fixture(scope="module")
def result():
    return plan(model("70b"), 1024, TOKENS_70B)


def _exact_memory(entry, row: dict[str, object]) -> int:
    """Most loaded rank's bytes by exact substitution, plus every request rounded one by one.

    Balanced: each rank's own layers, written out here: v ceil((L + 2) / (p v)) less the embedding's
    slot on rank 0 and the loss's on rank p - 1; rank 1 (p > 2) holds them all and no edge.
    """
    recompute, zero, balanced = str(row["recompute"]), int(row["zero"]), bool(row["balanced"])
    # ZeRO-2 and -3 are Megatron-FSDP's optim_grads and optim_grads_params placements
    placed = {0: "megatron", 1: "megatron", 2: "megatron-fsdp-optim-grads", 3: "megatron-fsdp-optim-grads-params"}[zero]
    terms = stage_accounts.accounts(entry.architecture, "llama-fused", recompute, placed, bool(zero), balanced=balanced)
    values = {**entry.values, **{BY_NAME[k]: int(row[k]) for k in ("b", "t", "p", "v", "c", "d", "m")}}
    at = {symbol: sp.Integer(value) for symbol, value in values.items()}
    pp, vv, mm = int(row["p"]), int(row["v"]), int(row["m"])
    if not balanced:
        return _rank_memory(terms, "first", terms.columns()["memory_per_gpu"], pipeline_split.STAGE_LAYERS,
                            pipeline_split.STAGE_LAYERS, placed, zero, recompute, at)
    per_chunk = -(-(entry.layers + 2) // (pp * vv))
    ranks = {"first": (0, vv * per_chunk - 1), "last": (pp - 1, vv * per_chunk - 1)}
    if pp > 2:
        ranks["middle"] = (1, vv * per_chunk)
    most = 0
    for rank, (index, layers) in ranks.items():
        warmup = pp - index - 1 if vv == 1 else 2 * (pp - index - 1) + (vv - 1) * pp  # schedules.py
        chunks = min(warmup + 1, mm * vv)
        # layer-micro-batches held: exact where every held chunk is the rank's one chunk or all of the
        # step's, or on the last rank at m = p (one loss chunk held); else ceil per chunk
        if vv == 1 or chunks == mm * vv:
            held = chunks * layers / vv
        else:
            held = chunks * per_chunk - (rank == "last" and mm == pp)
        states, activations = {L: pp * layers}, {L: sp.Rational(held * pp * vv, chunks)}
        total = terms.state(rank).xreplace(states) + terms.activation(rank).xreplace(activations)
        most = max(most, _rank_memory(terms, rank, total, states, activations, placed, zero, recompute, at))
    return most


def _rank_memory(terms, rank, total, states, activations, placed, zero, recompute, at):
    """``total`` at ``at`` plus the allocator's rounding of the rank's state buffers and held activations."""
    total = total.xreplace(at)
    stage = (terms.parameters["single"] if at[p] == 1 else terms.parameters[rank].xreplace(states)).xreplace(at)
    for buffer in placement_ledger(placed, bool(zero), d * c).where("resident"):  # dp x cp shards
        one = buffer.bytes.xreplace({N: stage}).xreplace(at)
        total += allocated_bytes(int(sp.ceiling(one - sp.Rational(1, 2)))) - one
    chunks = pipeline_split.stage_in_flight(rank).xreplace(at)
    held = (chunks * (L / (p * v)).xreplace(activations)).xreplace(at)
    for tensor in layer_activations("llama-fused", "fused", t, True, recompute):
        one = tensor.bytes.xreplace(stage_accounts.CONTEXT).xreplace(at)
        total += held * (allocated_bytes(int(one)) - one)
    return total


def test_feasibility_agrees_with_the_per_layout_accounts(result):
    c, entry = result.columns, result.model
    low, high = usable_bytes("h100")
    tight = result.tight()
    timed = np.flatnonzero(c["reason"] != "batch")
    rows = np.random.default_rng(7).choice(timed, size=30, replace=False)
    best = result.order()[:5]
    for index in (*rows, *best):
        row = {key: c[key][index] for key in c}
        exact = _exact_memory(entry, row)
        assert c["memory_per_gpu"][index] == pytest.approx(float(exact), rel=1e-12, abs=2)
        if row["reason"] in ("", "memory"):     # the default fit: at or under the high end, tight above low
            assert bool(row["feasible"]) == (exact <= high), row
            assert bool(tight[index]) == (low < exact <= high), row


def test_first_stage_states_by_hand(result):
    # t = 8, p = 2, v = 8, d = 64, distributed optimizer: 40 layers of Llama 3 70B on the first
    # stage, matrices over t, two RMSNorm scales replicated, the embedding over t; 6 + 12/64 bytes each.
    h, f, hkv, vocab = 8192, 28672, 1024, 128256
    matrices = 2 * h * h + 2 * h * hkv + 3 * h * f
    params = 40 * (matrices // 8 + 2 * h) + vocab * h // 8
    assert params == 4_410_179_584
    grid = sweep.grid(["70b"], t=[8], p=[2], v=[8], d=[64], zero=[1], tokens=TOKENS_70B)
    assert int(grid["state_bytes"][0]) * 64 == params * (6 * 64 + 12)
    # with c = 2, d = 32 the distributed optimizer shards over the 64 ranks of dp x cp, as Megatron's
    # intra_dp_cp_group (megatron/core/optimizer/__init__.py): the same 6 + 12/64 bytes
    grid = sweep.grid(["70b"], t=[8], p=[2], v=[8], d=[32], c=[2], zero=[1], tokens=TOKENS_70B)
    assert int(grid["state_bytes"][0]) * 64 == params * (6 * 64 + 12)


def test_the_top_layouts_fit_and_are_ranked_by_step_time(result):
    c = result.columns
    order = result.order()
    feasible = int(c["feasible"].sum())
    assert feasible > 0 and all(c["feasible"][order[:feasible]])
    ranked = result.ranked()
    times = c["step_time"][ranked]
    assert np.all(np.diff(times) >= 0)
    # equal predicted steps share a rank; the next distinct time takes the next rank; no rank unless it fits
    # and no variant of the same layout beats it
    ranks = result.ranks()
    assert ranks[order[0]] == 1 and np.all(ranks[order[ranked.size:]] == 0)
    steps = np.diff(ranks[ranked])
    assert np.array_equal(steps, (np.diff(times) > 1e-9 * times[1:]).astype(int))
    assert steps.sum() < ranked.size - 1    # some layouts are alike (c and b traded at equal tokens per GPU)
    assert sum(result.failures().values()) == len(order) - feasible


def test_every_layout_is_valid_and_accounted(result):
    c, entry = result.columns, result.model
    assert np.all(entry.heads % c["t"] == 0) and np.all(entry.kv_heads % c["t"] == 0)
    assert np.all(c["t"] * c["p"] * c["c"] * c["d"] == 1024)
    assert np.all(entry.seq % c["c"] == 0) and set(np.unique(c["c"])) == {1, 2, 4, 8, 16}
    assert np.all(c["p"] * c["v"] <= entry.layers + 2 * c["balanced"])
    assert np.all(c["balanced"][c["p"] == 1] == 0)
    whole = c["reason"] != "batch"
    assert np.all(c["m"][whole] * entry.seq * c["b"][whole] * c["d"][whole] == TOKENS_70B)
    assert set(np.unique(c["reason"])) <= {"", *REASONS}


#: A small plan (Llama 3 8B on 4 GPUs) whose layouts include each ZeRO stage and some that fit: the CLI's
#: output is checked on it in process, where the accounts the module's 70B plan compiled are reused.
SMALL = ["--model", "8b", "--gpus", "4", "--tokens", str(2**15)]


def test_json_lists_every_layout_with_its_fields(capsys):
    assert main([*SMALL, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["communication_modelled"] is True
    fields = {"t", "p", "v", "c", "d", "b", "m", "recompute", "zero", "balanced", "memory_per_gpu", "step_time",
              "breakdown", "feasible", "rank", "tight", "dominated", "reason"}
    assert data["layouts"] and all(set(layout) == fields for layout in data["layouts"])
    # a dominated variant fits but has no rank; every other fitting layout has one
    assert all((layout["rank"] is None) == (not layout["feasible"] or layout["dominated"]) for layout in data["layouts"])
    assert any(layout["feasible"] for layout in data["layouts"])
    assert {layout["zero"] for layout in data["layouts"]} == {0, 1, 2, 3}


def test_text_names_the_step_model_and_shows_breakdowns(capsys):
    assert main(SMALL) == 0
    out = capsys.readouterr().out
    assert "step time predicted by derive.accounts.prediction" in out
    assert "#1 breakdown (s): compute" in out
    assert "not ranked:" in out and "variants that another recompute / ZeRO choice of the same layout beats" in out


@pytest.mark.parametrize("argv, option", [
    (["--model", "7b", "--gpus", "8", "--tokens", "8192"], "--model"),
    (["--model", "8b", "--gpus", "0", "--tokens", "8192"], "--gpus"),
    (["--model", "8b", "--gpus", "8", "--tokens", "lots"], "--tokens"),
    (["--model", "8b", "--gpus", "8", "--tokens", "8192", "--profile", "fast"], "--profile"),
    (["--model", "8b", "--gpus", "8", "--tokens", "8192", "--gpu", "b200"], "--gpu"),
    (["--model", "8b", "--gpus", "8", "--tokens", "8192", "--mfu", "1.5"], "--mfu"),
    (["--gpus", "8", "--tokens", "8192"], "--model"),
    (["--model", "8b", "--gpus", "8", "--tokens", str(10**30)], "--tokens"),
    (["--model", "8b", "--gpus", str(10**12), "--tokens", "8192"], "--gpus"),
    (["--model", "8b", "--gpus", "8", "--tokens", "8192", "--seq", "-4"], "--seq"),
])
def test_bad_input_is_one_line_naming_the_option(argv, option, capsys):
    with pytest.raises(SystemExit) as exit_info:
        sys.exit(main(argv))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and option in err


def _qwen25_7b_parameters() -> int:
    """Qwen2.5-7B counted by hand: q/k/v with biases, o without, SwiGLU, two RMSNorms, untied head."""
    h, layers, heads, kv_heads, ffn, vocab = 3584, 28, 28, 4, 18944, 152064
    kv = kv_heads * h // heads
    layer = (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * ffn + 2 * h
    return layers * layer + 2 * vocab * h + h


def test_a_config_model_is_swept_with_its_own_table():
    """The qkv biases of a Qwen2 config reach the sweep (the Llama family table has none)."""
    entry = from_config(CONFIGS / "qwen2.5-7b.json")
    one = {name: np.array([1]) for name in ("b", "t", "p", "v", "d")}
    columns = sweep.evaluate(entry, {**one, "s": np.array([4096])}, names=["parameters"])
    assert int(columns["parameters"][0]) == _qwen25_7b_parameters() == 7_615_616_512


def test_plan_reads_a_config(capsys):
    assert main(["--config", str(CONFIGS / "qwen2.5-7b.json"), "--gpus", "4",
                 "--tokens", str(2**15), "--seq", "4096", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == "qwen2.5-7b" and data["seq"] == 4096
    assert any(layout["feasible"] for layout in data["layouts"])


@pytest.mark.parametrize("argv", [
    ["--config", str(CONFIGS / "mixtral-8x7b-v0.1.json")],   # MoE: its own accounts, never a dense guess
    ["--config", "no-such-config.json"],
    ["--config", str(CONFIGS / "qwen2.5-7b.json"), "--model", "8b"],
])
def test_bad_config_is_one_line_naming_config(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        sys.exit(main([*argv, "--gpus", "64", "--tokens", str(2**22)]))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--config" in err


def test_a_full_disk_is_one_line():
    """The planner shares the report's output handling: a full disk is one line and exit 2."""
    with open("/dev/full", "w") as full:
        # a small plan that fits (GPT-3 1.3B on one GPU): the report is written after planning
        result = subprocess.run([sys.executable, "-m", "derive.plan", "--model", "1.3b", "--gpus", "1",
                                 "--tokens", "8192"], stdout=full, stderr=subprocess.PIPE, text=True)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "derive.plan: error: stdout: cannot write the report (No space left on device)"]
