"""FP8 rows of the communication ledger: the parameter all-gather under --fp8-param-gather, the MoE dispatch in FP8.

What travels is read from the recipes (``derive.recipes.gathered_parameter_dtype``,
``dispatch_dtype``, ``combine_dtype``) and built from the rows that hold it: the gathered
parameters are the state ledger's parameter rows that ZeRO-3 shards (``zero3``) for the rank's
share, with the quantised layer matrices (``derive.recipes.fp8_weights``, the same rows the state
account counts as N_8 / n_8) as their row-wise FP8 copy and its scales; the dispatched tokens are
the routed copies re-typed to the recipe's element plus one activation scale per tile.
"""
from __future__ import annotations

from dataclasses import replace

import sympy as sp

from derive.accounts.state import PRECISIONS, state_ledger
from derive.recipes import RECIPES, combine_dtype, dispatch_dtype, fp8_weights, gathered_parameter_dtype
from derive.tensors import Ledger, Tensor


def fp8_tensor_count(table: Ledger) -> sp.Expr:
    """n_8 of an unsharded ``table``: its quantised matrices (tensor parallelism cuts a matrix, not their number)."""
    return sp.expand(sp.Add(*(row.count for row in fp8_weights(table))))


def gathered_parameters(share: Ledger, tensors: sp.Expr, precision: str, fp8_param_gather: bool) -> Ledger:
    """The rows a ZeRO / FSDP / distributed-optimizer parameter all-gather moves for ``share``.

    bf16 compute copy of every parameter; under Megatron's --fp8-param-gather
    (megatron/core/distributed/param_and_grad_buffer.py gathers the FP8 parameter data; TE
    ``fp8_model_init``) the quantised layer matrices travel as the recipe's gathered dtype with
    their scales (the row-wise copy: the column-wise one is made from it after the gather), the
    rest (norms, embedding, head, router) stays at the compute dtype.
    """
    rule = PRECISIONS[precision]
    numel = share.numel()
    quantised = fp8_weights(share).numel()
    gathered = gathered_parameter_dtype(rule.fp8, fp8_param_gather)
    if rule.fp8 is None or quantised == 0 or gathered != RECIPES[rule.fp8].element:
        return state_ledger(precision, "sgd", numel).where("params").without("fp8")
    recipe = RECIPES[rule.fp8]
    held = state_ledger(precision, "sgd", numel, fp8_params=quantised, fp8_tensors=tensors,
                        fp8_param_gather=True).where("params", "zero3")
    rows = held.without(*recipe.weight_copies[1:])
    if not any(row.dtype == gathered for row in rows.where("fp8", recipe.weight_copies[0])):
        raise ValueError(f"fp8_param_gather: the {recipe.name} parameter copy is not {gathered}")
    return rows


def routed_payload(routed: Tensor, precision: str, into_experts: bool) -> sp.Expr:
    """Bytes of an expert-parallel all-to-all of the ``routed`` token copies under ``precision``.

    Into the experts (forward dispatch, the combine's backward) in ``dispatch_dtype``; out of them
    (forward combine, the dispatch's backward) in ``combine_dtype`` (DeepSeek-V3 section 3.3.4:
    activations before the up-projections and activation gradients before the down-projections
    dispatched in FP8, both combines kept in BF16; DeepEP's FP8 dispatch kernel). An FP8 payload
    carries the recipe's activation scales (one fp32 per 1 x 128 tile).
    """
    name = PRECISIONS[precision].fp8
    dtype = dispatch_dtype(name) if into_experts else combine_dtype(name)
    if name is None or dtype != RECIPES[name].element:
        return routed.bytes
    scaling = RECIPES[name].activation
    data = replace(routed, dtype=dtype)
    scales = Tensor(f"{routed.name} {scaling.dtype} activation scales",
                    (scaling.scales(data.numel, routed.count),), scaling.dtype)
    return sp.expand(data.bytes + scales.bytes)
