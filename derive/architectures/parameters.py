"""Parameter rows: a matrix that sits in a GEMM, a vector (norm scale or shift, bias), in the model's dtype.

The tables built of them are walked through the operation registry (derive.architectures.tables,
for every layout: the GPT and Llama families', a config's, an MoE model's).

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

from derive.tensors import Tensor

DTYPE = "bf16"


def matrix(name: str, rows: sp.Expr, cols: sp.Expr, *tags: str) -> Tensor:
    """A weight matrix [in, out] that sits in a GEMM."""
    return Tensor(name, (rows, cols), DTYPE, frozenset(("gemm", *tags)))


def vector(name: str, width: sp.Expr, *tags: str) -> Tensor:
    """A vector parameter (norm scale or shift, bias)."""
    return Tensor(name, (width,), DTYPE, frozenset(tags))
