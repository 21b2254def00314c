"""Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models" (arXiv 1910.02054).

Model-state bytes per device come from derive's state tables
(``derive.accounts.state``) under the paper's setting: mixed-precision (fp16)
Adam, K = 12 (fp32 master, momentum, variance), stages P_os = ZeRO-1,
P_os+g = ZeRO-2, P_os+g+p = ZeRO-3 over N_d data-parallel ranks. Model sizes
(Psi = 7.5B, 128B, 1T, 1.5B) are the paper's nominal figures (inputs); GB is
10^9 bytes, as the paper's 7.5B x 16 = 120 GB shows.
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.state import resident_bytes, state_bytes
from derive.claims import EXACT, Alternative, decimals, document, significant
from derive.claims._papers import GB, as_printed, truncated
from derive.dtypes import dtype_bytes
from derive.symbols import N, d

claim = document("Rajbhandari et al. 2020", "arXiv 1910.02054, ZeRO: Memory Optimizations Toward "
                 "Training Trillion Parameter Models (SC20)",
                 "Unconfirmed (no verdict): every cell of Table 1, the P_os+g form, 16 GB per GPU "
                 "and the 3 GB / 6 GB figures of section 3: no stored copy of Table 1 (its "
                 "transcriptions found reproduce it as an image) or of those sentences was "
                 "found.").claim

VELOG = ("https://velog.io/@hanhan/ZeRO-Zero-Redundancy-Optimizer (Figure 1's 7.5B, N_d = 64: "
         "120 / 31.4 / 16.6 / 1.9 GB)")
CSDN = ("https://blog.csdn.net/qq_36803941/article/details/140825656 (transcribes Figure 1: 7.5B, "
        "N_d = 64, K = 12, P_os = (2 + 2) Psi + K Psi / N_d, 120 GB -> 31.4 GB, 4x; GPT-2 1.5B "
        "needs at least 24 GB)")
ONEFLOW = ("https://docs.oneflow.org/v0.8.0/cookies/zero.html (the three stages: P_os 4x, P_os+g "
           "8x, P_os+g+p linear in the data-parallel degree)")
LABML = ("https://vuink.com/post/aa-d-dynozy-d-dnv/scaling/zero3/index-d-dhtml (labml.ai's ZeRO-3 "
         "notes: memory (2 + 2 + K) Psi / N_d, K = 12 for Adam)")
TORONTO = ("https://www.cs.toronto.edu/~cmaddis/courses/csc2541_w25/presentations/richards_zero.pdf "
           "(a trillion parameters + Adam + FP16: ~16 TB)")

PRECISION, OPTIMIZER = "fp16", "adam"
#: the paper's stage names -> ZeRO stage.
STAGES = {"P_os": 1, "P_os+g": 2, "P_os+g+p": 3}
#: Table 1: Psi -> N_d -> the three stages' GB per device, as printed.
TABLE1 = {
    "7.5B": (7.5e9, {1: ("120", "120", "120"), 4: ("52.5", "41.3", "30"),
                     16: ("35.6", "21.6", "7.5"), 64: ("31.4", "16.6", "1.88"),
                     256: ("30.4", "15.4", "0.47"), 1024: ("30.1", "15.1", "0.12")}),
    "128B": (128e9, {1: ("2048", "2048", "2048"), 4: ("896", "704", "512"),
                     16: ("608", "368", "128"), 64: ("536", "284", "32"),
                     256: ("518", "263", "8"), 1024: ("513", "257", "2")}),
    "1T": (1e12, {1: ("16000", "16000", "16000"), 4: ("7000", "5500", "4000"),
                  16: ("4750", "2875", "1000"), 64: ("4187", "2218", "250"),
                  256: ("4046", "2054", "62.5"), 1024: ("4011", "2013", "15.6")}),
}
TRUNCATED = "the value truncated, not rounded (the paper cuts the fraction of its larger cells)"


def _per_device(psi: float, stage: int, ranks: int) -> sp.Expr:
    """Model-state bytes on one of ``ranks`` devices under ZeRO ``stage`` (fp16 + Adam)."""
    return resident_bytes(PRECISION, OPTIMIZER, stage, d).subs({N: sp.Integer(int(psi)), d: ranks})


# --- Figure 1: the three stages' forms and the 7.5B, N_d = 64 example ---------------------------
K = 12
claim("rajbhandari.figure1.baseline-form", "Figure 1", "baseline data parallel: (2 + 2 + K) Psi "
      "bytes per device", (2 + 2 + K) * N, "B", EXACT,
      lambda: resident_bytes(PRECISION, OPTIMIZER, 0, d), checked_against=CSDN)
claim("rajbhandari.figure1.os-form", "Figure 1", "P_os: 2 Psi + 2 Psi + K Psi / N_d",
      2 * N + 2 * N + K * N / d, "B", EXACT, lambda: resident_bytes(PRECISION, OPTIMIZER, 1, d),
      checked_against=CSDN)
claim("rajbhandari.figure1.os-g-form", "Figure 1", "P_os+g: 2 Psi + (2 + K) Psi / N_d",
      2 * N + (2 + K) * N / d, "B", EXACT, lambda: resident_bytes(PRECISION, OPTIMIZER, 2, d))
claim("rajbhandari.figure1.os-g-p-form", "Figure 1", "P_os+g+p: (2 + 2 + K) Psi / N_d",
      (2 + 2 + K) * N / d, "B", EXACT, lambda: resident_bytes(PRECISION, OPTIMIZER, 3, d),
      checked_against=LABML)
claim("rajbhandari.figure1.k", "Figure 1 / 3.1", "mixed-precision Adam keeps K = 12 bytes of "
      "optimizer state per parameter", K, "bytes/parameter", EXACT,
      lambda: state_bytes(PRECISION, OPTIMIZER).optimizer / N, checked_against=CSDN)
for _label, _stage, _printed in (("baseline", 0, "120"), ("P_os", 1, "31.4"), ("P_os+g", 2, "16.6"),
                                 ("P_os+g+p", 3, "1.9")):
    claim(f"rajbhandari.figure1.7.5b-{_label}", "Figure 1", f"7.5B, N_d = 64, {_label}: "
          f"{_printed} GB per device", float(_printed), "GB", as_printed(_printed),
          lambda _stage=_stage: _per_device(7.5e9, _stage, 64), checked_against=VELOG)

# --- Table 1: every cell ---------------------------------------------------------------------
for _model, (_psi, _rows) in TABLE1.items():
    for _ranks, _cells in _rows.items():
        for (_label, _stage), _printed in zip(STAGES.items(), _cells):
            _derive = (lambda _psi=_psi, _stage=_stage, _ranks=_ranks:
                       _per_device(_psi, _stage, _ranks))
            claim(f"rajbhandari.table1.{_model}-{_label}-dp{_ranks}", "Table 1",
                  f"{_model}, {_label}, N_d = {_ranks}: {_printed} GB per device", float(_printed),
                  "GB", as_printed(_printed), _derive,
                  alternative=Alternative(TRUNCATED, lambda _f=_derive: truncated(_f() / GB) * GB))

# --- the stated reductions -------------------------------------------------------------------
claim("rajbhandari.reduction.os-4x", "1 / 5.1", "P_os: 4x memory reduction (large N_d)", 4, "x", EXACT,
      lambda: sp.limit(resident_bytes(PRECISION, OPTIMIZER, 0, d)
                       / resident_bytes(PRECISION, OPTIMIZER, 1, d), d, sp.oo),
      checked_against=CSDN)
claim("rajbhandari.reduction.os-g-8x", "1 / 5.2", "P_os+g: 8x memory reduction (large N_d)", 8, "x",
      EXACT, lambda: sp.limit(resident_bytes(PRECISION, OPTIMIZER, 0, d)
                              / resident_bytes(PRECISION, OPTIMIZER, 2, d), d, sp.oo),
      checked_against=ONEFLOW)
claim("rajbhandari.reduction.os-g-p-linear", "1 / 5.3", "P_os+g+p: memory reduction linear in N_d",
      d, "x", EXACT, lambda: sp.cancel(resident_bytes(PRECISION, OPTIMIZER, 0, d)
                                       / resident_bytes(PRECISION, OPTIMIZER, 3, d)),
      checked_against=ONEFLOW)
claim("rajbhandari.1t-16tb", "1", "a trillion-parameter model's states in 16-bit Adam: about 16 TB",
      16, "TB", decimals(0), lambda: _per_device(1e12, 0, 1), checked_against=TORONTO)
claim("rajbhandari.1t-16gb-per-gpu", "1", "16 TB over 1024 GPUs is 16 GB each", 16, "GB",
      significant(2), lambda: _per_device(1e12, 3, 1024))

# --- section 3: GPT-2 1.5B ------------------------------------------------------------------
_GPT2 = sp.Integer(1_500_000_000)
claim("rajbhandari.3.1.gpt2-weights-3gb", "3.1", "GPT-2 (1.5B): 3 GB of 16-bit weights", 3, "GB",
      decimals(0), lambda: state_bytes(PRECISION, OPTIMIZER).params.subs(N, _GPT2))
claim("rajbhandari.3.1.gpt2-states-24gb", "3.1", "GPT-2 (1.5B) with mixed-precision Adam needs at "
      "least 24 GB for its model states", 24, "GB", decimals(0),
      lambda: resident_bytes(PRECISION, OPTIMIZER).subs(N, _GPT2), checked_against=CSDN)
claim("rajbhandari.3.2.gpt2-fp32-buffer-6gb", "3.2", "GPT-2 (1.5B): a fused fp32 buffer of all "
      "gradients is 6 GB", 6, "GB", decimals(0), lambda: dtype_bytes("fp32") * _GPT2)
