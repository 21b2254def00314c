"""A saved-for-backward table under an FP8 recipe: the layer matrices' inputs kept in FP8 with their scales.

TE's Linear and LayerNormLinear quantise their input for the forward GEMM and keep the
FP8 data the weight-gradient GEMM reads (transformer_engine/pytorch/module/linear.py,
_Linear.forward: ``saved_inputmat`` is the quantised input when FP8 is on), with one
scale per tensor (per-tensor recipes) or per block (``derive.recipes``). Everything else
stays 16-bit: norms, attention (Q, K, V, output, logsumexp), SwiGLU / GELU inputs, the head.
A ``linear_input`` row is re-typed; a ``linear_input_shared`` row (the attention output,
which flash attention keeps for its own backward) stays and gains an FP8 copy; a
``linear_input_twice`` row (read by two TE Linears, each quantising its own input: MLA's
down projections, megatron/core/transformer/multi_latent_attention.py) becomes two FP8 copies.
A ``grouped_gemm`` row (a GroupedLinear's input: the rank's E/e local experts' tokens) is
quantised split by split, one quantizer per GEMM (transformer_engine/pytorch/module/
grouped_linear.py _GroupedLinear.forward, ``split_quantize(inp, m_splits, input_quantizers)``):
per-tensor recipes keep E/e scales for it.
"""
from __future__ import annotations

from dataclasses import replace

import sympy as sp

from derive.recipes import recipe as fp8_recipe
from derive.symbols import E, e
from derive.tensors import Ledger, Tensor

#: Tags a scale row inherits from its data row: how tensor and sequence parallelism split it.
SPLIT_TAGS = frozenset({"tp_shardable", "replicated"})


def _scale_rows(data: Tensor, name: str) -> list[Tensor]:
    """The block (or per-tensor) scales of one saved tensor, and a second-level per-tensor scale where the recipe has one."""
    scaling = fp8_recipe(name).activation
    rows = [_scale_row(data, name)]
    if scaling.tensor_scale:
        tags = frozenset({"fp8_scale"}) | (data.tags - {"fp8"} - SPLIT_TAGS)
        rows.append(Tensor(f"{data.name} global scale", (sp.Integer(1),), scaling.tensor_scale, tags,
                           count=data.count, note="one per saved tensor"))
    return rows


def _scale_row(data: Tensor, name: str) -> Tensor:
    """The scales of one saved FP8 tensor: one per tensor (not split), or one per block (split like the data)."""
    scaling = fp8_recipe(name).activation
    tags = frozenset({"fp8_scale"}) | (data.tags - {"linear_input", "linear_input_shared",
                                                    "linear_input_twice", "fp8"})
    if scaling.per_tensor:  # one scale per GEMM's input: not sharded, not all-gathered over t_E
        grouped = data.has("grouped_gemm")
        return Tensor(f"{data.name} scale_inv", (E / e if grouped else sp.Integer(1),), scaling.dtype,
                      tags - SPLIT_TAGS - {"expert_hidden"}, count=data.count,
                      note="one per local expert (GroupedLinear)" if grouped else "one per saved tensor")
    elements = sp.Mul(*data.shape)
    return Tensor(f"{data.name} block scales", (scaling.scales(elements, 1),), scaling.dtype, tags,
                  count=data.count, note=f"one per {scaling.block[0] * scaling.block[1]} elements")


def quantised_saved(table: Ledger, name: str) -> Ledger:
    """``table`` as recipe ``name`` keeps it: linear inputs in FP8 plus their scales, every other row as it was."""
    recipe = fp8_recipe(name)
    if not any(row.has("linear_input") or row.has("linear_input_shared") for row in table):
        raise ValueError("profile: an FP8 recipe re-types the linear inputs of the Megatron + TE "
                         "tables (gpt, llama-fused, the fused MoE profile); this table marks none")
    rows: list[Tensor] = []
    for row in table:
        if row.has("linear_input"):
            copies = 2 if row.has("linear_input_twice") else 1
            data = replace(row, name=f"{row.name} ({recipe.element}" + (", one per reader)" if copies > 1
                                                                        else ")"),
                           dtype=recipe.element, tags=row.tags | {"fp8"}, count=copies * row.count)
            rows += [data, *_scale_rows(data, name)]
        elif row.has("linear_input_shared"):
            data = replace(row, name=f"{row.name} ({recipe.element} copy, the next linear's input)",
                           dtype=recipe.element, tags=(row.tags - {"linear_input_shared"}) | {"fp8"},
                           note="quantised by the linear that reads it; the 16-bit tensor stays for attention")
            rows += [row, data, *_scale_rows(data, name)]
        else:
            rows.append(row)
    return Ledger(rows)
