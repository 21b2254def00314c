"""What PyTorch's autograd engine keeps and what its flop counter counts, for one kind and shape.

Saved tensors are caught with ``torch.autograd.graph.saved_tensors_hooks``
(every tensor any backward node packs during the forward) and deduplicated by
storage: several saved views of one storage are one allocation. Parameters and
buffers are excluded by storage identity (their ``untyped_storage().data_ptr()``),
so a view of a buffer (a slice of the RoPE table) is excluded too. Each storage is
labelled with the backward nodes that hold it, read back from the autograd
graph's ``_saved_*`` attributes. FLOPs are ``torch.utils.flop_counter.FlopCounterMode``'s
total over the forward and the backward.
"""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Callable, Mapping

# The validate extra pins torch alone; torch warns at import when NumPy is absent, and needs none here.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import torch  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from derive.validate.layers import DTYPE, GPTLayer, LlamaLayer, LlamaModel
from derive.validate.hf import causal_lm
from derive.validate.predicted import HF_KINDS, checked_shape

DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32",
               torch.bool: "bool", torch.uint8: "uint8", torch.int8: "int8", torch.int64: "int64",
               torch.float8_e4m3fn: "fp8", torch.float8_e5m2: "fp8"}


@dataclass(frozen=True)
class Saved:
    """One allocation autograd keeps: the view(s) saved, their dtype and bytes."""

    saved_by: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: str
    numel: int
    bytes: int


def build(kind: str, shape: Mapping[str, int]) -> tuple[torch.nn.Module, Callable[[], torch.Tensor]]:
    """The module for ``kind`` at ``shape`` and a closure running its forward to a tensor."""
    v = checked_shape(kind, shape)
    torch.manual_seed(0)
    if kind in HF_KINDS:
        return causal_lm(*HF_KINDS[kind], v)
    if kind == "gpt-eager":
        module = GPTLayer(v["s"], v["h"], v["a"], v["f"])
        x = torch.randn(v["s"], v["b"], v["h"], dtype=DTYPE, requires_grad=True)
        return module, lambda: module(x)
    if kind == "llama-eager":
        module = LlamaLayer(v["s"], v["h"], v["a"], v["g"], v["f"])
        x = torch.randn(v["b"], v["s"], v["h"], dtype=DTYPE, requires_grad=True)
        return module, lambda: module(x)
    module = LlamaModel(v["L"], v["V"], v["s"], v["h"], v["a"], v["g"], v["f"])
    tokens = torch.randint(0, v["V"], (v["b"], v["s"]))
    targets = torch.randint(0, v["V"], (v["b"], v["s"]))
    return module, lambda: module(tokens, targets)


def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


def _view(tensor: torch.Tensor) -> tuple:
    """A key naming one view of one storage."""
    return (_storage(tensor), tensor.storage_offset(), tuple(tensor.shape), tensor.stride())


def _holders(root: torch.autograd.graph.Node) -> dict[tuple, list[str]]:
    """view -> the ``Node.attribute`` names of the backward nodes that keep it."""
    holders: dict[tuple, list[str]] = {}
    seen, stack = set(), [root]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for attribute in dir(node):
            if not attribute.startswith("_saved_"):
                continue
            value = getattr(node, attribute)
            for item in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(item, torch.Tensor):
                    label = f"{node.name()}.{attribute[len('_saved_'):]}"
                    holders.setdefault(_view(item), []).append(label)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return holders


def _elements(view: torch.Tensor) -> frozenset[int]:
    """The storage elements ``view`` covers."""
    count = view.untyped_storage().nbytes() // view.element_size()
    index = torch.arange(count).as_strided(view.shape, view.stride(), view.storage_offset())
    return frozenset(index.flatten().tolist())


def _allocation(views: list[torch.Tensor], holders: dict[tuple, list[str]]) -> list[Saved]:
    """One storage as rows: its distinct views when they tile it without overlap, else one row."""
    views = list({_view(v): v for v in views}.values())
    labels = {_view(v): tuple(sorted(set(holders.get(_view(v), ["?"])))) for v in views}
    nbytes = views[0].untyped_storage().nbytes()
    dtype = DTYPE_NAMES[views[0].dtype]
    covers = [_elements(v) for v in views]
    disjoint = sum(len(c) for c in covers) == len(frozenset().union(*covers))
    if len(views) > 1 and disjoint and sum(v.nbytes for v in views) == nbytes:
        return [Saved(labels[_view(v)], tuple(v.shape), dtype, v.numel(), v.nbytes) for v in views]
    widest = max(views, key=lambda v: v.numel())
    numel = nbytes // widest.element_size()
    every = tuple(sorted({label for names in labels.values() for label in names}))
    return [Saved(every, tuple(widest.shape), dtype, numel, nbytes)]


def saved_tensors(kind: str, shape: Mapping[str, int]) -> list[Saved]:
    """Every allocation autograd keeps for backward, parameters and buffers excluded."""
    return saved_by(*build(kind, shape))


def saved_by(module: torch.nn.Module, forward: Callable[[], torch.Tensor]) -> list[Saved]:
    """Every allocation autograd keeps while ``forward`` runs, ``module``'s parameters and buffers excluded."""
    own = {_storage(t) for t in (*module.parameters(), *module.buffers())}
    packed: list[torch.Tensor] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        packed.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = forward()
    holders = _holders(out.grad_fn)
    by_storage: dict[int, list[torch.Tensor]] = {}
    for tensor in packed:
        if _storage(tensor) not in own:
            by_storage.setdefault(_storage(tensor), []).append(tensor)
    return [row for views in by_storage.values() for row in _allocation(views, holders)]


def measured_saved_bytes(kind: str, shape: Mapping[str, int]) -> int:
    """Bytes autograd keeps for backward for ``kind`` at ``shape``, deduplicated by storage."""
    return sum(row.bytes for row in saved_tensors(kind, shape))


def measured_flops(kind: str, shape: Mapping[str, int],
                   math_attention: bool = False) -> tuple[int, dict[str, int]]:
    """FlopCounterMode's forward + backward total, and its count per aten op.

    ``math_attention`` forces scaled_dot_product_attention onto its math backend
    (explicit bmm the counter can see) instead of the CPU flash kernel.
    """
    _, forward = build(kind, shape)
    backend = sdpa_kernel(SDPBackend.MATH) if math_attention else contextlib.nullcontext()
    with backend, FlopCounterMode(display=False) as counter:
        out = forward()
        out.backward(torch.ones_like(out))
    per_op = {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
    return int(counter.get_total_flops()), per_op
