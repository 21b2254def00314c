"""Systems as data: each GPU's dense peaks, HBM, NVLink and scale-out links, every number with its source.

Conventions (DESIGN.md rule 4): peaks are dense tensor-core FLOP/s, no
sparsity (NVIDIA's data sheets print the sparse figure with an asterisk; the
dense one is half). GB = 10^9 bytes. Link bandwidths are **unidirectional**
bytes per second per GPU: NVLink's data-sheet figure is bidirectional (the sum
of both directions), so it is halved here; a NIC's Gb/s is per direction, so it
is divided by 8. A collective's bytes a rank *sends* go over the unidirectional
figure. ``nvlink_domain`` is how many GPUs one NVLink fabric joins (8 on an HGX
board, 72 in a GB200 NVL72 rack); ranks further apart talk over the NIC.
Latencies are stated reasoning, not data-sheet figures: a few microseconds per
NCCL step inside a node, more across InfiniBand.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from derive.inputs import choose

if TYPE_CHECKING:
    import numpy as np

TERA, GIGA = 10**12, 10**9

#: Dtypes a peak may be given for; "fp4" only where the GPU sells it.
PEAK_DTYPES = ("bf16", "fp8", "fp4")
#: NVIDIA's architecture names (each data sheet / whitepaper names its GPU's): A100 is Ampere
#: (GA100), H100 and H200 are Hopper (GH100), B200 and GB200 are Blackwell (GB100 dies), B300 and
#: GB300 Blackwell Ultra (the same generation's tensor cores, more FP4 and HBM).
GENERATIONS = ("ampere", "hopper", "blackwell")


@dataclass(frozen=True)
class System:
    """One GPU in its usual system: dense peaks by dtype, HBM, NVLink and NIC per GPU, each with a source."""

    name: str
    peaks: dict[str, float] = field(hash=False)
    hbm_bytes: int
    hbm_bandwidth: float
    nvlink_bandwidth: float
    nvlink_domain: int
    nic_bandwidth: float
    nvlink_latency: float
    nic_latency: float
    sms: int
    generation: str
    source: str
    link_source: str

    def __post_init__(self) -> None:
        """Peaks only for known dtypes, and a bf16 one; ``sms`` streaming multiprocessors (the GEMM tiles' waves)."""
        for dtype in self.peaks:
            choose("dtype", dtype, PEAK_DTYPES)
        choose("generation", self.generation, GENERATIONS)
        if "bf16" not in self.peaks:
            raise ValueError(f"peaks: {self.name} needs a bf16 peak")

    def peak(self, dtype: str) -> float:
        """Dense FLOP/s at ``dtype``; ValueError naming the dtype where the GPU has no such tensor core."""
        return self.peaks[choose("dtype", dtype, self.peaks)]

    @property
    def ridge(self) -> float:
        """FLOPs per HBM byte at which a bf16 kernel turns compute-bound (peak / bandwidth; Williams et al. 2009)."""
        return self.peaks["bf16"] / self.hbm_bandwidth

    def link(self, span: int | np.ndarray) -> tuple[float | np.ndarray, float | np.ndarray]:
        """(unidirectional bytes/s, latency s) of a group spanning ``span`` consecutive GPUs (or a column of spans)."""
        import numpy as np  # on the step model's first link, not on import: check and report never load it

        near = np.less_equal(span, self.nvlink_domain)
        return (np.where(near, self.nvlink_bandwidth, self.nic_bandwidth),
                np.where(near, self.nvlink_latency, self.nic_latency))


_HGX_NVLINK3 = ("NVIDIA A100 Tensor Core GPU data sheet: NVLink 600 GB/s (bidirectional, third "
                "generation; 300 GB/s each way), 8 GPUs per HGX A100 board; DGX A100 user guide: one "
                "ConnectX-6 HDR 200 Gb/s InfiniBand adapter per GPU (Selene, where Korthikanti et al. "
                "and Narayanan et al. ran)")
_HGX_NVLINK4 = ("NVIDIA H100 Tensor Core GPU data sheet (SXM): NVLink 900 GB/s (bidirectional, fourth "
                "generation; 450 GB/s each way), 8 GPUs per HGX H100 board; DGX H100 user guide: one "
                "ConnectX-7 400 Gb/s (NDR) adapter per GPU (Llama 3's 'RoCE ... 400 Gbps between "
                "GPUs', Dubey et al. 2024, section 3.3.1)")
_NVLINK5 = ("NVIDIA HGX B200 / GB200 NVL72 data sheets: fifth-generation NVLink 1.8 TB/s per GPU "
            "(bidirectional; 900 GB/s each way); HGX B200 joins 8 GPUs, GB200 NVL72 joins 72 (130 TB/s "
            "in all); DGX B200 user guide: ConnectX-7 400 Gb/s per GPU for the compute fabric")
#: Stated reasoning: an NCCL step costs a few microseconds on NVLink and about twice that
#: across an InfiniBand / RoCE fabric (NCCL's own tuning model, src/graph/tuning.cc, puts base
#: latencies of a few microseconds per algorithm and protocol).
NVLINK_LATENCY, NIC_LATENCY = 5e-6, 10e-6

SYSTEMS: dict[str, System] = {
    system.name: system
    for system in (
        System("a100-40gb", {"bf16": 312 * TERA}, 40 * GIGA, 1555 * GIGA, 300 * GIGA, 8,
               200 * GIGA / 8, NVLINK_LATENCY, NIC_LATENCY, 108, "ampere",
               "NVIDIA A100 Tensor Core GPU data sheet, A100 40GB SXM: BF16 Tensor Core 312 TFLOPS "
               "(624 with sparsity), 40 GB HBM2 at 1,555 GB/s; no FP8; 108 SMs (NVIDIA A100 Tensor Core GPU "
               "Architecture whitepaper)", _HGX_NVLINK3),
        System("a100-80gb", {"bf16": 312 * TERA}, 80 * GIGA, 2039 * GIGA, 300 * GIGA, 8,
               200 * GIGA / 8, NVLINK_LATENCY, NIC_LATENCY, 108, "ampere",
               "NVIDIA A100 Tensor Core GPU data sheet, A100 80GB SXM: BF16 Tensor Core 312 TFLOPS "
               "dense (624 with sparsity), 80 GB HBM2e at 2,039 GB/s; no FP8; 108 SMs (A100 whitepaper)", _HGX_NVLINK3),
        System("h100", {"bf16": 989 * TERA, "fp8": 1979 * TERA}, 80 * GIGA, 3350 * GIGA,
               450 * GIGA, 8, 400 * GIGA / 8, NVLINK_LATENCY, NIC_LATENCY, 132, "hopper",
               "NVIDIA H100 Tensor Core GPU data sheet, H100 SXM: BF16 1,979 and FP8 3,958 TFLOPS "
               "with sparsity, so 989 and 1,979 dense; 80 GB HBM3 at 3.35 TB/s; 132 SMs (NVIDIA H100 Tensor "
               "Core GPU Architecture whitepaper, SXM5)", _HGX_NVLINK4),
        System("h200", {"bf16": 989 * TERA, "fp8": 1979 * TERA}, 141 * GIGA, 4800 * GIGA,
               450 * GIGA, 8, 400 * GIGA / 8, NVLINK_LATENCY, NIC_LATENCY, 132, "hopper",
               "NVIDIA H200 Tensor Core GPU data sheet, H200 SXM: BF16 1,979 and FP8 3,958 TFLOPS "
               "with sparsity (989 and 1,979 dense, the H100's GH100 die, 132 SMs); 141 GB HBM3e at 4.8 TB/s",
               _HGX_NVLINK4),
        System("b200", {"bf16": 2250 * TERA, "fp8": 4500 * TERA, "fp4": 9000 * TERA}, 180 * GIGA,
               8000 * GIGA, 900 * GIGA, 8, 400 * GIGA / 8, NVLINK_LATENCY, NIC_LATENCY, 148, "blackwell",
               "NVIDIA HGX B200 data sheet, per GPU (the 8-GPU board's figures / 8): FP4 18, FP8 9, "
               "BF16 4.5 PFLOPS with sparsity, so 9, 4.5 and 2.25 dense; 1,440 GB HBM3e per board "
               "= 180 GB per GPU, 8 TB/s per GPU; 148 SMs (CUDA's device properties for a B200)", _NVLINK5),
        System("b300", {"bf16": 2250 * TERA, "fp8": 4500 * TERA, "fp4": 13500 * TERA}, 288 * GIGA,
               8000 * GIGA, 900 * GIGA, 8, 800 * GIGA / 8, NVLINK_LATENCY, NIC_LATENCY, 160, "blackwell",
               "NVIDIA HGX B300 specifications, per GPU (the 8-GPU board's figures / 8): FP4 144 PFLOPS with "
               "sparsity and 108 without, FP8 72 and BF16 36 PFLOPS with sparsity, so 13.5, 4.5 and 2.25 "
               "dense; DGX B300 data sheet: 2.3 TB HBM3e in all = 288 GB per GPU; Blackwell Ultra (NVIDIA "
               "technical blog 'Inside NVIDIA Blackwell Ultra', 2025): 288 GB HBM3e at 8 TB/s, 160 SMs",
               "NVIDIA HGX B300 specifications: fifth-generation NVLink, 1.8 TB/s GPU-to-GPU (bidirectional; "
               "900 GB/s each way), 14.4 TB/s over the board's 8 GPUs; DGX B300 data sheet: eight "
               "single-port ConnectX-8 SuperNICs, 800 Gb/s per GPU for the compute fabric"),
        System("gb200", {"bf16": 2500 * TERA, "fp8": 5000 * TERA, "fp4": 10000 * TERA}, 186 * GIGA,
               8000 * GIGA, 900 * GIGA, 72, 400 * GIGA / 8, NVLINK_LATENCY, NIC_LATENCY, 148, "blackwell",
               "NVIDIA GB200 NVL72 data sheet, per GPU (the rack's figures / 72): FP4 1,440, FP8 720, "
               "BF16 360 PFLOPS with sparsity, so 10, 5 and 2.5 PFLOPS dense per GPU; 13.4 TB HBM3e "
               "= 186 GB per GPU, 576 TB/s = 8 TB/s per GPU; 148 SMs (the B200 die)", _NVLINK5),
        System("gb300", {"bf16": 2500 * TERA, "fp8": 5000 * TERA, "fp4": 15000 * TERA}, 288 * GIGA,
               8000 * GIGA, 900 * GIGA, 72, 800 * GIGA / 8, NVLINK_LATENCY, NIC_LATENCY, 160, "blackwell",
               "NVIDIA GB300 NVL72 data sheet, per GPU (the rack's figures / 72): FP4 1,080 PFLOPS dense "
               "(1,440 with sparsity), FP8 720 and BF16 360 with sparsity, so 15, 5 and 2.5 PFLOPS dense "
               "per GPU; 576 TB/s = 8 TB/s per GPU; Blackwell Ultra: 288 GB HBM3e (eight 12-high stacks), "
               "160 SMs; one ConnectX-8 SuperNIC at 800 Gb/s per GPU", _NVLINK5),
    )
}


def system(name: str) -> System:
    """A system by name; ValueError naming the field (``gpu``) if unknown."""
    return SYSTEMS[choose("gpu", name, SYSTEMS)]
