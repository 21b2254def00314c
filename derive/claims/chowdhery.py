"""Chowdhery et al. 2022, "PaLM: Scaling Language Modeling with Pathways" (arXiv 2204.02311).

PaLM's layer is derive's Llama layer table (no biases, SwiGLU with d_ff = 4
d_model, one key/value head: multi-query) with head width 256 and one norm
(the parallel formulation shares the pre-norm), input and output embeddings
tied (Table 1 and section 2). The shapes are local here; throughput, chip
count and the TPU v4 peak are the paper's inputs (Appendix B).
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.flops import flops_per_token, mfu
from derive.architectures.decoder import GPT, LLAMA
from derive.architectures.gemms import attention_score_gemms, flops, weight_gemms
from derive.architectures.tables import edge_parameters, layer_gemms, layer_parameters, output_gemms
from derive.claims import Alternative, decimals, document, significant
from derive.claims._papers import A100_PEAK, as_printed, gpt
from derive.conventions import CONVENTIONS
from derive.conventions.published import six_n
from derive.symbols import L, N, V, a, f, g, h, k, s

claim = document(
    "Chowdhery et al. 2022", "arXiv 2204.02311, PaLM: Scaling Language Modeling with Pathways",
    "Read in a full-text copy of the paper. Not registered: "
    "Table 3's GPT-3 (21.3 %, from 24.6 non-attention TFLOP/s per GPU over a V100 peak the paper "
    "does not print: over the V100's 125 TFLOP/s it is 19.7 %, 20.2 % with PaLM's attention term, "
    "so the peak behind 21.3 % is unknown) and Gopher (32.5 %, from 0.0152 steps/s: the batch and "
    "shape it needs are in Rae et al. 2021, not read here).",
).claim

#: Table 1's 540.35B, quoted with Appendix B's figures.
PAPERNOTES = ("https://awesome.papernotes.org/en/era4_foundation_models/2022_palm/ ('N to 540.35B', "
              "780B tokens, 6,144 TPU v4 chips, 238.3K tokens/s, 46.2 % MFU, 57.8 % HFU)")
#: Appendix B's throughput, chip count and MFU, as quoted.
LEONERICSSON = ("https://leonericsson.github.io/blog/2023-08-22-palm ('238.3K tokens/sec resulting "
                "in a model FLOPs utilization of 46.2%', 6144 TPU v4 chips)")

#: Where the paper's own text was read: a full-text copy (ar5iv-style HTML as text).
FULLTEXT = "a full-text copy of arXiv 2204.02311"


def _read(where: str) -> str:
    """``checked_against`` for a value read in the full-text copy: where, and what it prints."""
    return f"{FULLTEXT}, {where}"


APPENDIX_B = _read("Appendix B: MT-NLG 65.43K tokens/s (1920 x 2048/60.1) on 2240 A100s at 312 "
                   "TFLOP/s, MFU 29.7 % without attention or 30.2 % with it; PaLM 540B 238.3K "
                   "tokens/s, (238.3 x 6 x 540)/(275 x 6144), 45.7 % without self-attention or "
                   "46.2 % with it, HFU 57.8 %")
TABLE22 = _read("Appendix B, Table 22: TFLOPs per token (non-attn+attn) 0.0550, 0.388, 3.28, "
                "(+remat) 0.0561, 0.392, 4.10; train FLOPs 4.29e22, 3.08e23, 2.56e24; PetaFLOP/s-days "
                "497, 3570, 29600; 62B and 8B rematerialise only self-attention, 540B also 75 % of "
                "the non-attention forward")
TABLE21 = _read("section 13, Table 21: model size 8, 62, 540, 70, 280 (billions), tokens 780, 795, "
                "780, 1400, 300 (billions), training FLOP count 37.4, 295.7, 2527.2, 588.0, 504.0 "
                "zettaFLOPs, footnote: 2 x 3 x m x t")

#: Table 1: layers, heads, d_model; every model: head width 256, d_ff = 4 d_model, one kv head,
#: vocabulary 256k (256000), sequence length 2048.
SHAPES = {"8B": (32, 16, 4096), "62B": (64, 32, 8192), "540B": (118, 48, 18432)}
#: Table 1, parameters in billions as printed.
PRINTED_N = {"8B": 8.63, "62B": 62.50, "540B": 540.35}
#: Appendix B: PaLM 540B's training throughput (tokens/s), chips, TPU v4 bf16 peak (FLOP/s).
THROUGHPUT, CHIPS, TPU_V4_PEAK = 238_300, 6144, 275 * 10**12
#: Section 3 / Table 21: every PaLM model saw 780B training tokens; the 540B's nominal size.
TOKENS, NOMINAL_540B = 780 * 10**9, 540 * 10**9
#: Table 21: (model size in billions as named, training tokens in billions, training zettaFLOPs).
TABLE21_ROWS = {"8B": (8, 780, 37.4), "62B": (62, 795, 295.7), "540B": (540, 780, 2527.2),
                "Chinchilla": (70, 1400, 588.0), "Gopher": (280, 300, 504.0)}
#: Appendix B: share of the non-attention forward the 540B recomputes (the 8B and 62B: none).
REMAT_NON_ATTENTION = {"8B": 0, "62B": 0, "540B": sp.Rational(3, 4)}
#: Table 22 as printed: TFLOPs per token without / with rematerialisation, train FLOPs, PF/s-days.
TABLE22_ROWS = {"8B": ("0.0550", "0.0561", 4.29e22, 497), "62B": ("0.388", "0.392", 3.08e23, 3570),
                "540B": ("3.28", "4.10", 2.56e24, 29600)}
#: Appendix B, MT-NLG 530B (Smith et al. 2022): batch (sequences) and seconds per step, GPUs.
MTNLG_BATCH, MTNLG_STEP_SECONDS, MTNLG_GPUS = 1920, sp.Rational(601, 10), 2240


def _values(name: str) -> dict[sp.Symbol, int]:
    layers, heads, hidden = SHAPES[name]
    return {L: layers, a: heads, h: hidden, g: 1, k: 256, f: 4 * hidden, V: 256000, s: 2048}


def _layer() -> object:
    """One PaLM layer: the Llama table at head width k without the second norm (parallel layer)."""
    return layer_parameters(LLAMA, head_dim=k).filter(lambda tensor: tensor.name != "ffn_norm.weight")


def parameters(name: str, norms: bool = True) -> sp.Expr:
    """N: L layers, the tied embedding (once) and the final norm, from derive's tables."""
    edges = edge_parameters(LLAMA).filter(lambda tensor: tensor.name != "output.weight")
    ledger = _layer().times(L) + edges
    if not norms:
        ledger = ledger.without("norm")
    return ledger.numel().xreplace(_values(name))


def model_flops_per_token(name: str) -> sp.Expr:
    """Every GEMM of a token (tied head once, full score square): derive's count at PaLM's shape."""
    layer = layer_gemms(LLAMA, "full", k)
    return (L * flops(layer) + flops(output_gemms(LLAMA))).xreplace(_values(name))


def hardware_flops_per_token(name: str) -> sp.Expr:
    """Appendix B's hardware FLOPs: the model's GEMMs, the self-attention forward once more, and the stated share of the other forwards."""
    weights = L * flops(weight_gemms(_layer()), "forward") + flops(output_gemms(LLAMA), "forward")
    scores = L * flops(attention_score_gemms("full", a, k), "forward")
    extra = REMAT_NON_ATTENTION[name] * weights + scores
    return model_flops_per_token(name) + extra.xreplace(_values(name))


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
          checked_against=(PAPERNOTES + "; " if _name == "540B" else "") + _read(
              "Table 1: 8.63, 62.50, 540.35 billion parameters"))

claim("chowdhery.appendixB.540b-mfu", "Appendix B / Table 3", "PaLM 540B: 238.3K tokens/s on 6144 "
      "TPU v4 chips is 46.2 % MFU", 46.2, "%", decimals(1),
      lambda: mfu(THROUGHPUT, model_flops_per_token("540B"), CHIPS, TPU_V4_PEAK),
      alternative=None,
      note="derive's GEMM count (tied head once, full score square, no norms)",
      checked_against=LEONERICSSON + "; " + APPENDIX_B)
claim("chowdhery.appendixB.540b-mfu-6n-12lhqt", "Appendix B", "the same MFU under the paper's "
      "own count, 6N + 12LHQT (N with the norm scales)", 46.2, "%", decimals(1),
      lambda: mfu(THROUGHPUT, palm_formula("540B"), CHIPS, TPU_V4_PEAK),
      checked_against=LEONERICSSON + "; " + APPENDIX_B)

claim("chowdhery.appendixB.540b-mfu-no-attention", "Appendix B", "without self-attention "
      "(6N per token) the same throughput is 45.7 % MFU", 45.7, "%", decimals(1),
      lambda: mfu(THROUGHPUT, 6 * parameters("540B"), CHIPS, TPU_V4_PEAK),
      checked_against=APPENDIX_B)
claim("chowdhery.appendixB.540b-hfu", "Appendix B / 4.1", "with the rematerialised FLOPs (75 % of the "
      "non-attention forward and all of the self-attention forward again) the same throughput is "
      "57.8 % HFU", 57.8, "%", decimals(1),
      lambda: mfu(THROUGHPUT, hardware_flops_per_token("540B"), CHIPS, TPU_V4_PEAK),
      checked_against=APPENDIX_B)
for _name, (_per_token, _remat, _train, _days) in TABLE22_ROWS.items():
    _tokens = TABLE21_ROWS[_name][1] * 10**9
    _digits = significant(3)
    claim(f"chowdhery.table22.{_name}-tflops-per-token", "Table 22", f"PaLM {_name}: {_per_token} "
          "TFLOPs per token (non-attention + attention)", float(_per_token), "TFLOP/token",
          as_printed(_per_token),
          lambda _name=_name: model_flops_per_token(_name), checked_against=TABLE22)
    claim(f"chowdhery.table22.{_name}-tflops-per-token-remat", "Table 22", f"PaLM {_name}: {_remat} "
          "TFLOPs per token with rematerialisation", float(_remat), "TFLOP/token", as_printed(_remat),
          lambda _name=_name: hardware_flops_per_token(_name), checked_against=TABLE22)
    claim(f"chowdhery.table22.{_name}-train-flops", "Table 22", f"PaLM {_name}: {_train:.3g} train "
          f"FLOPs ({TABLE21_ROWS[_name][1]}B tokens)", _train, "FLOP", _digits,
          lambda _name=_name, _tokens=_tokens: model_flops_per_token(_name) * _tokens,
          checked_against=TABLE22)
    claim(f"chowdhery.table22.{_name}-petaflop-days", "Table 22", f"PaLM {_name}: {_days} "
          "PetaFLOP/s-days", _days, "PFLOP/s-days", _digits,
          lambda _name=_name, _tokens=_tokens: model_flops_per_token(_name) * _tokens,
          checked_against=TABLE22)

_SIX_MT = "the footnote's 2 x 3 x m x t with m the model's size as named"
for _name, (_size, _billions, _zetta) in TABLE21_ROWS.items():
    _tokens = _billions * 10**9

    def _six_mt(_size: int = _size, _tokens: int = _tokens) -> sp.Expr:
        """derive.conventions' 6N (its paper form) at N = the size the table names, times its tokens."""
        return six_n().subs(N, _size * 10**9) * _tokens

    _palm = _name in SHAPES
    claim(f"chowdhery.table21.{_name}-zettaflops", "Table 21", f"{_name}: {_zetta} zettaFLOPs of "
          f"training ({_size}B parameters as named, {_billions}B tokens)" + ("" if _palm else
                                                                           f", by {_SIX_MT}"),
          _zetta, "ZFLOP", decimals(1),
          (lambda _name=_name, _tokens=_tokens: model_flops_per_token(_name) * _tokens)
          if _palm else _six_mt,
          alternative=Alternative(_SIX_MT + " (no attention term, not derive's N)", _six_mt)
          if _palm else None,
          note="derive's count adds the attention GEMMs (12LHQT) and the parameters beyond the "
               "model's name" if _palm else "",
          checked_against=TABLE21)

# --- Appendix B: Megatron-Turing NLG 530B (its shape as Korthikanti et al. 2022 tabulate it) -----
MTNLG = gpt("mt-nlg-530b", 105, 20480, 128, 51200, 2048,
            "Korthikanti et al. 2022, Table 3 (530B, MT-NLG): 105 layers, h = 20480, 128 heads")


def _mtnlg_throughput() -> sp.Expr:
    """Tokens per second: a step's sequences x 2048 tokens over its 60.1 s."""
    return MTNLG_BATCH * MTNLG.seq / MTNLG_STEP_SECONDS


claim("chowdhery.appendixB.mtnlg-throughput", "Appendix B", "Megatron-Turing NLG: 1920 x 2048 "
      "tokens per 60.1 s step is 65.43K tokens/s", 65430, "tokens/s", significant(4),
      _mtnlg_throughput, checked_against=APPENDIX_B)
claim("chowdhery.appendixB.mtnlg-mfu-no-attention", "Appendix B / Table 3", "Megatron-Turing NLG on "
      "2240 A100s: 29.7 % MFU without self-attention (6N)", 29.7, "%", decimals(1),
      lambda: mfu(_mtnlg_throughput(), MTNLG.at(CONVENTIONS["6N"]("gpt")), MTNLG_GPUS, A100_PEAK),
      note="N = 529.6B, derive's count of the 530B shape (the paper's own product with the nominal "
           "530B, (65.43 x 6 x 530)/(312 x 2240), is 29.78 %)", checked_against=APPENDIX_B)
claim("chowdhery.appendixB.mtnlg-mfu", "Appendix B / Table 3", "with self-attention: 30.2 % MFU",
      30.2, "%", decimals(1),
      lambda: mfu(_mtnlg_throughput(), MTNLG.at(flops_per_token(GPT, "full")), MTNLG_GPUS,
                  A100_PEAK),
      note="derive's GEMM count of the 530B shape (tied head once, full score square)",
      checked_against=APPENDIX_B + "; " + _read("section 4.1, Table 3: 30.2 %"))
