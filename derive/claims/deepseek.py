"""DeepSeek-AI 2024, "DeepSeek-V3 Technical Report" (arXiv 2412.19437), section 3.3: FP8 training.

Section 3.3's statements on what runs in FP8 and what it keeps are counted as
conventions (``derive.recipes``'s ``fp8-blockwise`` recipe, ``adamw-bf16``) and
proved in ``derive.identities.fp8``; the numeric statement checked here is the
speed one. Not registered, with why: the relative loss error below 0.25 % against
BF16 (a training outcome, not a count); the 14-bit accumulation of H800 FP8 GEMMs
and the promotion every N_C = 128 elements (a kernel's numerics); E5M6 for the
attention output cached for linear_proj (derive's recipe keeps TE's FP8 copy: the
E5M6 format has no element size in derive's dtype table); the SwiGLU input cached in
FP8 with the output recomputed (an MoE-layer activation table is issue 15's).
"""
from __future__ import annotations

from derive.claims import document, significant
from derive.conventions.fp8 import gemm_peak

claim = document("DeepSeek-AI 2024", "arXiv 2412.19437, DeepSeek-V3 Technical Report, section 3.3",
                 "Section 3.3 (FP8 training). What is FP8 (Fprop, Dgrad, Wgrad of the linears), "
                 "what stays BF16/FP32 (embedding, output head, MoE gating, norms, attention; "
                 "master weights, gradients), the BF16 moments and the FP8 dispatch / BF16 combine "
                 "are derive's fp8-blockwise and adamw-bf16 conventions, proved in identities.fp8.").claim

SECTION_331 = ("arXiv 2412.19437 section 3.3.1: 'these GEMM operations accept FP8 tensors as inputs "
               "... theoretically doubles the computational speed compared with the original BF16 "
               "method'")

claim("deepseek.3.3.1.fp8-doubles-speed", "3.3.1", "FP8 GEMMs theoretically double the "
      "computational speed of BF16 ones", 2, "x", significant(1),
      lambda: gemm_peak("fp8-blockwise", "linear", "h100") / gemm_peak("bf16", "linear", "h100"),
      note="H800 shares the H100 SXM's tensor cores: dense FP8 1979 over dense BF16 989 TFLOPS",
      checked_against=SECTION_331)
