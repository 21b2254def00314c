"""What a GPU loses before the first tensor: the per-GPU memory budget (the article, section 5).

The driver reports a capacity a little under the datasheet's; from it the
process loses the CUDA context and resident kernels and the NCCL buffers
(both cudaMalloc'd outside PyTorch's caching allocator, so outside
``memory_reserved``) and whatever safety margin is kept free. What is left
is ``reserved``; of it the caching allocator loses a fraction to
fragmentation, and library workspaces (cuBLAS, cuDNN, Transformer Engine)
are allocated through it. The rest is usable for tensors:

    usable = (capacity - context - NCCL - margin) * (1 - fragmentation) - workspaces

Every item is a (low, high) range with its source or stated reasoning; the
usable range pairs the largest capacity with the smallest losses (high end)
and the smallest capacity with the largest losses (low end). Units: bytes,
shown in GiB (2^30) - the driver and PyTorch report GiB; datasheets sell GB.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from derive.inputs import choose
from derive.presets import HARDWARE
from derive.units import BYTE_UNITS

GiB = BYTE_UNITS["GiB"]
MiB = BYTE_UNITS["MiB"]
GB = BYTE_UNITS["GB"]


def gib(value: str) -> int:
    """``value`` GiB (a decimal string such as '79.6') in whole bytes."""
    return int(Fraction(value) * GiB)


@dataclass(frozen=True)
class Capacity:
    """Memory the driver reports (cudaMemGetInfo total), as a (low, high) range in bytes."""

    low: int
    high: int
    source: str


#: Total memory as the driver reports it; PyTorch's OOM message prints the same total.
DRIVER_CAPACITY: dict[str, Capacity] = {
    "h100": Capacity(
        gib("79.11"), gib("79.6"),
        "low: PyTorch OOM on an H100 80GB, 'GPU 0 has a total capacity of 79.11 GiB' "
        "(vllm-project/vllm issue 27508); high: the article, section 5.4, "
        "torch.cuda.mem_get_info() reports about 79.6 GiB"),
    "a100": Capacity(
        gib("79.25"), gib("79.35"),
        "PyTorch OOMs on A100 80GB cards: '79.25 GiB total capacity' (levihsu/OOTDiffusion "
        "issue 235), '79.35 GiB total capacity' (Instruction-Tuning-with-GPT-4/GPT-4-LLM "
        "issue 16)"),
}

#: nvidia-smi memory.total (= cudaMemGetInfo total) of an H100 80GB HBM3 in bytes: a measurement
#: (81559 MiB, 79.65 GiB), the card's 80 GiB of HBM less what the driver keeps.
NVIDIA_SMI_TOTAL: dict[str, int] = {"h100": 81559 * MiB}

#: Memory on the card. The datasheets' "80 GB" counts HBM in binary units: five active
#: 16 GiB stacks, 80 GiB (85.9 GB). The driver reports this less what it keeps for itself.
HBM_CAPACITY: dict[str, Capacity] = {
    name: Capacity(80 * GiB, 80 * GiB,
                   f"{HARDWARE[name].source}; the '80 GB' is 5 HBM stacks x 16 GiB = 80 GiB (2^30 B), "
                   "as memory is counted; the driver's total is this less what the driver reserves")
    for name in ("h100", "a100")
}
for _name, _capacity in DRIVER_CAPACITY.items():
    if _capacity.high > HBM_CAPACITY[_name].low:
        raise ValueError(f"{_name}: the driver cannot report more than the card's HBM")

#: cuBLAS workspace per handle per stream: parseChosenWorkspaceSize() default.
CUBLAS_WORKSPACE: dict[str, int] = {
    "h100": 4096 * 8 * 1024,
    "a100": 4096 * 1024 * 2 + 16 * 1024 * 8,
}
CUBLAS_SOURCE = ("aten/src/ATen/cuda/CublasHandlePool.cpp parseChosenWorkspaceSize() / "
                 "getChosenWorkspaceSize(): default sm90 ? 4096*8*1024 (32 MiB) : "
                 "4096*1024*2 + 16*1024*8 bytes per handle and stream, overridden by "
                 "CUBLAS_WORKSPACE_CONFIG; allocated from the caching allocator")


@dataclass(frozen=True)
class BudgetItem:
    """One loss: (low, high) in bytes, or as a fraction of reserved, or in cuBLAS handle-streams."""

    name: str
    low: Fraction | int
    high: Fraction | int
    unit: str
    where: str
    source: str


OUTSIDE = "outside memory_reserved (cudaMalloc by the driver or a library)"
INSIDE = "inside memory_reserved (through the caching allocator)"

BUDGET_ITEMS: dict[str, BudgetItem] = {
    item.name: item
    for item in (
        BudgetItem("CUDA context and kernels", gib("0.5"), gib("1"), "bytes", OUTSIDE,
                   "the article, sections 5.1 and 8: a few hundred MB for a bare PyTorch "
                   "process, about 1 GB with cuBLAS, cuDNN, NCCL, Transformer Engine and "
                   "FlashAttention kernels resident (less with CUDA_MODULE_LOADING=LAZY, the "
                   "default since CUDA 12.2); seen only as mem_get_info minus memory_reserved"),
        BudgetItem("NCCL communicators", gib("1"), gib("3"), "bytes", OUTSIDE,
                   "the article, sections 5.2 and 8: NCCL_BUFFSIZE (4 MiB by default) per "
                   "channel plus LL/LL128 buffers, tens to hundreds of MB per communicator; "
                   "one communicator per process group (TP, DP, PP neighbours, CP, embedding), "
                   "created lazily at the first collective: 1-3 GiB in all"),
        BudgetItem("safety margin", 0, gib("1"), "bytes", OUTSIDE,
                   "stated reasoning: none for a profiled, fixed-shape run; up to 1 GiB "
                   "kept free for step-to-step variation (variable sequence lengths, a "
                   "non-fused optimizer step's temporaries, the article's section 2.2)"),
        BudgetItem("fragmentation", Fraction(5, 100), Fraction(15, 100), "fraction of reserved",
                   INSIDE,
                   "the article, section 5.3: inactive_split_bytes of a typical training "
                   "process, 5-15 % of reserved (less with expandable_segments:True)"),
        BudgetItem("cuBLAS workspaces", 1, 8, "cuBLAS handle-streams", INSIDE,
                   f"{CUBLAS_SOURCE}; stated reasoning: one handle-stream (the compute "
                   "stream) to eight (side streams for TP/CP communication overlap, "
                   "pipeline sends, several threads)"),
        BudgetItem("cuDNN / Transformer Engine workspaces", 0, 256 * MiB, "bytes", INSIDE,
                   "the article, section 5.1: cuDNN and Transformer Engine's FP8 GEMMs keep "
                   "workspaces too, library workspaces together usually a few hundred MB; "
                   "stated reasoning: up to 256 MiB beyond cuBLAS"),
    )
}

SIDES = ("low", "high")


def _hardware(hardware_name: str) -> str:
    """``hardware_name`` if it has a budget, else ValueError naming the field."""
    choose("hardware_name", hardware_name, HARDWARE)
    return choose("hardware_name", hardware_name, DRIVER_CAPACITY)


def item_bytes(item: BudgetItem, hardware_name: str, side: str) -> Fraction | int:
    """The ``side`` ('low' or 'high') of ``item`` for ``hardware_name``: bytes, or a fraction of reserved."""
    value = getattr(item, choose("side", side, SIDES))
    if item.unit == "cuBLAS handle-streams":
        return value * CUBLAS_WORKSPACE[_hardware(hardware_name)]
    return value


def _losses(hardware_name: str, side: str, where: str) -> Fraction:
    """Bytes lost at ``side`` by the items that sit ``where`` (fractions of reserved excluded)."""
    return sum((Fraction(item_bytes(item, hardware_name, side)) for item in BUDGET_ITEMS.values()
                if item.where == where and item.unit != "fraction of reserved"), Fraction(0))


def usable_at(hardware_name: str, side: str) -> Fraction:
    """Usable bytes with every loss at ``side`` ('low' losses give the high end of the range)."""
    name = _hardware(hardware_name)
    capacity = DRIVER_CAPACITY[name]
    losses = "high" if side == "low" else "low"
    total = capacity.low if side == "low" else capacity.high
    reserved = total - _losses(name, losses, OUTSIDE)
    fragmentation = Fraction(item_bytes(BUDGET_ITEMS["fragmentation"], name, losses))
    workspaces = _losses(name, losses, INSIDE)
    return reserved * (1 - fragmentation) - workspaces


def usable_bytes(hardware_name: str = "h100") -> tuple[int, int]:
    """(low, high) bytes usable for tensors on one ``hardware_name`` GPU, rounded down."""
    return (math.floor(usable_at(hardware_name, "low")),
            math.floor(usable_at(hardware_name, "high")))


def budget_table(hardware_name: str = "h100") -> list[dict[str, object]]:
    """Rows for the sheet: memory on the card, as the driver reports it, each loss, and what is usable."""
    name = _hardware(hardware_name)
    hbm, capacity = HBM_CAPACITY[name], DRIVER_CAPACITY[name]

    def row(item: str, low: object, high: object, where: str, source: str) -> dict[str, object]:
        return {"item": item, "low": low, "high": high, "where": where, "source": source}

    rows = [
        row("memory on the card (HBM)", hbm.low, hbm.high,
            "datasheet '80 GB': HBM is counted in GiB", hbm.source),
        row("capacity reported by the driver", capacity.low, capacity.high,
            "cudaMemGetInfo total: the HBM less the driver's reserve", capacity.source),
    ]
    rows += [row(item.name, item_bytes(item, name, "low"), item_bytes(item, name, "high"),
                 item.where, item.source) for item in BUDGET_ITEMS.values()]
    low, high = usable_bytes(name)
    rows.append(row("usable for tensors", low, high, "what the tensor ledgers may fill",
                    "capacity - context - NCCL - margin, times (1 - fragmentation), "
                    "minus workspaces"))
    return rows


def gpus_to_hold(total_bytes: int | float | sp.Expr, per_gpu_bytes: int | float | sp.Expr) -> int:
    """GPUs needed to hold ``total_bytes`` at ``per_gpu_bytes`` each (ceil; state only, no activations)."""
    def number(field: str, value: object) -> sp.Expr:
        if isinstance(value, bool) or not isinstance(value, (int, float, Fraction, sp.Basic)):
            raise ValueError(f"{field}: must be a number of bytes, got {value!r}")
        try:
            exact = sp.nsimplify(value)
        except (TypeError, ValueError, sp.SympifyError):
            raise ValueError(f"{field}: must be a number of bytes, got {value!r}") from None
        if not (exact.is_number and exact.is_finite and exact.is_extended_real):
            raise ValueError(f"{field}: must be a finite number of bytes, got {value!r}")
        return exact

    total, per_gpu = number("total_bytes", total_bytes), number("per_gpu_bytes", per_gpu_bytes)
    if total < 0:
        raise ValueError(f"total_bytes: must be a non-negative number, got {total_bytes!r}")
    if not per_gpu > 0:
        raise ValueError(f"per_gpu_bytes: must be a positive number, got {per_gpu_bytes!r}")
    return int(sp.ceiling(total / per_gpu))


#: The article's per-card planning budget (section 5.4 and self-test 1), stated as 70 GiB.
PLANNING_BUDGET_GIB = 70


#: The systems table's GPU names (derive.systems) -> the hardware names whose usable range is measured here.
SYSTEM_BUDGETS = {"h100": "h100", "a100-80gb": "a100"}


def usable_low_end(gpu) -> int:
    """Bytes usable for tensors on a derive.systems GPU, low end: its measured range, else the H100's share of its HBM."""
    from derive.systems import SYSTEMS

    if gpu.name in SYSTEM_BUDGETS:
        return usable_bytes(SYSTEM_BUDGETS[gpu.name])[0]
    return int(gpu.hbm_bytes * (usable_bytes("h100")[0] / SYSTEMS["h100"].hbm_bytes))
