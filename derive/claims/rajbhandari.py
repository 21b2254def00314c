"""Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models" (arXiv 1910.02054).

Model-state bytes per device come from derive's state tables
(``derive.accounts.state``) under the paper's setting: mixed-precision (fp16)
Adam, K = 12 (fp32 master, momentum, variance), stages P_os = ZeRO-1,
P_os+g = ZeRO-2, P_os+g+p = ZeRO-3 over N_d data-parallel ranks. Model sizes
(Psi = 7.5B, 128B, 1T, 1.5B) are the paper's nominal figures (inputs); GB is
10^9 bytes, as the paper's 7.5B x 16 = 120 GB shows. The largest model a device
holds (section 5.4, Table 2) is its 32 GB (the paper's V100) over derive's
bytes per parameter, times the model-parallel degree.
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.activations import layer_activation_bytes
from derive.accounts.state import bytes_per_parameter, resident_bytes, state_bytes
from derive.claims import AT_LEAST, EXACT, Alternative, decimals, document, significant
from derive.claims._comm import dp_elements, tp_layer_elements
from derive.claims._papers import GB, as_printed, gpt, truncated
from derive.conventions.published import rajbhandari_activations
from derive.dtypes import dtype_bytes
from derive.symbols import L, N, b, d, h, s, t

claim = document("Rajbhandari et al. 2020", "arXiv 1910.02054, ZeRO: Memory Optimizations Toward "
                 "Training Trillion Parameter Models (SC20)",
                 "Every claim read in a text extraction of the paper (arXiv v3). Not checked: "
                 "Table 2's measured sizes and Figures 2-8 (measurements, not accounts); section "
                 "8's partitioned activation checkpoints (ZeRO-R's P_a: derive.accounts.comm has no "
                 "row for them); the checkpointed-activation figures of sections 3.2 and 6.1 (8 GB, 33 GB, "
                 "2 GB: what is checkpointed and the 100B model's layer count are not stated "
                 "fully).").claim

#: The paper's text (arXiv 1910.02054v3), Tables 1 and 2 included, as extracted to plain text.
ZERO_TEXT = ("AICO-Ascend/AICO-Knowledge extraction/fulltext/zero-memory-optimizations-toward-"
             "training-trillion-parameter-models.txt @ 3e3956c (text of arXiv 1910.02054v3, "
             "Tables 1-2 as text)")

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


def _max_params(stage: int, ranks: int, memory: sp.Expr) -> sp.Expr:
    """The largest Psi whose model states fit ``memory`` bytes per device under ZeRO ``stage``."""
    return memory / bytes_per_parameter(PRECISION, OPTIMIZER, stage, d).subs(d, ranks)


def _sources(*sources: str) -> str:
    return "; ".join(sources)


# --- Figure 1 (and sections 3.1, 5.1-5.3): the stages' forms and the 7.5B, N_d = 64 example -----
K = 12
claim("rajbhandari.figure1.baseline-form", "Figure 1 / 3.1", "baseline data parallel: (2 + 2 + K) "
      "Psi = 16 Psi bytes per device", (2 + 2 + K) * N, "B", EXACT,
      lambda: resident_bytes(PRECISION, OPTIMIZER, 0, d),
      checked_against=_sources(ZERO_TEXT + " section 3.1: 2Psi + 2Psi + KPsi = 16Psi", CSDN))
claim("rajbhandari.figure1.os-form", "Figure 1 / 5.1", "P_os: 4 Psi + K Psi / N_d",
      2 * N + 2 * N + K * N / d, "B", EXACT, lambda: resident_bytes(PRECISION, OPTIMIZER, 1, d),
      checked_against=_sources(ZERO_TEXT + " section 5.1: 4Psi + KPsi/N_d", CSDN))
claim("rajbhandari.figure1.os-g-form", "Figure 1 / 5.2", "P_os+g: 2 Psi + 14 Psi / N_d",
      2 * N + (2 + K) * N / d, "B", EXACT, lambda: resident_bytes(PRECISION, OPTIMIZER, 2, d),
      checked_against=ZERO_TEXT + " section 5.2: 2Psi + 14Psi/N_d")
claim("rajbhandari.figure1.os-g-p-form", "Figure 1 / 5.3", "P_os+g+p: 16 Psi / N_d",
      (2 + 2 + K) * N / d, "B", EXACT, lambda: resident_bytes(PRECISION, OPTIMIZER, 3, d),
      checked_against=_sources(ZERO_TEXT + " section 5.3: 16Psi/N_d", LABML))
claim("rajbhandari.figure1.k", "Figure 1 / 3.1", "mixed-precision Adam keeps K = 12 bytes of "
      "optimizer state per parameter", K, "bytes/parameter", EXACT,
      lambda: state_bytes(PRECISION, OPTIMIZER).optimizer / N,
      checked_against=_sources(ZERO_TEXT + " section 3.1: 'Mixed-precision Adam has K = 12'", CSDN))
for _label, _stage, _printed, _section in (("baseline", 0, "120", "5.1"), ("P_os", 1, "31.4", "5.1"),
                                           ("P_os+g", 2, "16.6", "5.2"),
                                           ("P_os+g+p", 3, "1.9", "5.3")):
    claim(f"rajbhandari.figure1.7.5b-{_label}", f"Figure 1 / {_section}", f"7.5B, N_d = 64, "
          f"{_label}: {_printed} GB per device", float(_printed), "GB", as_printed(_printed),
          lambda _stage=_stage: _per_device(7.5e9, _stage, 64),
          checked_against=_sources(f"{ZERO_TEXT} section {_section}", VELOG))

# --- Table 1: every cell ---------------------------------------------------------------------
for _model, (_psi, _rows) in TABLE1.items():
    for _ranks, _cells in _rows.items():
        for (_label, _stage), _printed in zip(STAGES.items(), _cells):
            _derive = (lambda _psi=_psi, _stage=_stage, _ranks=_ranks:
                       _per_device(_psi, _stage, _ranks))
            claim(f"rajbhandari.table1.{_model}-{_label}-dp{_ranks}", "Table 1",
                  f"{_model}, {_label}, N_d = {_ranks}: {_printed} GB per device", float(_printed),
                  "GB", as_printed(_printed), _derive,
                  alternative=Alternative(TRUNCATED, lambda _f=_derive: truncated(_f() / GB) * GB),
                  checked_against=ZERO_TEXT + " Table 1")

# --- the stated reductions -------------------------------------------------------------------
claim("rajbhandari.reduction.os-4x", "1 / 5.1", "P_os: 4x memory reduction (large N_d)", 4, "x", EXACT,
      lambda: sp.limit(resident_bytes(PRECISION, OPTIMIZER, 0, d)
                       / resident_bytes(PRECISION, OPTIMIZER, 1, d), d, sp.oo),
      checked_against=_sources(ZERO_TEXT + " sections 1 and 5.1", CSDN))
claim("rajbhandari.reduction.os-g-8x", "1 / 5.2", "P_os+g: 8x memory reduction (large N_d)", 8, "x",
      EXACT, lambda: sp.limit(resident_bytes(PRECISION, OPTIMIZER, 0, d)
                              / resident_bytes(PRECISION, OPTIMIZER, 2, d), d, sp.oo),
      checked_against=_sources(ZERO_TEXT + " sections 1 and 5.2", ONEFLOW))
claim("rajbhandari.reduction.os-g-p-linear", "1 / 5.3", "P_os+g+p: memory reduction linear in N_d",
      d, "x", EXACT, lambda: sp.cancel(resident_bytes(PRECISION, OPTIMIZER, 0, d)
                                       / resident_bytes(PRECISION, OPTIMIZER, 3, d)),
      checked_against=_sources(ZERO_TEXT + " sections 1, 5.3 and 5.4", ONEFLOW))
claim("rajbhandari.reduction.os-g-p-64x", "1", "splitting across N_d = 64 GPUs yields a 64x memory "
      "reduction", 64, "x", EXACT,
      lambda: (resident_bytes(PRECISION, OPTIMIZER, 0, d)
               / resident_bytes(PRECISION, OPTIMIZER, 3, d)).subs(d, 64),
      checked_against=ZERO_TEXT + " section 1")
claim("rajbhandari.1t-16tb", "1", "a trillion-parameter model's states in 16-bit Adam: about 16 TB",
      16, "TB", decimals(0), lambda: _per_device(1e12, 0, 1),
      checked_against=_sources(ZERO_TEXT + " section 1", TORONTO))
claim("rajbhandari.1t-16gb-per-gpu", "1", "16 TB over 1024 GPUs is 16 GB each", 16, "GB",
      significant(2), lambda: _per_device(1e12, 3, 1024), checked_against=ZERO_TEXT + " section 1")

# --- section 5.4 and Table 2: the largest model 32 GB devices hold -----------------------------
#: The paper's device: a 32 GB V100 (Table 1's bold cells, Table 2's theoretical sizes).
V100 = 32 * GB
#: Table 2: MP degree -> (GPUs, printed max model size in billions: baseline, P_os, P_os+g, P_os+g+p).
TABLE2 = {1: (64, ("2", "7.6", "14.4", "128")), 2: (128, ("4", "15.2", "28.8", "256")),
          4: (256, ("8", "30.4", "57.6", "0.5T")), 8: (512, ("16", "60.8", "115.2", "1T")),
          16: (1024, ("32", "121.6", "230.4", "2T"))}
SCALED = ("the MP = 1 row's size rounded to 0.1B first and then multiplied by the MP degree "
          "(the paper scales 7.6B and 14.4B, not the unrounded size)")
for _size, _label in (("7.5", "P_os"), ("14", "P_os+g"), ("128", "P_os+g+p")):
    claim(f"rajbhandari.5.4.dp64-{_label}-fits-{_size}b", "5.4", f"with N_d = 64, {_label} trains "
          f"models of up to {_size}B parameters (32 GB devices)", float(_size),
          "billion parameters", AT_LEAST,
          lambda _stage=STAGES[_label]: _max_params(_stage, 64, V100),
          checked_against=ZERO_TEXT + " section 5.4")
claim("rajbhandari.5.4.dp1024-1t-fits", "5.4 / 9", "with N_d = 1024, P_os+g+p trains a 1 trillion "
      "parameter model (32 GB devices)", 1000, "billion parameters", AT_LEAST,
      lambda: _max_params(3, 1024, V100), checked_against=ZERO_TEXT + " sections 5.4 and 9")
for _mp, (_gpus, _cells) in TABLE2.items():
    for _label, _stage, _printed in zip(("baseline", *STAGES), (0, *STAGES.values()), _cells):
        _fit = (lambda _stage=_stage, _mp=_mp, _gpus=_gpus:
                _mp * _max_params(_stage, _gpus // _mp, V100))
        _scaled = (lambda _stage=_stage, _mp=_mp:
                   _mp * sp.Rational(decimals(1).printed(_max_params(_stage, 64, V100) / 10**9))
                   * 10**9)
        claim(f"rajbhandari.table2.mp{_mp}-{_label}", "Table 2", f"MP = {_mp}, {_gpus} GPUs "
              f"(N_d = {_gpus // _mp}), {_label}: max theoretical model size "
              f"{_printed if _printed.endswith('T') else _printed + 'B'}",
              float(_printed[:-1]) * 1000 if _printed.endswith("T") else float(_printed),
              "billion parameters",
              significant(1) if _printed.endswith("T") else as_printed(_printed), _fit,
              alternative=Alternative(SCALED, _scaled),
              checked_against=ZERO_TEXT + " Table 2 (left: Max Theoretical Model Size)")

# --- sections 3 and 6.2: GPT-2 1.5B and fused buffers ------------------------------------------
_GPT2 = sp.Integer(1_500_000_000)
claim("rajbhandari.3.1.gpt2-weights-3gb", "3", "GPT-2 (1.5B): 3 GB of 16-bit weights", 3, "GB",
      decimals(0), lambda: state_bytes(PRECISION, OPTIMIZER).params.subs(N, _GPT2),
      checked_against=ZERO_TEXT + " sections 3 and 3.1")
claim("rajbhandari.3.1.gpt2-states-24gb", "3.1", "GPT-2 (1.5B) with mixed-precision Adam needs at "
      "least 24 GB for its model states", 24, "GB", decimals(0),
      lambda: resident_bytes(PRECISION, OPTIMIZER).subs(N, _GPT2),
      checked_against=_sources(ZERO_TEXT + " section 3.1", CSDN))
claim("rajbhandari.3.2.gpt2-fp32-buffer-6gb", "3.2", "GPT-2 (1.5B): a fused fp32 buffer of all "
      "gradients is 6 GB", 6, "GB", decimals(0), lambda: dtype_bytes("fp32") * _GPT2,
      checked_against=ZERO_TEXT + " section 3.2")
claim("rajbhandari.6.2.3b-fp32-buffer-12gb", "6.2", "a 3B model: a 32-bit fused buffer needs 12 GB",
      12, "GB", decimals(0), lambda: dtype_bytes("fp32") * sp.Integer(3_000_000_000),
      checked_against=ZERO_TEXT + " section 6.2")

# --- section 3.2: GPT-2 1.5B's activations ------------------------------------------------------
#: GPT-2 1.5B (Radford et al. 2019: 48 layers, d_model 1600, 25 heads), section 3.2's sequence
#: length 1K and batch 32.
GPT2 = gpt("gpt2-1.5b", 48, 1600, 25, 50257, 1024, "Radford et al. 2019 (GPT-2 XL); ZeRO section 3.2")
claim("rajbhandari.3.2.gpt2-activations-60gb", "3.2", "GPT-2 (1.5B), sequence 1K, batch 32: about "
      "60 GB of activations", 60, "GB", decimals(0),
      lambda: GPT2.at(L * layer_activation_bytes("gpt", "materialised"), b=32),
      alternative=Alternative("the paper's footnote 3 (12 x h x b x s x L fp16 values: 24 bytes "
                              "per sbh per layer, no s^2 attention-score terms)",
                              lambda: GPT2.at(rajbhandari_activations(), b=32)),
      note=f"derive keeps {GPT2.at(layer_activation_bytes('gpt', 'materialised') / (s * b * h))} "
           "bytes per sbh per layer at this shape (sbh(34 + 5as/h), Korthikanti et al. 2022, "
           "Table 2)",
      checked_against=ZERO_TEXT + " section 3.2 and footnote 3")

# --- section 7 and 8: communication volumes (derive.accounts.comm's rows) -----------------------
#: Where section 7's and 8's text was read: a text extraction in stored public repository content.
COMM_TEXT = ("a text extraction of arXiv 1910.02054 (sections 7.1-8, found by exact-string search of "
             "public repository content)")
RING_LIMIT = "the ring's (N_d - 1)/N_d taken as 1, the paper's large-N_d reading"
claim("rajbhandari.7.1.dp-2psi", "7.1", "standard data parallelism moves 2 Psi per step (reduce-scatter "
      "then all-gather of the gradients, Psi elements each)", 2 * N, "elements", EXACT,
      lambda: dp_elements(0), note=RING_LIMIT,
      checked_against=COMM_TEXT + ": 'the standard DP incurs 2Psi data movement during each training step'")
claim("rajbhandari.7.2.1.os-g-2psi", "7.2.1", "P_os+g: a reduce-scatter of the gradients and an all-gather "
      "of the parameters, Psi + Psi = 2 Psi, exactly the baseline's", 2 * N, "elements", EXACT,
      lambda: dp_elements(2), note=RING_LIMIT,
      checked_against=COMM_TEXT + ": 'the total communication volume per training step is Psi + Psi = "
                                  "2Psi, exactly the same as the baseline DP'")
claim("rajbhandari.7.2.2.os-g-p-3psi", "7.2.2", "P_os+g+p: parameters all-gathered for forward and again "
      "for backward, gradients reduce-scattered: 3 Psi", 3 * N, "elements", EXACT,
      lambda: dp_elements(3), note=RING_LIMIT,
      checked_against=COMM_TEXT + ": 'The total volume is therefore 3Psi'")
claim("rajbhandari.7.2.2.os-g-p-1.5x", "7.2.2", "P_os+g+p moves 1.5x the baseline's volume", 1.5, "x",
      decimals(1), lambda: sp.cancel(dp_elements(3) / dp_elements(0)),
      checked_against=COMM_TEXT + ": 'which is 1.5x compared to the baseline'")
claim("rajbhandari.8.megatron-recompute-12sh", "8", "Megatron with activation checkpointing: two "
      "all-reduces forward, two in recomputation, two backward, 12 x seq x hidden per block",
      12 * s * h, "elements", EXACT,
      lambda: sp.limit(tp_layer_elements(tp=2, recompute="full"), t, sp.oo).subs(b, 1),
      note="b = 1 (the paper leaves the batch out of the product) and the ring's 2(t-1)/t taken as 2",
      checked_against=COMM_TEXT + ": 'The total communication per block is 12 x seq_length x hidden_dim'")
