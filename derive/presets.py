"""Named model shapes and hardware: the numbers substituted into derive's expressions.

A :class:`Model` is validated when made (positive sizes, heads dividing
hidden, kv heads dividing heads), so every number on the sheet and in the
report comes from a shape that exists.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from derive.architectures.decoder import Layout, parameter_rows
from derive.architectures.families import FAMILIES, model_parameters
from derive.architectures.moe import active_parameter_count
from derive.hf import from_config, published_config
from derive.inputs import MAX_PARAMETERS, choose, divides, exact_count, positive_int, positive_value
from derive.recipes import fp8_weight_counts
from derive.symbols import BY_NAME, N_8, N_GEMM, L, N, V, a, f, g, h, k, n_8, s
from derive.systems import SYSTEMS
from derive.tensors import Ledger


#: Model field -> the symbol it sets.
FIELD_SYMBOLS: dict[str, sp.Symbol] = {"layers": L, "hidden": h, "heads": a, "kv_heads": g,
                                       "ffn": f, "vocab": V, "seq": s}


@lru_cache(maxsize=None)
def _parameter_numel(architecture: Layout | str) -> tuple[sp.Expr, tuple[str, ...]]:
    """(N as an expression of the table's symbols, the Model fields it uses), once per table form."""
    rows = model_parameters(architecture) if isinstance(architecture, str) else parameter_rows(architecture)
    numel = rows.numel()
    return numel, tuple(name for name, symbol in FIELD_SYMBOLS.items() if numel.has(symbol))


@lru_cache(maxsize=4096)
def _parameter_count(architecture: Layout | str, values: tuple[tuple[str, int], ...]) -> int:
    """N of a table form at the sizes ``values`` (symbol name, value), exact."""
    numel, _ = _parameter_numel(architecture)
    return int(numel.xreplace({BY_NAME[name]: sp.Integer(value) for name, value in values}))


@dataclass(frozen=True)
class Model:
    """A decoder-only Transformer shape, in the article's symbols.

    A model read from a config (``derive.hf.from_config``) also carries its
    ``layout`` (the table's form), the values of the MoE / MLA / position symbols
    (``sizes``, by symbol name), the indices of its MoE layers and its model_type.
    """

    name: str
    family: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq: int
    source: str = ""
    head_dim: int | None = None
    layout: Layout | None = None
    sizes: tuple[tuple[str, int], ...] = ()
    moe_layers: tuple[int, ...] = ()
    model_type: str = ""

    def __post_init__(self) -> None:
        choose("family", self.family, FAMILIES)
        for name in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq"):
            object.__setattr__(self, name, positive_int(name, getattr(self, name)))
        if self.head_dim is None:
            divides("heads", self.heads, "hidden", self.hidden)
        else:
            object.__setattr__(self, "head_dim", positive_int("head_dim", self.head_dim))
        divides("kv_heads", self.kv_heads, "heads", self.heads)
        if self.family == "gpt" and self.kv_heads != self.heads:
            raise ValueError(f"kv_heads: the gpt family has no grouped-query attention, so kv_heads "
                             f"must equal heads = {self.heads}, got {self.kv_heads}")
        _, sized = _parameter_numel(self.architecture)
        largest = max(sized, key=lambda name: getattr(self, name))  # the first of equals
        exact_count(largest, "the parameter count N", self.parameters, MAX_PARAMETERS)

    @property
    def values(self) -> dict[sp.Symbol, int]:
        """Symbol -> number for substitution."""
        values = {symbol: getattr(self, field) for field, symbol in FIELD_SYMBOLS.items()}
        return {**values, k: self.head_dim or self.hidden // self.heads,
                **{BY_NAME[name]: value for name, value in self.sizes}}

    def subs(self, expr: sp.Expr, **extra: int) -> sp.Expr:
        """``expr`` with this model's sizes (and ``extra`` symbol=value pairs) substituted."""
        unknown = sorted(set(extra) - set(BY_NAME))
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown symbol (known: {', '.join(sorted(BY_NAME))})")
        values: dict[sp.Symbol, object] = dict(self.values)
        values.update({BY_NAME[name]: positive_value(name, value) for name, value in extra.items()})
        return sp.sympify(expr).xreplace({symbol: sp.sympify(value)
                                          for symbol, value in values.items()})

    def at(self, expr: sp.Expr, **extra: int) -> sp.Expr:
        """``expr`` at this model: its sizes, N and N_GEMM substituted exactly (``extra`` pairs too, b=1, d=8)."""
        expr = sp.sympify(expr)
        counts: dict[str, int] = {}
        if expr.has(N):
            counts["N"] = self.parameters
        if expr.has(N_GEMM):
            counts["N_GEMM"] = self.gemm_parameters
        if expr.has(N_8) or expr.has(n_8):
            counts["N_8"], counts["n_8"] = self.fp8_weights
        return self.subs(expr, **{**counts, **extra})

    @property
    def architecture(self) -> Layout | str:
        """What the accounts build this model's tables from: its layout, or its family's tables."""
        return self.family if self.layout is None else self.layout

    @property
    def parameter_rows(self) -> Ledger:
        """Every parameter tensor, symbolic: the layout's table, or the family's."""
        return model_parameters(self.family) if self.layout is None else parameter_rows(self.layout)

    @property
    def dense(self) -> bool:
        """No MoE and no MLA block."""
        return self.layout is None or self.layout.dense

    def require_dense(self, account: str) -> None:
        """ValueError unless every account of derive applies (MoE / MLA beyond parameters: issue 15)."""
        if not self.dense:
            raise ValueError(f"{account}: activations and FLOPs of MoE / MLA layers are not "
                             f"modelled yet ({self.name}, {self.model_type}); only its parameters "
                             "and active parameters are counted")

    @property
    def parameters(self) -> int:
        """N: every parameter once, a tied embedding once (the table's sum, built once per table form)."""
        return _parameter_count(self.architecture, tuple(sorted(
            (symbol.name, value) for symbol, value in self.values.items())))

    @property
    def active_parameters(self) -> int:
        """Parameters one token passes through: N for a dense model, k_E of E routed experts per MoE layer."""
        active = active_parameter_count(self.parameter_rows)
        if dict(self.sizes).get("E") and "k_E" not in dict(self.sizes):
            raise ValueError(f"num_experts_per_tok: {self.name}'s config leaves top-k unset")
        return int(self.subs(active))

    @property
    def fp8_weights(self) -> tuple[int, int]:
        """(N_8, n_8): elements and tensors of the layer matrices an FP8 recipe quantises (recipes.fp8_weights)."""
        numel, tensors = fp8_weight_counts(self.parameter_rows)
        return int(self.subs(numel)), int(self.subs(tensors))

    @property
    def gemm_parameters(self) -> int:
        """N_GEMM."""
        return int(self.subs(self.parameter_rows.where("gemm").numel()))


LLAMA3 = ("Llama 3 paper (Dubey et al. 2024), Table 3; V = 128256 with special tokens; "
          "read from the published config.json, derive/configs/{config}.json")


def _llama3(name: str, config: str) -> Model:
    """A Llama 3 preset read from its published config at the article's s = 8192."""
    return from_config(published_config(config), name=name, seq=8192,
                       source=LLAMA3.format(config=config))


MODELS: dict[str, Model] = {
    model.name: model
    for model in (
        _llama3("llama3-8b", "meta-llama-3-8b"),
        _llama3("llama3-70b", "meta-llama-3-70b"),
        _llama3("llama3-405b", "llama-3.1-405b"),
        Model("gpt3-175b", "gpt", 96, 12288, 96, 96, 4 * 12288, 50257, 2048,
              "Brown et al. 2020 (GPT-3), Table 2.1"),
        Model("gpt3-1.3b", "gpt", 24, 2048, 16, 16, 4 * 2048, 50257, 2048,
              "Brown et al. 2020 (GPT-3), Table 2.1 (GPT-3 XL)"),
    )
}

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
