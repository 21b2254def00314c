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
w = _size("w")
# Gemma 2/3: the layers of layer_types that attend through the sliding window (the others fully)
# (a count that may be 0: every layer full)
L_w = sp.Symbol("L_w", nonnegative=True, integer=True)
LATEX_NAMES[L_w] = "L_{w}"
# parameters (the ZeRO paper writes Psi)
N = _size("N")
N_GEMM = _size("N_GEMM", r"N_{\mathrm{GEMM}}")
# low-precision training (derive.recipes): the layer matrices an FP8 recipe quantises
N_8 = _size("N_8", r"N_{8}")
n_8 = _size("n_8", r"n_{8}")
# parallel sizes and pipeline schedule
t = _size("t")
p = _size("p")
d = _size("d")
c = _size("c")
e = _size("e")
m = _size("m")
v = _size("v")
# learned positions (GPT-2's wpe: n_positions rows, whatever the training s)
s_max = _size("s_max", r"s_{\max}")
# mixture of experts (Shazeer et al. 2017; Fedus et al. 2021; DeepSeek-V3 report, section 2.1.2)
E = _size("E")
k_E = _size("k_E", "k_{E}")
f_E = _size("f_E", "f_{E}")
f_S = _size("f_S", "f_{S}")
L_E = _size("L_E", "L_{E}")
t_E = _size("t_E", "t_{E}")
# multi-head latent attention (DeepSeek-V2 report, section 2.1)
r_q = _size("r_q", "r_{q}")
r_kv = _size("r_kv", r"r_{kv}")
k_nope = _size("k_nope", r"k_{\mathrm{nope}}")
k_rope = _size("k_rope", r"k_{\mathrm{rope}}")
k_v = _size("k_v", "k_{v}")
# multi-token prediction and group-limited routing (DeepSeek-V3 report, sections 2.2 and 2.1.2)
D = _size("D")
n_g = _size("n_g", r"n_{g}")
k_g = _size("k_g", r"k_{g}")
N_active = _size("N_active", r"N_{\mathrm{active}}")
# the report's inputs and the figures later figures name (derive.formulas; T, F, G, P, t_step below)
MFU_target = sp.Symbol("MFU_target", positive=True)
LATEX_NAMES[MFU_target] = r"\mathrm{MFU}_{\mathrm{target}}"
M_GPU = _size("M_GPU", r"M_{\mathrm{GPU}}")
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
    Notation(w, "sliding-window width (a config's sliding_window): a token attends to the last w",
             "shape"),
    Notation(L_w, "sliding-window layers (Gemma's and Qwen's layer_types sliding_attention); the other "
             "L - L_w attend fully", "shape"),
    Notation(s_max, "learned position rows (GPT-2's n_positions), fixed by the model, not the batch",
             "shape"),
    Notation(E, "routed experts per MoE layer", "moe"),
    Notation(k_E, "routed experts each token passes through (top-k)", "moe"),
    Notation(f_E, "FFN width of one routed expert (moe_intermediate_size)", "moe"),
    Notation(f_S, "FFN width of the shared expert(s), all of them together", "moe"),
    Notation(L_E, "MoE layers (the other L - L_E layers are dense)", "moe"),
    Notation(r_q, "MLA query compression rank (q_lora_rank)", "mla"),
    Notation(r_kv, "MLA key/value compression rank (kv_lora_rank)", "mla"),
    Notation(k_nope, "MLA query/key head width without RoPE (qk_nope_head_dim)", "mla"),
    Notation(k_rope, "MLA decoupled RoPE width, per query head and shared by keys (qk_rope_head_dim); "
             "the turned width of a partial rotary head (Phi 3, GPT-NeoX)", "mla"),
    Notation(k_v, "MLA value head width (v_head_dim)", "mla"),
    Notation(D, "multi-token-prediction modules (DeepSeek-V3's depth D)", "moe"),
    Notation(n_g, "expert groups of group-limited routing (DeepSeek-V3's n_group)", "moe"),
    Notation(k_g, "groups a token may route to (DeepSeek-V3's topk_group)", "moe"),
    Notation(N, "parameters (Psi in the ZeRO paper)", "count"),
    Notation(N_GEMM, "parameters that sit in a GEMM (layer matrices and output head)", "count"),
    Notation(N_8, "parameters in the layer matrices an FP8 recipe quantises (not the embedding, "
             "norms nor output head)", "count"),
    Notation(n_8, "layer matrices an FP8 recipe quantises (weight tensors, L per layer row)", "count"),
    Notation(N_active, "parameters one token passes through (routed experts: k_E of E)", "count"),
    Notation(t, "tensor-parallel size", "parallel"),
    Notation(p, "pipeline-parallel size", "parallel"),
    Notation(d, "data-parallel size", "parallel"),
    Notation(c, "context-parallel size", "parallel"),
    Notation(e, "expert-parallel size", "parallel"),
    Notation(t_E, "expert tensor-parallel size (splits each routed expert)", "parallel"),
    Notation(m, "micro-batches per step", "parallel"),
    Notation(v, "virtual pipeline stages per rank (interleaved schedule)", "parallel"),
    Notation(MFU_target, "target model FLOPs utilisation of a step bound", "report"),
    Notation(M_GPU, "memory budget of one GPU (bytes)", "report"),
    Notation(M_state, "resident state bytes (params + grads + optimizer) per GPU", "report"),
    Notation(M_act, "activation bytes of one micro-batch: all layers + logits", "report"),
)

# claim-side quantities: what a paper's or a framework's formula is written in
B = _size("B")
T = _size("T")
Q = _size("Q")
K = _size("K")
R, F, G, P = sp.symbols("R F G P", positive=True)
MFU = sp.Symbol("MFU", positive=True)
t_step = sp.Symbol("t_step", positive=True)
H_KV = sp.Symbol("h_kv", positive=True)

#: Symbols of published formulas and worked examples (not sizes of a model; not in the sheet's notation table).
CLAIM_NOTATION: tuple[Notation, ...] = (
    Notation(B, "sequences per batch (Narayanan et al. 2021's B)", "claim"),
    Notation(T, "tokens: of a step, or of a packed batch (Megatron's total_real_tokens_in_batch)", "claim"),
    Notation(Q, "sum of squared sequence lengths of a batch (Megatron's seqlen_squared_sum_in_batch)",
             "claim"),
    Notation(K, "optimizer bytes per parameter under mixed-precision Adam (ZeRO's K)", "claim"),
    Notation(R, "observed tokens per second (PaLM's MFU, appendix B)", "claim"),
    Notation(F, "model FLOPs per token", "claim"),
    Notation(G, "GPUs", "claim"),
    Notation(P, "peak FLOP/s of one GPU", "claim"),
    Notation(MFU, "model FLOPs utilisation", "claim"),
    Notation(t_step, "seconds per step", "claim"),
    Notation(H_KV, "h_kv = g h / a, printed as one name in activation coefficients", "claim"),
)

BY_NAME: dict[str, sp.Symbol] = {entry.symbol.name: entry.symbol for entry in NOTATION + CLAIM_NOTATION}


#: The GPT layer's FFN width, f = 4h (Vaswani et al. 2017; GPT-2/3; Korthikanti et al. 2022, 4.1):
#: an assumption applied by substitution, never built into a table.
FFN_4H: dict[sp.Symbol, sp.Expr] = {f: 4 * h}


def h_kv(heads: sp.Expr = a, kv_heads: sp.Expr = g, hidden: sp.Expr = h) -> sp.Expr:
    """Key/value width under GQA: g heads of width h/a (Ainslie et al. 2023)."""
    return kv_heads * hidden / heads


def meaning(symbol: sp.Symbol) -> str:
    """The one-line meaning of ``symbol``; KeyError if derive does not own it."""
    for entry in NOTATION + CLAIM_NOTATION:
        if entry.symbol == symbol:
            return entry.meaning
    raise KeyError(f"{symbol} is not a derive symbol")
