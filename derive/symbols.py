"""Every SymPy symbol derive uses, with its meaning.

One table owns the notation (the article's, DESIGN.md "Notation"), so the
sheet's notation table is generated from the same objects the maths uses.
Shape and count symbols are positive integers; nothing else is declared.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp


@dataclass(frozen=True)
class Notation:
    """A symbol and the one line that says what it stands for."""

    symbol: sp.Symbol
    meaning: str
    group: str


def _size(name: str, latex: str | None = None) -> sp.Symbol:
    """A positive integer size; ``latex`` overrides the printed name."""
    symbol = sp.Symbol(name, positive=True, integer=True)
    if latex is not None:
        LATEX_NAMES[symbol] = latex
    return symbol


#: symbol -> LaTeX name, for symbols whose Python name is not their printed one.
LATEX_NAMES: dict[sp.Symbol, str] = {}

# model and batch shape (Korthikanti et al. 2022, section 3; the article's section 1.3)
s = _size("s")
b = _size("b")
h = _size("h")
a = _size("a")
g = _size("g")
L = _size("L")
V = _size("V")
f = _size("f")
k = _size("k")
# parameters (the ZeRO paper writes Psi)
N = _size("N")
N_GEMM = _size("N_GEMM", r"N_{\mathrm{GEMM}}")
# parallel sizes and pipeline schedule
t = _size("t")
p = _size("p")
d = _size("d")
c = _size("c")
e = _size("e")
m = _size("m")
v = _size("v")
# the report's inputs and the figures later figures name (derive.formulas)
T = _size("T")
G = _size("G")
P = sp.Symbol("P", positive=True)
MFU_target = sp.Symbol("MFU_target", positive=True)
LATEX_NAMES[MFU_target] = r"\mathrm{MFU}_{\mathrm{target}}"
t_step = sp.Symbol("t_step", positive=True)
LATEX_NAMES[t_step] = r"t_{\mathrm{step}}"
M_GPU = _size("M_GPU", r"M_{\mathrm{GPU}}")
F = _size("F")
M_state = _size("M_state", r"M_{\mathrm{state}}")
M_act = _size("M_act", r"M_{\mathrm{act}}")

NOTATION: tuple[Notation, ...] = (
    Notation(s, "sequence length (tokens per sequence)", "shape"),
    Notation(b, "micro-batch size (sequences)", "shape"),
    Notation(h, "hidden size", "shape"),
    Notation(a, "attention (query) heads", "shape"),
    Notation(g, "key/value heads under GQA (g = a is MHA); h_kv = g h / a", "shape"),
    Notation(k, "per-head width (kv_channels); h / a unless a model says otherwise", "shape"),
    Notation(L, "Transformer layers", "shape"),
    Notation(V, "vocabulary size", "shape"),
    Notation(f, "FFN (MLP) hidden size", "shape"),
    Notation(N, "parameters (Psi in the ZeRO paper)", "count"),
    Notation(N_GEMM, "parameters that sit in a GEMM (layer matrices and output head)", "count"),
    Notation(t, "tensor-parallel size", "parallel"),
    Notation(p, "pipeline-parallel size", "parallel"),
    Notation(d, "data-parallel size", "parallel"),
    Notation(c, "context-parallel size", "parallel"),
    Notation(e, "expert-parallel size", "parallel"),
    Notation(m, "micro-batches per step", "parallel"),
    Notation(v, "virtual pipeline stages per rank (interleaved schedule)", "parallel"),
    Notation(T, "tokens per step (global batch)", "report"),
    Notation(G, "GPUs", "report"),
    Notation(P, "peak FLOP/s of one GPU (dense)", "report"),
    Notation(MFU_target, "target model FLOPs utilisation", "report"),
    Notation(t_step, "observed seconds per step", "report"),
    Notation(M_GPU, "memory budget of one GPU (bytes)", "report"),
    Notation(F, "model FLOPs per token (causal attention)", "report"),
    Notation(M_state, "resident state bytes (params + grads + optimizer) per GPU", "report"),
    Notation(M_act, "activation bytes of one micro-batch: all layers + logits", "report"),
)

BY_NAME: dict[str, sp.Symbol] = {entry.symbol.name: entry.symbol for entry in NOTATION}


#: The GPT layer's FFN width, f = 4h (Vaswani et al. 2017; GPT-2/3; Korthikanti et al. 2022, 4.1):
#: an assumption applied by substitution, never built into a table.
FFN_4H: dict[sp.Symbol, sp.Expr] = {f: 4 * h}


def h_kv(heads: sp.Expr = a, kv_heads: sp.Expr = g, hidden: sp.Expr = h) -> sp.Expr:
    """Key/value width under GQA: g heads of width h/a (Ainslie et al. 2023)."""
    return kv_heads * hidden / heads


def meaning(symbol: sp.Symbol) -> str:
    """The one-line meaning of ``symbol``; KeyError if derive does not own it."""
    for entry in NOTATION:
        if entry.symbol == symbol:
            return entry.meaning
    raise KeyError(f"{symbol} is not a derive symbol")
