"""Caching-allocator rounding on hand-computed requests (c10/cuda/CUDACachingAllocator.cpp)."""
import pytest

from derive.accounts.allocator import (
    ALLOCATOR_CONSTANTS,
    allocated_bytes,
    ledger_allocation,
    ledger_segments,
    pool,
    rounded_bytes,
    segment_bytes,
)
from derive.render.sections.budget import rounding_comparison
from derive.symbols import L, h
from derive.tensors import Ledger, Tensor

MiB = 2**20


def test_constants_as_declared_in_pytorch():
    values = {name: constant.value for name, constant in ALLOCATOR_CONSTANTS.items()}
    assert values == {"kMinBlockSize": 512, "kSmallSize": 1048576, "kSmallBuffer": 2097152,
                      "kLargeBuffer": 20971520, "kMinLargeAlloc": 10485760,
                      "kRoundLarge": 2097152}
    assert all("AllocatorConfig.h" in c.source for c in ALLOCATOR_CONSTANTS.values())


@pytest.mark.parametrize("request_bytes, block, segment, which", [
    (1, 512, 2 * MiB, "small"),
    (512, 512, 2 * MiB, "small"),
    (513, 1024, 2 * MiB, "small"),
    (1 * MiB, 1 * MiB, 2 * MiB, "small"),                    # kSmallSize is still small
    (1 * MiB + 1, 1 * MiB + 512, 20 * MiB, "large"),         # large pool, 20 MiB segment
    (9 * MiB, 9 * MiB, 20 * MiB, "large"),                   # under kMinLargeAlloc
    (10 * MiB - 1, 10 * MiB, 10 * MiB, "large"),             # rounded to 10 MiB first
    (10 * MiB, 10 * MiB, 10 * MiB, "large"),                 # kMinLargeAlloc: own segment
    (10 * MiB + 1, 10 * MiB + 512, 12 * MiB, "large"),       # segment rounded to 2 MiB; tail split off
    (11 * MiB + 1, 12 * MiB, 12 * MiB, "large"),             # tail <= 1 MiB is not split: whole segment
    (100 * MiB + 3, 100 * MiB + 512, 102 * MiB, "large"),
])
def test_hand_computed_requests(request_bytes, block, segment, which):
    assert allocated_bytes(request_bytes) == block
    assert segment_bytes(request_bytes) == segment
    assert pool(request_bytes) == which


def test_zero_bytes_allocates_nothing():
    assert (rounded_bytes(0), allocated_bytes(0), segment_bytes(0)) == (0, 0, 0)


@pytest.mark.parametrize("bad", [-1, 1.5, "512", True])
def test_bad_request(bad):
    with pytest.raises(ValueError, match=r"^request_bytes: "):
        allocated_bytes(bad)


def test_ledger_allocation_by_hand():
    ledger = Ledger([
        Tensor("norm", (h,), "bf16", count=L),   # 200 bytes -> 512, three times
        Tensor("w", (h, h), "fp32"),             # 40000 bytes -> 79 * 512 = 40448
    ])
    assert ledger_allocation(ledger, {h: 100, L: 3}) == (3 * 200 + 40000, 3 * 512 + 40448)
    assert ledger_segments(ledger, {h: 100, L: 3}) == 4 * 2 * MiB


def test_ledger_allocation_needs_whole_bytes():
    with pytest.raises(ValueError, match=r"^values: "):
        ledger_allocation(Ledger([Tensor("w", (h,), "bf16")]), {})


def test_where_rounding_matters_and_where_it_does_not():
    rows = {row["case"]: row for row in rounding_comparison()}
    gemm = rows["Llama 3 8B GEMM weights (bf16)"]
    assert gemm["requests"] == 32 * 7 + 1 and gemm["rounding"] == 0
    steps = rows["Llama 3 8B Adam step counters"]
    assert steps["requests"] == 32 * 9 + 3                       # one per parameter tensor
    assert (steps["requested"], steps["allocated"]) == (291 * 4, 291 * 512)
    tiny = rows["tiny tensors (b = 1, s = 100, h = 100)"]
    assert (tiny["requested"], tiny["allocated"]) == (100 + 4 + 200, 3 * 512)
