"""FP8 conventions the step-time model and the communication ledger read: GEMM dtypes, peaks, MFU, gathered bytes.

The recipes themselves (block shapes, scale dtypes, what is cached) are data in
``derive.recipes``; this module names the conventions built on them.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from derive.accounts.state import PRECISIONS
from derive.architectures.decoder import LLAMA, Layout
from derive.architectures.tables import model_gemms
from derive.dtypes import dtype_bytes
from derive.expansion import expand
from derive.inputs import choose, flag
from derive.systems import SYSTEMS
from derive.recipes import (
    RECIPES,
    combine_dtype,
    dispatch_dtype,
    gathered_parameter_dtype,
    quantised_gemm,
)

__all__ = ["GEMM_KINDS", "FP8_PEAK_FLOPS", "FP4_PEAK_FLOPS", "MFU_PEAKS", "gemm_dtype", "gemm_peak", "mfu_peak",
           "gathered_bytes_per_parameter", "gather_ratio", "gradient_reduction_dtype",
           "dispatch_dtype", "combine_dtype", "gathered_parameter_dtype", "recipe_of", "flops_by_dtype", "dense_peak",
           "dispatch_bytes_per_element"]

#: GEMM kinds by name, as the tags of a ``derive.architectures.gemms`` row would carry them.
GEMM_KINDS: dict[str, frozenset[str]] = {
    "linear": frozenset({"weight", "layer", "gemm"}),
    "attention": frozenset({"layer", "attention_score"}),
    "head": frozenset({"weight", "output", "gemm"}),
    "router": frozenset({"weight", "layer", "gemm", "router"}),
}

#: Dense FP8 tensor-core peaks (FLOP/s), no sparsity (DESIGN.md rule 4); MXFP8 runs at the same rate.
FP8_PEAK_FLOPS: dict[str, float] = {
    "h100": 1979e12,   # H100 SXM5 datasheet: 3,958 TFLOPS FP8 with sparsity
    "h200": 1979e12,   # H200 SXM datasheet: 3,958 TFLOPS FP8 with sparsity (GH100 die)
    "b200": 4500e12,   # HGX B200 per GPU: 9 PFLOPS FP8 with sparsity, 4.5 dense
    "b300": float(SYSTEMS["b300"].peaks["fp8"]),  # HGX B300 per GPU, as derive.systems holds it (its source there)
}


#: Dense FP4 tensor-core peaks (FLOP/s), no sparsity: Blackwell only (NVFP4 GEMMs).
FP4_PEAK_FLOPS: dict[str, float] = {
    "b200": 9000e12,   # HGX B200 per GPU: 18 PFLOPS FP4 with sparsity, 9 dense
    "b300": float(SYSTEMS["b300"].peaks["fp4"]),  # HGX B300 per GPU: 144 PFLOPS with sparsity / 8 GPUs, 108 dense / 8
}
#: Low-precision element -> its table of dense peaks.
LOW_PRECISION_PEAKS: dict[str, dict[str, float]] = {"fp8": FP8_PEAK_FLOPS, "fp4": FP4_PEAK_FLOPS}


@dataclass(frozen=True)
class MfuPeak:
    """What an MFU figure divides by: the dense BF16 peak, or the dense FP8 peak."""

    dtype: str
    source: str


#: Both conventions in print: FP8 runs are reported against the BF16 peak by some, the FP8 peak by others.
MFU_PEAKS: dict[str, MfuPeak] = {
    "bf16-peak": MfuPeak("bf16", "model FLOPs over the dense BF16 peak whatever the GEMM dtype "
                                 "(PaLM appendix B's definition applied unchanged; a run's FP8 "
                                 "speed-up shows as MFU above the BF16 ceiling)"),
    "fp8-peak": MfuPeak("fp8", "model FLOPs over the dense FP8 peak (the GPU's fastest dense "
                               "rate for the GEMMs' dtype; halves the figure on H100 / B200)"),
}


def recipe_of(precision: str) -> str | None:
    """The FP8 recipe a precision trains its layer matrices with, or None for a 16/32-bit precision."""
    return PRECISIONS[choose("precision", precision, PRECISIONS)].fp8


def gemm_dtype(precision: str, gemm: object, layer: int | None = None, layers: int | None = None,
               bf16_edge_layers: int = 0) -> str:
    """The dtype ``gemm`` (a GEMM row or a kind of :data:`GEMM_KINDS`) runs in under ``precision``.

    The recipe's element (fp8, or fp4 under nvfp4) for the layer matrices only (``recipes.quantised_gemm``); attention, the head
    and a router stay at the compute dtype. ``bf16_edge_layers`` keeps the first and
    last that many layers in 16 bits (Megatron's --first-last-layers-bf16 with
    --num-layers-at-start-in-bf16 / --num-layers-at-end-in-bf16; DeepSeek-V3 section 3.3.1
    keeps its embedding and output layers so), given the 0-based ``layer`` of ``layers``.
    """
    compute = PRECISIONS[choose("precision", precision, PRECISIONS)].compute
    tags = GEMM_KINDS[choose("gemm", gemm, GEMM_KINDS)] if isinstance(gemm, str) else gemm.tags
    name = recipe_of(precision)
    if name is None or not quantised_gemm(name, frozenset(tags)):
        return compute
    if bf16_edge_layers:
        if layer is None or layers is None:
            raise ValueError("layer: bf16_edge_layers needs the GEMM's layer and the layer count")
        if layer < bf16_edge_layers or layer >= layers - bf16_edge_layers:
            return compute
    return RECIPES[name].element


def flops_by_dtype(precision: str, architecture: Layout = LLAMA, mask: str = "causal") -> dict[str, sp.Expr]:
    """Training FLOPs per token by GEMM dtype: :func:`gemm_dtype` of every row of ``model_gemms`` (forward + backward)."""
    split: dict[str, sp.Expr] = {}
    for row in model_gemms(architecture, mask):
        dtype = gemm_dtype(precision, row)
        split[dtype] = expand(split.get(dtype, 0) + row.training)
    return split


def dense_peak(dtype: str, gpu: str) -> float:
    """``gpu``'s dense peak (FLOP/s) for GEMMs in ``dtype``: FP8 / FP4 from their tables, else the preset's bf16 peak (the report's)."""
    from derive.presets import HARDWARE  # here, not on import: the check's proofs need no preset (issue 28)

    hardware = HARDWARE[choose("peak", gpu, HARDWARE)]
    if dtype not in LOW_PRECISION_PEAKS:
        return hardware.peak_flops
    peaks = LOW_PRECISION_PEAKS[dtype]
    if gpu not in peaks:
        raise ValueError(f"peak: {gpu} has no {dtype} tensor cores ({dtype} peaks: {', '.join(peaks)})")
    return peaks[gpu]


def gemm_peak(precision: str, gemm: object, gpu: str, **edges: int) -> float:
    """The dense peak (FLOP/s) of ``gpu`` for ``gemm``'s dtype under ``precision`` (:func:`gemm_dtype`)."""
    return dense_peak(gemm_dtype(precision, gemm, **edges), gpu)


def mfu_peak(convention: str, gpu: str) -> float:
    """The peak an MFU figure divides by under ``convention`` (:data:`MFU_PEAKS`)."""
    return dense_peak(MFU_PEAKS[choose("mfu_peak", convention, MFU_PEAKS)].dtype, gpu)


def gathered_bytes_per_parameter(precision: str, fp8_param_gather: bool = False) -> sp.Expr:
    """Bytes one FP8-quantised layer-matrix element costs in a parameter all-gather (ZeRO-3 / FSDP / distributed optimizer).

    bf16: 2; FP8 parameter gather: 1 plus the weight's block scales (per-tensor scales are O(tensors)).
    """
    flag("fp8_param_gather", fp8_param_gather)
    name = recipe_of(precision)
    dtype = gathered_parameter_dtype(name, fp8_param_gather)
    if name is None or dtype != RECIPES[name].element:
        return sp.Integer(dtype_bytes(PRECISIONS[precision].compute))
    return RECIPES[name].element_bytes + RECIPES[name].weight.overhead()


def gather_ratio(precision: str, fp8_param_gather: bool = True) -> sp.Expr:
    """Parameter all-gather bytes relative to the bf16 gather: 1/2 per tensor, 33/64 under MXFP8, 129/512 under NVFP4."""
    return gathered_bytes_per_parameter(precision, fp8_param_gather) / dtype_bytes("bf16")


def dispatch_bytes_per_element(precision: str) -> sp.Expr:
    """Bytes per activation element of the MoE dispatch all-to-all: FP8 plus its 1 x 128 tile scales under DeepSeek-V3's recipe, else 16-bit."""
    name = recipe_of(precision)
    dtype = dispatch_dtype(name)
    if name is None or dtype != RECIPES[name].element:
        return sp.Integer(dtype_bytes(PRECISIONS[precision].compute))
    return RECIPES[name].element_bytes + RECIPES[name].activation.overhead()


def gradient_reduction_dtype(precision: str) -> str:
    """The dtype gradients are reduced in: the precision's gradient dtype (FP8 never reaches the reduction)."""
    return PRECISIONS[choose("precision", precision, PRECISIONS)].grad
