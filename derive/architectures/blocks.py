"""Parameter rows of the dense blocks a decoder is built from: norms, attention, MLP, embedding, head.

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

from derive.architectures.parameters import DTYPE, matrix, vector
from derive.symbols import V, a, f, g, h, k
from derive.tensors import Tensor

#: Norm kinds: the parameters one norm of width n holds (RMSNorm: a scale; LayerNorm: scale and shift).
NORMS = ("rms", "layer")


def norm(name: str, width: sp.Expr, kind: str, *tags: str) -> list[Tensor]:
    """One norm over ``width``: RMSNorm a scale (Zhang & Sennrich 2019), LayerNorm a scale and a shift (Ba et al. 2016)."""
    rows = [vector(f"{name}.weight", width, "norm", *tags)]
    if kind == "layer":
        rows.append(vector(f"{name}.bias", width, "norm", "bias", *tags))
    return rows


def linear(name: str, rows: sp.Expr, cols: sp.Expr, bias: bool, *tags: str,
           weight: str = ".weight") -> list[Tensor]:
    """One projection [rows, cols] and, with ``bias``, its bias over ``cols``; the matrix is ``name + weight``."""
    out = [matrix(f"{name}{weight}", rows, cols, *tags)]
    if bias:
        out.append(vector(f"{name}.bias", cols, "bias", *tags))
    return out


def attention(names: dict[str, str], fused: bool, qkv_bias: bool, o_bias: bool,
              qk_norm: str, head_dim: sp.Expr = k, weight: str = ".weight") -> list[Tensor]:
    """Multi-head / grouped-query attention: a query heads, g key/value heads of width ``head_dim`` (Ainslie et al. 2023).

    ``qk_norm``: "none", "head" (an RMSNorm over one head's width, shared by the
    heads: Qwen 3, Gemma 3) or "projection" (over the whole q and k projections:
    OLMo 2). ``names`` and ``weight`` are a naming: transformers' module paths and ".weight",
    or Meta's Llama reference (:data:`META_NAMES`, no suffix).
    """
    q_width, kv_width = a * head_dim, g * head_dim
    if fused:
        rows = linear(names["qkv"], h, q_width + 2 * kv_width, qkv_bias, "attention", "fused",
                      weight=weight)
    else:
        rows = [row for role, width in (("q", q_width), ("k", kv_width), ("v", kv_width))
                for row in linear(names[role], h, width, qkv_bias, "attention", weight=weight)]
    rows += linear(names["o"], q_width, h, o_bias, "attention", weight=weight)
    if qk_norm != "none":
        widths = (head_dim, head_dim) if qk_norm == "head" else (q_width, kv_width)
        for role, width in zip(("q_norm", "k_norm"), widths):
            rows += norm(names[role], width, "rms", "attention", "qk_norm")
    return rows


def gated_mlp(names: dict[str, str], width: sp.Expr, bias: bool, fused: bool,
              *tags: str, weight: str = ".weight") -> list[Tensor]:
    """A gated MLP (SwiGLU / GeGLU, Shazeer 2020): gate and up [h, width], down [width, h]."""
    if fused:
        rows = linear(names["gate_up"], h, 2 * width, bias, "mlp", "fused", *tags, weight=weight)
    else:
        rows = [*linear(names["gate"], h, width, bias, "mlp", *tags, weight=weight),
                *linear(names["up"], h, width, bias, "mlp", *tags, weight=weight)]
    return rows + linear(names["down"], width, h, bias, "mlp", *tags, weight=weight)


def plain_mlp(names: dict[str, str], width: sp.Expr, bias: bool, *tags: str) -> list[Tensor]:
    """A two-matrix MLP (GELU; Vaswani et al. 2017, GPT-2, GPT-NeoX): up [h, width], down [width, h]."""
    return [*linear(names["up"], h, width, bias, "mlp", *tags),
            *linear(names["down"], width, h, bias, "mlp", *tags)]


def mlp(names: dict[str, str], gated: bool, width: sp.Expr = f, bias: bool = False,
        fused: bool = False, *tags: str, weight: str = ".weight") -> list[Tensor]:
    """The layer's MLP: gated (three matrices, two of them possibly fused) or plain (two)."""
    if gated:
        return gated_mlp(names, width, bias, fused, *tags, weight=weight)
    return plain_mlp(names, width, bias, *tags)


def megatron_attention(head_dim: sp.Expr = h / a) -> list[Tensor]:
    """Megatron's GPT attention (MHA): one query_key_value [h, 3 a d] and the projection dense, both with biases."""
    q_width = a * head_dim
    return [*linear("attention.query_key_value", h, 3 * q_width, True, "attention"),
            *linear("attention.dense", q_width, h, True, "attention")]


def sinks(heads: sp.Expr = a) -> list[Tensor]:
    """One learned attention-sink logit per query head (GPT-OSS's ``self_attn.sinks`` [a], GptOssAttention)."""
    return [vector("self_attn.sinks", heads, "attention", "sink")]


#: Meta's Llama reference (llama/model.py Attention, FeedForward): the matrices without a ".weight".
META_NAMES: dict[str, str] = {
    "q": "attention.wq", "k": "attention.wk", "v": "attention.wv", "o": "attention.wo",
    "gate": "feed_forward.w1 (gate)", "up": "feed_forward.w3 (up)", "down": "feed_forward.w2 (down)",
}
#: Megatron's GPT MLP (megatron/legacy/model/transformer.py ParallelMLP, the checkpoint's names).
MEGATRON_NAMES: dict[str, str] = {"up": "mlp.dense_h_to_4h", "down": "mlp.dense_4h_to_h"}


def embedding(name: str, tied: bool = False) -> list[Tensor]:
    """The token embedding [V, h]; tied to the output head it is also that GEMM's matrix (used as W^T)."""
    tags = {"embedding", "output", "gemm", "tied"} if tied else {"embedding"}
    return [Tensor(name, (V, h), DTYPE, frozenset(tags))]


def positions(name: str, length: sp.Expr) -> list[Tensor]:
    """Learned position embeddings [length, h] (GPT-2, Megatron's GPT)."""
    return [Tensor(name, (length, h), DTYPE, frozenset({"position"}))]


def head(name: str) -> list[Tensor]:
    """An untied output head [h, V]: the logits' GEMM."""
    return [matrix(name, h, V, "output")]
