"""A collective's latency per NCCL call (NCCL's ring model), the calls a data-parallel row is issued in, and what
context parallel's ring leaves exposed per pass: each against numbers worked out by hand."""
from __future__ import annotations

from dataclasses import replace

import pytest

from derive.accounts.comm_time import call_latency, collective_seconds, ring_exposed
from derive.accounts.efficiency import Efficiency
from derive.accounts.prediction import ledger_rows
from derive.accounts.schedule import data_parallel_calls
from derive.accounts.step_layout import Layout
from derive.parallelism import Parallelism
from derive.presets import model
from derive.systems import system

H100 = system("h100")
NVLINK, NIC = 5e-6, 10e-6  # derive.systems' per-step latencies (H100.nvlink_latency, H100.nic_latency)
ETA = Efficiency(gemm=0.8, memory=0.9, network=0.8)


def test_the_latencies_are_the_systems_table_s():
    assert (H100.nvlink_latency, H100.nic_latency) == (NVLINK, NIC)


def test_call_latency_follows_nccls_ring_model_by_hand():
    # NCCL tuning.cc: (nsteps - nInterSteps) x intraLat + nInterSteps x interLat
    # t = 8 all-gather inside one HGX board: 7 steps, none leaves the board
    assert call_latency("all-gather", 8, 8, H100) == pytest.approx(7 * NVLINK)
    # d = 128 at t = 8 (one rank a board, 1,024 GPUs): each of the 127 steps crosses to the next board
    assert call_latency("reduce-scatter", 128, 1024, H100) == pytest.approx(127 * NIC)
    # ZeRO-3 over d c = 8,192 ranks at t = 2 (16,384 GPUs): 4 ranks a board, 2,048 boards, 2,047 crossings
    assert call_latency("all-gather", 8192, 16384, H100) == pytest.approx(6144 * NVLINK + 2047 * NIC)
    assert 6144 * NVLINK + 2047 * NIC == pytest.approx(51.19e-3)
    # an all-reduce makes two passes: 2 x 255 steps over 128 boards of 2 ranks, 2 x 127 crossings
    assert call_latency("all-reduce", 256, 1024, H100) == pytest.approx(256 * NVLINK + 254 * NIC)
    # a pipeline send is one step on the link its group spans
    assert call_latency("send-recv", 16, 16 * 8, H100) == pytest.approx(NIC)
    assert call_latency("send-recv", 2, 8, H100) == pytest.approx(NVLINK)


def test_data_parallel_calls_by_hand():
    # Megatron DDP / distributed optimizer: buckets of max(40M, 1M x dp) parameters
    assert data_parallel_calls(6.33e9, 256, 1, 8) == 25  # 6.33e9 / 256e6 = 24.7
    assert data_parallel_calls(100e6, 8, 0, 32) == 3  # 40M buckets: 40 + 40 + 20
    assert data_parallel_calls(10e6, 8, 1, 32) == 1
    # Megatron-FSDP / FSDP2: one call per transformer layer (FSDP unit) on the rank
    assert data_parallel_calls(6.33e9, 256, 2, 8) == 8
    assert data_parallel_calls(202e9, 8192, 3, 126) == 126


def test_a_zero3_gather_over_thousands_of_ranks_pays_its_latency_per_layer():
    # Llama 3 405B at t 2, p 1, c 4, d 2,048, ZeRO-3 on 16,384 H100s: the forward gather is 126 calls (one per layer),
    # each of 6,144 NVLink steps and 2,047 crossings
    entry = replace(model("405b"), seq=8192)
    layout = Parallelism(tp=2, pp=1, cp=4, dp=2048, zero=3, micro_batch=1, global_batch=2048, sequence_parallel=True)
    gather = next(row for row in ledger_rows(entry, layout) if row.name == "dp.params.forward.all-gather")
    assert gather.ranks == 8192
    sizes = {"tp": 2, "cp": 4, "ep": 1, "dp": 2048, "pp": 1}
    one, per_layer = (float(collective_seconds(gather, sizes, H100, ETA, calls)) for calls in (1, 126))
    assert per_layer - one == pytest.approx(125 * (6144 * NVLINK + 2047 * NIC))
    assert per_layer - one > 6.0  # seconds a step: more than the step's whole compute


def _layout(c: int, recompute: str = "none") -> Layout:
    return Layout(4, 16, 8, c, 1, 64, 4, 1, 32, True, 1, recompute, "bf16")


def test_the_context_ring_hides_each_pass_behind_its_own_attention_by_hand():
    # 3 ms of attention a micro-batch, 2 of them backward; c = 4: the forward's K/V behind (c - 1)/c of the
    # forward's attention (its last step hides nothing), the backward's K/V and dK/dV behind all of the backward's
    compute = {"attention": 3e-3, "attention_backward": 2e-3}
    # forward: 0.9 ms behind 0.75 x 1 ms -> 0.15 ms exposed; backward: 2.4 ms behind 2 ms -> 0.4 ms
    assert ring_exposed(0.9e-3, 2.4e-3, _layout(4), compute, True) == pytest.approx(0.15e-3 + 0.4e-3)
    # pooled over both passes (3.3 ms behind 3 ms) it had been 0.3 ms
    assert max(0.0, 3.3e-3 - 3e-3) == pytest.approx(0.3e-3)
    # backward hidden: 1.2 ms behind 2 ms
    assert ring_exposed(0.9e-3, 1.2e-3, _layout(4), compute, True) == pytest.approx(0.15e-3)
    # c = 2: half of the forward hides: 0.9 - 0.5
    assert ring_exposed(0.9e-3, 1.2e-3, _layout(2), compute, True) == pytest.approx(0.4e-3)
    # a recomputed forward runs the ring again beside its rerun attention: 1.8 ms behind 2 x 0.75 ms
    assert ring_exposed(1.8e-3, 1.2e-3, _layout(4, "selective"), compute, True) == pytest.approx(0.3e-3)
    # the rule off: every transfer exposed
    assert ring_exposed(0.9e-3, 1.2e-3, _layout(4), compute, False) == pytest.approx(2.1e-3)
