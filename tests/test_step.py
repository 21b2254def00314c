"""The step model: bubble, roofline and waves by hand, the ledger's rows, breakdowns that sum, overlap switches."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest

from derive.accounts.comm import collectives
from derive.accounts.prediction import ledger_rows, predict
from derive.accounts.schedule import DEFAULT_OVERLAP, bubble_fraction, pipeline_length, span
from derive.accounts.roofline import (
    achieved_flops,
    cast_bytes_per_element,
    pass_bytes,
    pass_seconds,
    wave_efficiency,
)
from derive.accounts.compute_time import fp8_cast_bytes
from derive.accounts.efficiency import Efficiency
from derive.recipes import RECIPES
from derive.hf import published_model
from derive.parallelism import Parallelism
from derive.presets import model
from derive.systems import system

H100, A100 = system("h100"), system("a100-80gb")
ETA = Efficiency(gemm=0.8, memory=0.9, network=0.8)


def test_bubble_by_hand():
    # Narayanan et al. 2021, 2.2: (p - 1)/(v m); Llama 3 405B at p = 16, v = 4, m = 16: 15/64
    assert bubble_fraction(16, 4, 16) == 15 / 64
    assert bubble_fraction(8, 1, 64) == 7 / 64
    assert pipeline_length(16, 4, 16) == 16 + 15 / 4


def test_rank_order_spans_by_hand():
    # the expert group on Megatron's expert grid: t_E e = 8 x 4 (t_E defaults to t)
    sizes = {"tp": 8, "cp": 2, "ep": 4, "dp": 16, "pp": 4}
    assert [span(g, sizes) for g in ("tp", "cp", "ep", "dp", "edp", "pp")] == [8, 16, 32, 256, 256, 1024]
    assert H100.link(span("tp", sizes)) == (450e9, H100.nvlink_latency)
    assert H100.link(span("cp", sizes))[0] == 50e9           # 16 GPUs: two HGX boards, over the NIC
    assert system("gb200").link(span("ep", sizes))[0] == 900e9  # 64 GPUs inside one NVL72 rack


def megatron_expert_group(rank: int, etp: int, ep: int) -> list[int]:
    """The expert-parallel group of ``rank`` on Megatron's expert grid, enumerated as its RankGenerator does.

    megatron/core/parallel_state.py: RankGenerator(tp=etp, ep=e, dp=edp, pp=p, cp=1), order tp-ep-dp-pp,
    so a rank is i_tp + etp (i_ep + e rest); the EP group varies i_ep with the others held.
    """
    i_tp, rest = rank % etp, rank // (etp * ep)
    return [i_tp + etp * (j + ep * rest) for j in range(ep)]


def test_expert_groups_span_megatrons_expert_grid():
    from collections import Counter
    from derive.accounts.comm_time import ranks_per_domain, remote_share
    # Qwen3-235B on 256 H100 at t = 2, t_E = 1, e = 32 (the held-out tables' layout): rank 40's EP group is
    # GPUs 32..63, eight on each of four HGX boards; the dense grid's t c e = 64 would put four on each of eight
    group = megatron_expert_group(40, 1, 32)
    assert group == list(range(32, 64))
    sizes = {"tp": 2, "cp": 1, "ep": 32, "etp": 1}
    assert span("ep", sizes) == 32 == max(group) - min(group) + 1
    boards = Counter(rank // 8 for rank in group)
    assert ranks_per_domain(32, span("ep", sizes), H100) == 8 == max(boards.values()) == min(boards.values())
    # a rank sends 24 of its 31 peers' shares over the NIC
    assert remote_share(32, span("ep", sizes), H100) == pytest.approx(24 / 31)
    # t_E = 2, e = 16: the group strides 2 GPUs over 32, four on each board
    group = megatron_expert_group(1, 2, 16)
    assert group == list(range(1, 32, 2)) and span("ep", {"tp": 4, "ep": 16, "etp": 2}) == 32
    assert ranks_per_domain(16, 32, H100) == 4 == max(Counter(rank // 8 for rank in group).values())


def test_wave_quantization_by_hand():
    # 2048 x 3072 output in 128 x 256 tiles: 16 x 12 = 192 tiles, two waves of 108 SMs = 216 slots
    assert wave_efficiency(2048, 3072, A100) == pytest.approx(192 / 216)
    # 100 x 100 in one tile: 10,000 of 128 x 256 x 108 slots
    assert wave_efficiency(100, 100, A100) == pytest.approx(100 * 100 / (128 * 256 * 108))


def test_roofline_by_hand():
    # one token's GEMM [1, 8192] x [8192, 8192] in bf16: intensity 2mnk / (2 (mk + kn + mn)) < 1 FLOP/byte
    m, n, k = 1, 8192, 8192
    intensity = 2 * m * n * k / (2 * (m * k + k * n + m * n))
    waves = wave_efficiency(1, 8192, H100)
    assert achieved_flops(m, n, k, "bf16", H100, 0.5) == pytest.approx(0.5 * intensity * 3.35e12 * waves)
    # a large square GEMM is compute-bound: eta x peak x waves
    big = achieved_flops(8192, 8192, 8192, "fp8", H100, 0.5)
    assert big == pytest.approx(0.5 * 1979e12 * wave_efficiency(8192, 8192, H100))


def test_pass_bytes_by_operand_dtype_by_hand():
    # forward [4096, 1024] x [1024, 2048] in FP8: operands one byte each, result BF16
    m, n, k = 4096, 2048, 1024
    assert pass_bytes(m, n, k, "forward", "fp8") == 4096 * 1024 + 1024 * 2048 + 2 * 4096 * 2048
    # the data gradient reads dC [m, n] and B^T [n, k], writes dA [m, k] in BF16
    assert pass_bytes(m, n, k, "dgrad", "bf16") == 2 * 4096 * 2048 + 2 * 2048 * 1024 + 2 * 4096 * 1024
    # the weight gradient reads A^T and dC, accumulates dB [k, n] into the FP32 main grad (read + write)
    assert pass_bytes(m, n, k, "wgrad", "fp8") == 1024 * 4096 + 4096 * 2048 + 8 * 1024 * 2048
    with pytest.raises(ValueError, match="pass"):
        pass_bytes(m, n, k, "backward", "fp8")


def test_skinny_expert_gemm_is_memory_bound_by_hand():
    # 16 tokens through a [2048, 768] expert in FP8 on an H100: 2 x 16 x 768 x 2048 FLOPs at 1979 TFLOP/s
    # take 25 ns; its bytes (16 x 2048 + 2048 x 768 + 2 x 16 x 768) at 3.35 TB/s take 485 ns
    m, n, k = 16, 768, 2048
    waves = wave_efficiency(m, n, H100)
    memory = (16 * 2048 + 2048 * 768 + 2 * 16 * 768) / 3.35e12
    assert memory > 2 * m * n * k / 1979e12
    assert pass_seconds(m, n, k, "forward", "fp8", H100, 0.5) == pytest.approx(memory / (0.5 * waves))


def test_fp8_cast_bytes_by_recipe_by_hand():
    # per element: current scaling reads BF16 twice (amax, then cast); delayed and MX once. Hopper's FP8
    # tensor cores are TN-only: a per-tensor cast writes the row-wise and the transposed copy; Blackwell
    # needs one; MXFP8 always writes both, each with one E8M0 (1 byte) scale per 32 elements
    assert cast_bytes_per_element(RECIPES["fp8-current"], "hopper") == 2 + 2 + 1 + 1
    assert cast_bytes_per_element(RECIPES["fp8-current"], "blackwell") == 2 + 2 + 1
    assert cast_bytes_per_element(RECIPES["fp8-delayed"], "hopper") == 2 + 1 + 1
    assert cast_bytes_per_element(RECIPES["mxfp8"], "blackwell") == 2 + 2 * (1 + 1 / 32)
    assert cast_bytes_per_element(RECIPES["fp8-blockwise"], "hopper") == 2 + 2 * (1 + 4 / 128)
    # a norm TE fuses into the linear layer writes the FP8 copies itself: no read left for delayed and
    # MX; current scaling's amax comes with the norm's BF16 output, the cast still reads it once
    assert cast_bytes_per_element(RECIPES["fp8-current"], "blackwell", norm_fused=True) == 2 + 1
    assert cast_bytes_per_element(RECIPES["fp8-delayed"], "hopper", norm_fused=True) == 1 + 1
    assert cast_bytes_per_element(RECIPES["mxfp8"], "blackwell", norm_fused=True) == 2 * (1 + 1 / 32)


def test_fp8_cast_bytes_of_a_layer_by_hand():
    # Llama 3 8B, t = 1, m micro-batches of T tokens: per layer the inputs of qkv (h), o (h), gate/up (h)
    # and down (f) once each, the output gradients of q, k, v, o, gate, up, down, and the weights / m;
    # the qkv and gate/up inputs come out of the fused norms (TELayerNormColumnParallelLinear): at 3 bytes
    # under current scaling (one BF16 read, one FP8 write on Blackwell), 2 x 33/32 under MXFP8
    from derive.accounts.step_layout import Layout
    from derive.accounts.workload import workload
    work = workload(model("llama3-8b"))
    h, f, g, L, T, m = 4096, 14336, 1024, 32, 8192, 4
    lay = Layout(1, 1, 1, 1, 1, 1, 1, 1, m, False, 1, "none", "fp8-current")
    inputs, fused = h + f, h + h
    gradients = h + g + g + h + f + f + h
    weights = h * h + 2 * h * g + h * h + 3 * h * f
    elements = L * (T * (inputs + gradients) + weights / m)
    assert fp8_cast_bytes(work, lay, T, system("b200")) == pytest.approx(elements * 5 + L * T * fused * 3)
    assert fp8_cast_bytes(work, replace(lay, precision="mxfp8"), T, system("b200")) == pytest.approx(
        (elements + L * T * fused) * 2 * 33 / 32 + elements * 2)


LAYOUTS = [
    (model("llama3-70b"), Parallelism(tp=4, pp=4, vp=5, cp=2, dp=2, global_batch=256, recompute="selective",
                                      sequence_parallel=True, zero=1)),
    (model("llama3-70b"), Parallelism(tp=8, dp=8, global_batch=64, recompute="full")),
    (model("gpt3-175b"), Parallelism(tp=8, pp=8, dp=2, global_batch=64, scatter_gather=True, recompute="full")),
    (published_model("qwen3-30b-a3b", seq=4096), Parallelism(tp=2, pp=2, ep=8, dp=8, global_batch=64,
                                                             sequence_parallel=True, zero=1)),
]


@pytest.mark.parametrize("entry, layout", LAYOUTS, ids=lambda x: getattr(x, "name", ""))
def test_compiled_rows_equal_the_ledger(entry, layout):
    exact = [(r.name, r.group, r.collective, float(r.ranks), float(r.sent), float(r.count))
             for r in collectives(entry, layout)]
    fast = [(r.name, r.group, r.collective, r.ranks, r.sent, r.count) for r in ledger_rows(entry, layout)]
    assert fast == exact


@pytest.mark.parametrize("entry, layout", LAYOUTS, ids=lambda x: getattr(x, "name", ""))
def test_breakdown_sums_to_the_step(entry, layout):
    result = predict(entry, layout, H100, eta=ETA)
    assert sum(result.breakdown.values()) == pytest.approx(result.step_time_s, rel=1e-12)
    assert set(result.breakdown) == {"compute", "recompute", "memory_bound", "tp", "cp", "ep", "bubble",
                                     "dp", "pp", "optimizer"}
    assert all(value >= 0 for value in result.breakdown.values())
    gpus = layout.gpus
    tokens = layout.global_batch * entry.seq
    assert result.tokens_per_s_per_gpu == pytest.approx(tokens / result.step_time_s / gpus)
    assert result.model_tflops_per_gpu * 1e12 == pytest.approx(result.mfu * 989e12)
    assert result.mfu_full_square > result.mfu and result.hfu >= result.mfu


def test_the_bubble_is_the_stage_time_times_p_minus_1_over_v():
    entry, layout = LAYOUTS[0]
    result = predict(entry, layout, H100, eta=ETA)
    per_micro = sum(result.breakdown[k] for k in ("compute", "recompute", "memory_bound", "tp", "cp", "ep"))
    m = layout.micro_batches
    assert result.breakdown["bubble"] == pytest.approx(per_micro / m * (4 - 1) / 5)


def test_overlap_rules_switch():
    entry = model("llama3-8b")
    layout = Parallelism(tp=2, dp=32, global_batch=32, sequence_parallel=True)
    default = predict(entry, layout, H100, eta=ETA)
    exposed = predict(entry, layout, H100, eta=ETA, overlap=DEFAULT_OVERLAP - {"dp-reduce-with-backward"})
    hidden = predict(entry, layout, H100, eta=ETA, overlap=DEFAULT_OVERLAP | {"tp-comm-overlap"})
    assert exposed.breakdown["dp"] > default.breakdown["dp"] > 0
    assert hidden.breakdown["tp"] < default.breakdown["tp"]
    with pytest.raises(ValueError, match="overlap"):
        predict(entry, layout, H100, eta=ETA, overlap={"magic"})


def test_moe_has_expert_all_to_all_and_fewer_flops_than_its_parameters():
    entry, layout = LAYOUTS[3]
    result = predict(entry, layout, H100, eta=ETA)
    assert result.breakdown["ep"] > 0
    dense_like = 6 * entry.parameters * layout.global_batch * entry.seq / result.step_time_s / layout.gpus
    assert result.model_tflops_per_gpu * 1e12 < dense_like / 5  # 8 of 128 experts per token


def test_fp8_runs_linear_layers_at_the_fp8_peak():
    entry, layout = LAYOUTS[0]
    bf16 = predict(entry, layout, H100, eta=ETA)
    fp8 = predict(entry, layout, H100, "fp8-current", eta=ETA)
    assert fp8.breakdown["compute"] < bf16.breakdown["compute"]
    assert fp8.breakdown["memory_bound"] > bf16.breakdown["memory_bound"]  # the casts
    assert fp8.mfu > bf16.mfu  # both against the bf16 peak
    with pytest.raises(ValueError, match="precision"):
        predict(entry, layout, A100, "mxfp8", eta=ETA)


def test_a_faster_link_never_slows_the_step():
    entry = model("llama3-70b")
    layout = Parallelism(tp=8, pp=2, dp=8, global_batch=64, sequence_parallel=True, zero=1)
    slow = predict(entry, layout, H100, eta=ETA)
    fast = predict(entry, layout, H100, eta=Efficiency(0.8, 0.9, 1.0))
    assert fast.step_time_s < slow.step_time_s
    assert math.isclose(fast.breakdown["compute"], slow.breakdown["compute"])


def test_all_to_all_remote_share_by_hand():
    from derive.accounts.comm_time import remote_share
    # 64 expert ranks over 64 consecutive H100s: 8 in the rank's HGX board, 56 of 63 peers remote
    assert remote_share(64, 64, H100) == pytest.approx(56 / 63)
    # 8 ranks strided by t = 8 over 64 GPUs: one per board, every peer remote
    assert remote_share(8, 64, H100) == 1.0
    assert remote_share(8, 8, H100) == 0.0 and remote_share(64, 64, system("gb200")) == 0.0


def test_ring_collectives_across_nvlink_domains_use_the_domains_nics_by_hand():
    from derive.accounts.comm_time import collective_seconds, ring_bandwidth
    from derive.accounts.prediction import Row
    gb200 = system("gb200")
    # a data-parallel group of d = 64 at t = 8 over 512 H100s: one rank per HGX board, one NIC (50 GB/s)
    assert ring_bandwidth(64, 512, H100) == 50e9
    # at t = 4 over 256 H100s: two ranks per board, two rings leave it through two NICs
    assert ring_bandwidth(64, 256, H100) == 2 * 50e9
    # at t = 1 over 64 H100s: eight per board, 8 x 50 = 400 GB/s, under NVLink's 450
    assert ring_bandwidth(64, 64, H100) == 400e9
    # at t = 2 over 128 GB200s: 64 x 72 / 128 = 36 ranks per NVL72 rack, 36 x 50 GB/s capped at NVLink's 900
    assert ring_bandwidth(64, 128, gb200) == 900e9
    assert ring_bandwidth(8, 8, H100) == 450e9  # inside one board
    # Llama 3.1 405B's FSDP parameter all-gather there (25.09's FP8-CS row): 4e11 bytes a rank, 63 ring steps,
    # 36 ranks in the first rack and 28 in the second: one of them crosses racks (NIC latency), 62 stay on NVLink
    sizes = {"tp": 2, "cp": 1, "ep": 1, "dp": 64, "pp": 1}
    gather = Row("dp.params", "dp", "all-gather", "forward", "forward", 64.0, 4e11, 1.0)
    assert float(collective_seconds(gather, sizes, gb200, ETA)) == pytest.approx(
        4e11 / (0.8 * 900e9) + 62 * 5e-6 + 1 * 10e-6)
    # a pipeline send is one rank to one rank: its own NIC, even where 16 stages over 128 GB200s put 9 in a rack
    send = Row("pp.send", "pp", "send-recv", "compute", "forward", 16.0, 1e9, 1.0)
    pipeline = {"tp": 8, "cp": 1, "ep": 1, "dp": 1, "pp": 16}
    assert float(collective_seconds(send, pipeline, gb200, ETA)) == pytest.approx(1e9 / (0.8 * 50e9) + 10e-6)


def test_gemm_efficiency_by_generation():
    # A100 is Ampere, H100 / H200 Hopper, B200 / GB200 Blackwell (which takes Hopper's constant)
    assert [system(name).generation for name in ("a100-40gb", "a100-80gb", "h100", "h200", "b200", "gb200")] == [
        "ampere", "ampere", "hopper", "hopper", "blackwell", "blackwell"]
    eta = Efficiency(gemm=0.8, memory=0.9, network=0.8, gemm_hopper=0.6)
    assert [eta.gemm_for(system(name)) for name in ("a100-80gb", "h100", "h200", "b200", "gb200")] == [
        0.8, 0.6, 0.6, 0.6, 0.6]
    assert ETA.gemm_for(H100) == 0.8  # no Hopper constant: Ampere's for every generation
    # compute-bound: 8192 x 8192 x 8192 on an H100 fills whole waves (64 x 32 tiles = 2048 of 16 x 132)
    assert achieved_flops(8192, 8192, 8192, "bf16", H100, eta.gemm_for(H100)) == pytest.approx(
        0.6 * 989e12 * 2048 / (16 * 132))
    entry = model("llama3-70b")
    layout = Parallelism(tp=8, pp=2, dp=8, global_batch=64, sequence_parallel=True, zero=1)
    ampere_rate = predict(entry, layout, H100, eta=ETA)
    hopper_rate = predict(entry, layout, H100, eta=eta)
    assert hopper_rate.breakdown["compute"] == pytest.approx(ampere_rate.breakdown["compute"] * 0.8 / 0.6, rel=1e-2)
    assert predict(entry, layout, A100, eta=eta).step_time_s == predict(entry, layout, A100, eta=ETA).step_time_s


def test_flash_attention_pass_keeps_the_score_tile_on_chip_by_hand():
    # QK^T of one head at s = 8192, d = 128 on a B200: 2 s^2 d FLOPs at 2,250 TFLOP/s take 7.6 us; a
    # materialised kernel also writes the [s, s] scores in BF16 (2 s^2 bytes) and reads Q and K^T
    # (2 x 2 s d) at 8 TB/s: 17.2 us, memory-bound (intensity ~ d / (1 + 2 d / s) < ridge 281 FLOP/byte)
    b200, s_, d_ = system("b200"), 8192, 128
    waves = wave_efficiency(s_, s_, b200, 32)
    flops_s = 2 * s_ * s_ * d_ / 2250e12
    bytes_s = (2 * s_ * s_ + 2 * 2 * s_ * d_) / 8000e9
    assert bytes_s > flops_s
    assert pass_seconds(s_, s_, d_, "forward", "bf16", b200, 0.5, batch=32) == pytest.approx(
        32 * bytes_s / (0.5 * waves))
    # flash (Dao et al. 2022): the score tile stays in SRAM, the pass is compute-bound
    assert pass_seconds(s_, s_, d_, "forward", "bf16", b200, 0.5, batch=32, on_chip=True) == pytest.approx(
        32 * flops_s / (0.5 * waves))


def test_attention_kernel_by_family():
    # Korthikanti's and Narayanan's GPT runs materialised the scores; Llama-style layers and MoE
    # presets run TE's fused (flash) attention
    from derive.accounts.workload import workload
    from derive.names import named_model
    assert workload(model("gpt3-175b")).attention_kernel == "materialised"
    assert workload(model("llama3-8b")).attention_kernel == "fused"
    assert workload(named_model("qwen3-30b-a3b", moe=True)[0]).attention_kernel == "fused"


def test_flash_attention_costs_only_its_flops_in_the_step():
    # Llama 3 8B at t = 1 on one H100, micro-batch 1 (s = 8192): per layer the two score GEMMs (QK^T, PV)
    # are 2 x 2 s^2 d a / 2 causal FLOPs forward, twice that backward; at eta x peak x waves
    from derive.accounts.compute_time import compute_per_micro_batch
    from derive.accounts.step_layout import Layout
    from derive.accounts.workload import workload
    work = workload(model("llama3-8b"))
    lay = Layout(1, 1, 1, 1, 1, 1, 1, 1, 1, False, 0, "none", "bf16")
    seconds = compute_per_micro_batch(work, lay, H100, ETA)["attention"]
    s_, d_, heads, layers = 8192, 128, 32, 32
    per_pass = [wave_efficiency(s_, s_, H100, heads / 2), wave_efficiency(s_, d_, H100, heads / 2),  # forward
                wave_efficiency(s_, d_, H100, heads / 2), wave_efficiency(s_, s_, H100, heads / 2),  # dgrad
                wave_efficiency(d_, s_, H100, heads / 2), wave_efficiency(s_, d_, H100, heads / 2)]  # wgrad
    flops = 2 * s_ * s_ * d_ * heads / 2
    hand = layers * sum(flops / (989e12 * 0.8 * waves) for waves in per_pass)
    assert float(seconds) == pytest.approx(hand, rel=1e-9)


def test_ep_all_to_all_across_nodes_hides_behind_the_other_micro_batch():
    # Qwen3-30B-A3B at e = 32 over 32 H100s (four HGX boards): the dispatch / combine leave the NVLink
    # domain, so the default rule (Megatron-Bridge's moe_a2a_overlap on H100) hides each behind the other
    # micro-batch's computation Megatron pairs it with; at e = 8 (one board) they stay exposed
    from derive.accounts.comm_time import ep_overlap_window
    from derive.accounts.compute_time import compute_per_micro_batch
    from derive.accounts.step_layout import Layout
    from derive.accounts.workload import workload
    entry = published_model("qwen3-30b-a3b", seq=4096)
    across = Parallelism(ep=32, dp=32, global_batch=64, zero=1)
    inside = Parallelism(ep=8, dp=32, global_batch=64, zero=1)
    off = DEFAULT_OVERLAP - {"ep-a2a-overlap-across-nodes"}
    ep_exposed = predict(entry, across, H100, eta=ETA, overlap=off).breakdown["ep"]
    ep_hidden = predict(entry, across, H100, eta=ETA).breakdown["ep"]
    lay = Layout(1, 1, 1, 1, 32, 32, 1, 1, 2, False, 1, "none", "bf16")
    compute = compute_per_micro_batch(workload(entry), lay, H100, ETA)
    window = sum(float(compute[k]) for k in ("linear", "expert", "attention", "head", "recompute", "memory_bound"))
    assert float(ep_overlap_window(lay, H100, compute, DEFAULT_OVERLAP)) == pytest.approx(window)
    # one all-to-all of one layer by hand: 4096 tokens x 8 copies x 2048 x 2 B, 31/32 of it to the peers; the group
    # (32 GPUs on Megatron's expert grid) has 8 ranks a board, so 24 of the 31 peers are over the NIC (50 GB/s)
    sent = 4096 * 8 * 2048 * 2 * 31 / 32
    a2a = max(24 / 31 * sent / 50e9, 7 / 31 * sent / 450e9) / 0.8 + H100.nic_latency
    assert ep_exposed == pytest.approx(2 * 48 * 4 * a2a, rel=1e-9)  # m = 2 micro-batches, 48 MoE layers
    # Megatron's per-layer schedule (model_chunk_schedule_plan.py, TransformerLayerSchedulePlan.run; one event
    # per micro-batch, pipeline_parallel/utils.py ScheduleNode), simulated node by node: comm stream C_b, D_f, D_b,
    # C_f; compute stream A_f, M_b (data gradient, then the weight gradient outside the event: the recipes'
    # delay_wgrad_compute), M_f, A_b; each node after its stream's previous node and its micro-batch's
    gemm = float(compute["linear"] + compute["attention"] + compute["expert"])
    scale = 1 + float(compute["memory_bound"]) / gemm  # the element-wise seconds over the pieces by GEMM share
    side_b = float(compute["backward"] - compute["backward expert"] - compute["backward head"])
    a_f, a_b = (float(compute["linear"] + compute["attention"]) - side_b) / 48 * scale, side_b / 48 * scale
    m_w = float(compute["wgrad expert"]) / 48 * scale
    m_d = float(compute["backward expert"]) / 48 * scale - m_w
    m_f = float(compute["expert"]) / 48 * scale - m_d - m_w
    assert 0 < m_w < m_d + m_w and m_f > 0
    c_b = a2a                          # comm: starts at 0
    f_a = a_f                          # compute: starts at 0
    f_md = max(c_b, f_a) + m_d         # compute: after A_f (stream) and C_b (its micro-batch)
    f_mw = f_md + m_w                  # compute: after M_d on the stream, no event
    c_df = max(f_a, c_b) + a2a         # comm: after C_b (stream) and A_f (its micro-batch)
    c_db = max(c_df, f_md) + a2a       # comm: after D_f (stream) and M_d (its micro-batch)
    f_mf = max(f_mw, c_df) + m_f       # compute: after M_w (stream) and D_f (its micro-batch)
    end = max(max(c_db, f_mf) + a2a, max(f_mf, c_db) + a_b)  # C_f after D_b and M_f; A_b after M_f and D_b
    pair = end - (a_f + a_b + m_f + m_d + m_w)
    # each transfer outlasts the computation beside it even on the SMs the dispatcher leaves (20 of 132), so
    # sharing the SMs costs nothing here (test_ep_overlap_shares_the_sms_by_hand prices it where it binds)
    assert max(a_f, a_b) + a2a * 20 / 132 < a2a and m_f + m_d + m_w + 2 * a2a * 20 / 132 < 2 * a2a
    assert ep_hidden == pytest.approx(2 * 48 * pair, rel=1e-9)
    # the pairing hides less than the whole micro-batch would, and never more than the all-to-alls take
    assert max(0.0, ep_exposed - 2 * window) < ep_hidden < ep_exposed
    assert predict(entry, inside, H100, eta=ETA).breakdown["ep"] == predict(
        entry, inside, H100, eta=ETA, overlap=off).breakdown["ep"] > 0
    # Megatron refuses the overlap under full recompute, and with p > 1 without interleaving
    assert float(ep_overlap_window(replace(lay, recompute="full"), H100, compute, DEFAULT_OVERLAP)) == 0.0
    assert float(ep_overlap_window(replace(lay, p=2), H100, compute, DEFAULT_OVERLAP)) == 0.0
    assert float(ep_overlap_window(replace(lay, p=2, v=2), H100, compute, DEFAULT_OVERLAP)) == pytest.approx(window)


def test_ep_overlap_shares_the_sms_by_hand():
    # one MoE layer pair of Megatron's EP overlap with the stage's seconds per micro-batch over 48 MoE layers:
    # A_f 1, A_b 2, M_f 2, M_d 2, M_w 2 ms a layer; the dispatcher holds 20 of an H100's 132 SMs while it runs
    from derive.accounts.comm_time import DISPATCHER_SMS, ep_paired_seconds
    from derive.accounts.workload import workload
    work = workload(published_model("qwen3-30b-a3b", seq=4096))
    assert work.layers == work.moe_layers == 48 and DISPATCHER_SMS == 20
    ms = 1e-3
    compute = {"layers": 48, "linear": 48 * 2 * ms, "attention": 48 * 1 * ms, "expert": 48 * 6 * ms, "head": 0.0,
               "recompute": 0.0, "memory_bound": 0.0, "backward": 48 * (2 + 4) * ms, "backward expert": 48 * 4 * ms,
               "backward head": 0.0, "wgrad expert": 48 * 2 * ms}
    steps = [(step, pass_) for step in ("dispatch", "combine") for pass_ in ("forward", "backward")]
    # computation outlasts every transfer: each transfer hides, but the computation beside it loses 20/132 of
    # the SMs for as long as it runs: the four transfers' 2 ms x 20 / 132 exposed
    short = dict.fromkeys(steps, 0.5 * ms)
    assert ep_paired_seconds(short, work, compute, 132) == pytest.approx(4 * 0.5 * ms * 20 / 132, rel=1e-9)
    # transfers of 5 ms outlast every piece: combine_bwd 5 (A_f beside it), the dispatches
    # max(max(5, 2) + 5, max(5, 2 + 2) + 2) = 10 (the experts' 6 ms beside them), combine_fwd 5 (A_b beside it):
    # 20 ms for 9 ms of computation
    long = dict.fromkeys(steps, 5 * ms)
    assert ep_paired_seconds(long, work, compute, 132) == pytest.approx(11 * ms, rel=1e-9)


def test_moe_dispatcher_permutations_by_hand():
    # Qwen3-30B-A3B: h = 2048, k_E = 8 of E = 128 experts in all 48 layers. Per token per MoE layer, forward:
    # permute 2 k h (k copies read and written), unpermute (k + 1) h (k read, the weighted sum written),
    # and with more than one local expert the two chunk sorts 2 x 2 k h; the backward the same again
    from derive.accounts.compute_time import routing_elements
    from derive.accounts.step_layout import Layout
    from derive.accounts.workload import workload
    work = workload(published_model("qwen3-30b-a3b", seq=4096))
    lay = Layout(1, 1, 1, 1, 8, 8, 1, 1, 1, False, 1, "none", "bf16")
    h, k = 2048, 8
    assert routing_elements(work, lay) == 2 * (2 * k * h + (k + 1) * h + 4 * k * h) == 233472
    assert routing_elements(work, replace(lay, e=128)) == 2 * (2 * k * h + (k + 1) * h)  # one expert a rank
    assert routing_elements(work, replace(lay, recompute="full")) == 3 * 116736          # the forward once more
    # DeepSeek-V3: 58 MoE layers of 61, the average layer carries 58/61 of one
    deepseek = workload(published_model("deepseek-v3", seq=4096))
    h, k = 7168, 8
    assert routing_elements(deepseek, lay) == pytest.approx(2 * (6 * k * h + (k + 1) * h) * 58 / 61)
    assert routing_elements(workload(model("llama3-8b")), lay) == 0.0


def test_the_glu_clamp_follows_the_configs_swiglu_limit():
    # the eager clamp is the config's, not a model name's: GPT-OSS without swiglu_limit runs none, Qwen3-30B-A3B
    # given one runs it; a limit that is no positive number is refused naming the field
    import json

    from derive.accounts.workload import workload
    from derive.hf import CONFIGS, from_config
    gpt_oss = json.loads((CONFIGS / "gpt-oss-120b.json").read_text())
    qwen = json.loads((CONFIGS / "qwen3-30b-a3b.json").read_text())
    assert gpt_oss["swiglu_limit"] == 7.0 and "swiglu_limit" not in qwen
    assert from_config(gpt_oss, seq=4096).layout.glu_limit == 7.0
    unclamped = {key: value for key, value in gpt_oss.items() if key != "swiglu_limit"}
    assert not workload(from_config(unclamped, seq=4096)).clamped_glu
    assert workload(from_config({**qwen, "swiglu_limit": 10}, seq=4096)).clamped_glu
    for bad in (0, -1, "7", True):
        with pytest.raises(ValueError, match="swiglu_limit: must be a positive number"):
            from_config({**gpt_oss, "swiglu_limit": bad}, seq=4096)


def test_moe_expert_eager_bias_and_clamp_kernels_by_hand():
    # GPT-OSS 120B: h = 2880, k_E = 4 of E = 128 experts in all 36 layers, a bias on each expert's down_proj
    # (Megatron's linear_fc2, skip_bias_add=True): TEGroupedMLP._apply_bias runs t + b * p and torch.cat eagerly.
    # Per token per MoE layer, in units of its k h expert-output elements: forward b * p writes 1, the add reads 2
    # and writes 1, the cat reads 1 and writes 1 (6); backward grad * p and grad * b each read 2 (the product, then
    # its sum) and write 1 (6). The dispatcher's kernels as for Qwen3 (two local experts at e = 64: the sorts run)
    from derive.accounts.compute_time import routing_elements
    from derive.accounts.step_layout import Layout
    from derive.accounts.workload import workload
    work = workload(published_model("gpt-oss-120b", seq=4096))
    assert work.expert_output_bias
    for other in ("qwen3-30b-a3b", "deepseek-v3"):
        assert not workload(published_model(other, seq=4096)).expert_output_bias
        assert not workload(published_model(other, seq=4096)).clamped_glu
    lay = Layout(1, 1, 1, 1, 64, 64, 1, 4, 5, False, 1, "none", "bf16")
    h, k = 2880, 4
    dispatch = 2 * k * h + (k + 1) * h + 4 * k * h
    # GPT-OSS's recipe also clamps the GLU input (activation_func_clamp_value = 7.0): per routed copy of f_E = 2880
    # per half, forward two clamps (read and write a half each) and a cat (read both halves, write both): 8 f;
    # backward two clamp gradients (read the gradient and the input, write a half) and the chunk's gradient
    # (read both halves, write both): 10 f
    f = 2880
    assert (work.expert_ffn, work.clamped_glu) == (f, True)
    bias, clamp = 12 * k * h, 18 * k * f
    assert routing_elements(work, lay) == 2 * dispatch + bias + clamp == 512640
    # a full recompute runs the forward kernels once more, the backward ones once
    assert routing_elements(work, replace(lay, recompute="full")) == (
        3 * dispatch + (2 * 6 + 6) * k * h + (2 * 8 + 10) * k * f) == 757440
    assert routing_elements(replace(work, clamped_glu=False), lay) == 2 * dispatch + bias == 305280
    # at BF16 on 16,384 tokens a rank, 36 layers: the bias 163 GB a micro-batch, 23.7 ms at 0.86 x 8 TB/s (GB300)
    bias_bytes = bias * 2 * 16384 * 36
    assert bias_bytes == pytest.approx(163.1e9, rel=1e-3)
    assert bias_bytes / (0.86 * 8e12) == pytest.approx(23.7e-3, rel=2e-3)
    # and the step model's element-wise seconds of a GB300 micro-batch grow by exactly the two, nothing else moves
    from derive.accounts.compute_time import compute_per_micro_batch
    eta = Efficiency(gemm=0.77, memory=0.86, network=0.77, gemm_hopper=0.57)
    with_bias = compute_per_micro_batch(work, lay, system("gb300"), eta)
    without = compute_per_micro_batch(replace(work, expert_output_bias=False, clamped_glu=False), lay,
                                      system("gb300"), eta)
    eager_bytes = (bias + clamp) * 2 * 16384 * 36
    assert with_bias["memory_bound"] - without["memory_bound"] == pytest.approx(eager_bytes / (0.86 * 8e12), rel=1e-9)
    assert {kind: value for kind, value in with_bias.items() if kind != "memory_bound"} == {
        kind: value for kind, value in without.items() if kind != "memory_bound"}


def test_moe_router_runs_in_bf16_under_fp8():
    # Megatron's router is a plain parameter outside fp8_autocast: the same seconds under fp8-current as
    # under bf16, while the experts' GEMMs run at the FP8 peak
    from derive.accounts.compute_time import _gemm_seconds
    from derive.accounts.step_layout import Layout
    from derive.accounts.workload import workload
    work = workload(published_model("qwen3-30b-a3b", seq=4096))
    router = next(row for row in work.rows if row.kind == "router")
    expert = next(row for row in work.rows if row.kind == "expert")
    assert router.name == "mlp.gate.weight" and (router.n, router.k) == (128, 2048)
    bf16 = Layout(1, 1, 1, 1, 8, 8, 1, 1, 1, False, 1, "none", "bf16")
    fp8 = replace(bf16, precision="fp8-current")
    assert _gemm_seconds(router, work, fp8, H100, ETA, 4096) == _gemm_seconds(router, work, bf16, H100, ETA, 4096)
    assert _gemm_seconds(expert, work, fp8, H100, ETA, 4096)[0] < _gemm_seconds(expert, work, bf16, H100, ETA, 4096)[0]


def test_ring_attention_merge_bytes_by_hand():
    # Llama 3 405B, one layer per token: Q and the attention output 128 heads x 128 x 2 B = 32768 B, K and V
    # 2 x 8 x 128 x 2 B = 4096 B. TE's ring (AttnFuncWithCPAndKVP2P) at c = 4: the output rescaled at step 0
    # (read 1, write 1) and merged at 3 later steps (read 2, write 1): 2 + 9 = 11 moves; dQ the same; K/V into
    # the ring buffer (2), dK/dV copied at step 0 (2) and added at 3 steps (9): 13 moves
    from derive.accounts.compute_time import ring_merge_bytes
    from derive.accounts.step_layout import Layout
    from derive.accounts.workload import workload
    work = workload(model("llama3-405b"))
    assert work.ring_bytes == (32768.0, 4096.0, 32768.0)
    lay = Layout(4, 16, 8, 4, 1, 64, 4, 1, 32, True, 1, "none", "bf16", True)
    assert ring_merge_bytes(work, lay) == 11 * 32768 + 11 * 32768 + 13 * 4096 == 774144
    # selective recompute re-runs core attention and its forward merge: 11 x 32768 more
    assert ring_merge_bytes(work, replace(lay, recompute="selective")) == 774144 + 11 * 32768
    assert ring_merge_bytes(work, replace(lay, c=1)) == 0
    assert ring_merge_bytes(work, replace(lay, cp_comm="all_gather")) == 0


def test_ring_attention_merges_are_element_wise_time_by_hand():
    # Llama 3 8B, t = p = 1, c = 2, m = 4: the p2p ring's merges over all 32 layers of 4096 tokens per micro-batch,
    # at eta_memory x HBM bandwidth; q, out 32 x 128 x 2 B = 8192 B, K and V 2 x 8 x 128 x 2 B = 4096 B:
    # out 2 + 3, dQ 2 + 3, K/V 2 + 2 + 3 moves
    entry = model("llama3-8b")
    ring = Parallelism(cp=2, dp=4, global_batch=16)
    gathered = replace(ring, cp_comm="all_gather")
    merged = predict(entry, ring, H100, eta=ETA).breakdown["memory_bound"]
    plain = predict(entry, gathered, H100, eta=ETA).breakdown["memory_bound"]
    per_token = 5 * 8192 + 5 * 8192 + 7 * 4096
    assert math.isclose(merged - plain, 4 * 4096 * 32 * per_token / (0.9 * H100.hbm_bandwidth), rel_tol=1e-9)
