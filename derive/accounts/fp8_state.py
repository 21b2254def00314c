"""The rows an FP8 recipe adds to the resident state: cached FP8 weight copies, their scales, delayed-scaling history.

Built from a recipe's fields (``derive.recipes``) and two counts of the model's
parameter table: ``N_8`` elements and ``n_8`` tensors in the layer matrices the
recipe quantises (``derive.recipes.fp8_weights``). Per-tensor scales are one row
entry per tensor, block scales one per block: sizes from shapes and block sizes.
"""
from __future__ import annotations

import sympy as sp

from derive.recipes import Recipe
from derive.tensors import Tensor

#: Tags of a copy of the parameters held per rank and sharded with them under ZeRO-3 / FSDP.
WEIGHT_COPY = frozenset({"params", "resident", "zero3", "fp8"})
#: Tags of a TE module's scaling buffers: per module, on every rank (not sharded).
MODULE_BUFFER = frozenset({"params", "resident", "fp8", "fp8_meta"})


#: Row tags: ``params``, ``resident``, ``fp8``; the copy (``row-wise`` / ``column-wise``) on a weight
#: copy and its block scales; ``zero3`` on what ZeRO-3 shards with the parameters; ``fp8_meta``
#: on a TE module's delayed-scaling buffers.


def fp8_weight_rows(recipe: Recipe, numel: sp.Expr, tensors: sp.Expr,
                    fp8_param_gather: bool = False) -> list[Tensor]:
    """Cached FP8 weight copies and their scales (TE Float8Tensor data / transpose, block scale_inv).

    Under Megatron's --fp8-param-gather the row-wise copy is the parameter itself
    (megatron/training/arguments.py; TE ``fp8_model_init``): the caller drops that
    many bf16 parameters.
    """
    scaling = recipe.weight
    rows: list[Tensor] = []
    for copy in recipe.weight_copies:
        held = "parameters (--fp8-param-gather)" if fp8_param_gather and copy == recipe.weight_copies[0] \
            else "weight cache"
        rows.append(Tensor(f"{recipe.name} {held}, {copy}", (numel,), recipe.element,
                           WEIGHT_COPY | {copy}, note="cached across the micro-batches of a step"))
        if not scaling.per_tensor:
            rows.append(Tensor(f"{recipe.name} {copy} block scales ({scaling.dtype}, one per "
                               f"{scaling.block[0] * scaling.block[1]} elements)",
                               (scaling.scales(numel, tensors),), scaling.dtype, WEIGHT_COPY | {copy}))
        if scaling.tensor_scale:
            rows.append(Tensor(f"{recipe.name} {copy} global scales ({scaling.tensor_scale}, one per "
                               "tensor)", (scaling.tensor_scales(tensors),), scaling.tensor_scale,
                               WEIGHT_COPY | {copy}))
    if scaling.per_tensor:
        rows.append(Tensor(f"{recipe.name} weight scale_inv ({scaling.dtype}, one per tensor)",
                           (scaling.scales(numel, tensors),), scaling.dtype, WEIGHT_COPY,
                           note="shared by the data and its transpose"))
    if recipe.delayed:
        quantizers = sum(recipe.quantizers)
        rows += [
            Tensor(f"{recipe.name} scales ({quantizers} FP8 tensors per GEMM)", (quantizers * tensors,),
                   "fp32", MODULE_BUFFER, note="DelayedScalingRecipeState.scale, forward and backward"),
            Tensor(f"{recipe.name} amax history ({recipe.amax_history} steps)",
                   (recipe.amax_history, quantizers * tensors), "fp32", MODULE_BUFFER,
                   note="DelayedScalingRecipeState.amax_history, forward and backward"),
        ]
    return rows
