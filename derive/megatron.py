"""Megatron-LM's estimators, rebuilt from derive's tables under Megatron's convention.

The functions carry the names of megatron/training/theoretical_memory_usage.py
(core_v0.18.0). Each takes a record's ``args`` as a mapping and returns an
exact number. Nothing here re-types Megatron's arithmetic: the parameter
table is derive's own (``derive.architectures.parameters``), the bytes per
parameter come from ``derive.accounts.state``; what is Megatron's is the
*convention* under which the tables are read:

* linear biases are never counted; a norm holds a scale (``RMSNorm``) or a
  scale and a shift (``LayerNorm``), per the ``normalization`` argument;
* learned position embeddings are not counted;
* the vocabulary is ``padded_vocab_size`` and the head width ``kv_channels``;
* the "most loaded shard" is the first pipeline stage: L/p layers and the
  final norm's 1/p share (it sits in Megatron's transformer block) plus the
  input embedding; matrices are divided by t, norms are replicated on every
  tensor-parallel rank; with one stage and untied embeddings the output head
  is added;
* bytes per parameter are the bf16 recipe's (fp32 main gradients): 18, or
  6 + 12/d with the distributed optimizer.

Each departure from the derived ledger is quantified in
``derive.identities.megatron``.
"""
from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from functools import lru_cache
from typing import Mapping

import sympy as sp

from derive.accounts.state import distributed_optimizer_bytes_per_parameter
from derive.architectures.parameters import gpt_layer, llama_edges, llama_layer
from derive.inputs import choose, positive_int
from derive.symbols import L, V, a, d, f, g, h, k, p, t
from derive.tensors import Ledger

#: Megatron's ``normalization`` argument -> whether the norm carries a shift (bias).
NORMALIZATIONS: dict[str, bool] = {"RMSNorm": False, "LayerNorm": True}

#: Arguments whose feature derive does not model; each must be off (None/False).
UNSUPPORTED = ("num_experts", "mtp_num_layers", "multi_latent_attention",
               "moe_shared_expert_intermediate_size")

#: Megatron's default --make-vocab-size-divisible-by (megatron/training/arguments.py).
VOCAB_DIVISIBLE_BY = 128


def padded_vocab(vocab: sp.Expr, tensor_parallel: sp.Expr = t,
                 divisible_by: int = VOCAB_DIVISIBLE_BY) -> sp.Expr:
    """V rounded up to a multiple of divisible_by * t (megatron/training/tokenizer _vocab_size_with_padding)."""
    step = divisible_by * tensor_parallel
    return sp.ceiling(sp.sympify(vocab) / step) * step


def _norms(table: Ledger, normalization: str) -> Ledger:
    """``table`` with its norms as ``normalization`` shapes them: scale, plus a shift for LayerNorm."""
    with_shift = NORMALIZATIONS[choose("normalization", normalization, NORMALIZATIONS)]
    scales = table.where("norm").without("bias")
    shifts = scales.map(lambda w: replace(w, name=w.name.replace(".weight", ".bias"),
                                          tags=w.tags | {"bias"}))
    return table.without("norm") + scales + (shifts if with_shift else Ledger())


def layer(swiglu: bool, normalization: str) -> Ledger:
    """One layer as Megatron counts it: derive's table at head width k, no linear biases."""
    table = llama_layer(head_dim=k) if swiglu else gpt_layer(head_dim=k)
    return _norms(table.filter(lambda w: w.has("norm") or not w.has("bias")), normalization)


def edges(untied: bool, normalization: str) -> Ledger:
    """Embedding, final norm and (untied) output head; no learned positions (Megatron's count)."""
    table = llama_edges()
    if not untied:
        table = table.without("output")
    return _norms(table, normalization)


def _sharded(table: Ledger, ranks: sp.Expr) -> Ledger:
    return table.map(lambda w: w.divided(ranks))


def _tensor_parallel(table: Ledger, ranks: sp.Expr = t) -> Ledger:
    """One tensor-parallel rank's share: matrices and embeddings split, norms replicated."""
    return table.map(lambda w: w if w.has("norm") else w.divided(ranks))


def first_stage(swiglu: bool, normalization: str, untied: bool, single_stage: bool) -> Ledger:
    """Megatron's most loaded shard: block / p + embedding (+ head when p = 1 and untied), matrices / t."""
    ends = edges(untied, normalization)
    block = layer(swiglu, normalization).times(L) + ends.where("norm")
    shard = _sharded(block, p) + ends.where("embedding")
    if single_stage and untied:
        shard = shard + ends.where("output")
    return _tensor_parallel(shard)


@lru_cache(maxsize=None)
def weight_and_optimizer_bytes(swiglu: bool, normalization: str, untied: bool,
                               single_stage: bool, distributed: bool) -> sp.Expr:
    """Bytes per GPU of the first stage: its parameters times the bf16 recipe's bytes/parameter."""
    shard = first_stage(swiglu, normalization, untied, single_stage)
    per_parameter = distributed_optimizer_bytes_per_parameter("bf16", distributed=distributed)
    return sp.expand(shard.numel() * per_parameter)


def _flag(args: Mapping[str, object], name: str) -> bool:
    value = args.get(name)
    if not isinstance(value, bool):
        raise ValueError(f"{name}: must be True or False, got {value!r}")
    return value


def _sizes(args: Mapping[str, object]) -> dict[sp.Symbol, int]:
    """Symbol -> value from Megatron's argument names (num_query_groups := heads without GQA)."""
    for name in UNSUPPORTED:
        if args.get(name):
            raise ValueError(f"{name}: not modelled by derive (dense models only), got {args[name]!r}")
    heads = positive_int("num_attention_heads", args.get("num_attention_heads"))
    groups = (positive_int("num_query_groups", args.get("num_query_groups"))
              if _flag(args, "group_query_attention") else heads)
    if not _flag(args, "swiglu") and groups != heads:
        raise ValueError(f"num_query_groups: the GPT table has fused MHA QKV, got {groups} "
                         f"groups for {heads} heads")
    return {
        L: positive_int("num_layers", args.get("num_layers")),
        h: positive_int("hidden_size", args.get("hidden_size")),
        a: heads,
        g: groups,
        k: positive_int("kv_channels", args.get("kv_channels")),
        f: positive_int("ffn_hidden_size", args.get("ffn_hidden_size")),
        V: positive_int("padded_vocab_size", args.get("padded_vocab_size")),
        t: positive_int("tensor_model_parallel_size", args.get("tensor_model_parallel_size")),
        p: positive_int("pipeline_model_parallel_size", args.get("pipeline_model_parallel_size")),
        d: positive_int("data_parallel_size", args.get("data_parallel_size")),
    }


def exact(value: sp.Expr) -> Fraction:
    """A SymPy rational as a fractions.Fraction; ValueError if a symbol is left."""
    if not value.is_Rational:
        raise ValueError(f"result: not a number after substitution: {value}")
    return Fraction(int(value.p), int(value.q))


def compute_weight_and_optimizer_memory(args: Mapping[str, object], **extra_call_args: object) -> Fraction:
    """Bytes per GPU of weights + optimizer on the first stage (theoretical_memory_usage.py, same name)."""
    sizes = _sizes(args)
    expr = weight_and_optimizer_bytes(
        _flag(args, "swiglu"),
        str(args.get("normalization")),
        _flag(args, "untie_embeddings_and_output_weights"),
        sizes[p] == 1,
        _flag(args, "use_distributed_optimizer"),
    )
    return exact(expr.xreplace({symbol: sp.Integer(n) for symbol, n in sizes.items()}))
