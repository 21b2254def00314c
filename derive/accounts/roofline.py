"""One GEMM pass on one GPU: max(FLOPs at the dtype's tensor-core peak, operand bytes at HBM bandwidth).

A roofline per GEMM (Williams et al. 2009): a pass of C[M, N] = A[M, K] B[K, N] takes

    max( 2MNK / peak_dtype,  bytes / HBM bandwidth ) / (eta_gemm x waves)

where ``bytes`` are the operands it reads and the result it writes, each at its own dtype's
size (``OPERAND_BYTES``: an FP8 operand is one byte, an FP4 one half; results are written in BF16, the weight
gradient accumulated into the FP32 main gradient), and ``waves`` is the share of tile slots
its output fills (``wave_efficiency``). Small and skinny GEMMs (few tokens per expert, a
narrow hidden size) land on the memory side by the same formula that puts large ones on
the compute side. The FP8 casts a recipe runs before its GEMMs are memory-bound traffic
from the recipe's fields (``cast_bytes_per_element``).

Attention's score GEMMs follow the kernel the activation tables assume
(``derive.accounts.workload.attention_kernel``): Korthikanti's and Narayanan's GPT runs wrote the
[s, s] scores to HBM (memory-bound at s = 2048 on an A100 by this roofline); a flash kernel keeps
them on chip (``on_chip``) and is compute-bound at the GEMMs' efficiency (FlashAttention-3, Shah et
al. 2024: 740 TFLOP/s forward in BF16 on an H100, 75 % of its peak, a cuBLAS GEMM's share). Charging
flash attention for the score matrix had made the dense FP8 runs of the held-out set 7-28 % too
slow (Llama 3 8B at s = 8192: attention half the predicted step).

Measured and not kept (python -m derive.calibrate, then --check; nothing fitted to the held-out
runs): the bytes side at the element-wise HBM efficiency instead of the GEMM's own (held-out mean
|error| 27.5 % against 25.7 %, MoE 61.8 % against 48.1 %, Korthikanti Table 5 max 3.6 % against
2.5 %); the routed experts' GEMMs as one grouped GEMM whose tiles share the waves (Megatron's
moe_grouped_gemm) instead of each expert's GEMM on its own waves (held-out MoE 36.2 % against
29.7 %: the per-expert waves stand in for what a grouped GEMM of small experts loses).
"""
from __future__ import annotations

import numpy as np

from derive.dtypes import DTYPE_BYTES
from derive.inputs import choose
from derive.recipes import Recipe
from derive.systems import System

#: A size or a time: a number, or a numpy column of them (one per layout).
Number = float | np.ndarray

#: Bytes of a GEMM input operand by the dtype the GEMM runs in (derive.dtypes): an FP8 element
#: (E4M3 / E5M2) is one byte, held as uint8 data in Transformer Engine's Float8Tensor.
OPERAND_BYTES = {"bf16": DTYPE_BYTES["bf16"], "fp8": DTYPE_BYTES["uint8"], "fp4": DTYPE_BYTES["uint8"] / 2}
#: Bytes of a forward or data-gradient result: the activation dtype, BF16 (TE's FP8 GEMMs take
#: ``out_dtype`` = the module's activation dtype: transformer_engine/pytorch/cpp_extensions/gemm.py).
OUTPUT_BYTES = DTYPE_BYTES["bf16"]
#: Bytes per element of a weight-gradient result: accumulated into the FP32 main gradient, read
#: and written (Megatron --gradient-accumulation-fusion, on by default: TE ``fuse_wgrad_accumulation``
#: / fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32 in megatron/core/tensor_parallel/layers.py).
WGRAD_BYTES = 2 * DTYPE_BYTES["fp32"]
#: Output tile of one thread block (CUTLASS's default 128 x 256 tensor-core tile on Ampere and Hopper).
TILE = (128, 256)
#: The three passes of C[M, N] = A[M, K] B[K, N] (derive.architectures.gemms.Gemm.passes):
#: (first operand, second operand, result) as shapes over (M, N, K) -- forward A B = C, data
#: gradient dC B^T = dA, weight gradient A^T dC = dB.
PASSES = {"forward": (("m", "k"), ("k", "n"), ("m", "n")),
          "dgrad": (("m", "n"), ("n", "k"), ("m", "k")),
          "wgrad": (("k", "m"), ("m", "n"), ("k", "n"))}


def wave_efficiency(rows: Number, cols: Number, gpu: System, batch: Number = 1) -> Number:
    """Share of the tile slots a GEMM's output [rows, cols] fills: tiles over whole waves of one tile per SM.

    The output is cut into ``TILE`` tiles (CUTLASS / cuBLAS thread-block tiles), one per streaming
    multiprocessor at a time; the last wave and the edge tiles run partly empty (NVIDIA, "Matrix
    Multiplication Background User's Guide": tile and wave quantization). Sizes may be numpy columns.
    """
    tile_rows, tile_cols = TILE
    rows, cols = np.maximum(rows, 1), np.maximum(cols, 1)
    down, across = -(-rows // tile_rows), -(-cols // tile_cols)
    tiles = down * across * batch
    waves = -(-tiles // gpu.sms)
    return (rows * cols * batch) / (waves * gpu.sms * tile_rows * tile_cols)


def pass_bytes(m: Number, n: Number, k: Number, pass_: str, dtype: str) -> Number:
    """HBM bytes one pass reads and writes: its two operands at ``dtype``'s size, its result in BF16 (FP32 main grad for wgrad)."""
    size = OPERAND_BYTES[choose("dtype", dtype, OPERAND_BYTES)]
    sizes = {"m": m, "n": n, "k": k}
    first, second, result = PASSES[choose("pass", pass_, PASSES)]
    out = WGRAD_BYTES if pass_ == "wgrad" else OUTPUT_BYTES
    return sum(sizes[rows] * sizes[cols] * element
               for (rows, cols), element in ((first, size), (second, size), (result, out)))


def pass_seconds(m: Number, n: Number, k: Number, pass_: str, dtype: str, gpu: System, eta: float,
                 batch: Number = 1, on_chip: bool = False) -> Number:
    """Seconds of ``batch`` independent passes: max(FLOPs / peak, bytes / HBM bandwidth) / (eta x waves).

    ``eta`` is the share of its roofline a GEMM kernel reaches (``derive.accounts.efficiency.Efficiency``,
    one per GPU generation); ``waves`` the share of tile slots its result fills, which idles SMs for
    its loads as for its math (``wave_efficiency``). ``on_chip``: a fused (flash) attention pass whose
    [s, s] score tile never reaches HBM (Dao et al. 2022, FlashAttention, section 3.1: tiling keeps
    S and P in SRAM); its Q, K, V, O reads are O(s d) against O(s^2 d) FLOPs, so it is compute-bound.
    """
    rows, cols = (dict(m=m, n=n, k=k)[axis] for axis in PASSES[choose("pass", pass_, PASSES)][2])
    compute = 2 * m * n * k / gpu.peak(dtype)
    memory = 0.0 if on_chip else pass_bytes(m, n, k, pass_, dtype) / gpu.hbm_bandwidth
    return batch * np.maximum(compute, memory) / (eta * wave_efficiency(rows, cols, gpu, batch))


def achieved_flops(m: float, n: float, k: float, dtype: str, gpu: System, eta: float,
                   pass_: str = "forward", batch: float = 1) -> float:
    """FLOP/s of ``batch`` passes of C[m, n] = A[m, k] B[k, n] on the roofline (``pass_seconds``)."""
    return 2 * m * n * k * batch / pass_seconds(m, n, k, pass_, dtype, gpu, eta, batch)


#: Whether a GPU generation's FP8 tensor cores take only the TN layout, so that a per-tensor-scaled
#: operand used transposed (the weight gradient's input and output gradient, the data gradient's
#: weight) needs a transposed FP8 copy: Hopper does (TE's fused cast_transpose); Blackwell runs
#: FP8 GEMMs in any layout (TE ``is_non_tn_fp8_gemm_supported``: compute capability >= 10.0,
#: transformer_engine/pytorch/utils.py). Ampere has no FP8.
TN_ONLY = {"ampere": True, "hopper": True, "blackwell": False}


def cast_copies(recipe: Recipe, generation: str) -> int:
    """FP8 copies one cast writes of a tensor used in two GEMM layouts (row-wise and column-wise).

    Block scales run along one direction (MXFP8's 1 x 32, the 1 x 128 tiles), so a block-scaled
    tensor is quantised twice from its high-precision values, on every GPU (TE MXFP8BlockScaling /
    Float8BlockScaling docstrings); a per-tensor-scaled one needs its transpose only where the FP8
    tensor cores are TN-only (``TN_ONLY``).
    """
    if not recipe.activation.per_tensor:
        return len(recipe.weight_copies)
    return len(recipe.weight_copies) if TN_ONLY[choose("generation", generation, TN_ONLY)] else 1


def cast_bytes_per_element(recipe: Recipe, generation: str, norm_fused: bool = False) -> float:
    """HBM bytes one element's FP8 cast moves: reads, FP8 copies and their block scales.

    ``norm_fused``: the tensor is the output of a normalization Transformer Engine fuses into the
    linear layer (LayerNormLinear's ``with_quantized_norm``: the norm kernel is handed the quantizer,
    transformer_engine/pytorch/module/layernorm_linear.py): the norm writes the FP8 copies itself,
    so the cast reads nothing more; under current scaling the norm computes the amax as it writes
    its BF16 output, and one read (the cast) remains.

    The high-precision tensor is read once by the cast; current scaling reads it once more
    before, for the amax its scale needs (TE Float8CurrentScalingQuantizer: nvte_compute_amax,
    then the cast: transformer_engine/common/recipe/current_scaling.cu); delayed scaling takes
    its scale from the history and updates the amax inside the cast; block scaling finds each
    block's amax inside the cast kernel. Each copy writes one FP8 element plus its block's
    share of a scale (``derive.recipes.Scaling.overhead``).
    """
    reads = (1 if recipe.delayed or not recipe.activation.per_tensor else 2) - (1 if norm_fused else 0)
    copies = cast_copies(recipe, generation)
    written = copies * (float(recipe.element_bytes) + float(recipe.activation.overhead()))
    return reads * DTYPE_BYTES["bf16"] + written
