"""``from_config``: a derive Model from a Hugging Face ``config.json``, its table generated from the config's fields.

Each family (``model_type``) says which config fields switch which rows of
``derive.architectures.decoder.Layout``, as transformers 5.23 builds the model
(``transformers/models/<family>/modeling_<family>.py``); the sizes become the
values of derive's symbols. A field the config omits takes the default of
transformers' config class for that family; a missing size or an inconsistent
field is a ValueError naming the config field. The dense families are data
(:data:`DENSE`, one :class:`Family` table each) that :meth:`Family.read`
interprets; the web page applies the same tables (``Family.data()``), so its
reading of a pasted config cannot drift from this one. The MoE / MLA families
read their extra fields in Python on top of such a table.

Published configs ship with the package (``derive/configs/*.json``, provenance
in ``derive/configs/SOURCES.md``): ``published_config(name)``, ``PUBLISHED``.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping

from derive.architectures.decoder import Layout
from derive.architectures.mla import MLA
from derive.architectures.moe import MoE
from derive.inputs import MAX_SIZE, choose, read_json
from derive.model import Model

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
        """A positive integer field up to MAX_SIZE (``default`` when absent or null, else required)."""
        value = self.config.get(name)
        if value is None:
            if default is _MISSING:
                raise ValueError(f"{name}: missing from the {self.model_type} config")
            value = default
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_SIZE:
            raise ValueError(f"{name}: must be a positive integer up to 2^53, got {value!r}")
        return value

    def flag(self, name: str, default: bool) -> bool:
        """A true/false field, ``default`` when absent."""
        value = self.config.get(name, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ValueError(f"{name}: must be true or false, got {value!r}")
        return value

    def first(self, names: tuple[str, ...]) -> int:
        """The first of ``names`` present (a field and its transformers-5 alias), as a :class:`Read` of them reads it."""
        return _read(self, Read(names), {})[1]


#: What a family reader finds in a config: the keyword arguments of derive.model.Model
#: (layout, layers, hidden, heads, kv_heads, ffn, vocab, seq, head_dim, sizes, moe_layers).
Shape = dict[str, Any]


@dataclass(frozen=True)
class Read:
    """One size of a config: the first of ``names`` given, else ``times`` x the size ``like``, else ``default``.

    With none of them a missing field is an error naming ``names[0]``, unless not ``required``
    (the size is then None: a head width the config leaves to h / a). ``absent``: the config
    class's default when no name is in the config at all (a null still reads as ``like`` or
    None: MistralConfig's num_key_value_heads is 8 when absent, num_attention_heads when null).
    """

    names: tuple[str, ...] = ()
    default: int | None = None
    like: str | None = None
    times: int = 1
    required: bool = True
    absent: int | None = None

    def data(self) -> dict[str, Any]:
        """This read as JSON data (the web page's interpreter applies it)."""
        return {"names": list(self.names), "default": self.default, "like": self.like,
                "times": self.times, "required": self.required, "absent": self.absent}


#: The sizes a Llama-style config names (transformers' LlamaConfig), in reading order;
#: num_key_value_heads defaults to num_attention_heads.
DECODER_SIZES: dict[str, Read] = {
    "hidden": Read(("hidden_size",)), "heads": Read(("num_attention_heads",)),
    "kv_heads": Read(("num_key_value_heads",), like="heads"),
    "layers": Read(("num_hidden_layers",)), "ffn": Read(("intermediate_size",)),
    "vocab": Read(("vocab_size",)), "seq": Read(("max_position_embeddings",)),
}
#: A config's head width: head_dim, else h / a.
HEAD_DIM = Read(("head_dim",), required=False)


def kv_heads_absent(default: int) -> dict[str, Read]:
    """DECODER_SIZES whose num_key_value_heads is ``default`` when the config leaves it out
    (the config class's field default; a null reads as num_attention_heads)."""
    return {**DECODER_SIZES, "kv_heads": Read(("num_key_value_heads",), like="heads",
                                               absent=default)}


#: Divisibility the sizes must meet, in checking order: (divisor, dividend, head width): a
#: head-width rule holds only where the head width is h / a (no head_dim given).
DIVIDES: tuple[tuple[str, str, bool], ...] = (("kv_heads", "heads", False), ("heads", "hidden", True))


@dataclass(frozen=True)
class Family:
    """How one model_type's config becomes a Model: a data table that :meth:`read` interprets.

    ``layout``: the rows every model of the family has; ``flags``: (Layout field, config
    field, transformers' default) for each row a config switches; ``sizes``: Model field
    -> :class:`Read`; ``head_dim``: the head-width read, None where the family has none
    (k = h / a); ``positions``: learned positions, s_max = seq. ``source``: the modeling
    file the table follows. The web page applies the same table (``data()``).
    """

    source: str
    layout: Layout = field(default_factory=Layout)
    flags: tuple[tuple[str, str, bool], ...] = (("tied", "tie_word_embeddings", False),)
    sizes: Mapping[str, Read] = field(default_factory=lambda: dict(DECODER_SIZES))
    head_dim: Read | None = HEAD_DIM
    positions: bool = False

    def layout_for(self, flags: Mapping[str, bool]) -> Layout:
        """The layout at the config flags' values (config field -> bool)."""
        return replace(self.layout, **{row: flags[name] for row, name, _ in self.flags})

    def config_flags(self) -> dict[str, bool]:
        """Each config flag the family reads -> its default, in reading order."""
        return {name: default for _, name, default in self.flags}

    def read(self, c: Fields) -> Shape:
        """The family's shape of config ``c``; a ValueError names the first bad config field."""
        flags = {name: c.flag(name, default) for name, default in self.config_flags().items()}
        sizes: dict[str, int] = {}
        named: dict[str, str] = {}
        for size, read in self.sizes.items():
            named[size], sizes[size] = _read(c, read, sizes)
        head_dim = None if self.head_dim is None else _read(c, self.head_dim, sizes)[1]
        for divisor, dividend, head_width in DIVIDES:
            if head_width and head_dim is not None:
                continue
            if sizes[dividend] % sizes[divisor]:
                note = (" (and the config gives no head_dim)"
                        if head_width and self.head_dim is not None else "")
                raise ValueError(f"{named[divisor]}: {sizes[divisor]} does not divide "
                                 f"{named[dividend]} = {sizes[dividend]}{note}")
        if head_dim is not None and head_dim * sizes["heads"] == sizes["hidden"]:
            head_dim = None  # the usual h / a: keep the article's symbols
        shape: Shape = dict(layout=self.layout_for(flags), head_dim=head_dim, **sizes)
        if self.positions:
            shape["sizes"] = {"s_max": sizes["seq"]}
        return shape

    def data(self) -> dict[str, Any]:
        """The table as JSON data: flags, sizes, head width, positions (the page's interpreter)."""
        return {"flags": [[name, default] for name, default in self.config_flags().items()],
                "sizes": [[size, read.data()] for size, read in self.sizes.items()],
                "head_dim": None if self.head_dim is None else self.head_dim.data(),
                "divides": [list(pair) for pair in DIVIDES], "positions": self.positions}


def _read(c: Fields, read: Read, sizes: Mapping[str, int]) -> tuple[str, int | None]:
    """(the config field read, its value) for ``read``; defaults as :class:`Read` says."""
    for name in read.names:
        if c.config.get(name) is not None:
            return name, c.size(name)
    name = read.names[0] if read.names else str(read.like)
    if read.absent is not None and not any(field in c.config for field in read.names):
        return name, read.absent
    if read.like is not None:
        return name, read.times * sizes[read.like]
    if read.default is not None:
        return name, c.size(name, read.default)
    if read.required:
        return name, c.size(name)
    return name, None


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


def _sparse_layers(c: Fields, layers: int) -> list[int]:
    """Qwen MoE: layer i is sparse unless in mlp_only_layers, when (i + 1) % decoder_sparse_step == 0."""
    step = c.size("decoder_sparse_step", 1)
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


# ---- reading configs ----

def load_config(config: Mapping[str, Any] | str | os.PathLike) -> tuple[dict[str, Any], str]:
    """(parsed config, a default name): a mapping as given, or a path to a config.json."""
    if isinstance(config, Mapping):
        return dict(config), str(config.get("_name_or_path") or config.get("model_type") or "config")
    path = Path(config)
    parsed = read_json("config", path)
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


#: model_type -> (the config's window field, the switch it needs or None, the class default when
#: absent): MistralConfig's sliding_window defaults to 4096; Mixtral's and Phi3Config's to null;
#: the Qwen configs keep theirs only under use_sliding_window (configuration_*.py __post_init__).
WINDOWS: dict[str, tuple[str, str | None, int | None]] = {
    "mistral": ("sliding_window", None, 4096), "mixtral": ("sliding_window", None, None),
    "phi3": ("sliding_window", None, None),
    "qwen2": ("sliding_window", "use_sliding_window", 4096),
    "qwen3": ("sliding_window", "use_sliding_window", 4096),
    "qwen3_moe": ("sliding_window", "use_sliding_window", 4096),
    "gemma2": ("sliding_window", None, 4096), "gemma3_text": ("sliding_window", None, 4096),
    "gpt_oss": ("sliding_window", None, 128),
}


def sliding_window(config: Mapping[str, Any]) -> int | None:
    """The sliding window w transformers' attention applies for ``config`` (None without one)."""
    read = WINDOWS.get(str(config.get("model_type")))
    if read is None:
        return None
    field, switch, default = read
    c = Fields(config)
    if switch is not None and not c.flag(switch, False):
        return None
    if field in config and config[field] is None:
        return None
    return c.size(field, default) if default is not None else (
        c.size(field) if config.get(field) is not None else None)


#: model_type -> (the legacy top-level field, its class default) of a partial rotary head
#: (configuration_phi3.py / configuration_gpt_neox.py __post_init__: rope_parameters'
#: partial_rotary_factor, else the top-level field, else the default).
PARTIAL_ROTARY = {"phi3": ("partial_rotary_factor", 1.0), "gpt_neox": ("rotary_pct", 0.25)}


def rotary_width(config: Mapping[str, Any], head_dim: int) -> int | None:
    """The cos / sin width of a partial rotary config, None where RoPE turns whole heads.

    Phi3RotaryEmbedding (GPTNeoXRotaryEmbedding alike).compute_default_rope_parameters: dim = int(head_dim * factor), one
    frequency per even index below dim, cos = cat(freqs, freqs): 2 ceil(dim / 2) wide.
    """
    if config.get("model_type") not in PARTIAL_ROTARY:
        return None
    legacy, default = PARTIAL_ROTARY[config["model_type"]]
    found = [config[field].get("partial_rotary_factor") for field in ("rope_parameters", "rope_scaling")
             if isinstance(config.get(field), dict)]
    factor = next((value for value in [*found, config.get(legacy)] if value is not None), default)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        raise ValueError(f"{legacy}: must be a number in (0, 1], got {factor!r}")
    if factor == 1:
        return None
    dim = int(head_dim * factor)   # 0 is allowed: transformers then turns nothing
    return 2 * -(-dim // 2)


#: model_type -> (the config field of its default pattern or None, its default period) of a
#: family whose layers alternate sliding and full attention: without layer_types, layer i slides
#: unless i + 1 is a multiple of the period (Gemma2Config.__post_init__: 2;
#: Gemma3TextConfig.__post_init__: sliding_window_pattern, 6; GptOssConfig.__post_init__: 2).
LAYER_TYPES = {"gemma2": (None, 2), "gemma3_text": ("sliding_window_pattern", 6), "gpt_oss": (None, 2)}
SLIDING, FULL = "sliding_attention", "full_attention"
#: model_type -> (the config field, its class default) of the first sliding layer of a Qwen family
#: without layer_types: layer i slides where the window is on (use_sliding_window) and i is at
#: least max_window_layers (configuration_qwen2.py / configuration_qwen3.py __post_init__).
QWEN_WINDOW_LAYERS = {"qwen2": ("max_window_layers", 28), "qwen3": ("max_window_layers", 28)}


def layer_types(config: Mapping[str, Any], layers: int) -> list[str] | None:
    """Each layer's attention (sliding_attention / full_attention) as transformers builds it.

    None for other families, and for a Qwen config with neither layer_types nor a window (every
    layer full_attention, the Llama layer).
    """
    if config.get("model_type") not in (*LAYER_TYPES, *QWEN_WINDOW_LAYERS):
        return None
    if (config["model_type"] in QWEN_WINDOW_LAYERS and config.get("layer_types") is None
            and sliding_window(config) is None):
        return None
    listed = config.get("layer_types")
    if listed is not None:
        if not isinstance(listed, list) or len(listed) != layers or any(
                kind not in (SLIDING, FULL) for kind in listed):
            raise ValueError(f"layer_types: must list {SLIDING!r} or {FULL!r} for each of the "
                             f"num_hidden_layers = {layers} layers, got {listed!r}")
        return list(listed)
    if config["model_type"] in QWEN_WINDOW_LAYERS:
        field, first = QWEN_WINDOW_LAYERS[config["model_type"]]
        first = config.get(field, first)
        if isinstance(first, bool) or not isinstance(first, int) or not 0 <= first <= MAX_SIZE:
            raise ValueError(f"{field}: must be a non-negative integer up to 2^53, got {first!r}")
        on = sliding_window(config) is not None
        return [SLIDING if on and i >= first else FULL for i in range(layers)]
    field, period = LAYER_TYPES[config["model_type"]]
    if field is not None:
        period = Fields(config).size(field, period)
    return [SLIDING if (i + 1) % period else FULL for i in range(layers)]


#: model_type -> (Layout field, config field, the config class's default) of each tanh
#: soft-capping transformers applies: Gemma2Attention passes attn_logit_softcapping to the
#: attention function, Gemma2ForCausalLM / Gemma3ForCausalLM.forward cap the logits with
#: final_logit_softcapping; Gemma3Attention.forward passes no softcap (its field changes nothing).
SOFTCAPPING = {
    "gemma2": (("attention_softcap", "attn_logit_softcapping", 50.0),
               ("logit_softcap", "final_logit_softcapping", 30.0)),
    "gemma3_text": (("logit_softcap", "final_logit_softcapping", None),),
}


def softcapping(config: Mapping[str, Any]) -> dict[str, bool]:
    """Layout field -> whether transformers soft-caps there (a number, or the class default when absent; null: no cap)."""
    found = {}
    for row, name, default in SOFTCAPPING.get(str(config.get("model_type")), ()):
        value = config[name] if name in config else default
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not value > 0):
            raise ValueError(f"{name}: must be a positive number or null, got {value!r}")
        found[row] = value is not None
    return found


#: model_type -> the dropout probabilities its modeling code applies in training and their config
#: class defaults (configuration_<family>.py); every other family: attention_dropout, 0.
DROPOUT: dict[str, tuple[tuple[str, float], ...]] = {
    "phi3": (("attention_dropout", 0.0), ("resid_pdrop", 0.0), ("embd_pdrop", 0.0)),
    "gpt_neox": (("attention_dropout", 0.0), ("hidden_dropout", 0.0)),
    "gpt2": (("attn_pdrop", 0.1), ("resid_pdrop", 0.1), ("embd_pdrop", 0.1)),
}
ATTENTION_DROPOUT = (("attention_dropout", 0.0),)


def dropout(config: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
    """(field, p) of each dropout the config turns on (p > 0, or a class default above 0 when absent)."""
    found = []
    for name, default in DROPOUT.get(str(config.get("model_type")), ATTENTION_DROPOUT):
        value = config.get(name)
        value = default if value is None else value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise ValueError(f"{name}: must be a probability in [0, 1), got {value!r}")
        if value > 0:
            found.append((name, float(value)))
    return tuple(found)


#: model_type -> (config field, the values whose saved tensors derive lists, the class default):
#: GPT2Attention._upcast_and_reordered_attn (fp32 baddbmm) and any activation but gelu_new
#: (NewGELUActivation) keep other tensors, and without use_cache no DynamicCache copies k and v
#: (models/gpt2/modeling_gpt2.py, activations.py, cache_utils.py DynamicLayer.update); Gemma's
#: rows are gelu_pytorch_tanh's, and Gemma3TextConfig's use_bidirectional_attention halves the
#: window and drops the causal mask (configuration_gemma3.py __post_init__).
SAVED_SETTINGS: dict[str, tuple[tuple[str, tuple[Any, ...], Any], ...]] = {
    "gpt2": (("reorder_and_upcast_attn", (False,), False),
             ("activation_function", ("gelu_new",), "gelu_new"),
             ("use_cache", (True,), True)),
    "gemma2": (("hidden_activation", ("gelu_pytorch_tanh",), "gelu_pytorch_tanh"),),
    "gemma3_text": (("hidden_activation", ("gelu_pytorch_tanh",), "gelu_pytorch_tanh"),
                    ("use_bidirectional_attention", (False, None), False)),
}


def unmodelled(config: Mapping[str, Any]) -> tuple[str, ...]:
    """"field = value" of each setting whose saved tensors derive does not list (the parameters do not change)."""
    found = []
    for name, modelled, default in SAVED_SETTINGS.get(str(config.get("model_type")), ()):
        value = config.get(name, default)
        if value not in modelled:
            found.append(f"{name} = {value!r}")
    return tuple(found)


def from_config(config: Mapping[str, Any] | str | os.PathLike, *, name: str | None = None,
                seq: int | None = None, source: str = "") -> Model:
    """A :class:`derive.model.Model` whose parameter table is generated from ``config``'s fields.

    ``seq`` overrides the context length (max_position_embeddings / n_positions).
    """
    parsed, default_name = load_config(config)
    shape = read_shape(parsed)
    if seq is not None:
        shape["seq"] = seq
    window = sliding_window(parsed)
    if window is not None:
        shape["sizes"] = {**shape.get("sizes", {}), "w": window}
    shape["layout"] = replace(shape["layout"], dropout=dropout(parsed),
                              unmodelled=unmodelled(parsed))
    types = layer_types(parsed, shape["layers"])
    if types is not None:
        shape["sizes"] = {**shape.get("sizes", {}), "L_w": types.count(SLIDING)}
        shape["layout"] = replace(shape["layout"], **softcapping(parsed))
    rotary = rotary_width(parsed, shape.get("head_dim") or shape["hidden"] // shape["heads"])
    if rotary is not None:
        shape["sizes"] = {**shape.get("sizes", {}), "k_rope": rotary}
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
