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
# Mixture-of-Experts, latent attention and multi-token prediction (DeepSeek-V3 report, sections 2.1-2.2)
E = _size("E")
K = _size("K", r"k_{\mathrm{top}}")
f_e = _size("f_e", r"f_{e}")
f_s = _size("f_s", r"f_{s}")
L_m = _size("L_m", r"L_{\mathrm{MoE}}")
r_q = _size("r_q", r"r_{q}")
r_kv = _size("r_kv", r"r_{kv}")
d_n = _size("d_n", r"d_{\mathrm{nope}}")
d_r = _size("d_r", r"d_{\mathrm{rope}}")
d_v = _size("d_v", r"d_{v}")
D = _size("D")
t_e = _size("t_e", r"t_{e}")
n_g = _size("n_g", r"n_{g}")
k_g = _size("k_g", r"k_{g}")
N_active = _size("N_active", r"N_{\mathrm{active}}")

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
    Notation(E, "routed experts per MoE layer", "moe"),
    Notation(K, "routed experts per token (top-k)", "moe"),
    Notation(f_e, "one routed expert's MLP width", "moe"),
    Notation(f_s, "shared experts' MLP width (all shared experts together)", "moe"),
    Notation(L_m, "MoE layers (the other L - L_MoE layers have a dense MLP of width f)", "moe"),
    Notation(r_q, "MLA query latent rank (q_lora_rank)", "moe"),
    Notation(r_kv, "MLA key/value latent rank (kv_lora_rank)", "moe"),
    Notation(d_n, "MLA per-head query/key width without rotary position (qk_nope_head_dim)", "moe"),
    Notation(d_r, "MLA per-head rotary query/key width, one shared rotary key (qk_rope_head_dim)", "moe"),
    Notation(d_v, "MLA per-head value width (v_head_dim)", "moe"),
    Notation(D, "multi-token-prediction modules (DeepSeek-V3's depth D)", "moe"),
    Notation(n_g, "expert groups of group-limited routing (DeepSeek-V3's n_group)", "moe"),
    Notation(k_g, "groups a token may route to (DeepSeek-V3's topk_group)", "moe"),
    Notation(t_e, "expert tensor-parallel size (splits each routed expert)", "parallel"),
    Notation(N_active, "parameters one token passes through (routed experts: top-k of E)", "count"),
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
