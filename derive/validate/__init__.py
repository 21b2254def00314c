"""Validate derive's activation and FLOP ledgers against PyTorch's autograd engine and flop counter.

``python -m derive.validate [--json] [--tensors]`` builds each kind in PyTorch
eager (bfloat16, CPU) over a grid of small shapes, records every tensor saved
for backward and FlopCounterMode's forward + backward FLOPs, and compares them
exactly with the ledgers; ``--hf [--samples N] [--seed S] [--replay JSON]`` checks the
config reader and the transformers accounts against transformers' own models at
random configs and shapes (``derive.validate.hf``, ``derive.validate.hf_random``).
torch is imported only by the measuring modules
(``derive.validate.measure``, ``derive.validate.layers``), never by the rest of
derive; the predictions need only SymPy. The ``comm-*`` kinds (``derive.validate.comm``)
run PyTorch's DDP, FSDP2, DTensor TP / SP, pipelining and an expert-parallel MoE block in
gloo processes and compare every collective with the communication ledger.
"""
from __future__ import annotations

from types import ModuleType
from typing import Mapping

from derive.validate.predicted import KINDS, predicted_flops, predicted_saved_bytes

__all__ = ["KINDS", "NO_TORCH", "predicted_saved_bytes", "measured_saved_bytes",
           "predicted_flops", "measured_flops"]

#: The one line a machine without torch gets when it asks for a measurement.
NO_TORCH = ("torch is not installed: measuring needs the validate extra, "
            "pip install 'derive[validate]' (torch 2.13.0; the CPU build is enough)")


def measuring() -> ModuleType:
    """``derive.validate.measure`` (imports torch); ModuleNotFoundError with :data:`NO_TORCH` without it."""
    try:
        from derive.validate import measure
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] != "torch":
            raise
        raise ModuleNotFoundError(NO_TORCH, name="torch") from None
    return measure


def measured_saved_bytes(kind: str, shape: Mapping[str, int]) -> int:
    """Bytes PyTorch's autograd keeps for ``kind`` at ``shape`` (needs the ``validate`` extra)."""
    return measuring().measured_saved_bytes(kind, shape)


def measured_flops(kind: str, shape: Mapping[str, int]) -> int:
    """FlopCounterMode's forward + backward FLOPs for ``kind`` at ``shape`` (needs torch)."""
    return measuring().measured_flops(kind, shape)[0]
