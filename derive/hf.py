"""``from_config``: a derive Model from a Hugging Face ``config.json``, its table generated from the config's fields.

Each family (``model_type``) says which config fields switch which rows of
``derive.architectures.decoder.Layout``, as transformers 5.23 builds the model
(``transformers/models/<family>/modeling_<family>.py``); the sizes become the
values of derive's symbols. A field the config omits takes the default of
transformers' config class for that family; a missing size or an inconsistent
field is a ValueError naming the config field.

Published configs ship with the package (``derive/configs/*.json``, provenance
in ``derive/configs/SOURCES.md``): ``published_config(name)``, ``PUBLISHED``.
"""
from __future__ import annotations

import json
import os
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping

from derive.architectures.decoder import Layout
from derive.architectures.mla import MLA
from derive.architectures.moe import MoE
from derive.inputs import choose

_MISSING = object()


class Fields:
    """A parsed config.json whose reads raise a ValueError naming the field."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)
        self.model_type = self.config.get("model_type", "")

    def get(self, name: str, default: Any = None) -> Any:
        """``config[name]``, or ``default`` when absent or null."""
        value = self.config.get(name)
        return default if value is None else value

    def size(self, name: str, default: Any = _MISSING) -> int:
        """A positive integer field (``default`` when absent or null, else required)."""
        value = self.config.get(name)
        if value is None:
            if default is _MISSING:
                raise ValueError(f"{name}: missing from the {self.model_type} config")
            value = default
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name}: must be a positive integer, got {value!r}")
        return value

    def flag(self, name: str, default: bool) -> bool:
        """A true/false field, ``default`` when absent."""
        value = self.config.get(name, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ValueError(f"{name}: must be true or false, got {value!r}")
        return value

    def first(self, names: tuple[str, ...], default: Any = _MISSING) -> int:
        """The first of ``names`` present (a field and its transformers-5 alias)."""
        for name in names:
            if self.config.get(name) is not None:
                return self.size(name)
        return self.size(names[0], default)


#: What a family reader finds in a config: the keyword arguments of derive.presets.Model
#: (layout, layers, hidden, heads, kv_heads, ffn, vocab, seq, head_dim, sizes, moe_layers).
Shape = dict[str, Any]


def _heads(c: Fields, hidden: int, head_dim_default: int | None = None) -> tuple[int, int, int | None]:
    """(query heads, kv heads, head width if not hidden/heads); checks GQA divides."""
    heads = c.size("num_attention_heads")
    kv_heads = c.size("num_key_value_heads", heads)
    if heads % kv_heads:
        raise ValueError(f"num_key_value_heads: {kv_heads} does not divide "
                         f"num_attention_heads = {heads}")
    head_dim = c.get("head_dim", head_dim_default)
    if head_dim is None:
        if hidden % heads:
            raise ValueError(f"num_attention_heads: {heads} does not divide hidden_size = "
                             f"{hidden} (and the config gives no head_dim)")
    else:
        head_dim = c.size("head_dim", head_dim_default)
        if head_dim * heads == hidden:
            head_dim = None  # the usual h / a: keep the article's symbols
    return heads, kv_heads, head_dim


def _decoder(c: Fields, layout: Layout, head_dim_default: int | None = None,
             ffn: int | None = None, **extra: Any) -> Shape:
    """The sizes every Llama-style config names (hidden_size, num_hidden_layers, ...)."""
    hidden = c.size("hidden_size")
    heads, kv_heads, head_dim = _heads(c, hidden, head_dim_default)
    return dict(layout=layout, layers=c.size("num_hidden_layers"), hidden=hidden, heads=heads,
                 kv_heads=kv_heads, ffn=ffn if ffn is not None else c.size("intermediate_size"),
                 vocab=c.size("vocab_size"), seq=c.size("max_position_embeddings"),
                 head_dim=head_dim, **extra)


# ---- dense families ----

def llama(c: Fields) -> Shape:
    """LlamaForCausalLM: attention_bias on q, k, v, o; mlp_bias on gate, up, down (modeling_llama.py)."""
    bias = c.flag("attention_bias", False)
    return _decoder(c, Layout(qkv_bias=bias, o_bias=bias, mlp_bias=c.flag("mlp_bias", False),
                              tied=c.flag("tie_word_embeddings", False)))


def mistral(c: Fields) -> Shape:
    """MistralForCausalLM: Llama without biases; head_dim may differ from h/a (modeling_mistral.py)."""
    return _decoder(c, Layout(tied=c.flag("tie_word_embeddings", False)))


def qwen2(c: Fields) -> Shape:
    """Qwen2ForCausalLM: q, k, v always carry a bias, o does not (modeling_qwen2.py, Qwen2Attention)."""
    return _decoder(c, Layout(qkv_bias=True, tied=c.flag("tie_word_embeddings", False)))


def qwen3(c: Fields) -> Shape:
    """Qwen3ForCausalLM: RMSNorm on each query and key head (q_norm, k_norm over head_dim)."""
    bias = c.flag("attention_bias", False)
    return _decoder(c, Layout(qkv_bias=bias, o_bias=bias, qk_norm="head",
                              tied=c.flag("tie_word_embeddings", False)))


#: Gemma 2/3: a norm before and after attention and before and after the MLP (modeling_gemma2.py).
SANDWICH_NORMS = (("input_layernorm", "attention"), ("post_attention_layernorm", "attention"),
                  ("pre_feedforward_layernorm", "mlp"), ("post_feedforward_layernorm", "mlp"))
#: transformers' Gemma2Config / Gemma3TextConfig default head_dim.
GEMMA_HEAD_DIM = 256


def gemma2(c: Fields) -> Shape:
    """Gemma2ForCausalLM: four norms per layer, GeGLU, tied embedding by default."""
    bias = c.flag("attention_bias", False)
    return _decoder(c, Layout(layer_norms=SANDWICH_NORMS, qkv_bias=bias, o_bias=bias,
                              tied=c.flag("tie_word_embeddings", True)), GEMMA_HEAD_DIM)


def gemma3_text(c: Fields) -> Shape:
    """Gemma3ForCausalLM: Gemma 2's four norms plus q/k head norms."""
    bias = c.flag("attention_bias", False)
    return _decoder(c, Layout(layer_norms=SANDWICH_NORMS, qkv_bias=bias, o_bias=bias,
                              qk_norm="head", tied=c.flag("tie_word_embeddings", True)),
                    GEMMA_HEAD_DIM)


def phi3(c: Fields) -> Shape:
    """Phi3ForCausalLM: fused qkv_proj [h, (a + 2g) k] and gate_up_proj [h, 2f], no biases."""
    return _decoder(c, Layout(qkv_fused=True, gate_up_fused=True,
                              tied=c.flag("tie_word_embeddings", False)))


def olmo2(c: Fields) -> Shape:
    """Olmo2ForCausalLM: norms after attention and MLP only; q/k norms over the whole projections."""
    bias = c.flag("attention_bias", False)
    return _decoder(c, Layout(layer_norms=(("post_attention_layernorm", "attention"),
                                           ("post_feedforward_layernorm", "mlp")),
                              qk_norm="projection", qkv_bias=bias, o_bias=bias,
                              tied=c.flag("tie_word_embeddings", False)))


GPT2_NAMES = {"layers": "transformer.h", "embedding": "transformer.wte",
              "positions": "transformer.wpe", "final_norm": "transformer.ln_f",
              "qkv": "attn.c_attn", "o": "attn.c_proj", "up": "mlp.c_fc", "down": "mlp.c_proj"}


def gpt2(c: Fields) -> Shape:
    """GPT2LMHeadModel: LayerNorm with bias, Conv1D c_attn/c_proj/c_fc with biases, learned positions, tied head."""
    hidden, heads = c.size("n_embd"), c.size("n_head")
    if hidden % heads:
        raise ValueError(f"n_head: {heads} does not divide n_embd = {hidden}")
    positions = c.size("n_positions")
    layout = Layout(norm="layer", layer_norms=(("ln_1", "attention"), ("ln_2", "mlp")),
                    qkv_fused=True, qkv_bias=True, o_bias=True, gated=False, mlp_bias=True,
                    tied=c.flag("tie_word_embeddings", True), learned_positions=True,
                    names=GPT2_NAMES)
    return dict(layout=layout, layers=c.size("n_layer"), hidden=hidden, heads=heads,
                 kv_heads=heads, ffn=c.size("n_inner", 4 * hidden), vocab=c.size("vocab_size"),
                 seq=positions, sizes={"s_max": positions})


NEOX_NAMES = {"layers": "gpt_neox.layers", "embedding": "gpt_neox.embed_in",
              "final_norm": "gpt_neox.final_layer_norm", "qkv": "attention.query_key_value",
              "o": "attention.dense", "up": "mlp.dense_h_to_4h", "down": "mlp.dense_4h_to_h"}


def gpt_neox(c: Fields) -> Shape:
    """GPTNeoXForCausalLM: LayerNorm with bias, fused qkv, attention_bias, MLP biases, parallel attention + MLP."""
    bias = c.flag("attention_bias", True)
    layout = Layout(norm="layer", qkv_fused=True, qkv_bias=bias, o_bias=bias, gated=False,
                    mlp_bias=True, tied=c.flag("tie_word_embeddings", False),
                    parallel=c.flag("use_parallel_residual", True), names=NEOX_NAMES)
    hidden = c.size("hidden_size")
    heads = c.size("num_attention_heads")
    if hidden % heads:
        raise ValueError(f"num_attention_heads: {heads} does not divide hidden_size = {hidden}")
    return dict(layout=layout, layers=c.size("num_hidden_layers"), hidden=hidden, heads=heads,
                 kv_heads=heads, ffn=c.size("intermediate_size"), vocab=c.size("vocab_size"),
                 seq=c.size("max_position_embeddings"))


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


def _with_moe(shape: Shape, moe: MoE, moe_layers: list[int], sizes: dict[str, int]) -> Shape:
    """``shape`` with its MoE layers; an MoE config whose every layer is dense stays dense."""
    if not moe_layers:
        return shape
    return {**shape, "layout": replace(shape["layout"], moe=moe), "moe_layers": tuple(moe_layers),
            "sizes": {**shape.get("sizes", {}), **sizes, "L_E": len(moe_layers)}}


def mixtral(c: Fields) -> Shape:
    """MixtralForCausalLM: every layer an MoE of num_local_experts experts of width intermediate_size."""
    shape = _decoder(c, Layout(tied=c.flag("tie_word_embeddings", False)))
    sizes = {**_top_k(c, c.size("num_local_experts")), "f_E": shape["ffn"]}
    return _with_moe(shape, MoE(), list(range(shape["layers"])), sizes)


def _sparse_layers(c: Fields, layers: int) -> list[int]:
    """Qwen MoE: layer i is sparse unless in mlp_only_layers, when (i + 1) % decoder_sparse_step == 0."""
    step = c.size("decoder_sparse_step", 1)
    dense = c.get("mlp_only_layers", [])
    if not isinstance(dense, list) or any(
            isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < layers for i in dense):
        raise ValueError(f"mlp_only_layers: must list layer indices below num_hidden_layers = "
                         f"{layers}, got {dense!r}")
    return [i for i in range(layers) if i not in dense and (i + 1) % step == 0]


def qwen2_moe(c: Fields) -> Shape:
    """Qwen2MoeForCausalLM: routed experts, a shared expert with a sigmoid gate, qkv biases."""
    shape = _decoder(c, Layout(qkv_bias=c.flag("qkv_bias", True),
                               tied=c.flag("tie_word_embeddings", False)))
    sizes = {**_top_k(c, c.first(("num_experts", "num_local_experts"))),
             "f_E": c.size("moe_intermediate_size"),
             "f_S": c.size("shared_expert_intermediate_size")}
    return _with_moe(shape, MoE(shared="mlp.shared_expert", shared_gate=True),
                     _sparse_layers(c, shape["layers"]), sizes)


def qwen3_moe(c: Fields) -> Shape:
    """Qwen3MoeForCausalLM: Qwen 3 attention (q/k norms), routed experts, no shared expert."""
    bias = c.flag("attention_bias", False)
    shape = _decoder(c, Layout(qkv_bias=bias, o_bias=bias, qk_norm="head",
                               tied=c.flag("tie_word_embeddings", False)))
    sizes = {**_top_k(c, c.first(("num_experts", "num_local_experts"))),
             "f_E": c.size("moe_intermediate_size")}
    return _with_moe(shape, MoE(), _sparse_layers(c, shape["layers"]), sizes)


# ---- DeepSeek: MLA + DeepSeekMoE ----

def _deepseek(c: Fields, router_bias: str, mlp_bias: bool) -> Shape:
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
              router_bias_name="e_score_correction_bias", shared_bias=mlp_bias)
    return _with_moe(shape, moe, list(range(first_moe, layers)), moe_sizes)


def deepseek_v2(c: Fields) -> Shape:
    """DeepseekV2ForCausalLM: MLA (q_lora_rank may be null), DeepSeekMoE; mlp_bias on the dense and shared-expert MLPs."""
    return _deepseek(c, "none", c.flag("mlp_bias", False))


def deepseek_v3(c: Fields) -> Shape:
    """DeepseekV3ForCausalLM: as V2, plus the router's e_score_correction_bias (a buffer, not a parameter)."""
    return _deepseek(c, "buffer", False)


FAMILIES: dict[str, Callable[[Fields], Shape]] = {
    family.__name__: family for family in (
        llama, mistral, qwen2, qwen3, gemma2, gemma3_text, phi3, gpt2, gpt_neox, olmo2,
        mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3)
}


# ---- reading configs ----

def load_config(config: Mapping[str, Any] | str | os.PathLike) -> tuple[dict[str, Any], str]:
    """(parsed config, a default name): a mapping as given, or a path to a config.json."""
    if isinstance(config, Mapping):
        return dict(config), str(config.get("_name_or_path") or config.get("model_type") or "config")
    path = Path(config)
    try:
        parsed = json.loads(path.read_text())
    except OSError as error:
        raise ValueError(f"config: cannot read {str(path)!r} ({error.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"config: {str(path)!r} is not JSON ({error})") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"config: {str(path)!r} holds no JSON object")
    stem = path.parent.name if path.stem == "config" else path.stem
    return parsed, str(parsed.get("_name_or_path") or stem)


def read_shape(config: Mapping[str, Any]) -> Shape:
    """The layout and sizes of a parsed config; ValueError naming an unknown model_type or a bad field."""
    model_type = config.get("model_type")
    if model_type is None:
        raise ValueError(f"model_type: missing from the config (known: {', '.join(FAMILIES)})")
    return FAMILIES[choose("model_type", model_type, FAMILIES)](Fields(config))


def from_config(config: Mapping[str, Any] | str | os.PathLike, *, name: str | None = None,
                seq: int | None = None, source: str = ""):
    """A :class:`derive.presets.Model` whose parameter table is generated from ``config``'s fields.

    ``seq`` overrides the context length (max_position_embeddings / n_positions).
    """
    from derive.presets import Model  # presets builds its Llama 3 models with this function

    parsed, default_name = load_config(config)
    shape = read_shape(parsed)
    if seq is not None:
        shape["seq"] = seq
    shape["sizes"] = tuple(sorted(shape.get("sizes", {}).items()))
    return Model(name=name or default_name, family="llama" if shape["layout"].gated else "gpt",
                 source=source or f"config.json of {default_name}",
                 model_type=parsed["model_type"], **shape)


# ---- the published configs shipped with derive ----

CONFIGS = resources.files("derive") / "configs"


def published_names() -> tuple[str, ...]:
    """The published configs shipped in derive/configs, by file stem, sorted."""
    return tuple(sorted(p.name.removesuffix(".json") for p in CONFIGS.iterdir()
                        if p.name.endswith(".json")))


def published_config(name: str) -> dict[str, Any]:
    """One shipped config.json, parsed; ValueError listing the names if unknown."""
    choose("config", name, published_names())
    return json.loads((CONFIGS / f"{name}.json").read_text())


def published_model(name: str, seq: int | None = None):
    """A shipped config as a Model named by its file stem."""
    return from_config(published_config(name), name=name, seq=seq,
                       source=f"derive/configs/{name}.json (see derive/configs/SOURCES.md)")
