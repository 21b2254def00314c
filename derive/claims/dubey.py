"""Dubey et al. 2024, "The Llama 3 Herd of Models" (arXiv 2407.21783): Table 3's shapes, the 405B's compute, Table 4.

Table 3's shapes are local here with the paper's vocabulary of 128,000 tokens
(derive's presets carry the released tokenizer's 128,256). Table 4's
parallel sizes, sequence lengths, batch sizes and TFLOPs/GPU are the paper's
inputs; the GPU counts, tokens per batch and MFU follow from them and from
derive's H100 peak (``derive.presets.hardware``).
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.flops import mfu
from derive.claims import Alternative, decimals, document, significant
from derive.claims._papers import truncated
from derive.conventions import CONVENTIONS
from derive.model import Model
from derive.presets import hardware

claim = document("Dubey et al. 2024", "arXiv 2407.21783, The Llama 3 Herd of Models",
                 "Read in a text copy of the paper. Not registered: "
                 "section 3.2.1's scaling-law extrapolation (402B parameters on 16.55T tokens at "
                 "3.8 x 10^25 FLOPs), a fit of the paper's own runs rather than a count; section "
                 "3.3.2's all-gather context parallelism prints no volume: it is a ledger row "
                 "(derive.accounts.comm, cp_comm 'all_gather') and the identity "
                 "comm.cp_all_gather_forward (the ring's forward bytes).").claim

#: Where the paper's own text was read: a text copy of the PDF.
FULLTEXT = "a text copy of arXiv 2407.21783 (the PDF as Markdown)"


def _read(where: str) -> str:
    """``checked_against`` for a value read in the text copy: where, and what it prints."""
    return f"{FULLTEXT}, {where}"


TABLE3_SOURCE = (_read("Table 3: layers 32/80/126, model dimension 4,096/8192/16,384, FFN 14,336/"
                       "28,672/53,248, heads 32/64/128, 8 key/value heads, vocabulary 128,000") + "; "
                 "https://aarnphm.xyz/thoughts/Llama-3 (Table 3: 8B/70B/405B, layers 32/80/126, "
                 "d_model 4096/8192/16384, FFN 14336/28672/53248, heads 32/64/128, 8 kv heads); "
                 "vocabulary 128,000: http://sushant-kumar.com/blog/llama3")
TABLE4_SOURCE = ("https://glennklockwood.com/garden/llama-3.1 (Table 4's rows as presented at SC'24: "
                 "8192/16384/16384 GPUs, TP 8, CP 1/1/16, PP 16, 16M tokens/batch, 430/400/380 "
                 "TFLOPS/GPU)")
COMPUTE_SOURCE = ("https://www.notebookcheck.net/Meta-unveils-biggest-smartest-royalty-free-Llama-3-1-"
                  "405B-AI.866775.0.html ('the 3.8 x 10^25 FLOPs needed to create a 405 "
                  "billion-parameter model'); 15.6T tokens: https://aarnphm.xyz/thoughts/Llama-3")
MFU_SOURCE = "https://aiportalx.com/meta-ai/llama-3.1-8b ('405B got MFU of between 38-43%')"
TABLE4_READ = _read("Table 4: GPUs / TP / CP / PP / DP / sequence / batch size per DP / tokens per batch "
                    "/ TFLOPs per GPU / BF16 MFU: 8,192 8 1 16 64 8,192 32 16M 430 43%; 16,384 8 1 16 "
                    "128 8,192 16 16M 400 41%; 16,384 8 16 16 4 131,072 16 16M 380 38%")
INTRO_READ = _read("section 1: 'pre-trained using 3.8 x 10^25 FLOPs, almost 50x more than the largest "
                   "version of Llama 2 ... 405B trainable parameters on 15.6T text tokens'")
LLAMA2_SOURCE = ("http://proyectodescartes.org/iCartesiLibri/materiales_didacticos/IA2024/docs/llama2/"
                 "6.html (Llama 2, Table 1: 70B, 4k context, 2.0T tokens, GQA; vocabulary 32k)")

TABLE3 = "Dubey et al. 2024, Table 3 (vocabulary 128,000)"
MODELS = {
    "8B": Model("dubey-8b", "llama", 32, 4096, 32, 8, 14336, 128000, 8192, TABLE3),
    "70B": Model("dubey-70b", "llama", 80, 8192, 64, 8, 28672, 128000, 8192, TABLE3),
    "405B": Model("dubey-405b", "llama", 126, 16384, 128, 8, 53248, 128000, 8192, TABLE3),
}
#: Llama 2 70B (Touvron et al. 2023, Table 1 and section 2.2: 80 layers, h = 8192, 64 heads,
#: 8 kv heads, f = 28672, vocabulary 32,000, 2.0T tokens).
LLAMA2_70B = Model("llama2-70b", "llama", 80, 8192, 64, 8, 28672, 32000, 4096,
                   "Touvron et al. 2023 (Llama 2), Table 1; f and kv heads from the released config")
LLAMA2_TOKENS = 2 * 10**12
#: Section 1 / 3.2.1: the 405B's pre-training tokens.
TOKENS_405B = 15_600_000_000_000
#: Table 4: (TP, CP, PP, DP, sequence length, batch size per DP, TFLOPs/GPU); printed GPUs, MFU %.
TABLE4 = (
    (8, 1, 16, 64, 8192, 32, 430, 8192, 43),
    (8, 1, 16, 128, 8192, 16, 400, 16384, 41),
    (8, 16, 16, 4, 131072, 16, 380, 16384, 38),
)
H100_PEAK = sp.Integer(int(hardware("h100").peak_flops))
MEBI = 2**20

for _name, _printed, _digits in (("8B", 8, 1), ("70B", 70, 2), ("405B", 405, 3)):
    claim(f"dubey.table3.{_name}-N", "Table 3", f"Llama 3 {_name}: {_printed} billion parameters",
          _printed, "billion parameters", significant(_digits),
          lambda _name=_name: MODELS[_name].parameters,
          alternative=Alternative("the count truncated to whole billions (a model name, not a "
                                  "rounding)",
                                  lambda _name=_name: truncated(MODELS[_name].parameters / 10**9)
                                  * 10**9), checked_against=TABLE3_SOURCE)


def _compute(model: Model, tokens: int, convention: str = "derive-causal") -> sp.Expr:
    """Training FLOPs of ``tokens`` tokens at ``model`` under a derive.conventions count."""
    return model.at(CONVENTIONS[convention]("llama")) * tokens


claim("dubey.1.405b-compute", "1 / 3.2.1", "the 405B was pre-trained on 15.6T tokens with "
      "3.8 x 10^25 FLOPs", 3.8e25, "FLOP", significant(2),
      lambda: _compute(MODELS["405B"], TOKENS_405B),
      alternative=Alternative("6N per token (derive.conventions '6N': the causal attention "
                              "term, 6Lsh, left out)",
                              lambda: _compute(MODELS["405B"], TOKENS_405B, "6N")),
      checked_against=COMPUTE_SOURCE + "; " + INTRO_READ)
claim("dubey.1.almost-50x-llama2", "1", "almost 50x the compute of the largest Llama 2 (70B, "
      "2T tokens)", 50, "x", significant(1),
      lambda: _compute(MODELS["405B"], TOKENS_405B) / _compute(LLAMA2_70B, LLAMA2_TOKENS),
      checked_against=INTRO_READ + "; Llama 2's 2.0T tokens: " + LLAMA2_SOURCE)

_DP_WHY = ("TP x CP x PP x DP counts each GPU once (derive's world size); the row's printed DP 4 "
           "gives 8,192 GPUs and 8.4M tokens, half of what it prints")
for _tp, _cp, _pp, _dp, _seq, _batch, _tflops, _gpus, _mfu in TABLE4:
    _label = f"{_gpus}gpu-s{_seq}"
    #: the data-parallel size the row's GPU count implies (differs from the printed DP in row 3).
    _implied = _gpus // (_tp * _cp * _pp)
    _odd = _implied != _dp
    claim(f"dubey.table4.{_label}.gpus", "Table 4", f"TP {_tp} x CP {_cp} x PP {_pp} x DP {_dp}: "
          f"{_gpus} GPUs", _gpus, "cards", decimals(0),
          lambda _t=_tp, _c=_cp, _p=_pp, _d=_dp: sp.Integer(_t * _c * _p * _d),
          alternative=Alternative(f"DP {_implied} in place of the printed {_dp}",
                                  lambda _t=_tp, _c=_cp, _p=_pp, _d=_implied:
                                  sp.Integer(_t * _c * _p * _d)) if _odd else None,
          note=_DP_WHY if _odd else "", checked_against=TABLE4_SOURCE + "; " + TABLE4_READ)
    claim(f"dubey.table4.{_label}.tokens", "Table 4", f"sequence {_seq} x {_batch} per DP rank x DP "
          f"{_dp}: 16M tokens per batch", 16, "M tokens", significant(2),
          lambda _s=_seq, _b=_batch, _d=_dp: sp.Integer(_s * _b * _d),
          alternative=Alternative(("M read as 2^20 tokens" if not _odd else
                                   f"DP {_implied} in place of the printed {_dp}, M read as 2^20 "
                                   "tokens"),
                                  lambda _s=_seq, _b=_batch, _d=_implied:
                                  sp.Rational(_s * _b * _d, MEBI) * 10**6),
          note=_DP_WHY if _odd else "", checked_against=TABLE4_SOURCE + "; " + TABLE4_READ)
    claim(f"dubey.table4.{_label}.mfu", "Table 4", f"{_tflops} TFLOPs/GPU is {_mfu} % BF16 MFU",
          _mfu, "%", decimals(0), lambda _x=_tflops: mfu(1, _x * 10**12, 1, H100_PEAK),
          alternative=Alternative(f"{_tflops} TFLOPs/GPU read as printed to 2 significant figures "
                                  f"(up to {_tflops + 5})",
                                  lambda _x=_tflops: mfu(1, (_x + 5) * 10**12, 1, H100_PEAK)),
          checked_against=(MFU_SOURCE + "; " if _mfu in (43, 38) else "") + TABLE4_READ)
