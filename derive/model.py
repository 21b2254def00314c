"""One model, dense or MoE: a decoder-only Transformer's shape in the article's symbols and its layout.

A :class:`Model` is validated when made (positive sizes, heads dividing
hidden, kv heads dividing heads), so every number on the sheet and in the
report comes from a shape that exists. Its ``layout``
(``derive.architectures.decoder.Layout``) holds every feature of its form:
MoE blocks with their routing, MLA, MTP modules, dense-first layers (``L_E``
of ``sizes``); a preset of the article's families leaves it None and is
counted by its family's tables. Configs are read by ``derive.hf``, presets
named in ``derive.presets``.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import sympy as sp

from derive.architectures.decoder import FAMILIES, Layout
from derive.architectures.tables import active_parameter_count, model_parameters, parameter_rows
from derive.evaluation import substitute, symbol_values
from derive.inputs import MAX_PARAMETERS, choose, divides, exact_count, positive_int
from derive.recipes import fp8_weight_counts
from derive.symbols import BY_NAME, N_8, N_GEMM, L, N, V, a, f, g, h, k, n_8, s
from derive.tensors import Ledger

#: Model field -> the symbol it sets.
FIELD_SYMBOLS: dict[str, sp.Symbol] = {"layers": L, "hidden": h, "heads": a, "kv_heads": g,
                                       "ffn": f, "vocab": V, "seq": s}

#: The Hugging Face model types whose MoE layers derive's saved-tensor tables model
#: (derive.architectures.saved): the MoE report takes them.
MOE_FAMILIES = ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3")


@lru_cache(maxsize=None)
def _parameter_numel(architecture: Layout) -> tuple[sp.Expr, tuple[str, ...]]:
    """(N as an expression of the table's symbols, the Model fields it uses), once per table form."""
    numel = parameter_rows(architecture).numel()
    return numel, tuple(name for name, symbol in FIELD_SYMBOLS.items() if numel.has(symbol))


@lru_cache(maxsize=4096)
def _parameter_count(architecture: Layout, values: tuple[tuple[str, int], ...]) -> int:
    """N of a table form at the sizes ``values`` (symbol name, value), exact."""
    numel, _ = _parameter_numel(architecture)
    return int(substitute(numel, {BY_NAME[name]: value for name, value in values}))


@dataclass(frozen=True)
class Model:
    """A decoder-only Transformer shape, dense or MoE, in the article's symbols.

    A model read from a config (``derive.hf.from_config``) also carries its
    ``layout`` (the table's form), the values of the MoE / MLA / MTP / position symbols
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
        """``expr`` with this model's sizes (and ``extra`` symbol=value pairs) substituted (derive.evaluation)."""
        return substitute(expr, symbol_values(self.values, **extra))

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
    def architecture(self) -> Layout:
        """What the accounts build this model's tables from: its layout, or its family's (decoder.GPT, LLAMA)."""
        return FAMILIES[self.family] if self.layout is None else self.layout

    @property
    def parameter_rows(self) -> Ledger:
        """Every parameter tensor, symbolic: the layout's table, or the family's (MTP modules apart)."""
        return parameter_rows(self.architecture)

    @property
    def dense(self) -> bool:
        """No MoE and no MLA block."""
        return self.layout is None or self.layout.dense

    def require_dense(self, account: str) -> None:
        """ValueError unless the dense tables hold every layer: MoE / MLA layers are the MoE tables' (MOE_FAMILIES) or not modelled."""
        if self.dense:
            return
        if self.model_type in MOE_FAMILIES or not self.model_type:
            raise ValueError(f"{account}: {self.name} ({self.model_type or 'MoE'}) has MoE / MLA layers, which "
                             "the dense tables do not hold; the MoE report counts its activations and FLOPs")
        raise ValueError(f"{account}: derive's saved-tensor tables do not model {self.model_type} layers "
                         f"({self.name}; the MoE tables take {', '.join(MOE_FAMILIES)}); only its parameters "
                         "and active parameters are counted")

    @property
    def parameters(self) -> int:
        """N: every parameter once, a tied embedding once, MTP modules apart (the table's sum, built once per table form)."""
        return _parameter_count(self.architecture, tuple(sorted(
            (symbol.name, value) for symbol, value in self.values.items())))

    @property
    def active_parameters(self) -> int:
        """Parameters one token passes through: N for a dense model, k_E of E routed experts per MoE layer."""
        active = active_parameter_count(self.architecture)
        if dict(self.sizes).get("E") and "k_E" not in dict(self.sizes):
            raise ValueError(f"num_experts_per_tok: {self.name}'s config leaves top-k unset")
        return int(self.subs(active))

    @property
    def mtp_parameters(self) -> int:
        """Parameters of the MTP modules (0 without them); embedding and head are shared."""
        if self.layout is None or not self.layout.mtp:
            return 0
        return int(self.subs(model_parameters(self.layout).where("mtp").numel()))

    @property
    def fp8_weights(self) -> tuple[int, int]:
        """(N_8, n_8): elements and tensors of the layer matrices an FP8 recipe quantises (recipes.fp8_weights)."""
        numel, tensors = fp8_weight_counts(self.parameter_rows)
        return int(self.subs(numel)), int(self.subs(tensors))

    @property
    def gemm_parameters(self) -> int:
        """N_GEMM."""
        return int(self.subs(self.parameter_rows.where("gemm").numel()))
