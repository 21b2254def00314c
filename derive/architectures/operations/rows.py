"""What every operation's saved rows share: dtypes, the token layout of a profile, conditional rows.

Tags on a saved row (the accounts of derive.accounts.activations read them):
  exactly one of ``tp_shardable`` (split over t tensor-parallel ranks: by heads or by the MLP's
  columns) or ``replicated`` (whole on every TP rank; sequence parallelism splits it over t);
  ``score_matrix`` for the [b, a, s, s] tensors; ``recomputed_selective`` for what Korthikanti's
  selective recompute drops; ``norm_statistics`` for a norm's per-token mean/rstd;
  ``softmax_statistics`` for the fused kernel's logsumexp; ``layer_input`` for the tensor full
  recompute keeps; ``dropout`` for masks; ``linear_input`` for a layer matrix's input kept only by
  that linear, ``linear_input_shared`` for one another op keeps too (derive.architectures.saved_fp8
  re-types the first and adds an FP8 copy of the second); the block (``norm``, ``attention``,
  ``mlp``). The op that keeps a tensor is in ``note``.
"""
from __future__ import annotations

import sympy as sp

from derive.symbols import a, b, g, h, s, w
from derive.tensors import Tensor

#: 16-bit activations (Korthikanti et al. 2022, section 4.1).
ACTIVATION = "bf16"
#: dropout masks kept as one byte per element.
MASK = "bool"
#: fp32 row statistics (norm rstd on CUDA, flash attention's logsumexp).
STATISTICS = "fp32"
#: token ids and positions (nn.Embedding's int64 indices).
INDEX_DTYPE = "int64"
#: per-head width of the article's and Megatron's layers.
HEAD = h / a

#: The token dimensions of a profile's tensors: Megatron's [s, b, ...] or PyTorch's [b, s, ...].
SEQUENCE_FIRST, BATCH_FIRST = (s, b), (b, s)


def row(name: str, shape: tuple[sp.Expr, ...], dtype: str, *tags: str, note: str = "") -> Tensor:
    """One saved tensor: ``shape`` elements of ``dtype``, tagged."""
    return Tensor(name, shape, dtype, frozenset(tags), note=note)


def exists(condition: sp.Basic) -> sp.Expr:
    """A row's count under ``condition``: 1 where it holds, 0 elsewhere (a row that exists only there)."""
    return sp.Piecewise((1, condition), (0, True))


def when(kept: Tensor, condition: sp.Basic) -> list[Tensor]:
    """``kept`` held only where ``condition`` holds (none if it never does, as is if it always does)."""
    if condition == sp.true:
        return [kept]
    if condition == sp.false:
        return []
    return [kept.times(exists(condition))]


#: b = 1: a view that folds the batch into another dimension needs no copy (one sequence).
SINGLE_SEQUENCE = sp.Eq(b, 1, evaluate=False)  # b may be 1: nothing to decide (or import) on load
#: transformers' eager attention with one key/value head and one sequence: repeat_kv's
#: expand + reshape (transformers/integrations/sdpa_attention.py repeat_kv) merges a size-1
#: g with the stride-0 repeat, a view; torch.matmul folds [b, a] into one batch dimension
#: (aten/src/ATen/native/LinearAlgebra.cpp _matmul_impl, reshape) without a copy only at b = 1,
#: so QK^T and PV keep the g-head K and V themselves, not a copy at a heads.
KV_VIEW = sp.And(sp.Eq(g, 1, evaluate=False), SINGLE_SEQUENCE)


def sliding_mask(window: bool) -> sp.Basic:
    """Where transformers materialises the sdpa mask of a sliding-window model: s >= w.

    masking_utils._ignore_causal_mask_sdpa refuses to skip the mask when
    ``kv_length >= local_attention_size`` (create_sliding_window_causal_mask, sdpa_mask).
    """
    return s >= w if window else sp.false


def residual_dropout(name: str, block: str, note: str) -> list[Tensor]:
    """The 1-byte mask of a dropout on a block's [s, b, h] output before the residual add (Korthikanti et al. 2022, section 4.1)."""
    return [row(name, (*SEQUENCE_FIRST, h), MASK, "replicated", "dropout", block, note=note)]
