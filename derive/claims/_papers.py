"""Helpers the paper modules share: GPT shapes from a paper's table, figures at a shape, rounding readings."""
from __future__ import annotations

import math

import sympy as sp

from derive.accounts.flops import flops_per_token
from derive.presets import Model
from derive.units import BYTE_UNITS

#: A100 SXM dense fp16/bf16 peak (NVIDIA A100 datasheet, 312 TFLOP/s): the peak both Megatron papers use.
A100_PEAK = 312 * 10**12
#: A GB (10^9 bytes), as the papers print memory.
GB = BYTE_UNITS["GB"]


def gpt(name: str, layers: int, hidden: int, heads: int, vocab: int, seq: int, source: str) -> Model:
    """A GPT shape (f = 4h, MHA, biases, learned positions, tied head) as a paper tabulates it."""
    return Model(name, "gpt", layers, hidden, heads, heads, 4 * hidden, vocab, seq, source)


def at(model: Model, expr: sp.Expr, **extra: int) -> sp.Expr:
    """``expr`` at ``model``'s sizes (f included) and N = its parameter count."""
    return model.subs(expr, N=model.parameters, **extra)


def gpt_full_flops(model: Model, recompute: str = "none") -> sp.Expr:
    """Training FLOPs per token of a GPT shape, full score square (the Megatron papers' count)."""
    return at(model, flops_per_token("gpt", "full", recompute))


def truncated(value: sp.Expr) -> sp.Expr:
    """``value`` with its fraction cut off (a table that truncates instead of rounding)."""
    return sp.Integer(math.floor(sp.Rational(value)))
