"""Megatron-LM's estimators, rebuilt from derive's tables under Megatron's convention.

The functions carry the names of megatron/training/theoretical_memory_usage.py
(core_v0.18.0). Each takes a record's ``args`` as a mapping and returns an
exact number. Nothing here re-types Megatron's arithmetic: the parameter
table is derive's own (``derive.architectures.families``), the bytes per
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

The activation estimators read derive's saved-for-backward tables
(``derive.accounts.activations``) under Megatron's convention:

* the layer is the GPT table (MHA, GELU, f the real MLP width) whatever the
  model: GQA, head width and SwiGLU are not seen; the score matrices are
  dropped (selective recompute); norm statistics are not counted;
* ``compute_activation_memory`` (sequence parallel + selective recompute):
  every row over t; the embedding keeps int64 token ids and a dropout mask;
  with one stage the output edge is the final norm's input, the head's input
  and the fp32 logits (4 bytes per logit);
* ``compute_activation_memory_without_sp``: the same table at f = 4h (the real
  f is ignored), ``tp_shardable`` rows over t; with one stage the output edge
  is the head's input and the bf16 logits (2 bytes per logit); everything
  times the 21/20 overhead;
* the first pipeline stage: the chunks in flight of the 1F1B schedule (at
  most m when ``num_microbatches`` is given) or of the interleaved one (where
  Megatron does not cap by m), L/(p v) layers each.

``num_floating_point_operations`` is the three passes of derive's GEMM table
(``derive.architectures.gemms``): the Llama attention (a query heads, g groups,
head width k) plus Megatron's optional output gate [h, a k], the SwiGLU or GELU
MLP, the causal QK^T and PV, one [h, V] output head; token-linear terms times
the tokens of the batch and the score terms times the sum of squared sequence
lengths (``derive.accounts.flops.packed_flops``).

Each departure from the derived ledger is quantified in
``derive.identities.megatron``.
"""
from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from functools import lru_cache
from typing import Callable, Mapping

import sympy as sp

from derive.accounts.activations import first_stage_activation_bytes, sharded
from derive.accounts.flops import packed_flops
from derive.architectures.families import gpt_layer, llama_edges, llama_layer
from derive.architectures.gemms import attention_score_gemms, flops, weight_gemms
from derive.architectures.operations.edges import output_saved
from derive.architectures.parameters import DTYPE
from derive.conventions.megatron import (
    MEGATRON_OVERHEAD,
    distributed_optimizer_bytes_per_parameter,
)
from derive.inputs import choose, positive_int
from derive.symbols import FFN_4H, L, Q, T, V, a, b, d, f, g, h, k, m, p, s, t, v
from derive.tensors import Ledger, Tensor
from derive.units import BYTE_UNITS

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


def tensor_parallel_share(table: Ledger, ranks: sp.Expr = t) -> Ledger:
    """One tensor-parallel rank's share: matrices and embeddings split, norms replicated."""
    return table.map(lambda w: w if w.has("norm") else w.divided(ranks))


def first_stage(swiglu: bool, normalization: str, untied: bool, single_stage: bool) -> Ledger:
    """Megatron's most loaded shard: block / p + embedding (+ head when p = 1 and untied), matrices / t."""
    ends = edges(untied, normalization)
    block = layer(swiglu, normalization).times(L) + ends.where("norm")
    shard = _sharded(block, p) + ends.where("embedding")
    if single_stage and untied:
        shard = shard + ends.where("output")
    return tensor_parallel_share(shard)


@lru_cache(maxsize=None)
def weight_and_optimizer_bytes(swiglu: bool, normalization: str, untied: bool,
                               single_stage: bool, distributed: bool) -> sp.Expr:
    """Bytes per GPU of the first stage: its parameters times the bf16 recipe's bytes/parameter."""
    shard = first_stage(swiglu, normalization, untied, single_stage)
    per_parameter = distributed_optimizer_bytes_per_parameter("bf16", distributed=distributed)
    return sp.expand(shard.numel() * per_parameter)


def _moe():
    """derive.megatron_moe, which takes the MoE, MLA and MTP records (imported late: it imports this module)."""
    from derive import megatron_moe
    return megatron_moe


def _flag(args: Mapping[str, object], name: str) -> bool:
    value = args.get(name)
    if not isinstance(value, bool):
        raise ValueError(f"{name}: must be True or False, got {value!r}")
    return value


#: Megatron's argument names -> derive's symbols.
ARG_SYMBOLS: dict[str, sp.Symbol] = {
    "seq_length": s, "micro_batch_size": b, "num_layers": L, "hidden_size": h,
    "kv_channels": k, "ffn_hidden_size": f, "padded_vocab_size": V,
    "tensor_model_parallel_size": t, "pipeline_model_parallel_size": p, "data_parallel_size": d,
}


def _read(args: Mapping[str, object], names: tuple[str, ...]) -> dict[str, int]:
    """Symbol -> positive integer for each Megatron argument in ``names``."""
    return {ARG_SYMBOLS[name].name: positive_int(name, args.get(name)) for name in names}


def _sizes(args: Mapping[str, object]) -> dict[str, int]:
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
    return {a.name: heads, g.name: groups,
            **_read(args, ("num_layers", "hidden_size", "kv_channels", "ffn_hidden_size",
                           "padded_vocab_size", "tensor_model_parallel_size",
                           "pipeline_model_parallel_size", "data_parallel_size"))}


def exact(value: sp.Expr) -> Fraction:
    """A SymPy rational as a fractions.Fraction; ValueError if a symbol is left."""
    if not value.is_Rational:
        raise ValueError(f"result: not a number after substitution: {value}")
    return Fraction(int(value.p), int(value.q))


# ---- compiled evaluation: each cached expression printed once as exact int / Fraction code ----

@lru_cache(maxsize=None)
def _compiled(expr: sp.Expr) -> tuple[tuple[str, ...], Callable[..., int | Fraction]]:
    """The names of ``expr``'s symbols and its exact Python code (derive.printing.python.exact_function), made once."""
    from derive.printing.python import arguments, exact_function  # numpy loads with it: only when a number is asked for

    return tuple(symbol.name for symbol in arguments(expr)), exact_function(expr)


def evaluate(expr: sp.Expr, values: Mapping[str, int]) -> Fraction:
    """``expr`` at ``values`` (symbol name -> int) exactly, as ``exact(expr.xreplace(...))`` but compiled."""
    names, function = _compiled(expr)
    try:
        result = function(*[values[name] for name in names])
    except KeyError as missing:
        raise ValueError(f"result: not a number after substitution, {missing} is not given") from None
    return result if type(result) is Fraction else Fraction(result)


def compute_weight_and_optimizer_memory(args: Mapping[str, object], **extra_call_args: object) -> Fraction:
    """Bytes per GPU of weights + optimizer on the first stage (theoretical_memory_usage.py, same name)."""
    if _moe().handles(args):
        return _moe().compute_weight_and_optimizer_memory(args)
    sizes = _sizes(args)
    expr = weight_and_optimizer_bytes(
        _flag(args, "swiglu"),
        str(args.get("normalization")),
        _flag(args, "untie_embeddings_and_output_weights"),
        sizes[p.name] == 1,
        _flag(args, "use_distributed_optimizer"),
    )
    return evaluate(expr, sizes)


# ---- activations: compute_activation_memory and compute_activation_memory_without_sp ----

#: Megatron's layer: the GPT table with materialised attention, scores dropped (selective recompute).
MEGATRON_LAYER = {"profile": "gpt", "attention_kernel": "materialised", "recompute": "selective"}

#: Where the without-SP estimator substitutes f: it uses 10 + 24/t, the GPT table at f = 4h.


def output_rows(sequence_parallel: bool) -> Ledger:
    """The output edge Megatron counts at p = 1, on one TP rank (theoretical_memory_usage.py)."""
    rows = output_saved()
    if sequence_parallel:      # final norm input, head input, fp32 logits: 4sbh(1 + V/h), over t
        return sharded(rows.without("transient", "token_ids"), t, True)
    # without SP: "outputs from final layer norm" (the head input) and the bf16 logits
    return sharded(Ledger([rows["output projection input"], rows["logits"]]), t, False)


@lru_cache(maxsize=None)
def activation_bytes(sequence_parallel: bool, single_stage: bool, interleaved: bool,
                     micro_batches: bool) -> sp.Expr:
    """First-stage activation bytes per GPU under Megatron's convention, in s b h f L V t p v m."""
    total = first_stage_activation_bytes(
        **MEGATRON_LAYER, tensor_parallel=t, sequence_parallel=sequence_parallel,
        pipeline=p, virtual=v if interleaved else None,
        micro_batches=m if micro_batches and not interleaved else None, output_layer=False)
    if single_stage:
        total += output_rows(sequence_parallel).bytes()
    if sequence_parallel:
        return sp.expand(total)
    return sp.expand(MEGATRON_OVERHEAD * total.subs(FFN_4H))


def _optional(field: str, value: object) -> int | None:
    return None if value is None else positive_int(field, value)


def _activation_values(args: Mapping[str, object], num_microbatches: object) -> dict[str, int]:
    values = _read(args, ("seq_length", "micro_batch_size", "hidden_size", "num_layers",
                          "padded_vocab_size", "tensor_model_parallel_size",
                          "pipeline_model_parallel_size"))
    if args.get("ffn_hidden_size") is not None:
        values[f.name] = positive_int("ffn_hidden_size", args.get("ffn_hidden_size"))
    virtual = _optional("virtual_pipeline_model_parallel_size",
                        args.get("virtual_pipeline_model_parallel_size"))
    if virtual is not None:
        values[v.name] = virtual
    micro = _optional("num_microbatches", num_microbatches)
    if micro is not None:
        values[m.name] = micro
    return values


def _activations(args: Mapping[str, object], num_microbatches: object,
                 sequence_parallel: bool) -> Fraction:
    values = _activation_values(args, num_microbatches)
    if sequence_parallel and f.name not in values:
        raise ValueError("ffn_hidden_size: needed by compute_activation_memory")
    expr = activation_bytes(sequence_parallel, values[p.name] == 1, v.name in values, m.name in values)
    return evaluate(expr, values)


def compute_activation_memory(args: Mapping[str, object], num_microbatches: object = None,
                              **extra_call_args: object) -> Fraction:
    """Activation bytes per GPU, first stage, SP + selective recompute (theoretical_memory_usage.py, same name)."""
    return _activations(args, num_microbatches, sequence_parallel=True)


def compute_activation_memory_without_sp(args: Mapping[str, object], num_microbatches: object = None,
                                         **extra_call_args: object) -> Fraction:
    """Activation bytes per GPU, first stage, no SP, times 1.05 (theoretical_memory_usage.py, same name)."""
    return _activations(args, num_microbatches, sequence_parallel=False)


def report_theoretical_memory(args: Mapping[str, object], num_microbatches: object = None,
                              **extra_call_args: object) -> tuple[Fraction, Fraction, Fraction]:
    """(weights + optimizer, activations, total) in MiB per GPU (theoretical_memory_usage.py, same name)."""
    if args.get("hybrid_layer_pattern"):
        raise ValueError(f"hybrid_layer_pattern: not modelled by derive, got {args['hybrid_layer_pattern']!r}")
    mib = BYTE_UNITS["MiB"]
    weights = compute_weight_and_optimizer_memory(args) / mib
    with_sp = (_flag(args, "sequence_parallel")
               and args.get("recompute_granularity") == "selective")
    activations = _activations(args, num_microbatches, sequence_parallel=with_sp) / mib
    return weights, activations, weights + activations


# ---- FLOPs: num_floating_point_operations (megatron/training/training.py) ----

def output_gate() -> Tensor:
    """Megatron's --attention-output-gate: a gate [h, a k] stacked into linear_qkv (a GEMM of the layer)."""
    return Tensor("attention.output_gate", (h, a * k), DTYPE,
                  frozenset({"gemm", "layer", "attention"}))


def flop_layer(swiglu: bool, gated: bool) -> Ledger:
    """The layer's GEMM parameters: GQA attention at head width k (+ gate), SwiGLU or GELU MLP, no biases."""
    attention = llama_layer(head_dim=k).where("gemm", "attention")
    if gated:
        attention = attention + Ledger([output_gate()])
    mlp = (llama_layer(head_dim=k) if swiglu else gpt_layer(head_dim=k)).where("gemm", "mlp")
    return attention + mlp


@lru_cache(maxsize=None)
def flops_per_token(swiglu: bool, gated: bool) -> sp.Expr:
    """FLOPs per token of one s-token sequence: L layers (weights, causal scores at width k) + the head."""
    gemms = (weight_gemms(flop_layer(swiglu, gated)) + attention_score_gemms("causal", a, k)).times(L)
    return flops(gemms + weight_gemms(llama_edges().where("output")))


#: Tokens of a batch and the sum of its squared sequence lengths (total_real_tokens_in_batch,
#: seqlen_squared_sum_in_batch; b s and b s^2 for b unpacked sequences of s tokens).
BATCH_TOKENS, SQUARED_LENGTHS = T, Q


@lru_cache(maxsize=None)
def batch_flops(swiglu: bool, gated: bool) -> sp.Expr:
    """FLOPs of a batch in T tokens and Q = sum of squared sequence lengths (packed_flops)."""
    return packed_flops(BATCH_TOKENS, SQUARED_LENGTHS, per_token=flops_per_token(swiglu, gated))


FLOP_UNSUPPORTED = UNSUPPORTED + ("moe_latent_size", "experimental_attention_variant",
                                  "hybrid_layer_pattern")


def num_floating_point_operations(args: Mapping[str, object], batch_size: object,
                                  seqlen_squared_sum_in_batch: object = None,
                                  total_real_tokens_in_batch: object = None) -> int:
    """FLOPs of one global batch, forward + backward, no recompute (training.py, same name)."""
    if _moe().handles(args):
        return _moe().num_floating_point_operations(args, batch_size, seqlen_squared_sum_in_batch,
                                                    total_real_tokens_in_batch)
    for name in FLOP_UNSUPPORTED:
        if args.get(name):
            raise ValueError(f"{name}: not modelled by derive (dense models only), got {args[name]!r}")
    heads = positive_int("num_attention_heads", args.get("num_attention_heads"))
    seq = positive_int("seq_length", args.get("seq_length"))
    sequences = positive_int("batch_size", batch_size)
    tokens = _optional("total_real_tokens_in_batch", total_real_tokens_in_batch)
    squares = _optional("seqlen_squared_sum_in_batch", seqlen_squared_sum_in_batch)
    values = {
        L.name: positive_int("num_layers", args.get("num_layers")),
        h.name: positive_int("hidden_size", args.get("hidden_size")),
        a.name: heads,
        g.name: (positive_int("num_query_groups", args.get("num_query_groups"))
            if _flag(args, "group_query_attention") else heads),
        k.name: positive_int("kv_channels", args.get("kv_channels")),
        f.name: positive_int("ffn_hidden_size", args.get("ffn_hidden_size")),
        V.name: positive_int("padded_vocab_size", args.get("padded_vocab_size")),
        BATCH_TOKENS.name: sequences * seq if tokens is None else tokens,
        SQUARED_LENGTHS.name: sequences * seq**2 if squares is None else squares,
    }
    expr = batch_flops(_flag(args, "swiglu"), _flag(args, "attention_output_gate"))
    result = evaluate(expr, values)
    return int(result) if result.denominator == 1 else result
