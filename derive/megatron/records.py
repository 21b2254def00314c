"""Megatron-LM's five estimators on a record's ``args``, exactly (megatron/training/theoretical_memory_usage.py
and megatron/training/training.py, core_v0.18.0, same names).

Each reads Megatron's arguments into a :class:`derive.megatron.tables.Reading` and
the sizes (symbol name -> positive integer), takes the cached expression of
``weights``, ``activations`` or ``flops`` and evaluates it exactly (``derive.evaluation.exact_value``:
compiled once by ``derive.printing.python``). A dense record is one without ``num_experts``,
``multi_latent_attention`` and ``mtp_num_layers``: its reading has those switches off.
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Mapping

import sympy as sp

from derive.evaluation import exact_value
from derive.inputs import positive_int
from derive.megatron.activations import activation_bytes
from derive.megatron.flops import BATCH_TOKENS, SQUARED_LENGTHS, batch_flops
from derive.megatron.tables import Reading
from derive.megatron.weights import weight_and_optimizer_bytes
from derive.symbols import (D, E, L, L_E, V, a, b, d, e, f, f_E, f_S, g, h, k, k_E, k_nope, k_rope, k_v,
                            m, p, r_kv, r_q, s, t, t_E, v)
from derive.units import BYTE_UNITS

#: Arguments whose feature num_floating_point_operations has and derive does not model; each must be off.
UNSUPPORTED = ("moe_latent_size", "experimental_attention_variant", "hybrid_layer_pattern")

#: Megatron's argument names -> derive's symbols.
ARG_SYMBOLS: dict[str, sp.Symbol] = {
    "seq_length": s, "micro_batch_size": b, "num_layers": L, "hidden_size": h,
    "kv_channels": k, "ffn_hidden_size": f, "padded_vocab_size": V,
    "tensor_model_parallel_size": t, "pipeline_model_parallel_size": p, "data_parallel_size": d,
    "num_experts": E, "moe_router_topk": k_E, "moe_ffn_hidden_size": f_E,
    "moe_shared_expert_intermediate_size": f_S, "kv_lora_rank": r_kv, "q_lora_rank": r_q,
    "qk_head_dim": k_nope, "qk_pos_emb_head_dim": k_rope, "v_head_dim": k_v,
    "expert_tensor_parallel_size": t_E, "expert_model_parallel_size": e,
    "mtp_num_layers": D,
}


# ---- reading Megatron's arguments ----

def _flag(args: Mapping[str, object], name: str) -> bool:
    value = args.get(name)
    if not isinstance(value, bool):
        raise ValueError(f"{name}: must be True or False, got {value!r}")
    return value


def _read(args: Mapping[str, object], names: tuple[str, ...]) -> dict[str, int]:
    """Symbol name -> positive integer for each Megatron argument in ``names``."""
    return {ARG_SYMBOLS[name].name: positive_int(name, args.get(name)) for name in names}


def _optional(field: str, value: object) -> int | None:
    return None if value is None else positive_int(field, value)


def moe_layer_pattern(args: Mapping[str, object]) -> list[int]:
    """Megatron's moe_layer_freq: an int N makes layer i MoE when i mod N = 0; a list is used as given."""
    layers_ = positive_int("num_layers", args.get("num_layers"))
    if not args.get("num_experts"):
        return [0] * layers_
    freq = args.get("moe_layer_freq")
    if isinstance(freq, int) and not isinstance(freq, bool):
        positive_int("moe_layer_freq", freq)
        return [1 if i % freq == 0 else 0 for i in range(layers_)]
    if isinstance(freq, list) and len(freq) == layers_ and set(freq) <= {0, 1}:
        return list(freq)
    raise ValueError(f"moe_layer_freq: an int or a list of {layers_} zeros and ones, got {freq!r}")


def _attention(args: Mapping[str, object]) -> str:
    """GQA, or MLA with (``mla``) or without (``mla-direct``) a query latent (q_lora_rank set)."""
    if not args.get("multi_latent_attention"):
        return "gqa"
    if _flag(args, "multi_latent_attention") and _flag(args, "group_query_attention"):
        raise ValueError("group_query_attention: MLA has no key/value groups")
    return "mla" if args.get("q_lora_rank") is not None else "mla-direct"


@lru_cache(maxsize=None)
def _reading(attention: str, **switches: object) -> Reading:
    """One Reading per set of switches (the estimators' caches look their expressions up by it)."""
    return Reading(attention, **switches)


def model(args: Mapping[str, object], weights: bool = False) -> tuple[Reading, dict[str, int]]:
    """The reading and the model sizes of a record (no parallel layout); ``weights``: with the switches
    only the weight estimator reads (normalization, tied embeddings, router bias, shared-expert gate)."""
    swiglu, pattern = _flag(args, "swiglu"), moe_layer_pattern(args)
    experts, attention = bool(args.get("num_experts")), _attention(args)
    if experts and not swiglu:
        raise ValueError("swiglu: derive's MoE tables have SwiGLU experts")
    heads = positive_int("num_attention_heads", args.get("num_attention_heads"))
    groups = (positive_int("num_query_groups", args.get("num_query_groups"))
              if _flag(args, "group_query_attention") else heads)
    names = ("num_layers", "hidden_size", "kv_channels", "ffn_hidden_size", "padded_vocab_size")
    names += ("num_experts", "moe_router_topk", "moe_ffn_hidden_size") if experts else ()
    names += ("moe_shared_expert_intermediate_size",) if experts and args.get(
        "moe_shared_expert_intermediate_size") is not None else ()
    names += ("kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim") \
        if attention != "gqa" else ()
    names += ("q_lora_rank",) if attention == "mla" else ()
    names += ("mtp_num_layers",) if args.get("mtp_num_layers") else ()
    shared = experts and args.get("moe_shared_expert_intermediate_size") is not None
    switches = {"shared": shared, "mtp": bool(args.get("mtp_num_layers")), "last_moe": bool(pattern[-1]),
                "swiglu": swiglu, "experts": experts}
    if weights:
        switches.update(normalization=str(args.get("normalization")),
                        untied=_flag(args, "untie_embeddings_and_output_weights"),
                        router_bias=experts and _flag(args, "add_bias_linear"),
                        gate=shared and bool(args.get("moe_shared_expert_gate")))
    sizes = {a.name: heads, g.name: groups, L_E.name: sum(pattern), **_read(args, names)}
    return _reading(attention, **switches), sizes


def _layout(args: Mapping[str, object], experts: bool) -> dict[str, int]:
    """t, p, d and, with experts, t_E and e: world = t p d, divisible by t_E e p (the expert-parallel groups)."""
    sizes = _read(args, ("tensor_model_parallel_size", "pipeline_model_parallel_size", "data_parallel_size"))
    if not experts:
        return sizes
    sizes.update(_read(args, ("expert_tensor_parallel_size", "expert_model_parallel_size")))
    tp, pp, dp, etp, ep = (sizes[x.name] for x in (t, p, d, t_E, e))
    world = positive_int("world_size", args.get("world_size"))
    if world != tp * pp * dp:
        raise ValueError(f"world_size: {world} is not TP * PP * DP = {tp * pp * dp}")
    if world % (etp * ep * pp):
        raise ValueError(f"world_size: {world} is not divisible by expert TP * EP * PP "
                         f"= {etp * ep * pp}")
    return sizes


# ---- the estimators ----

def compute_weight_and_optimizer_memory(args: Mapping[str, object], **extra_call_args: object) -> Fraction:
    """Bytes per GPU of weights + optimizer on the first stage (theoretical_memory_usage.py, same name)."""
    reading, values = model(args, weights=True)
    if not reading.swiglu and values[g.name] != values[a.name]:
        raise ValueError(f"num_query_groups: the GPT table has fused MHA QKV, got {values[g.name]} "
                         f"groups for {values[a.name]} heads")
    values.update(_layout(args, reading.experts))
    expr = weight_and_optimizer_bytes(reading, values[p.name] == 1,
                                      _flag(args, "use_distributed_optimizer"))
    return exact_value(expr, values)


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
    return exact_value(expr, values)


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


def num_floating_point_operations(args: Mapping[str, object], batch_size: object,
                                  seqlen_squared_sum_in_batch: object = None,
                                  total_real_tokens_in_batch: object = None) -> Fraction | int:
    """FLOPs of one global batch, forward + backward, no recompute (training.py, same name)."""
    for name in UNSUPPORTED:
        if args.get(name):
            raise ValueError(f"{name}: not modelled by derive, got {args[name]!r}")
    reading, values = model(args)
    seq = positive_int("seq_length", args.get("seq_length"))
    sequences = positive_int("batch_size", batch_size)
    tokens = _optional("total_real_tokens_in_batch", total_real_tokens_in_batch)
    squares = _optional("seqlen_squared_sum_in_batch", seqlen_squared_sum_in_batch)
    values[BATCH_TOKENS.name] = sequences * seq if tokens is None else tokens
    values[SQUARED_LENGTHS.name] = sequences * seq**2 if squares is None else squares
    result = exact_value(batch_flops(reading, _flag(args, "attention_output_gate")), values)
    return int(result) if result.denominator == 1 else result
