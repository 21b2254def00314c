"""The step model's fitted constants (GEMM, HBM and link efficiencies) and the file they are read from.

The eta constants are fitted by ``python -m derive.calibrate`` (derive.calibration_fit) on published
runs and read from ``derive/calibration.json``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from derive.systems import System

#: The calibration data file the package ships (written by python -m derive.calibrate).
CALIBRATION = Path(__file__).resolve().parents[1] / "calibration.json"

#: Which fitted GEMM efficiency a GPU generation takes (``System.generation``). Blackwell takes
#: Hopper's until a published Blackwell run joins the calibration set (stated assumption: the
#: same cuBLAS / CUTLASS warp-specialised kernels and the same power-limited boost clocks).
GEMM_GENERATION = {"ampere": "ampere", "hopper": "hopper", "blackwell": "hopper"}


@dataclass(frozen=True)
class Efficiency:
    """The fitted constants (each a fraction of a data-sheet figure) and where they come from.

    ``gemm`` is Ampere's GEMM efficiency, ``gemm_hopper`` Hopper's (and Blackwell's,
    ``GEMM_GENERATION``). Stated reasoning, not a sourced clock: the data-sheet peaks are the
    tensor cores' rate at the boost clock, and H100 tripled A100's dense peak (989 vs 312
    TFLOP/s) at 1.75 times its power limit (700 vs 400 W), so under sustained GEMMs it keeps a
    smaller share of that peak; one fitted share per generation absorbs it (and the kernels'
    own difference). The peaks' clocks: A100 312 TFLOP/s = 108 SMs x 2048 FLOPs x 1.41 GHz, H100
    989 = 132 x 4096 x 1.83 GHz (not the 1.98 GHz boost); NVIDIA's HPL Rpeak for A100 used the
    clock sustained at the power limit, 1.305 GHz (G. Lockwood, "Peak FLOPS", glennklockwood.com).
    No sustained H100 tensor clock was found to source, hence a fitted constant per generation.
    ``None`` means Ampere's figure for every generation.
    """

    gemm: float
    memory: float
    network: float
    gemm_hopper: float | None = None
    source: str = ""

    def gemm_for(self, gpu: System) -> float:
        """The GEMM efficiency of ``gpu``'s generation (``GEMM_GENERATION``)."""
        if GEMM_GENERATION[gpu.generation] == "hopper" and self.gemm_hopper is not None:
            return self.gemm_hopper
        return self.gemm


@lru_cache(maxsize=1)
def calibrated() -> Efficiency:
    """The constants ``python -m derive.calibrate`` wrote to ``derive/calibration.json``."""
    data = json.loads(CALIBRATION.read_text())
    return Efficiency(**data["constants"], source=data["source"])
