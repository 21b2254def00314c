"""What derive's ledgers predict at a numeric shape: saved tensors row by row, and FLOPs.

Nothing here imports torch: the predictions are sums over the activation
ledgers (``derive.architectures.saved``, ``derive.architectures.operations.edges``)
and the FLOP account (``derive.accounts.flops``) with the shape substituted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import sympy as sp

from derive.accounts.flops import flops_per_token
from derive.architectures.decoder import FAMILIES
from derive.architectures.operations.edges import hf_edges_saved, llama_edges_saved
from derive.architectures.saved import gpt_layer_saved, llama_layer_saved
from derive.architectures.tables import gemm_parameter_count, parameter_count
from derive.inputs import choose, divides, positive_int
from derive.symbols import BY_NAME, N_GEMM, L, N, b, s
from derive.tensors import Ledger

#: LayerNorm mean/rstd dtype of PyTorch's CPU kernel for bf16 input (aten native_layer_norm
#: keeps the statistics in the input dtype on CPU; CUDA keeps them in fp32).
CPU_LAYER_NORM_STATISTICS = "bf16"

#: kind -> (the layer's saved-tensor ledger, FLOP family, the model edges' ledger for a whole model)
KINDS: dict[str, tuple[Callable[[], Ledger], str, Callable[[], Ledger] | None]] = {
    "gpt-eager": (lambda: gpt_layer_saved("materialised", CPU_LAYER_NORM_STATISTICS), "gpt", None),
    "llama-eager": (lambda: llama_layer_saved(profile="eager"), "llama", None),
    "llama-model": (lambda: llama_layer_saved(profile="eager"), "llama", llama_edges_saved),
}

#: transformers' own LlamaForCausalLM, MistralForCausalLM, Qwen3ForCausalLM (derive.validate.hf):
#: kind -> (model_type, attn_implementation); Qwen 3 adds its q/k norms to the profile.
HF_KINDS: dict[str, tuple[str, str]] = {
    f"hf-{model_type}-{implementation}": (model_type, implementation)
    for model_type in ("llama", "mistral", "qwen3") for implementation in ("sdpa", "eager")
}
KINDS.update({
    kind: ((lambda profile=f"hf-{implementation}", qk=model_type == "qwen3":
            llama_layer_saved(profile, qk_norm=qk)), "llama", hf_edges_saved)
    for kind, (model_type, implementation) in HF_KINDS.items()
})
LAYER_FIELDS = ("s", "b", "h", "a", "g", "f")
MODEL_FIELDS = LAYER_FIELDS + ("L", "V")

#: The attention mask whose FLOPs FlopCounterMode sees for each kind (torch/utils/flop_counter.py):
#: the GPT layer's two materialised bmm over all s x s scores (the counter never halves
#: causal attention), and nothing for the CPU flash kernel, which has no registered formula;
#: transformers' eager attention is two bmm over all s x s scores, like the GPT layer's.
COUNTED_MASK = {"gpt": "full", "llama": "none",
                **{kind: "full" for kind in HF_KINDS if kind.endswith("eager")}}


def counted_mask(kind: str) -> str:
    """The attention mask under which derive's count equals what FlopCounterMode sees for ``kind``."""
    return COUNTED_MASK.get(kind) or COUNTED_MASK[KINDS[kind][1]]


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
    return LAYER_FIELDS if KINDS[choose("kind", kind, KINDS)][2] is None else MODEL_FIELDS


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
    layer_ledger, _, edges_ledger = KINDS[choose("kind", kind, KINDS)]
    layer = layer_ledger()
    if edges_ledger is None:
        return layer
    edges = edges_ledger()
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
    expr = sp.sympify(flops_per_token(FAMILIES[family], mask))
    return expr.subs({N: parameter_count(FAMILIES[family]), N_GEMM: gemm_parameter_count(FAMILIES[family])})


def predicted_flops(kind: str, shape: Mapping[str, int], mask: str | None = None) -> int:
    """Forward + backward FLOPs of ``kind`` at ``shape`` from derive's FLOP account.

    ``mask`` defaults to what FlopCounterMode can see (COUNTED_MASK); a
    layer is the L-derivative of the per-token account, times s*b tokens.
    """
    _, family, edges = KINDS[choose("kind", kind, KINDS)]
    per_token = _per_token(family, mask or counted_mask(kind))
    if edges is None:
        per_token = sp.diff(sp.expand(per_token), L)
    return int((per_token * s * b).subs(_subs(kind, shape)))
