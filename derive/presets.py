"""Named model shapes and hardware: the numbers substituted into derive's expressions.

One table of presets (:data:`MODELS`), dense and MoE alike, each a
:class:`derive.model.Model`: the Llama 3 models read from their published
configs, the GPT-3 shapes of the papers, and three MoE models (Mixtral 8x7B,
DeepSeek-V3, Qwen3-30B-A3B) read from their shipped configs. Each is built on
first use, so a command reads and validates only the presets it names.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable, Iterator, Mapping

import sympy as sp

from derive.hf import from_config, published_config
from derive.inputs import choose, positive_int
from derive.model import MOE_FAMILIES, Model
from derive.systems import SYSTEMS


LLAMA3 = ("Llama 3 paper (Dubey et al. 2024), Table 3; V = 128256 with special tokens; "
          "read from the published config.json, derive/configs/{config}.json")


def _llama3(name: str, config: str) -> Model:
    """A Llama 3 preset read from its published config at the article's s = 8192."""
    return from_config(published_config(config), name=name, seq=8192,
                       source=LLAMA3.format(config=config))


class Built(Mapping[str, Model]):
    """name -> Model, each built by its function on first use (a command reads only the presets it names)."""

    def __init__(self, makers: dict[str, Callable[[], Model]]) -> None:
        self._makers = makers
        self._built: dict[str, Model] = {}

    def __getitem__(self, name: str) -> Model:
        if name not in self._built:
            self._built[name] = self._makers[name]()
        return self._built[name]

    def __contains__(self, name: object) -> bool:
        return name in self._makers

    def __iter__(self) -> Iterator[str]:
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)


#: The dense presets, each built (its config read, its shape validated) when first used.
DENSE_MODELS: Mapping[str, Model] = Built({
    "llama3-8b": lambda: _llama3("llama3-8b", "meta-llama-3-8b"),
    "llama3-70b": lambda: _llama3("llama3-70b", "meta-llama-3-70b"),
    "llama3-405b": lambda: _llama3("llama3-405b", "llama-3.1-405b"),
    "gpt3-175b": lambda: Model("gpt3-175b", "gpt", 96, 12288, 96, 96, 4 * 12288, 50257, 2048,
                               "Brown et al. 2020 (GPT-3), Table 2.1"),
    "gpt3-1.3b": lambda: Model("gpt3-1.3b", "gpt", 24, 2048, 16, 16, 4 * 2048, 50257, 2048,
                               "Brown et al. 2020 (GPT-3), Table 2.1 (GPT-3 XL)"),
})


def moe_from_config(config: Mapping[str, Any], name: str | None = None, seq: int | None = None,
                    source: str = "") -> Model:
    """An MoE model as the MoE accounts read a parsed config.json: ``derive.hf.from_config``'s Model with
    DeepSeek-V3's group-limited routing sizes and MTP modules (transformers' model leaves them out)."""
    kind = choose("model_type", str(config.get("model_type")), MOE_FAMILIES)
    model = from_config(config, name=name, seq=seq, source=source)
    if model.layout.tied:
        raise ValueError("tie_word_embeddings: derive's MoE tables have an untied output head")
    if kind in ("qwen2_moe", "qwen3_moe") and dict(model.sizes).get("L_E") != model.layers:
        raise ValueError("mlp_only_layers: dense layers in a Qwen-MoE config are not modelled")
    if kind != "deepseek_v3":
        return model
    sizes = {"n_g": positive_int("n_group", config.get("n_group")),
             "k_g": positive_int("topk_group", config.get("topk_group"))}
    layout = model.layout
    if config.get("num_nextn_predict_layers"):
        sizes["D"] = positive_int("num_nextn_predict_layers", config.get("num_nextn_predict_layers"))
        layout = replace(layout, mtp=True)
    return replace(model, layout=layout, sizes=model.sizes + tuple(sizes.items()))


#: The MoE presets: name -> (shipped config, the name the report prints, s, source).
MOE_PRESETS: dict[str, tuple[str, str, int, str]] = {
    "mixtral-8x7b": ("mixtral-8x7b-v0.1", "Mixtral 8x7B", 32768,
                     "derive/configs/mixtral-8x7b-v0.1.json; Jiang et al. 2024 (Mixtral of Experts), Table 1"),
    "deepseek-v3": ("deepseek-v3", "DeepSeek-V3", 4096,
                    "derive/configs/deepseek-v3.json; DeepSeek-V3 report, sections 2 and 4.2 (61 layers, first 3 "
                    "dense, 1 shared + 256 routed experts, 8 active, one MTP module, pre-trained at s = 4096)"),
    "qwen3-30b-a3b": ("qwen3-30b-a3b", "Qwen3-30B-A3B", 32768,
                      "derive/configs/qwen3-30b-a3b.json (48 layers, 128 experts, 8 active, head_dim 128)"),
}


def _moe_preset(name: str) -> Model:
    """An MoE preset read from its shipped config (:data:`MOE_PRESETS`)."""
    config, shown, seq, source = MOE_PRESETS[name]
    return moe_from_config(published_config(config), shown, seq, source)


#: Every preset, dense and MoE, by name (a mapping; each read on first use, the dense ones from DENSE_MODELS).
MODELS: Mapping[str, Model] = Built({**{name: partial(DENSE_MODELS.__getitem__, name) for name in DENSE_MODELS},
                                     **{name: partial(_moe_preset, name) for name in MOE_PRESETS}})

#: Short names the article's CLI uses.
ALIASES: dict[str, str] = {"8b": "llama3-8b", "70b": "llama3-70b", "405b": "llama3-405b",
                           "175b": "gpt3-175b", "1.3b": "gpt3-1.3b"}

#: The three models of the article's tables.
LLAMA3_MODELS: tuple[str, ...] = ("llama3-8b", "llama3-70b", "llama3-405b")


def model(name: str) -> Model:
    """A preset by name or alias; ValueError naming the field if unknown."""
    name = ALIASES.get(name, name)
    return MODELS[choose("model", name, [*MODELS, *ALIASES])]


@dataclass(frozen=True)
class Hardware:
    """One accelerator: dense bf16 peak and memory as sold."""

    name: str
    peak_flops: float
    memory_bytes: int
    source: str


#: The report's and sheet's hardware names -> the systems table's (derive.systems): one table.
HARDWARE_SYSTEMS: dict[str, str] = {"h100": "h100", "a100": "a100-80gb", "h200": "h200", "b200": "b200",
                                   "b300": "b300"}

HARDWARE: dict[str, Hardware] = {
    name: Hardware(name, float(SYSTEMS[key].peaks["bf16"]), SYSTEMS[key].hbm_bytes, SYSTEMS[key].source)
    for name, key in HARDWARE_SYSTEMS.items()
}


def hardware(name: str) -> Hardware:
    """A hardware preset by name; ValueError naming the field if unknown."""
    return HARDWARE[choose("peak", name, HARDWARE)]


@dataclass(frozen=True)
class WorkedExample:
    """A cluster scenario: a model on a number of GPUs, tokens per step, an observed step time."""

    model: str
    gpu: str
    step_tokens: int
    gpus: int
    large_gpus: int
    target_mfu: sp.Rational
    step_seconds: sp.Rational
    training_tokens: int
    source: str


#: The article's worked example (sections 6.4 and 7.3): Llama 3 70B, a 4M-token (2^22) global
#: batch on 1024 H100s (and 8192), planned at 40 % MFU, observed at 4.5 s per step, 15T tokens.
ARTICLE_EXAMPLE = WorkedExample(
    "llama3-70b", "h100", 2**22, 1024, 8192, sp.Rational(2, 5), sp.Rational(9, 2), 15 * 10**12,
    "the article, section 6.4 (step-time bound, days for 15T tokens) and 7.3 (MFU of a 4.5 s step)")
