"""Published MoE model shapes (Mixtral 8x7B, DeepSeek-V3, Qwen3-30B-A3B) as symbol values and table features."""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import sympy as sp

from derive.architectures.moe_model import MoEFeatures, active_parameters, model_parameters
from derive.inputs import choose, positive_int
from derive.symbols import (BY_NAME, D, E, k_E, L, L_E, V, a, k_nope, k_rope, k_v, f, f_E, f_S, g, h, k,
                            k_g, n_g, r_kv, r_q, s)


@dataclass(frozen=True)
class MoEModel:
    """A named MoE shape: the values of derive's symbols and the rows its tables hold."""

    name: str
    features: MoEFeatures
    values: dict[sp.Symbol, int] = field(hash=False)
    source: str = ""

    def subs(self, expr: sp.Expr, **extra: int) -> sp.Expr:
        """``expr`` with this model's sizes (and ``extra`` symbol=value pairs) substituted."""
        values = {**self.values, **{BY_NAME.get(name, sp.Symbol(name)): n for name, n in extra.items()}}
        return sp.sympify(expr).xreplace({symbol: sp.Integer(n) for symbol, n in values.items()})

    @property
    def parameters(self) -> int:
        """N: every parameter of the main model once (MTP modules apart, as published)."""
        return int(self.subs(model_parameters(self.features).without("mtp").numel()))

    @property
    def active_parameters(self) -> int:
        """Parameters one token passes through in the main model (routed experts: k_E of E)."""
        return int(self.subs(active_parameters(self.features).without("mtp").numel()))

    @property
    def mtp_parameters(self) -> int:
        """Parameters of the MTP modules (0 without them); embedding and head are shared."""
        return int(self.subs(model_parameters(self.features).where("mtp").numel()))


#: Hugging Face model types :func:`moe_model_from_config` reads.
MOE_FAMILIES = ("mixtral", "qwen3_moe", "deepseek_v3")


MOE_MODELS: dict[str, MoEModel] = {
    "mixtral-8x7b": MoEModel(
        "Mixtral 8x7B", MoEFeatures("gqa"),
        {L: 32, L_E: 32, h: 4096, a: 32, g: 8, k: 128, f: 14336, E: 8, k_E: 2, f_E: 14336,
         V: 32000, s: 32768},
        "mistralai/Mixtral-8x7B-v0.1 config.json; Jiang et al. 2024 (Mixtral of Experts), Table 1"),
    "deepseek-v3": MoEModel(
        "DeepSeek-V3", MoEFeatures("mla", shared=True, mtp=True, router="sigmoid-grouped"),
        {L: 61, L_E: 58, h: 7168, a: 128, f: 18432, E: 256, k_E: 8, f_E: 2048, f_S: 2048,
         r_q: 1536, r_kv: 512, k_nope: 128, k_rope: 64, k_v: 128, V: 129280, D: 1, n_g: 8, k_g: 4,
         s: 4096},
        "deepseek-ai/DeepSeek-V3 config.json; DeepSeek-V3 report, sections 2 and 4.2 "
        "(61 layers, first 3 dense, 1 shared + 256 routed experts, 8 active, one MTP module, s = 4096)"),
    "qwen3-30b-a3b": MoEModel(
        "Qwen3-30B-A3B", MoEFeatures("gqa", qk_norm=True, weights_dtype="bf16"),
        {L: 48, L_E: 48, h: 2048, a: 32, g: 4, k: 128, f: 6144, E: 128, k_E: 8, f_E: 768,
         V: 151936, s: 32768},
        "Qwen/Qwen3-30B-A3B config.json (48 layers, 128 experts, 8 active, head_dim 128)"),
}


def moe_model(name: str) -> MoEModel:
    """The MoE preset ``name``; ValueError listing the known ones."""
    return MOE_MODELS[choose("model", name, MOE_MODELS)]


def _field(config: Mapping[str, Any], name: str, default: Any = None) -> int:
    value = config.get(name, default)
    if value is None:
        raise ValueError(f"{name}: missing from the config")
    return positive_int(name, value)


def moe_model_from_config(config: Mapping[str, Any], name: str | None = None,
                          seq: int | None = None) -> MoEModel:
    """An MoE model from a parsed Hugging Face config.json (mixtral, qwen3_moe, deepseek_v3)."""
    kind = choose("model_type", str(config.get("model_type")), MOE_FAMILIES)
    hidden, heads = _field(config, "hidden_size"), _field(config, "num_attention_heads")
    layers = _field(config, "num_hidden_layers")
    values = {L: layers, h: hidden, a: heads, V: _field(config, "vocab_size"),
              f: _field(config, "intermediate_size"), k_E: _field(config, "num_experts_per_tok"),
              s: seq or _field(config, "max_position_embeddings")}
    if config.get("tie_word_embeddings"):
        raise ValueError("tie_word_embeddings: derive's MoE tables have an untied output head")
    if kind == "deepseek_v3":
        dense = config.get("first_k_dense_replace", 0)
        values.update({L_E: layers - dense, E: _field(config, "n_routed_experts"),
                       f_E: _field(config, "moe_intermediate_size"),
                       f_S: _field(config, "moe_intermediate_size")
                       * _field(config, "n_shared_experts"),
                       r_kv: _field(config, "kv_lora_rank"), k_nope: _field(config, "qk_nope_head_dim"),
                       k_rope: _field(config, "qk_rope_head_dim"), k_v: _field(config, "v_head_dim"),
                       n_g: _field(config, "n_group"), k_g: _field(config, "topk_group")})
        latent = config.get("q_lora_rank") is not None
        if latent:
            values[r_q] = _field(config, "q_lora_rank")
        mtp = bool(config.get("num_nextn_predict_layers"))
        if mtp:
            values[D] = _field(config, "num_nextn_predict_layers")
        features = MoEFeatures("mla" if latent else "mla-direct", shared=True, mtp=mtp,
                               router="sigmoid-grouped",
                               normalise_topk=bool(config.get("norm_topk_prob", True)))
    else:
        experts = "num_local_experts" if kind == "mixtral" else "num_experts"
        if kind == "qwen3_moe" and (config.get("mlp_only_layers") or config.get("decoder_sparse_step", 1) != 1):
            raise ValueError("mlp_only_layers: dense layers in a Qwen3-MoE config are not modelled")
        values.update({L_E: layers, E: _field(config, experts), g: _field(config, "num_key_value_heads"),
                       k: _field(config, "head_dim", hidden // heads),
                       f_E: _field(config, "moe_intermediate_size" if kind == "qwen3_moe"
                                   else "intermediate_size")})
        features = (MoEFeatures("gqa", qk_norm=True, weights_dtype="bf16",
                                normalise_topk=bool(config.get("norm_topk_prob", False)))
                    if kind == "qwen3_moe" else MoEFeatures("gqa"))
    return MoEModel(name or str(config.get("_name_or_path") or kind), features, values,
                    f"config.json ({kind})")


def load_moe_model(name_or_path: str, seq: int | None = None) -> MoEModel:
    """A preset by name, or a config.json by path; ``seq`` overrides the context length."""
    if name_or_path in MOE_MODELS:
        preset = MOE_MODELS[name_or_path]
        return preset if seq is None else replace(preset, values={**preset.values, s: seq})
    path = Path(name_or_path)
    if path.suffix != ".json":
        raise ValueError(f"unknown MoE model {name_or_path!r} (known: {', '.join(MOE_MODELS)}, "
                         "or a path to a config.json)")
    try:
        config = json.loads(path.read_text())
    except OSError as error:
        raise ValueError(f"cannot read {name_or_path!r} ({error.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{name_or_path!r} is not JSON ({error})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{name_or_path!r} holds no JSON object")
    stem = path.parent.name if path.stem == "config" else path.stem
    return moe_model_from_config(config, stem, seq)
