"""Parameter tables, tensor by tensor, for the two layer families derive knows.

Tags on every tensor:
  ``layer`` (held once per layer; ``count`` is L), ``embedding`` (input token
  embedding), ``position`` (learned position embedding), ``output`` (the
  output head), ``norm`` (a norm's scale or shift), ``bias``, and ``gemm`` for
  every matrix that sits in a GEMM (the weights 6 FLOP/parameter/token apply
  to: layer matrices and the output head, not the input lookup nor norms);
  a layer's tensors also name their block, ``attention`` (with the norm before
  it) or ``mlp``.
Parameters are stored in the compute dtype of the model (bf16); what the
optimizer holds per parameter is the business of ``derive.accounts.state``.
"""
from __future__ import annotations

import sympy as sp

from derive.inputs import choose
from derive.symbols import L, V, a, f, g, h, s
from derive.tensors import Ledger, Tensor

DTYPE = "bf16"


def matrix(name: str, rows: sp.Expr, cols: sp.Expr, *tags: str) -> Tensor:
    """A weight matrix [in, out] that sits in a GEMM."""
    return Tensor(name, (rows, cols), DTYPE, frozenset(("gemm", *tags)))


def vector(name: str, width: sp.Expr, *tags: str) -> Tensor:
    """A vector parameter (norm scale or shift, bias)."""
    return Tensor(name, (width,), DTYPE, frozenset(tags))


def llama_layer(head_dim: sp.Expr = h / a) -> Ledger:
    """One Llama layer: RMSNorm, GQA (a query, g kv heads), SwiGLU, no biases (Llama 3 paper, Table 3)."""
    q_width, kv_width = a * head_dim, g * head_dim
    return Ledger(
        [
            vector("attention_norm.weight", h, "norm", "attention"),
            matrix("attention.wq", h, q_width, "attention"),
            matrix("attention.wk", h, kv_width, "attention"),
            matrix("attention.wv", h, kv_width, "attention"),
            matrix("attention.wo", q_width, h, "attention"),
            vector("ffn_norm.weight", h, "norm", "mlp"),
            matrix("feed_forward.w1 (gate)", h, f, "mlp"),
            matrix("feed_forward.w3 (up)", h, f, "mlp"),
            matrix("feed_forward.w2 (down)", f, h, "mlp"),
        ]
    ).map(lambda t: t.tagged("layer"))


def llama_edges() -> Ledger:
    """Untied input embedding and output head, and the final RMSNorm."""
    return Ledger(
        [
            Tensor("tok_embeddings.weight", (V, h), DTYPE, frozenset({"embedding"})),
            vector("norm.weight", h, "norm"),
            matrix("output.weight", h, V, "output"),
        ]
    )


def gpt_layer(head_dim: sp.Expr = h / a) -> Ledger:
    """One GPT layer: LayerNorm with bias, fused QKV and projection with biases, fc1/fc2 with biases (GPT-2/3, Megatron)."""
    q_width = a * head_dim
    return Ledger(
        [
            vector("input_layernorm.weight", h, "norm", "attention"),
            vector("input_layernorm.bias", h, "norm", "bias", "attention"),
            matrix("attention.query_key_value.weight", h, 3 * q_width, "attention"),
            vector("attention.query_key_value.bias", 3 * q_width, "bias", "attention"),
            matrix("attention.dense.weight", q_width, h, "attention"),
            vector("attention.dense.bias", h, "bias", "attention"),
            vector("post_attention_layernorm.weight", h, "norm", "mlp"),
            vector("post_attention_layernorm.bias", h, "norm", "bias", "mlp"),
            matrix("mlp.dense_h_to_4h.weight", h, f, "mlp"),
            vector("mlp.dense_h_to_4h.bias", f, "bias", "mlp"),
            matrix("mlp.dense_4h_to_h.weight", f, h, "mlp"),
            vector("mlp.dense_4h_to_h.bias", h, "bias", "mlp"),
        ]
    ).map(lambda t: t.tagged("layer"))


def gpt_edges() -> Ledger:
    """Word embedding tied to the output head (so it is also a GEMM), learned positions, final LayerNorm."""
    return Ledger(
        [
            Tensor(
                "word_embeddings.weight (tied output head)",
                (V, h),
                DTYPE,
                frozenset({"embedding", "output", "gemm", "tied"}),
            ),
            Tensor("position_embeddings.weight", (s, h), DTYPE, frozenset({"position"})),
            vector("final_layernorm.weight", h, "norm"),
            vector("final_layernorm.bias", h, "norm", "bias"),
        ]
    )


FAMILIES = {
    "llama": (llama_layer, llama_edges),
    "gpt": (gpt_layer, gpt_edges),
}


def model_parameters(family: str) -> Ledger:
    """Every parameter tensor of a ``family`` model: L layers plus the edges."""
    layer, edges = FAMILIES[choose("family", family, FAMILIES)]
    return layer().times(L) + edges()


def parameter_count(family: str) -> sp.Expr:
    """N, summed over the parameter table."""
    return model_parameters(family).numel()


def gemm_parameter_count(family: str) -> sp.Expr:
    """N_GEMM: the parameters that sit in a GEMM (layer matrices and the output head)."""
    return model_parameters(family).where("gemm").numel()
