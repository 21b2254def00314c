"""GEMM tables per token: every matrix multiply of a layer and of the model edges.

A :class:`Gemm` is ``C[m, n] = A[m, k] B[k, n]`` for ONE token (so ``m`` is 1
for a weight GEMM: one token's row), held ``count`` times (heads, layers).
One pass costs 2mnk FLOPs: ``k`` multiply-adds per output element.

Training runs every GEMM three times, and the three passes differ in kind:
  * a **weight** GEMM ``y = x W`` has a forward, a dgrad ``dx = dy W^T`` (the
    gradient passed to the layer below) and a wgrad ``dW = x^T dy``;
  * an **attention-score** GEMM (``S = Q K^T``, ``O = P V``) has no weight: its
    backward is two data-gradient GEMMs, one per activation operand
    (``dQ = dS K`` and ``dK = dS^T Q``; ``dP = dO V^T`` and ``dV = P^T dO``),
    and no wgrad.
Each pass is built as a GEMM of its own (operands transposed) and costed as
2mnk, so the 3 of "6 FLOPs per parameter" is a count of passes, not a constant.

Weight GEMMs come from the parameter tables (``derive.architectures.tables``):
every ``gemm``-tagged parameter is one weight GEMM, so the sum over weight
GEMMs is 6 N_GEMM per token by construction of the table, not by typing 6.

Tags: those of the parameter (``layer``, ``output``, ``tied`` ...) plus
``weight``; score GEMMs carry ``layer`` and ``attention_score``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from derive.expansion import expand
from derive.inputs import choose
from derive.symbols import a, h, s, w
from derive.tensors import Ledger, TaggedRow, Tensor

#: FLOPs of one multiply-add (the "2" of 2mnk).
FLOP_PER_MULTIPLY_ADD = 2

#: Attention masks: how many keys a query meets on average, as a share of s.
#: "causal" is the lower triangle counted as half the square (Megatron's ``/ 2``;
#: the exact mean is (s + 1)/2, a diagonal the convention drops); "full" is the
#: whole square; "none" leaves the score GEMMs out (the 6N-style count).
MASKS: dict[str, sp.Expr] = {
    "causal": sp.Rational(1, 2),
    "full": sp.Integer(1),
    "none": sp.Integer(0),
}


@dataclass(frozen=True)
class Pass:
    """One GEMM executed in training: C[m, n] = A[m, k] B[k, n], ``count`` times."""

    name: str
    m: sp.Expr
    n: sp.Expr
    k: sp.Expr
    count: sp.Expr = sp.Integer(1)

    @property
    def flops(self) -> sp.Expr:
        """2mnk per copy, times ``count``."""
        return FLOP_PER_MULTIPLY_ADD * self.m * self.n * self.k * self.count


@dataclass(frozen=True)
class Gemm(TaggedRow):
    """One GEMM of the forward pass for one token; ``count`` copies (heads, layers)."""

    name: str
    m: sp.Expr
    n: sp.Expr
    k: sp.Expr
    tags: frozenset[str] = field(default_factory=frozenset)
    count: sp.Expr = sp.Integer(1)
    note: str = ""

    def __post_init__(self) -> None:
        for name in ("m", "n", "k", "count"):
            object.__setattr__(self, name, sp.sympify(getattr(self, name)))
        object.__setattr__(self, "tags", frozenset(self.tags))

    @property
    def is_weight(self) -> bool:
        """Whether B is a parameter (then the backward has a wgrad)."""
        return "weight" in self.tags

    @property
    def passes(self) -> tuple[Pass, ...]:
        """Forward and the two backward GEMMs, each with its own (m, n, k)."""
        m, n, k, c = self.m, self.n, self.k, self.count
        forward = Pass("forward", m, n, k, c)              # C = A B
        dgrad_a = Pass("dgrad", m, k, n, c)                # dA = dC B^T
        if self.is_weight:
            return forward, dgrad_a, Pass("wgrad", k, n, m, c)          # dB = A^T dC
        return forward, dgrad_a, Pass("dgrad", k, n, m, c)              # dB = A^T dC, B an activation

    def flops(self, *kinds: str) -> sp.Expr:
        """FLOPs of the passes named ``kinds`` (all three when none is given)."""
        return sp.Add(*(p.flops for p in self.passes if not kinds or p.name in kinds))

    @property
    def forward(self) -> sp.Expr:
        """FLOPs of the forward GEMM."""
        return self.flops("forward")

    @property
    def dgrad(self) -> sp.Expr:
        """FLOPs of the data-gradient GEMMs (one for a weight GEMM, two for a score GEMM)."""
        return self.flops("dgrad")

    @property
    def wgrad(self) -> sp.Expr:
        """FLOPs of the weight-gradient GEMM (0 for a score GEMM)."""
        return self.flops("wgrad")

    @property
    def backward(self) -> sp.Expr:
        """dgrad + wgrad."""
        return self.flops("dgrad", "wgrad")

    @property
    def training(self) -> sp.Expr:
        """forward + backward."""
        return self.flops()



def weight_gemm(parameter: Tensor) -> Gemm:
    """The GEMM a ``gemm``-tagged parameter sits in: one token's row times the matrix."""
    rows, cols = parameter.shape
    k, n = (cols, rows) if parameter.has("embedding") else (rows, cols)  # a tied [V, h] is used as W^T
    return Gemm(parameter.name, 1, n, k, parameter.tags | {"weight"}, parameter.count)


def weight_gemms(parameters: Ledger) -> Ledger:
    """One weight GEMM per ``gemm``-tagged parameter of ``parameters``."""
    return Ledger(weight_gemm(p) for p in parameters.where("gemm"))


def attention_score_gemms(mask: str = "causal", heads: sp.Expr = a,
                          head_dim: sp.Expr | None = None, value_dim: sp.Expr | None = None) -> Ledger:
    """QK^T and PV of one layer for one query token, one of each per query head (GQA shares K/V, not the work).

    ``value_dim`` is PV's width when it differs from QK^T's (MLA: k_nope + k_rope vs k_v).
    ``mask`` "window": a causal sliding window of w keys (:func:`window_keys`).
    """
    keys = window_keys() if mask == "window" else s * MASKS[choose("mask", mask, [*MASKS, "window"])]
    if keys == 0:
        return Ledger()
    width = h / heads if head_dim is None else head_dim
    value = width if value_dim is None else value_dim
    tags = frozenset({"layer", "attention_score"})
    where = ", sliding window" if mask == "window" else ""
    return Ledger([
        Gemm(f"attention.scores (Q K^T){where}", 1, keys, width, tags, heads,
             "one query row [1, d] times K^T [d, keys] per head"),
        Gemm(f"attention.context (P V){where}", 1, value, keys, tags, heads,
             "one probability row [1, keys] times V [keys, d] per head"),
    ])


def window_keys(window: sp.Expr = w, seq: sp.Expr = s) -> sp.Expr:
    """Keys a query meets on average in a causal sliding-window layer (w <= s; a wider window is causal).

    Query i (1-based) meets min(i, w) keys, summed over the s queries; less the share of a diagonal
    :data:`MASKS`' causal convention drops (w = s gives its s / 2), over s queries.
    Attention over a window costs O(s w), not O(s^2) (Beltagy et al. 2020, Longformer, section 3.1);
    Megatron-Core runs it as window_size = (w, 0) in TransformerEngine's flash attention
    (GPT-OSS: Megatron-Bridge's GPTOSSProvider, window_size (128, 0), window_attn_skip_freq 2).
    """
    i = sp.Dummy("i", integer=True, positive=True)
    met = sp.summation(i, (i, 1, window)) + sp.summation(window, (i, window + 1, seq))
    within = expand((met - window * MASKS["causal"]) / seq)
    return sp.Piecewise((within, window <= seq), (seq * MASKS["causal"], True))


def flops(gemms: Ledger, *kinds: str) -> sp.Expr:
    """FLOPs of the passes named ``kinds`` (forward, dgrad, wgrad; all when none) summed over ``gemms``, expanded."""
    return expand(sp.Add(*(gemm.flops(*kinds) for gemm in gemms)))
