"""PyTorch's CUDA caching allocator applied to ledger tensors: requested vs allocated bytes (the article, section 5.3).

Every tensor is one request to ``c10/cuda/CUDACachingAllocator.cpp``:
``round_size()`` rounds it up to a multiple of kMinBlockSize (512 bytes);
``get_pool()`` sends requests of at most kSmallSize (1 MiB) to the small pool,
the rest to the large pool; when no cached block fits, ``get_allocation_size()``
asks cudaMalloc for a segment of kSmallBuffer (2 MiB) for a small request,
large_segment_size (20 MiB, formerly kLargeBuffer) for a request under
kMinLargeAlloc (10 MiB), and the request rounded up to kRoundLarge (2 MiB)
otherwise; ``should_split()`` then carves the block out of the segment - a
small-pool block whenever at least 512 bytes remain, a large-pool block only
when more than kSmallSize remains (otherwise the block is the whole segment).
Constants as in c10/core/AllocatorConfig.h (PyTorch 2.13: kMinBlockSize,
kSmallSize, kSmallBuffer, kMinLargeAlloc, kRoundLarge and
AcceleratorAllocatorConfig::large_segment_size_ = 20971520); older releases
declare the same values at the top of CUDACachingAllocator.cpp. This models
the default configuration (no expandable_segments, no roundup_power2_divisions,
max_split_size unlimited) and a fresh segment per request, so ``segment_bytes``
is what cudaMalloc would add to ``memory_reserved`` and ``allocated_bytes`` is
what ``memory_allocated`` counts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import sympy as sp

from derive.tensors import Ledger

MiB = 2**20


@dataclass(frozen=True)
class AllocatorConstant:
    """One constant of the caching allocator, with the file and comment that declare it."""

    name: str
    value: int
    meaning: str
    source: str


_CONFIG_H = "c10/core/AllocatorConfig.h"
_CACHING_CPP = "c10/cuda/CUDACachingAllocator.cpp"

ALLOCATOR_CONSTANTS: dict[str, AllocatorConstant] = {
    constant.name: constant
    for constant in (
        AllocatorConstant("kMinBlockSize", 512, "all sizes are rounded to at least 512 bytes",
                          f"{_CONFIG_H}; used by round_size() in {_CACHING_CPP}"),
        AllocatorConstant("kSmallSize", 1 * MiB, "largest \"small\" allocation is 1 MiB",
                          f"{_CONFIG_H}; get_pool() and should_split() in {_CACHING_CPP}"),
        AllocatorConstant("kSmallBuffer", 2 * MiB, "\"small\" allocations are packed in 2 MiB blocks",
                          f"{_CONFIG_H}; get_allocation_size() in {_CACHING_CPP}"),
        AllocatorConstant("kLargeBuffer", 20 * MiB,
                          "\"large\" allocations may be packed in 20 MiB blocks",
                          f"{_CONFIG_H} AcceleratorAllocatorConfig::large_segment_size_ (default "
                          f"20971520, env large_segment_size_mb); kLargeBuffer in older "
                          f"{_CACHING_CPP}"),
        AllocatorConstant("kMinLargeAlloc", 10 * MiB,
                          "allocations between 1 and 10 MiB may use kLargeBuffer",
                          f"{_CONFIG_H}; get_allocation_size() in {_CACHING_CPP}"),
        AllocatorConstant("kRoundLarge", 2 * MiB, "round up large allocations to 2 MiB",
                          f"{_CONFIG_H}; get_allocation_size() in {_CACHING_CPP}"),
    )
}

K_MIN_BLOCK_SIZE = ALLOCATOR_CONSTANTS["kMinBlockSize"].value
K_SMALL_SIZE = ALLOCATOR_CONSTANTS["kSmallSize"].value
K_SMALL_BUFFER = ALLOCATOR_CONSTANTS["kSmallBuffer"].value
K_LARGE_BUFFER = ALLOCATOR_CONSTANTS["kLargeBuffer"].value
K_MIN_LARGE_ALLOC = ALLOCATOR_CONSTANTS["kMinLargeAlloc"].value
K_ROUND_LARGE = ALLOCATOR_CONSTANTS["kRoundLarge"].value


def _request(request_bytes: object) -> np.ndarray:
    """``request_bytes`` as a column: an int64 column as it is, one int as a one-element column of
    Python ints (exact past int64); ValueError naming the field unless non-negative integers."""
    if isinstance(request_bytes, np.ndarray) and request_bytes.dtype.kind in "iu":
        if (request_bytes < 0).any():
            raise ValueError("request_bytes: must be non-negative integers, got a negative one")
        return request_bytes
    if isinstance(request_bytes, bool) or not isinstance(request_bytes, (int, sp.Integer)):
        raise ValueError(f"request_bytes: must be a non-negative integer, got {request_bytes!r}")
    if request_bytes < 0:
        raise ValueError(f"request_bytes: must be a non-negative integer, got {request_bytes!r}")
    return np.array([int(request_bytes)], dtype=object)


def _answer(column: np.ndarray, request_bytes: object, kind: type = int) -> int | str | np.ndarray:
    """One request's figure as a ``kind`` (int, or str for a pool); a column of requests' as a column."""
    return kind(column[0]) if np.ndim(request_bytes) == 0 else column


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _rounded(request: np.ndarray) -> np.ndarray:
    return np.where(request > 0, np.maximum(K_MIN_BLOCK_SIZE, _round_up(request, K_MIN_BLOCK_SIZE)), 0)


def _segment(request: np.ndarray) -> np.ndarray:
    size = _rounded(request)
    return np.select([size == 0, size <= K_SMALL_SIZE, size < K_MIN_LARGE_ALLOC],
                     [0, K_SMALL_BUFFER, K_LARGE_BUFFER], _round_up(size, K_ROUND_LARGE))


def rounded_bytes(request_bytes: int) -> int:
    """round_size(): the request rounded up to a multiple of kMinBlockSize (CUDACachingAllocator.cpp).

    Each function here takes one request or an int64 column of them.
    """
    return _answer(_rounded(_request(request_bytes)), request_bytes)


def pool(request_bytes: int) -> str:
    """get_pool(): ``small`` for rounded requests of at most kSmallSize, else ``large``."""
    return _answer(np.where(_rounded(_request(request_bytes)) <= K_SMALL_SIZE, "small", "large"), request_bytes, str)


def segment_bytes(request_bytes: int) -> int:
    """get_allocation_size(): the cudaMalloc segment a request opens when nothing cached fits."""
    return _answer(_segment(_request(request_bytes)), request_bytes)


def allocated_bytes(request_bytes: int) -> int:
    """The block handed to the tensor (memory_allocated): split from a fresh segment per should_split()."""
    request = _request(request_bytes)
    size, segment = _rounded(request), _segment(request)
    remaining = segment - size
    split = np.where(size <= K_SMALL_SIZE, remaining >= K_MIN_BLOCK_SIZE, remaining > K_SMALL_SIZE)
    return _answer(np.where(split, size, segment), request_bytes)


def allocations(ledger: Ledger, values: Mapping[sp.Symbol, int]) -> list[tuple[int, int]]:
    """(bytes of one copy, number of copies) of every tensor under ``values``."""
    rows = []
    for tensor in ledger:
        one = sp.Mul(*tensor.shape).subs(values) * tensor.element_bytes
        copies = sp.sympify(tensor.count).subs(values)
        if not (one.is_Integer and copies.is_Integer):
            raise ValueError(f"values: {tensor.name!r} is not a whole number of bytes under "
                             f"{dict(values)!r} (got {one} x {copies})")
        rows.append((int(one), int(copies)))
    return rows


def ledger_allocation(ledger: Ledger, values: Mapping[sp.Symbol, int]) -> tuple[int, int]:
    """(requested, allocated) bytes of ``ledger`` under ``values``, each copy its own request."""
    rows = allocations(ledger, values)
    requested = sum(one * copies for one, copies in rows)
    allocated = sum(allocated_bytes(one) * copies for one, copies in rows)
    return requested, allocated


def ledger_segments(ledger: Ledger, values: Mapping[sp.Symbol, int]) -> int:
    """Bytes of fresh segments if every request opened its own (an upper bound on reserved)."""
    return sum(segment_bytes(one) * copies for one, copies in allocations(ledger, values))
