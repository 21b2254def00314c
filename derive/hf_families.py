"""The families derive reads, by ``model_type``: the dense tables (:data:`DENSE`) and the MoE / MLA readers.

Each dense family is one :class:`derive.hf_fields.Family` table following its modeling file
(transformers 5.23, ``transformers/models/<family>/modeling_<family>.py``); the MoE / MLA
families read their extra fields in Python on top of such a table. :data:`FAMILIES` maps
every model_type to its reader.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from derive.architectures.decoder import Layout
from derive.architectures.mla import MLA
from derive.architectures.moe import MoE
from derive.hf_fields import DECODER_SIZES, Family, Fields, Read, Shape, kv_heads_absent

def _flags(*rows: tuple[str, str], default: bool = False) -> tuple[tuple[str, str, bool], ...]:
    """(Layout field, config field, default) for rows sharing one default."""
    return tuple((row, name, default) for row, name in rows)


#: attention_bias switches the q, k, v and o biases (LlamaAttention).
ATTENTION_BIAS = (("qkv_bias", "attention_bias"), ("o_bias", "attention_bias"))
TIED = ("tied", "tie_word_embeddings")

#: Gemma 2/3: a norm before and after attention and before and after the MLP (modeling_gemma2.py).
SANDWICH_NORMS = (("input_layernorm", "attention"), ("post_attention_layernorm", "attention"),
                  ("pre_feedforward_layernorm", "mlp"), ("post_feedforward_layernorm", "mlp"))
#: transformers' Gemma2Config / Gemma3TextConfig default head_dim.
GEMMA_HEAD_DIM = 256
#: transformers' Qwen3Config default head_dim (configuration_qwen3.py), when the config has none.
QWEN3_HEAD_DIM = 128
#: transformers' GptOssConfig default head_dim (configuration_gpt_oss.py), when the config has none.
GPT_OSS_HEAD_DIM = 64

GPT2_NAMES = {"layers": "transformer.h", "embedding": "transformer.wte",
              "positions": "transformer.wpe", "final_norm": "transformer.ln_f",
              "qkv": "attn.c_attn", "o": "attn.c_proj", "up": "mlp.c_fc", "down": "mlp.c_proj"}
NEOX_NAMES = {"layers": "gpt_neox.layers", "embedding": "gpt_neox.embed_in",
              "final_norm": "gpt_neox.final_layer_norm", "qkv": "attention.query_key_value",
              "o": "attention.dense", "up": "mlp.dense_h_to_4h", "down": "mlp.dense_4h_to_h"}

#: The dense families: model_type -> the table derive and the web page read its config with.
DENSE: dict[str, Family] = {
    "llama": Family("LlamaForCausalLM: attention_bias on q, k, v, o; mlp_bias on gate, up, down "
                    "(modeling_llama.py)",
                    flags=_flags(*ATTENTION_BIAS, ("mlp_bias", "mlp_bias"), TIED)),
    "mistral": Family("MistralForCausalLM: Llama without biases; head_dim may differ from h/a "
                      "(modeling_mistral.py)", sizes=kv_heads_absent(8)),
    "qwen2": Family("Qwen2ForCausalLM: q, k, v always carry a bias, o does not "
                    "(modeling_qwen2.py, Qwen2Attention)", Layout(qkv_bias=True),
                    sizes=kv_heads_absent(32)),
    "qwen3": Family("Qwen3ForCausalLM: RMSNorm on each query and key head (q_norm, k_norm over "
                    "head_dim; 128 when absent)", Layout(qk_norm="head"),
                    _flags(*ATTENTION_BIAS, TIED), kv_heads_absent(32),
                    Read(("head_dim",), required=False, absent=QWEN3_HEAD_DIM)),
    "gemma2": Family("Gemma2ForCausalLM: four norms per layer, GeGLU, tied embedding by default",
                     Layout(layer_norms=SANDWICH_NORMS),
                     _flags(*ATTENTION_BIAS) + _flags(TIED, default=True), kv_heads_absent(4),
                     head_dim=Read(("head_dim",), GEMMA_HEAD_DIM)),
    "gemma3_text": Family("Gemma3ForCausalLM: Gemma 2's four norms plus q/k head norms",
                          Layout(layer_norms=SANDWICH_NORMS, qk_norm="head"),
                          _flags(*ATTENTION_BIAS) + _flags(TIED, default=True), kv_heads_absent(4),
                          head_dim=Read(("head_dim",), GEMMA_HEAD_DIM)),
    "phi3": Family("Phi3ForCausalLM: fused qkv_proj [h, (a + 2g) k] and gate_up_proj [h, 2f], "
                   "no biases", Layout(qkv_fused=True, gate_up_fused=True)),
    "gpt2": Family("GPT2LMHeadModel: LayerNorm with bias, Conv1D c_attn/c_proj/c_fc with biases, "
                   "learned positions, tied head; n_inner defaults to 4 n_embd",
                   Layout(norm="layer", layer_norms=(("ln_1", "attention"), ("ln_2", "mlp")),
                          qkv_fused=True, qkv_bias=True, o_bias=True, gated=False,
                          mlp_bias=True, learned_positions=True, names=GPT2_NAMES),
                   _flags(TIED, default=True),
                   {"hidden": Read(("n_embd",)), "heads": Read(("n_head",)),
                    "kv_heads": Read(like="heads"), "layers": Read(("n_layer",)),
                    "ffn": Read(("n_inner",), like="hidden", times=4),
                    "vocab": Read(("vocab_size",)), "seq": Read(("n_positions",))},
                   head_dim=None, positions=True),
    "gpt_neox": Family("GPTNeoXForCausalLM: LayerNorm with bias, fused qkv, attention_bias, MLP "
                       "biases, parallel attention + MLP",
                       Layout(norm="layer", qkv_fused=True, gated=False, mlp_bias=True,
                              names=NEOX_NAMES),
                       _flags(*ATTENTION_BIAS, default=True) + _flags(TIED)
                       + _flags(("parallel", "use_parallel_residual"), default=True),
                       {**DECODER_SIZES, "kv_heads": Read(like="heads")}, head_dim=None),
    "olmo2": Family("Olmo2ForCausalLM: norms after attention and MLP only; q/k norms over the "
                    "whole projections",
                    Layout(layer_norms=(("post_attention_layernorm", "attention"),
                                        ("post_feedforward_layernorm", "mlp")),
                           qk_norm="projection"), _flags(*ATTENTION_BIAS, TIED)),
}


# ---- mixture of experts ----

def _top_k(c: Fields, experts: int) -> dict[str, int]:
    """{"E": experts, "k_E": top-k}; top-k absent only where the class default is null (DeepSeek-V2)."""
    sizes = {"E": experts}
    if c.get("num_experts_per_tok") is not None:
        top_k = c.size("num_experts_per_tok")
        if top_k > experts:
            raise ValueError(f"num_experts_per_tok: {top_k} exceeds the {experts} routed experts")
        sizes["k_E"] = top_k
    return sizes


#: The most layers an MoE config may have: its MoE layers are listed one index each (the deepest
#: published MoE models have 61-94 layers), so 2^16 keeps that list small.
MAX_MOE_LAYERS = 2**16


def _layer_indices(layers: int, start: int = 0) -> range:
    """Indices start .. layers - 1 of an MoE config's layers; ValueError naming num_hidden_layers past MAX_MOE_LAYERS."""
    if layers > MAX_MOE_LAYERS:
        raise ValueError(f"num_hidden_layers: an MoE config lists its layers one by one; at most "
                         f"2^16, got {layers}")
    return range(start, layers)


def _with_moe(shape: Shape, moe: MoE, moe_layers: list[int], sizes: dict[str, int]) -> Shape:
    """``shape`` with its MoE layers; an MoE config whose every layer is dense stays dense."""
    if not moe_layers:
        return shape
    return {**shape, "layout": replace(shape["layout"], moe=moe), "moe_layers": tuple(moe_layers),
            "sizes": {**shape.get("sizes", {}), **sizes, "L_E": len(moe_layers)}}


#: The dense part of the MoE families' configs (their attention, norms, sizes).
MOE_BASES: dict[str, Family] = {
    "mixtral": Family("MixtralForCausalLM (modeling_mixtral.py)", sizes=kv_heads_absent(8)),
    "qwen2_moe": Family("Qwen2MoeForCausalLM (modeling_qwen2_moe.py): qkv_bias on q, k, v",
                        flags=(("qkv_bias", "qkv_bias", True), ("tied", "tie_word_embeddings", False)),
                        sizes=kv_heads_absent(16)),
    "qwen3_moe": Family("Qwen3MoeForCausalLM (modeling_qwen3_moe.py): Qwen 3 attention",
                        Layout(qk_norm="head"), _flags(*ATTENTION_BIAS, TIED), kv_heads_absent(4)),
    "gpt_oss": Family("GptOssForCausalLM (modeling_gpt_oss.py): attention_bias on q, k, v, o (true by "
                      "default), a learned sink per query head, head_dim 64 by default (GptOssConfig)",
                      Layout(sinks=True), _flags(*ATTENTION_BIAS, default=True) + _flags(TIED),
                      kv_heads_absent(8), Read(("head_dim",), required=False, absent=GPT_OSS_HEAD_DIM)),
}


def mixtral(c: Fields) -> Shape:
    """MixtralForCausalLM: every layer an MoE of num_local_experts experts of width intermediate_size."""
    shape = MOE_BASES["mixtral"].read(c)
    sizes = {**_top_k(c, c.size("num_local_experts")), "f_E": shape["ffn"]}
    return _with_moe(shape, MoE(), list(_layer_indices(shape["layers"])), sizes)


#: Qwen2MoeConfig / Qwen3MoeConfig's decoder_sparse_step when absent (every layer sparse).
SPARSE_STEP = 1


def _sparse_layers(c: Fields, layers: int) -> list[int]:
    """Qwen MoE: layer i is sparse unless in mlp_only_layers, when (i + 1) % decoder_sparse_step == 0."""
    step = c.size("decoder_sparse_step", SPARSE_STEP)
    dense = c.get("mlp_only_layers", [])
    if not isinstance(dense, list) or any(
            isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < layers for i in dense):
        raise ValueError(f"mlp_only_layers: must list layer indices below num_hidden_layers = "
                         f"{layers}, got {dense!r}")
    dense = set(dense)
    return [i for i in _layer_indices(layers) if i not in dense and (i + 1) % step == 0]


def _qwen_routing(c: Fields) -> dict[str, Any]:
    """Qwen2-MoE / Qwen3-MoE routing: top-k weights renormalised only under norm_topk_prob (false by
    default in their config classes), cast to the hidden dtype before the experts (their SparseMoeBlock)."""
    return {"normalise_topk": bool(c.config.get("norm_topk_prob", False)), "weights_dtype": "bf16"}


def qwen2_moe(c: Fields) -> Shape:
    """Qwen2MoeForCausalLM: routed experts, a shared expert with a sigmoid gate, qkv biases."""
    shape = MOE_BASES["qwen2_moe"].read(c)
    sizes = {**_top_k(c, c.first(("num_experts", "num_local_experts"))),
             "f_E": c.size("moe_intermediate_size"),
             "f_S": c.size("shared_expert_intermediate_size")}
    return _with_moe(shape, MoE(shared="mlp.shared_expert", shared_gate=True, **_qwen_routing(c)),
                     _sparse_layers(c, shape["layers"]), sizes)


def qwen3_moe(c: Fields) -> Shape:
    """Qwen3MoeForCausalLM: Qwen 3 attention (q/k norms), routed experts, no shared expert."""
    shape = MOE_BASES["qwen3_moe"].read(c)
    sizes = {**_top_k(c, c.first(("num_experts", "num_local_experts"))),
             "f_E": c.size("moe_intermediate_size")}
    return _with_moe(shape, MoE(**_qwen_routing(c)), _sparse_layers(c, shape["layers"]), sizes)


def gpt_oss(c: Fields) -> Shape:
    """GptOssForCausalLM: every layer an MoE of num_local_experts biased experts of width intermediate_size.

    The router is a Linear with bias (GptOssTopKRouter: weight [E, h], bias [E]); the experts are
    stacked with biases (GptOssExperts: gate_up_proj [E, h, 2 f_E] + [E, 2 f_E], down_proj
    [E, f_E, h] + [E, h]); attention carries q, k, v, o biases and one sink per head.
    """
    shape = MOE_BASES["gpt_oss"].read(c)
    sizes = {**_top_k(c, c.first(("num_local_experts", "num_experts"))), "f_E": shape["ffn"]}
    moe = MoE(router_bias="parameter", router_name="router", expert_bias=True)
    return _with_moe(shape, moe, list(_layer_indices(shape["layers"])), sizes)


# ---- DeepSeek: MLA + DeepSeekMoE ----

def _deepseek(c: Fields, router_bias: str, mlp_bias: bool, **routing: Any) -> Shape:
    """DeepSeek-V2/V3: MLA in every layer; layers from first_k_dense_replace on are MoE."""
    hidden, heads = c.size("hidden_size"), c.size("num_attention_heads")
    layers = c.size("num_hidden_layers")
    q_rank = c.get("q_lora_rank")
    sizes = {"r_kv": c.size("kv_lora_rank"), "k_nope": c.size("qk_nope_head_dim"),
             "k_rope": c.size("qk_rope_head_dim"), "k_v": c.size("v_head_dim")}
    if q_rank is not None:
        sizes["r_q"] = c.size("q_lora_rank")
    layout = Layout(mla=MLA(q_lora=q_rank is not None, bias=c.flag("attention_bias", False)),
                    mlp_bias=mlp_bias, tied=c.flag("tie_word_embeddings", False))
    shape = dict(layout=layout, layers=layers, hidden=hidden, heads=heads, kv_heads=heads,
                  ffn=c.size("intermediate_size"), vocab=c.size("vocab_size"),
                  seq=c.size("max_position_embeddings"),
                  head_dim=sizes["k_nope"] + sizes["k_rope"], sizes=sizes)
    first_moe = c.get("first_k_dense_replace", 0)
    if isinstance(first_moe, bool) or not isinstance(first_moe, int) or not 0 <= first_moe <= layers:
        raise ValueError(f"first_k_dense_replace: must be 0 to num_hidden_layers = {layers}, "
                         f"got {first_moe!r}")
    expert = c.size("moe_intermediate_size")
    moe_sizes = {**_top_k(c, c.first(("n_routed_experts", "num_local_experts"))), "f_E": expert}
    shared = c.get("n_shared_experts", 0)
    if isinstance(shared, bool) or not isinstance(shared, int) or shared < 0:
        raise ValueError(f"n_shared_experts: must be a non-negative integer, got {shared!r}")
    if shared:
        moe_sizes["f_S"] = shared * expert
    moe = MoE(shared="mlp.shared_experts" if shared else "", router_bias=router_bias,
              router_bias_name="e_score_correction_bias", shared_bias=mlp_bias, **routing)
    return _with_moe(shape, moe, list(_layer_indices(layers, first_moe)), moe_sizes)


def deepseek_v2(c: Fields) -> Shape:
    """DeepseekV2ForCausalLM: MLA (q_lora_rank may be null), DeepSeekMoE; mlp_bias on the dense and shared-expert MLPs.

    DeepseekV2Config.validate_architecture refuses a hidden size the heads do not divide.
    """
    hidden, heads = c.size("hidden_size"), c.size("num_attention_heads")
    if hidden % heads:
        raise ValueError(f"num_attention_heads: {heads} does not divide hidden_size = {hidden}")
    return _deepseek(c, "none", c.flag("mlp_bias", False))


def deepseek_v3(c: Fields) -> Shape:
    """DeepseekV3ForCausalLM: as V2, plus the router's e_score_correction_bias (a buffer, not a parameter);
    sigmoid scores with group-limited top-k (DeepseekV3TopkRouter), renormalised unless norm_topk_prob is false."""
    return _deepseek(c, "buffer", False, router="sigmoid-grouped",
                     normalise_topk=bool(c.config.get("norm_topk_prob", True)))


#: Every family derive reads: the dense tables (:data:`DENSE`), then the MoE / MLA readers.
FAMILIES: dict[str, Callable[[Fields], Shape]] = {
    **{name: family.read for name, family in DENSE.items()},
    **{family.__name__: family for family in (mixtral, qwen2_moe, qwen3_moe, gpt_oss, deepseek_v2, deepseek_v3)},
}
