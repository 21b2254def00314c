"""Validate derive's activation and FLOP ledgers against PyTorch's autograd engine and flop counter.

``python -m derive.validate [--json] [--tensors]`` builds each kind in PyTorch
eager (bfloat16, CPU) over a grid of small shapes, records every tensor saved
for backward and FlopCounterMode's forward + backward FLOPs, and compares them
exactly with the ledgers. torch is imported only by the measuring modules
(``derive.validate.measure``, ``derive.validate.layers``), never by the rest of
derive; the predictions need only SymPy.
"""
from __future__ import annotations

from typing import Mapping

from derive.validate.predicted import KINDS, predicted_flops, predicted_saved_bytes

__all__ = ["KINDS", "predicted_saved_bytes", "measured_saved_bytes", "predicted_flops",
           "measured_flops"]


def measured_saved_bytes(kind: str, shape: Mapping[str, int]) -> int:
    """Bytes PyTorch's autograd keeps for ``kind`` at ``shape`` (needs the ``validate`` extra)."""
    from derive.validate.measure import measured_saved_bytes as measure

    return measure(kind, shape)


def measured_flops(kind: str, shape: Mapping[str, int]) -> int:
    """FlopCounterMode's forward + backward FLOPs for ``kind`` at ``shape`` (needs torch)."""
    from derive.validate.measure import measured_flops as measure

    return measure(kind, shape)[0]
