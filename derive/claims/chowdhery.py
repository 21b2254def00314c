"""Chowdhery et al. 2022, "PaLM: Scaling Language Modeling with Pathways" (arXiv 2204.02311).

PaLM's layer is derive's Llama layer table (no biases, SwiGLU with d_ff = 4
d_model, one key/value head: multi-query) with head width 256 and one norm
(the parallel formulation shares the pre-norm), input and output embeddings
tied (Table 1 and section 2). The shapes are local here; throughput, chip
count and the TPU v4 peak are the paper's inputs (Appendix B).
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.flops import mfu
from derive.architectures.gemms import attention_score_gemms, flops, llama_layer_gemms, output_gemms
from derive.architectures.parameters import llama_edges, llama_layer
from derive.claims import Alternative, decimals, document
from derive.symbols import L, V, a, f, g, h, k, s

claim = document(
    "Chowdhery et al. 2022", "arXiv 2204.02311, PaLM: Scaling Language Modeling with Pathways",
    "Not registered: PaLM's HFU (57.8 %, confirmed in Jack47/hack-SysML papers/NLP/PaLM.md, but it "
    "rests on a rematerialisation policy the paper does not tabulate), Table 22's 8B and 62B rows "
    "and Table 3's rows for GPT-3, Gopher and Megatron-Turing NLG (their throughputs come from "
    "other papers). Unconfirmed (no verdict): Table 1's 8.63B and 62.50B, the 45.7 % without "
    "attention and Table 22's 2527.2 zettaFLOPs: no stored copy of those was found.",
).claim

#: Table 1's 540.35B, quoted with Appendix B's figures.
PAPERNOTES = ("https://awesome.papernotes.org/en/era4_foundation_models/2022_palm/ ('N to 540.35B', "
              "780B tokens, 6,144 TPU v4 chips, 238.3K tokens/s, 46.2 % MFU, 57.8 % HFU)")
#: Appendix B's throughput, chip count and MFU, as quoted.
LEONERICSSON = ("https://leonericsson.github.io/blog/2023-08-22-palm ('238.3K tokens/sec resulting "
                "in a model FLOPs utilization of 46.2%', 6144 TPU v4 chips)")

#: Table 1: layers, heads, d_model; every model: head width 256, d_ff = 4 d_model, one kv head,
#: vocabulary 256k (256000), sequence length 2048.
SHAPES = {"8B": (32, 16, 4096), "62B": (64, 32, 8192), "540B": (118, 48, 18432)}
#: Table 1, parameters in billions as printed.
PRINTED_N = {"8B": 8.63, "62B": 62.50, "540B": 540.35}
#: Appendix B: PaLM 540B's training throughput (tokens/s), chips, TPU v4 bf16 peak (FLOP/s).
THROUGHPUT, CHIPS, TPU_V4_PEAK = 238_300, 6144, 275 * 10**12
#: Section 3 / Table 22: every PaLM model saw 780B training tokens; the 540B's nominal size.
TOKENS, NOMINAL_540B = 780 * 10**9, 540 * 10**9


def _values(name: str) -> dict[sp.Symbol, int]:
    layers, heads, hidden = SHAPES[name]
    return {L: layers, a: heads, h: hidden, g: 1, k: 256, f: 4 * hidden, V: 256000, s: 2048}


def _layer() -> object:
    """One PaLM layer: the Llama table at head width k without the second norm (parallel layer)."""
    return llama_layer(k).filter(lambda tensor: tensor.name != "ffn_norm.weight")


def parameters(name: str, norms: bool = True) -> sp.Expr:
    """N: L layers, the tied embedding (once) and the final norm, from derive's tables."""
    edges = llama_edges().filter(lambda tensor: tensor.name != "output.weight")
    ledger = _layer().times(L) + edges
    if not norms:
        ledger = ledger.without("norm")
    return ledger.numel().xreplace(_values(name))


def model_flops_per_token(name: str) -> sp.Expr:
    """Every GEMM of a token (tied head once, full score square): derive's count at PaLM's shape."""
    layer = llama_layer_gemms("full", k)
    return (L * flops(layer) + flops(output_gemms("llama"))).xreplace(_values(name))


def palm_formula(name: str) -> sp.Expr:
    """Appendix B: 6N + 12LHQT, with H = a heads, Q = k = 256, T = s and N from derive's tables."""
    scores = flops(attention_score_gemms("full", a, k))  # 12 H Q T per layer: forward + 2 dgrads
    return (6 * parameters(name) + L * scores.xreplace(_values(name))).xreplace(_values(name))


for _name, _printed in PRINTED_N.items():
    claim(f"chowdhery.table1.{_name}-N", "Table 1", f"PaLM {_name}: {_printed:.2f} billion "
          "parameters", _printed, "billion parameters", decimals(2),
          lambda _name=_name: parameters(_name),
          alternative=Alternative("N without the norm scales (L + 1 vectors of d_model)",
                                  lambda _name=_name: parameters(_name, norms=False)),
          checked_against=PAPERNOTES if _name == "540B" else "")

claim("chowdhery.appendixB.540b-mfu", "Appendix B / Table 3", "PaLM 540B: 238.3K tokens/s on 6144 "
      "TPU v4 chips is 46.2 % MFU", 46.2, "%", decimals(1),
      lambda: mfu(THROUGHPUT, model_flops_per_token("540B"), CHIPS, TPU_V4_PEAK),
      alternative=None,
      note="derive's GEMM count (tied head once, full score square, no norms)",
      checked_against=LEONERICSSON)
claim("chowdhery.appendixB.540b-mfu-6n-12lhqt", "Appendix B", "the same MFU under the paper's "
      "own count, 6N + 12LHQT (N with the norm scales)", 46.2, "%", decimals(1),
      lambda: mfu(THROUGHPUT, palm_formula("540B"), CHIPS, TPU_V4_PEAK),
      checked_against=LEONERICSSON)

claim("chowdhery.appendixB.540b-mfu-no-attention", "Appendix B", "without self-attention "
      "(6N per token) the same throughput is 45.7 % MFU", 45.7, "%", decimals(1),
      lambda: mfu(THROUGHPUT, 6 * parameters("540B"), CHIPS, TPU_V4_PEAK))
claim("chowdhery.table22.540b-zettaflops", "Table 22", "PaLM 540B's training compute: 2527.2 "
      "zettaFLOPs", 2527.2, "ZFLOP", decimals(1),
      lambda: model_flops_per_token("540B") * TOKENS,
      alternative=Alternative("6N per token with N = the nominal 540B (no attention term, not "
                              "derive's 540.36B)",
                              lambda: 6 * sp.Integer(NOMINAL_540B) * TOKENS),
      note="derive's count adds the attention GEMMs (12LHQT, about 1 % at T = 2048) and the "
           "0.36B beyond the model's name")
