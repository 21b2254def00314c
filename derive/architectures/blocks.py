"""Rows of the dense blocks a Hugging Face decoder is built from: norms, attention, MLP.

Each function returns the parameter rows of one block of ONE layer, sizes symbolic
(h, a, g, k, f of derive.symbols), named as transformers names the parameter inside
a layer (``self_attn.q_proj.weight``; the caller passes the module path). Every
matrix is written [in, out] as in ``derive.architectures.parameters``: nn.Linear
stores the transpose, GPT-2's Conv1D stores it as written.

Tags, besides those of ``derive.architectures.parameters`` (``gemm``, ``norm``,
``bias``, ``attention``, ``mlp``): ``fused`` on a matrix that holds several
projections (GPT-NeoX / Phi-3 / GPT-2 qkv, Phi-3 gate_up), ``qk_norm`` on the
query/key norms (Qwen 3, Gemma 3, OLMo 2).
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.parameters import matrix, vector
from derive.symbols import a, f, g, h, k
from derive.tensors import Tensor

#: Norm kinds: the parameters one norm of width n holds (RMSNorm: a scale; LayerNorm: scale and shift).
NORMS = ("rms", "layer")


def norm(name: str, width: sp.Expr, kind: str, *tags: str) -> list[Tensor]:
    """One norm over ``width``: RMSNorm a scale (Zhang & Sennrich 2019), LayerNorm a scale and a shift (Ba et al. 2016)."""
    rows = [vector(f"{name}.weight", width, "norm", *tags)]
    if kind == "layer":
        rows.append(vector(f"{name}.bias", width, "norm", "bias", *tags))
    return rows


def linear(name: str, rows: sp.Expr, cols: sp.Expr, bias: bool, *tags: str) -> list[Tensor]:
    """One projection [rows, cols] and, with ``bias``, its bias over ``cols``."""
    out = [matrix(f"{name}.weight", rows, cols, *tags)]
    if bias:
        out.append(vector(f"{name}.bias", cols, "bias", *tags))
    return out


def attention(names: dict[str, str], fused: bool, qkv_bias: bool, o_bias: bool,
              qk_norm: str, head_dim: sp.Expr = k) -> list[Tensor]:
    """Multi-head / grouped-query attention: a query heads, g key/value heads of width ``head_dim`` (Ainslie et al. 2023).

    ``qk_norm``: "none", "head" (an RMSNorm over one head's width, shared by the
    heads: Qwen 3, Gemma 3) or "projection" (over the whole q and k projections:
    OLMo 2).
    """
    q_width, kv_width = a * head_dim, g * head_dim
    if fused:
        rows = linear(names["qkv"], h, q_width + 2 * kv_width, qkv_bias, "attention", "fused")
    else:
        rows = [row for role, width in (("q", q_width), ("k", kv_width), ("v", kv_width))
                for row in linear(names[role], h, width, qkv_bias, "attention")]
    rows += linear(names["o"], q_width, h, o_bias, "attention")
    if qk_norm != "none":
        widths = (head_dim, head_dim) if qk_norm == "head" else (q_width, kv_width)
        for role, width in zip(("q_norm", "k_norm"), widths):
            rows += norm(names[role], width, "rms", "attention", "qk_norm")
    return rows


def gated_mlp(names: dict[str, str], width: sp.Expr, bias: bool, fused: bool,
              *tags: str) -> list[Tensor]:
    """A gated MLP (SwiGLU / GeGLU, Shazeer 2020): gate and up [h, width], down [width, h]."""
    if fused:
        rows = linear(names["gate_up"], h, 2 * width, bias, "mlp", "fused", *tags)
    else:
        rows = [*linear(names["gate"], h, width, bias, "mlp", *tags),
                *linear(names["up"], h, width, bias, "mlp", *tags)]
    return rows + linear(names["down"], width, h, bias, "mlp", *tags)


def plain_mlp(names: dict[str, str], width: sp.Expr, bias: bool, *tags: str) -> list[Tensor]:
    """A two-matrix MLP (GELU; Vaswani et al. 2017, GPT-2, GPT-NeoX): up [h, width], down [width, h]."""
    return [*linear(names["up"], h, width, bias, "mlp", *tags),
            *linear(names["down"], width, h, bias, "mlp", *tags)]


def mlp(names: dict[str, str], gated: bool, width: sp.Expr = f, bias: bool = False,
        fused: bool = False, *tags: str) -> list[Tensor]:
    """The layer's MLP: gated (three matrices, two of them possibly fused) or plain (two)."""
    if gated:
        return gated_mlp(names, width, bias, fused, *tags)
    return plain_mlp(names, width, bias, *tags)
