"""The norm operation: what LayerNorm and RMSNorm keep for backward in each implementation.

Implementations: Megatron's / CPU LayerNorm (input, mean, rstd: torch native_layer_norm keeps
mean/rstd in fp32 on CUDA, in the input dtype on CPU), PyTorch eager nn.RMSNorm (composite, fp32
copies), Transformer Engine's fused RMSNorm (input, fp32 rstd), transformers' LlamaRMSNorm (fp32
upcast, rstd, normalised cast back) and Gemma's (scaled before the cast, with 1 + w in fp32).
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.operations.rows import (ACTIVATION, BATCH_FIRST, SEQUENCE_FIRST,
                                                  STATISTICS, row)
from derive.symbols import a, b, g, h, s
from derive.tensors import Tensor

#: The statistics native_layer_norm keeps per token.
LAYER_NORM_STATISTICS = ("mean", "rstd")


def layer_input(layout: tuple[sp.Expr, ...] = (s, b, h)) -> Tensor:
    """The layer input x [s, b, h]: all full recompute keeps (Korthikanti et al. 2022, section 5)."""
    return row("layer input", layout, ACTIVATION, "replicated", "layer_input", "norm",
               note="kept by the first norm (and by the checkpoint under full recompute)")


def layer_norm(prefix: str, input_row: Tensor, dtype: str = ACTIVATION) -> list[Tensor]:
    """torch native_layer_norm: its input and the mean / rstd per token in ``dtype``."""
    return [input_row] + [
        row(f"{prefix} {stat}", input_row.shape[:-1], dtype, "replicated", "norm_statistics", "norm",
            note=f"{stat} per token, kept by {prefix}")
        for stat in LAYER_NORM_STATISTICS
    ]


def cpu_layer_norm(prefix: str, input_row: Tensor | None) -> list[Tensor]:
    """nn.LayerNorm on CPU in bf16 (transformers' GPT-NeoX, GPT-2): its input (None: a tensor another row holds) and bf16 mean / rstd."""
    held = input_row or row(f"{prefix} input", (b, s, h), ACTIVATION, "replicated", "norm")
    rows = layer_norm(prefix, held, ACTIVATION)
    return rows if input_row is not None else rows[1:]


def eager_rms_norm(prefix: str) -> list[Tensor]:
    """nn.RMSNorm in eager PyTorch: the composite rms_norm upcasts, so it keeps fp32 copies."""
    return [
        row(f"{prefix} input (fp32 upcast)", (*BATCH_FIRST, h), STATISTICS, "replicated", "norm",
            note=f"x.float(), kept by pow and mul inside {prefix} (nn.RMSNorm)"),
        row(f"{prefix} rstd", BATCH_FIRST, STATISTICS, "replicated", "norm_statistics", "norm",
            note=f"rsqrt(mean(x^2) + eps) per token, kept by {prefix}"),
        row(f"{prefix} normalised (fp32)", (*BATCH_FIRST, h), STATISTICS, "replicated", "norm",
            note=f"x * rstd before the scale, kept by the multiply with {prefix}.weight"),
    ]


def fused_rms_norm(prefix: str, input_row: Tensor) -> list[Tensor]:
    """A fused RMSNorm (Transformer Engine / Apex): keeps its input and an fp32 rstd per token."""
    return [input_row, row(f"{prefix} rstd", SEQUENCE_FIRST, STATISTICS, "replicated",
                           "norm_statistics", "norm", note=f"fp32 rstd, kept by {prefix}")]


def hf_rms_norm(prefix: str, shape: tuple[sp.Expr, ...], *tags: str,
                normalised: str = ACTIVATION) -> list[Tensor]:
    """LlamaRMSNorm: keeps the fp32 upcast input and rstd, and casts x * rstd back to bf16 before the scale.

    ``tags`` replace ``replicated`` (a norm over per-head widths is ``tp_shardable``);
    ``normalised="fp32"``: Olmo2RMSNorm scales before the cast (modeling_olmo2.py), so the
    multiply with the weight keeps x * rstd in fp32.
    """
    tags = tags or ("replicated",)
    cast = "(x * rstd).to(input_dtype)" if normalised == ACTIVATION else "x * rstd (fp32)"
    return [
        row(f"{prefix} input (fp32 upcast)", shape, STATISTICS, "norm", *tags,
            note=f"hidden_states.to(float32), kept by pow and mul inside {prefix}"),
        row(f"{prefix} rstd", shape[:-1], STATISTICS, "norm_statistics", "norm", *tags,
            note=f"rsqrt(variance + eps), kept by the mul inside {prefix}"),
        row(f"{prefix} normalised ({normalised})", shape, normalised, "norm", *tags,
            note=f"{cast}, kept by the multiply with {prefix}.weight"),
    ]


def gemma_rms_norm(prefix: str, shape: tuple[sp.Expr, ...], *tags: str) -> list[Tensor]:
    """Gemma2RMSNorm.forward: LlamaRMSNorm's fp32 input and rstd, x * rstd kept fp32, and 1 + w in fp32."""
    return [*hf_rms_norm(prefix, shape, *tags, normalised=STATISTICS),
            row(f"{prefix} 1 + weight (fp32)", shape[-1:], STATISTICS, "norm",
                *(tags or ("replicated",)),
                note=f"1.0 + {prefix}.weight.float(), a new tensor kept by the multiply")]


def qk_norms(head: sp.Expr, kind: str = "head") -> list[Tensor]:
    """q_norm / k_norm: ``head`` a LlamaRMSNorm over each head's width (Qwen 3, modeling_qwen3.py),
    ``gemma`` Gemma 3's Gemma3RMSNorm over each head, ``projection`` OLMo 2's Olmo2RMSNorm over the
    whole q_proj / k_proj output, one rstd per token, fp32 normalised (modeling_olmo2.py Olmo2Attention).
    """
    if kind == "projection":
        return [*hf_rms_norm("q_norm", (b, s, a * head), "tp_shardable", "qk_norm",
                             normalised=STATISTICS),
                *hf_rms_norm("k_norm", (b, s, g * head), "tp_shardable", "qk_norm",
                             normalised=STATISTICS)]
    norm = gemma_rms_norm if kind == "gemma" else hf_rms_norm
    return [*norm("q_norm", (b, s, a, head), "tp_shardable", "qk_norm"),
            *norm("k_norm", (b, s, g, head), "tp_shardable", "qk_norm")]


def te_rms_norm(prefix: str, width: sp.Expr, tags: tuple[str, ...] = ()) -> list[Tensor]:
    """TE's fused RMSNorm over ``width`` in an MoE / MLA layer (transformer_engine/pytorch/module/rmsnorm.py): its [s, b, width] input and an fp32 rstd per row."""
    return [row(f"{prefix} input", (s, b, width), ACTIVATION, "norm", *tags,
                note=f"kept by the fused {prefix}"),
            row(f"{prefix} rstd", (s, b), STATISTICS, "norm", "norm_statistics", *tags,
                note=f"fp32 rstd, kept by the fused {prefix}")]
