"""Megatron-LM's estimators on Mixture-of-Experts, MLA and MTP models, from derive's tables.

``derive.megatron``'s weight and FLOP estimators hand every record with
``num_experts``, ``multi_latent_attention`` or ``mtp_num_layers`` to the
functions here (the activation estimators read no MoE, MLA or MTP field:
Megatron prices every layer as a dense GPT layer of width ``ffn_hidden_size``,
and so does ``derive.megatron``). The tables are derive's own
(``derive.architectures.decoder``, ``moe``, ``mla``, ``mtp``, read by ``moe_model``); what is Megatron's
(core_v0.18.0, megatron/training/theoretical_memory_usage.py
compute_weight_and_optimizer_memory and megatron/training/training.py
num_floating_point_operations) is the convention they are read under:

* weights: no linear bias except the router's, counted only with
  ``add_bias_linear``; the shared-expert gate [h, 1] only with
  ``moe_shared_expert_gate``; routed experts over t_E e, router, gate and the
  layer norms whole, everything else over t - MLA's down projections and
  latent norms too (Transformer Engine keeps them whole on every rank);
  the first stage holds (L layers + final norm) / p, the MTP block's
  Transformer layers whole (not its projection nor its norms) and the input
  embedding (and the output head when p = 1, untied); experts' bytes per
  parameter use the expert data-parallel group EDP, the rest d;
* FLOPs: three passes of every weight GEMM with top-k routed experts and
  the shared experts, neither router nor gate; MLA's latent norms and the
  MTP block's three norms priced like [n, 1] weight GEMMs (6 per parameter);
  L + D layers, each MTP layer of the last layer's type; one more output
  GEMM per MTP module; causal scores of widths d_nope + d_rope and k_v.
"""
from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from functools import lru_cache
from typing import Mapping

import sympy as sp

from derive import megatron
from derive.accounts.experts import model_parallel_share, moe_resident_bytes
from derive.architectures.decoder import Layout
from derive.conventions.megatron import MEGATRON_RECIPES
from derive.accounts.flops import packed_flops
from derive.architectures.gemms import flops, weight_gemms
from derive.architectures.moe import active_rows
from derive.architectures.moe_model import (model_parameters, moe_layout,
                                            mtp_logit_gemms, score_gemms)
from derive.inputs import positive_int
from derive.symbols import D, E, L, L_E, V, a, d, e, f, f_E, f_S, g, h, k, k_E, k_nope, k_rope, k_v, p, r_kv, r_q, t, t_E
from derive.tensors import Ledger, Tensor

#: Arguments that switch a record to this module.
MOE_FIELDS = ("num_experts", "multi_latent_attention", "mtp_num_layers")


def handles(args: Mapping[str, object]) -> bool:
    """Whether ``args`` name an MoE, MLA or MTP model."""
    return any(args.get(name) for name in MOE_FIELDS)


# ---- the tables under Megatron's reading ----

def features(latent: bool | None, last_moe: bool, router_bias: bool = False, shared: bool = False,
             gate: bool = False) -> Layout:
    """The table a record's arguments describe: GQA (``latent`` None) or MLA, D MTP modules."""
    attention = "gqa" if latent is None else ("mla" if latent else "mla-direct")
    return moe_layout(attention, shared=shared, gate=gate, router_bias=router_bias, mtp=True,
                       last_moe=last_moe)


@lru_cache(maxsize=None)
def first_stage(latent: bool | None, normalization: str, untied: bool, single_stage: bool,
                last_moe: bool, router_bias: bool, shared: bool, gate: bool) -> Ledger:
    """Megatron's most loaded shard on one rank: (layers + final norm) / p, MTP layers, embedding."""
    table = model_parameters(features(latent, last_moe, router_bias, shared, gate))
    block = table.where("layer").without("mtp") + table.where("norm").without("layer", "mtp")
    shard = block.map(lambda w: w.divided(p)) + table.where("mtp", "layer") + table.where("embedding")
    if single_stage and untied:
        shard = shard + table.where("output")
    return model_parallel_share(megatron._norms(shard, normalization), duplicated_latents=False)


@lru_cache(maxsize=None)
def weight_and_optimizer_bytes(*key: object, distributed: bool) -> sp.Expr:
    """Bytes per GPU of the first stage: experts at EDP's bytes/parameter, the rest at d's."""
    return moe_resident_bytes(first_stage(*key), MEGATRON_RECIPES["bf16"], "adam", 1 if distributed else 0)


# ---- reading Megatron's arguments ----

def _flag(args: Mapping[str, object], name: str) -> bool:
    return megatron._flag(args, name)


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


def _latent(args: Mapping[str, object]) -> bool | None:
    """None for GQA, else whether MLA compresses the query (q_lora_rank set)."""
    if not _flag(args, "multi_latent_attention"):
        return None
    if _flag(args, "group_query_attention"):
        raise ValueError("group_query_attention: MLA has no key/value groups")
    return args.get("q_lora_rank") is not None


def _moe_flags(args: Mapping[str, object]) -> dict[str, bool]:
    shared = args.get("moe_shared_expert_intermediate_size") is not None
    return {"router_bias": _flag(args, "add_bias_linear") and bool(args.get("num_experts")),
            "shared": shared, "gate": shared and bool(args.get("moe_shared_expert_gate"))}


def _values(args: Mapping[str, object], flops_only: bool = False) -> dict[sp.Symbol, int]:
    """Symbol -> value of every size the tables use."""
    if not _flag(args, "swiglu"):
        raise ValueError("swiglu: derive's MoE and MLA tables have SwiGLU MLPs")
    pattern = moe_layer_pattern(args)
    heads = positive_int("num_attention_heads", args.get("num_attention_heads"))
    values = {a: heads, L: len(pattern), L_E: sum(pattern), D: args.get("mtp_num_layers") or 0,
              h: positive_int("hidden_size", args.get("hidden_size")),
              f: positive_int("ffn_hidden_size", args.get("ffn_hidden_size")),
              k: positive_int("kv_channels", args.get("kv_channels")),
              V: positive_int("padded_vocab_size", args.get("padded_vocab_size")),
              g: (positive_int("num_query_groups", args.get("num_query_groups"))
                  if _flag(args, "group_query_attention") else heads)}
    if args.get("num_experts"):
        values.update({E: positive_int("num_experts", args.get("num_experts")),
                       k_E: positive_int("moe_router_topk", args.get("moe_router_topk")),
                       f_E: positive_int("moe_ffn_hidden_size", args.get("moe_ffn_hidden_size"))})
    if args.get("moe_shared_expert_intermediate_size") is not None:
        values[f_S] = positive_int("moe_shared_expert_intermediate_size",
                                   args.get("moe_shared_expert_intermediate_size"))
    if _latent(args) is not None:
        values.update({r_kv: positive_int("kv_lora_rank", args.get("kv_lora_rank")),
                       k_nope: positive_int("qk_head_dim", args.get("qk_head_dim")),
                       k_rope: positive_int("qk_pos_emb_head_dim", args.get("qk_pos_emb_head_dim")),
                       k_v: positive_int("v_head_dim", args.get("v_head_dim"))})
        if _latent(args):
            values[r_q] = positive_int("q_lora_rank", args.get("q_lora_rank"))
    if flops_only:
        return values
    tp = positive_int("tensor_model_parallel_size", args.get("tensor_model_parallel_size"))
    pp = positive_int("pipeline_model_parallel_size", args.get("pipeline_model_parallel_size"))
    dp = positive_int("data_parallel_size", args.get("data_parallel_size"))
    etp = positive_int("expert_tensor_parallel_size", args.get("expert_tensor_parallel_size"))
    ep = positive_int("expert_model_parallel_size", args.get("expert_model_parallel_size"))
    world = positive_int("world_size", args.get("world_size"))
    if world != tp * pp * dp:
        raise ValueError(f"world_size: {world} is not TP * PP * DP = {tp * pp * dp}")
    if world % (etp * ep * pp):
        raise ValueError(f"world_size: {world} is not divisible by expert TP * EP * PP "
                         f"= {etp * ep * pp}")
    values.update({t: tp, p: pp, d: dp, t_E: etp, e: ep})
    return values


def _substituted(expr: sp.Expr, values: Mapping[sp.Symbol, int]) -> Fraction:
    return megatron.exact(expr.xreplace({symbol: sp.Integer(n) for symbol, n in values.items()}))


def compute_weight_and_optimizer_memory(args: Mapping[str, object], **extra_call_args: object) -> Fraction:
    """Bytes per GPU of weights + optimizer on the first stage (theoretical_memory_usage.py, same name)."""
    values = _values(args)
    normalization = str(args.get("normalization"))
    megatron._norms(Ledger(), normalization)   # ValueError on an unknown normalization
    key = (_latent(args), normalization, _flag(args, "untie_embeddings_and_output_weights"),
           values[p] == 1, bool(moe_layer_pattern(args)[-1]), *_moe_flags(args).values())
    expr = weight_and_optimizer_bytes(*key, distributed=_flag(args, "use_distributed_optimizer"))
    return _substituted(expr, values)


# ---- FLOPs ----

def _as_gemm(w: Tensor) -> Tensor:
    """A norm's scale [n] priced as an [n, 1] weight GEMM (Megatron's 6 FLOPs per norm parameter)."""
    return replace(w, shape=(*w.shape, 1), tags=w.tags | {"gemm"})


def _priced_norm(w: Tensor) -> bool:
    """MLA's latent norms and an MTP module's own norms: Megatron prices them like GEMM parameters."""
    return w.has("norm") and (w.has("mla_down") or (w.has("mtp") and not w.has("layer")))


def _counted(table: Ledger) -> Ledger:
    """Megatron's FLOP reading of a table: active experts, no router or gate, priced norms."""
    table = active_rows(table).without("router", "shared_expert_gate")
    return table.map(lambda w: _as_gemm(w) if _priced_norm(w) else w)


@lru_cache(maxsize=None)
def flops_per_token(latent: bool | None, last_moe: bool, shared: bool, gated: bool) -> sp.Expr:
    """FLOPs per token of one s-token sequence under Megatron's convention (training.py)."""
    feats = features(latent, last_moe, shared=shared)
    gemms = weight_gemms(_counted(model_parameters(feats)))
    if gated:
        gemms = gemms + weight_gemms(Ledger([megatron.output_gate()])).times(L + D)
    scores = score_gemms(feats).times(L + D)
    return flops(gemms + scores + mtp_logit_gemms(feats))


def num_floating_point_operations(args: Mapping[str, object], batch_size: object,
                                  seqlen_squared_sum_in_batch: object = None,
                                  total_real_tokens_in_batch: object = None) -> Fraction | int:
    """FLOPs of one global batch, forward + backward, no recompute (training.py, same name)."""
    for name in ("moe_latent_size", "experimental_attention_variant", "hybrid_layer_pattern"):
        if args.get(name):
            raise ValueError(f"{name}: not modelled by derive, got {args[name]!r}")
    values = _values(args, flops_only=True)
    seq = positive_int("seq_length", args.get("seq_length"))
    sequences = positive_int("batch_size", batch_size)
    tokens = megatron._optional("total_real_tokens_in_batch", total_real_tokens_in_batch)
    squares = megatron._optional("seqlen_squared_sum_in_batch", seqlen_squared_sum_in_batch)
    values[megatron.BATCH_TOKENS] = sequences * seq if tokens is None else tokens
    values[megatron.SQUARED_LENGTHS] = sequences * seq**2 if squares is None else squares
    per_token = flops_per_token(_latent(args), bool(moe_layer_pattern(args)[-1]),
                                args.get("moe_shared_expert_intermediate_size") is not None,
                                _flag(args, "attention_output_gate"))
    expr = packed_flops(megatron.BATCH_TOKENS, megatron.SQUARED_LENGTHS, per_token=per_token)
    result = _substituted(expr, values)
    return int(result) if result.denominator == 1 else result
