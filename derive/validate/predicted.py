"""What derive's ledgers predict at a numeric shape: saved tensors row by row, and FLOPs.

Nothing here imports torch: the predictions are sums over the activation
ledgers (``derive.architectures.saved``, ``derive.architectures.saved_edges``)
and the FLOP account (``derive.accounts.flops``) with the shape substituted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import sympy as sp

from derive.accounts.flops import flops_per_token
from derive.architectures.parameters import gemm_parameter_count, parameter_count
from derive.architectures.saved import gpt_layer_saved, llama_layer_saved
from derive.architectures.saved_edges import llama_edges_saved
from derive.inputs import choose, divides, positive_int
from derive.symbols import BY_NAME, N_GEMM, L, N, b, s
from derive.tensors import Ledger

#: LayerNorm mean/rstd dtype of PyTorch's CPU kernel for bf16 input (aten native_layer_norm
#: keeps the statistics in the input dtype on CPU; CUDA keeps them in fp32).
CPU_LAYER_NORM_STATISTICS = "bf16"

#: kind -> (the layer's saved-tensor ledger, FLOP family, whole model?)
KINDS: dict[str, tuple[Callable[[], Ledger], str, bool]] = {
    "gpt-eager": (lambda: gpt_layer_saved("materialised", CPU_LAYER_NORM_STATISTICS), "gpt", False),
    "llama-eager": (lambda: llama_layer_saved(profile="eager"), "llama", False),
    "llama-model": (lambda: llama_layer_saved(profile="eager"), "llama", True),
}
LAYER_FIELDS = ("s", "b", "h", "a", "g", "f")
MODEL_FIELDS = LAYER_FIELDS + ("L", "V")

#: The attention mask whose FLOPs FlopCounterMode sees for each kind (torch/utils/flop_counter.py):
#: the GPT layer's two materialised bmm over all s x s scores (the counter never halves
#: causal attention), and nothing for the CPU flash kernel, which has no registered formula.
COUNTED_MASK = {"gpt": "full", "llama": "none"}


@dataclass(frozen=True)
class Row:
    """One tensor of a ledger at a numeric shape."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    numel: int
    bytes: int


def fields(kind: str) -> tuple[str, ...]:
    """The shape fields ``kind`` needs."""
    return MODEL_FIELDS if KINDS[choose("kind", kind, KINDS)][2] else LAYER_FIELDS


def checked_shape(kind: str, shape: Mapping[str, int]) -> dict[str, int]:
    """``shape`` as positive ints with the divisibility a layer needs; ValueError naming the field."""
    values = {name: positive_int(name, shape.get(name)) for name in fields(kind)}
    divides("a", values["a"], "h", values["h"])
    divides("g", values["g"], "a", values["a"])
    if KINDS[kind][1] == "gpt" and values["g"] != values["a"]:
        raise ValueError(f"g: the GPT layer is multi-head attention, g must equal a = {values['a']}")
    if KINDS[kind][1] == "llama" and (values["h"] // values["a"]) % 2:
        raise ValueError(f"h: head width h/a = {values['h'] // values['a']} must be even for RoPE")
    return values


def _subs(kind: str, shape: Mapping[str, int]) -> dict[sp.Symbol, int]:
    return {BY_NAME[name]: value for name, value in checked_shape(kind, shape).items()}


def saved_ledger(kind: str) -> Ledger:
    """The ledger of tensors saved for backward that ``kind`` is compared with."""
    layer_ledger, _, whole_model = KINDS[choose("kind", kind, KINDS)]
    layer = layer_ledger()
    if not whole_model:
        return layer
    edges = llama_edges_saved()
    return edges.where("embedding") + layer.times(L) + edges.without("embedding")


def predicted_rows(kind: str, shape: Mapping[str, int]) -> list[Row]:
    """Every tensor of the ledger at ``shape``, one row per copy, in forward order.

    Consecutive tensors held the same number of times (a layer's, L times) are
    repeated as a block, so the rows run layer by layer as the forward does.
    """
    values = _subs(kind, shape)
    rows: list[Row] = []
    block: list[Row] = []
    block_copies = None
    for tensor in [*saved_ledger(kind), None]:
        copies = None if tensor is None else int(sp.Integer(tensor.count.subs(values)))
        if copies != block_copies:
            rows += block * (block_copies or 0)
            block, block_copies = [], copies
        if tensor is not None:
            numeric = tuple(int(sp.Integer(n.subs(values))) for n in tensor.shape)
            one = int(sp.Mul(*numeric))
            block.append(Row(tensor.name, numeric, tensor.dtype, one, one * tensor.element_bytes))
    return rows


def predicted_saved_bytes(kind: str, shape: Mapping[str, int]) -> int:
    """Bytes the ledger says autograd keeps for ``kind`` at ``shape`` (the ledger's sum, substituted)."""
    return int(saved_ledger(kind).bytes().subs(_subs(kind, shape)))


def _per_token(family: str, mask: str) -> sp.Expr:
    """FLOPs per token with N and N_GEMM written out as parameter-table sums."""
    expr = sp.sympify(flops_per_token(family=family, mask=mask))
    return expr.subs({N: parameter_count(family), N_GEMM: gemm_parameter_count(family)})


def predicted_flops(kind: str, shape: Mapping[str, int], mask: str | None = None) -> int:
    """Forward + backward FLOPs of ``kind`` at ``shape`` from derive's FLOP account.

    ``mask`` defaults to what FlopCounterMode can see (COUNTED_MASK); a
    layer is the L-derivative of the per-token account, times s*b tokens.
    """
    _, family, whole_model = KINDS[choose("kind", kind, KINDS)]
    per_token = _per_token(family, mask or COUNTED_MASK[family])
    if not whole_model:
        per_token = sp.diff(sp.expand(per_token), L)
    return int((per_token * s * b).subs(_subs(kind, shape)))
