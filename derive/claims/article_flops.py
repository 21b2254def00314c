"""The source article's claims of its chapters 6, 7 and 9: FLOPs (N_GEMM, 6N, the attention share), step time, days, MFU and HFU, the self-test.

Registered after derive.claims.article_activations' (chapters 4 and 5), in reading order.
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.flops import hfu, recompute_factor
from derive.architectures.decoder import LLAMA
from derive.architectures.tables import model_parameters
from derive.claims import CEIL, EXACT, Alternative, decimals, significant
from derive.claims._article import (
    EXAMPLE,
    GB_70,
    GIB_70,
    MIXED_UP_70,
    PEAK,
    PRETRAINING_TOKENS,
    STEP_GPUS,
    STEP_SECONDS,
    STEP_TOKENS,
    TWELVE_LH2,
    cards_for,
    observed_mfu,
    per_token,
    score_to_weight_flops,
    sequence_seconds,
    step_seconds,
    training_days,
)
from derive.claims.article import claim
from derive.conventions import CONVENTIONS
from derive.presets import model
from derive.symbols import N


# --- 6 FLOPs: N_GEMM, 6N, the attention share, seconds per sequence -----------------------
_70B = model("llama3-70b")
claim("6.1.70b-gemm-layers", "6.1", "70B: the layer GEMMs hold 68.45 B parameters", 68.45,
      "billion parameters", decimals(2),
      lambda: _70B.subs(model_parameters(LLAMA).where("gemm", "layer").numel()))
claim("6.1.70b-gemm-output", "6.1", "70B: the output head holds 1.05 B parameters", 1.05,
      "billion parameters", decimals(2),
      lambda: _70B.subs(model_parameters(LLAMA).where("output").numel()))
claim("6.1.70b-n-gemm", "6.1", "70B: N_GEMM = 69.5 B", 69.5, "billion parameters", decimals(1),
      lambda: _70B.gemm_parameters)
claim("6.1.70b-n-gemm-gap", "6.1 / 8.1", "N_GEMM and N differ by 1.5 %", 1.5, "%", decimals(1),
      lambda: sp.Rational(_70B.parameters - _70B.gemm_parameters, _70B.parameters))
claim("6.1.six-flop", "6.1", "6 FLOP per parameter per token (2 forward, 4 backward)", 6, "x",
      EXACT, lambda: CONVENTIONS["6N"].per_token(None) / N)
claim("6.2.attention-8-percent", "6.2", "6Lsh / 6N is about 8 % at s = h = 8192 (N ~ 12Lh^2)", 8,
      "%", decimals(0), lambda: score_to_weight_flops(8192), note=TWELVE_LH2)
claim("6.2.attention-130-percent", "6.2", "and about 130 % at s = 128K", 130, "%", significant(2),
      lambda: score_to_weight_flops(131072), note=TWELVE_LH2)
for _name, _six_n, _with_attn, _seconds in (("llama3-8b", 48, 51, 0.43),
                                           ("llama3-70b", 423, 449, 3.72),
                                           ("llama3-405b", 2435, 2524, 20.91)):
    claim(f"8.4.{_name}-6n", "8.4 output", f"{_name}: 6N = {_six_n} GFLOP per token", _six_n,
          "GFLOP/token", decimals(0),
          lambda _name=_name: model(_name).subs(CONVENTIONS["6N"]("llama")))
    claim(f"8.4.{_name}-flop-attn", "8.4 output / 8.1",
          f"{_name}: {_with_attn} GFLOP per token with causal attention", _with_attn, "GFLOP/token",
          decimals(0), lambda _name=_name: per_token(_name))
    claim(f"8.4.{_name}-seq-seconds", "8.4 output / 8.1",
          f"{_name}: one 8192-token sequence on one H100 takes at least {_seconds} s", _seconds,
          "s", decimals(2), lambda _name=_name: sequence_seconds(_name))

# --- 6.4 / 7 step time, days, MFU and HFU (70B, 2^22 tokens per step, 1024 H100s) ----------
claim("6.4.70b-step-1.86", "6.4 / 8.4 output", "70B, 4M tokens, 1024 H100s: at least 1.86 s per "
      "step", 1.86, "s", decimals(2), lambda: step_seconds())
claim("6.4.70b-step-4.65", "6.4 / 8.4 output", "4.65 s per step at 40 % MFU", 4.65, "s",
      decimals(2), lambda: step_seconds(sp.Rational(2, 5)))
claim("6.4.steps-3.6e6", "6.4", "15T tokens are 3.6e6 steps of 4M tokens", 3.6e6, "steps",
      significant(2), lambda: sp.Rational(PRETRAINING_TOKENS, STEP_TOKENS))
claim("6.4.days-193", "6.4", "15T tokens on 1024 H100s at 40 % MFU: about 193 days", 193, "days",
      decimals(0), lambda: training_days(STEP_GPUS))
claim("6.4.days-24", "6.4", "the same on 8192 H100s: 24 days", 24, "days", decimals(0),
      lambda: training_days(EXAMPLE.large_gpus))
claim("7.1.attention-6-percent", "7.1", "6N with and without the attention term differ by 6 % "
      "(70B, s = 8192)", 6, "%", decimals(0),
      lambda: per_token("llama3-70b") / model("llama3-70b").subs(CONVENTIONS["6N"]("llama")) - 1)
claim("7.2.hfu-four-thirds", "7.2 / 9 Q4", "full recompute: HFU = 4/3 MFU", sp.Rational(4, 3),
      "ratio", EXACT, lambda: recompute_factor("full"))
claim("8.4.70b-tokens-per-second", "8.4 output", "4.5 s per step is 932 K tokens/s", 932000,
      "tokens/s", significant(3), lambda: sp.Rational(STEP_TOKENS) / STEP_SECONDS)
claim("7.3.mfu-41.3", "7.3 / 8.4 output / 9 Q4", "4.5 s per step: MFU 41.3 %", 41.3, "%",
      decimals(1), observed_mfu)
claim("7.3.hfu-selective-42.3", "7.3 / 8.4 output", "HFU with selective recompute 42.3 %", 42.3,
      "%", decimals(1), lambda: observed_mfu() * model("llama3-70b").subs(
          recompute_factor("selective")))
claim("7.3.hfu-full-55.1", "7.3 / 8.4 output / 9 Q4", "HFU with full recompute 55.1 %", 55.1, "%",
      decimals(1), lambda: hfu(sp.Rational(STEP_TOKENS) / STEP_SECONDS, per_token("llama3-70b"),
                               STEP_GPUS, PEAK, recompute_factor("full")))
claim("7.5.430-tflops-43-percent", "7.5", "430 TFLOP/s/GPU on an H100 is 43 % MFU", 43, "%",
      decimals(0), lambda: sp.Integer(430 * 10**12) / PEAK)

# --- 9 self-test ------------------------------------------------------------------------
for _name, _cards_printed in (("llama3-8b", 2), ("llama3-70b", 17), ("llama3-405b", 93)):
    claim(f"9.q1.{_name}-cards-70gib", "9 Q1",
          f"{_name}: {_cards_printed} cards at about 70 GiB usable each hold the state",
          _cards_printed, "cards", CEIL, cards_for(_name, sp.Integer(GIB_70)),
          alternative=Alternative(MIXED_UP_70, cards_for(_name, sp.Integer(GB_70))))
