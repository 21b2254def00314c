"""MoE models for the accounts: a config.json read by derive.hf plus its routing features; three published presets."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping

import sympy as sp

from derive.architectures.moe_model import MoEFeatures, active_parameters, model_parameters
from derive.inputs import choose, positive_int
from derive.symbols import BY_NAME, D, L, L_E, k_g, n_g, s


@dataclass(frozen=True)
class MoEModel:
    """A named MoE shape: the values of derive's symbols and the rows its tables hold."""

    name: str
    features: MoEFeatures
    values: dict[sp.Symbol, int] = field(hash=False)
    source: str = ""

    def subs(self, expr: sp.Expr, **extra: int) -> sp.Expr:
        """``expr`` with this model's sizes (and ``extra`` symbol=value pairs) substituted."""
        unknown = [name for name in extra if name not in BY_NAME]
        if unknown:
            raise ValueError(f"{unknown[0]}: not a derive symbol")
        values = {**self.values, **{BY_NAME[name]: n for name, n in extra.items()}}
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


#: Hugging Face model types :func:`moe_model_from_config` reads, and the dtype each one's
#: routing weights reach the experts in (Qwen2-MoE and Qwen3-MoE cast them to the hidden dtype).
MOE_FAMILIES: dict[str, str] = {"mixtral": "fp32", "qwen2_moe": "bf16", "qwen3_moe": "bf16",
                                "deepseek_v3": "fp32"}


#: Whether the router renormalises its top-k weights when a config omits norm_topk_prob (the
#: config classes' defaults); Mixtral's router always does (modeling_mixtral.py MixtralTopKRouter).
NORMALISED_TOPK: dict[str, bool] = {"mixtral": True, "qwen2_moe": False, "qwen3_moe": False,
                                    "deepseek_v3": True}


def moe_model_from_config(config: Mapping[str, Any], name: str | None = None,
                          seq: int | None = None, source: str = "") -> MoEModel:
    """An MoE model from a parsed config.json: the table from ``derive.hf.from_config``, the routing from the config."""
    from derive.hf import from_config

    kind = choose("model_type", str(config.get("model_type")), MOE_FAMILIES)
    model = from_config(config, name=name, seq=seq)
    layout, values = model.layout, dict(model.values)
    if layout.tied:
        raise ValueError("tie_word_embeddings: derive's MoE tables have an untied output head")
    if kind in ("qwen2_moe", "qwen3_moe") and values[L_E] != values[L]:
        raise ValueError("mlp_only_layers: dense layers in a Qwen-MoE config are not modelled")
    deepseek = kind == "deepseek_v3"
    mtp = deepseek and bool(config.get("num_nextn_predict_layers"))
    if deepseek:
        values.update({n_g: positive_int("n_group", config.get("n_group")),
                       k_g: positive_int("topk_group", config.get("topk_group"))})
    if mtp:
        values[D] = positive_int("num_nextn_predict_layers", config.get("num_nextn_predict_layers"))
    return MoEModel(model.name, moe_features(config, layout, mtp), values, source or model.source)


def moe_features(config: Mapping[str, Any], layout, mtp: bool = False) -> MoEFeatures:
    """The features of an MoE config whose table ``layout`` derive.hf read: attention, experts, routing."""
    kind = choose("model_type", str(config.get("model_type")), MOE_FAMILIES)
    moe = layout.moe  # None when every layer is dense
    return MoEFeatures(
        "gqa" if layout.mla is None else ("mla" if layout.mla.q_lora else "mla-direct"),
        shared=bool(moe and moe.shared), gate=bool(moe and moe.shared_gate),
        router_bias=bool(moe and moe.router_bias == "parameter"), qk_norm=layout.qk_norm == "head",
        mtp=mtp, router="sigmoid-grouped" if kind == "deepseek_v3" else "softmax",
        normalise_topk=kind == "mixtral" or bool(config.get("norm_topk_prob",
                                                            NORMALISED_TOPK[kind])),
        weights_dtype=MOE_FAMILIES[kind])


def _published(config: str, name: str, seq: int, source: str) -> MoEModel:
    from derive.hf import published_config
    return moe_model_from_config(published_config(config), name, seq, source)


class _Presets(Mapping[str, MoEModel]):
    """The MoE presets by name, read from their shipped configs on first use (a dense command never reads them)."""

    def __init__(self) -> None:
        self._models: dict[str, MoEModel] | None = None

    def _loaded(self) -> dict[str, MoEModel]:
        if self._models is None:
            self._models = {
                "mixtral-8x7b": _published(
                    "mixtral-8x7b-v0.1", "Mixtral 8x7B", 32768,
                    "derive/configs/mixtral-8x7b-v0.1.json; Jiang et al. 2024 (Mixtral of Experts), Table 1"),
                "deepseek-v3": _published(
                    "deepseek-v3", "DeepSeek-V3", 4096,
                    "derive/configs/deepseek-v3.json; DeepSeek-V3 report, sections 2 and 4.2 (61 layers, first 3 "
                    "dense, 1 shared + 256 routed experts, 8 active, one MTP module, pre-trained at s = 4096)"),
                "qwen3-30b-a3b": _published(
                    "qwen3-30b-a3b", "Qwen3-30B-A3B", 32768,
                    "derive/configs/qwen3-30b-a3b.json (48 layers, 128 experts, 8 active, head_dim 128)"),
            }
        return self._models

    def __getitem__(self, name: str) -> MoEModel:
        return self._loaded()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())

    def __repr__(self) -> str:
        return repr(self._loaded())


#: The three published MoE presets by name (a mapping, read on first use).
MOE_MODELS: Mapping[str, MoEModel] = _Presets()


def moe_model(name: str) -> MoEModel:
    """The MoE preset ``name``; ValueError listing the known ones."""
    return MOE_MODELS[choose("model", name, MOE_MODELS)]


def load_moe_model(name_or_path: str, seq: int | None = None) -> MoEModel:
    """A preset by name, or a config.json by path (``derive.hf.load_config``); ``seq`` overrides s."""
    from derive.hf import load_config

    if name_or_path in MOE_MODELS:
        preset = MOE_MODELS[name_or_path]
        return preset if seq is None else replace(preset, values={**preset.values, s: seq})
    if not name_or_path.endswith(".json"):
        raise ValueError(f"unknown MoE model {name_or_path!r} (known: {', '.join(MOE_MODELS)}, "
                         "or a path to a config.json)")
    config, name = load_config(name_or_path)
    return moe_model_from_config(config, name, seq)
