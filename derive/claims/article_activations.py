"""The source article's claims of its chapters 4 and 5: activations (the GPT-34 convention, FlashAttention, b = 1) and memory outside tensors.

Registered after derive.claims.article's (the document, the opening and chapters 1-3), in reading order.
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.activations import (
    article_layer_bytes,
    article_model_bytes,
    layer_activation_bytes,
    logits_bytes,
)
from derive.accounts.allocator import K_LARGE_BUFFER
from derive.accounts.budget import NVIDIA_SMI_TOTAL, usable_bytes
from derive.accounts.flops import recompute_factor
from derive.claims import AT_LEAST, EXACT, Alternative, decimals, significant
from derive.claims._article import (
    BUDGET_RANGE,
    GPT34,
    MATERIALISED,
    MEGATRON_LAYER,
    SCORES,
    activations_at,
    per_sbh,
    state_of,
)
from derive.claims.article import claim
from derive.conventions.megatron import MEGATRON_OVERHEAD
from derive.presets import model
from derive.symbols import FFN_4H, a, h, s
from derive.units import BYTE_UNITS


# --- 4 activations (the article's GPT-34 convention, FlashAttention, b = 1) --------------------
claim("4.1.score-term-320", "4.1", "5as/h = 320 at s = 8192, a = 64, h = 8192", 320, "x", EXACT,
      lambda: per_sbh(SCORES).subs({s: 8192, a: 64, h: 8192}))
claim("4.1.score-ten-times-34", "4.1", "320 is ten times 34", 10, "x", significant(1),
      lambda: (per_sbh(SCORES) / per_sbh(article_layer_bytes())).subs({s: 8192, a: 64, h: 8192}),
      note="320/34 = 9.4: 'ten times' holds as an order of magnitude, not to one significant "
           "figure")
claim("4.1.score-over-90-percent", "4.1", "without FlashAttention over 90 % of a layer is the "
      "score matrix", 90, "%", AT_LEAST,
      lambda: (SCORES / MATERIALISED).subs({s: 8192, a: 64, h: 8192}))
for _name, _flash, _scores, _all in (("llama3-8b", 1.14, 11.88, 42.81),
                                     ("llama3-70b", 2.28, 23.76, 188.84),
                                     ("llama3-405b", 4.56, 47.51, 581.29)):
    claim(f"4.3.{_name}-layer-flash", "4.3 / 8.1 / 8.4 output",
          f"{_name}: {_flash} GB per layer with FlashAttention (b = 1)", _flash, "GB", decimals(2),
          activations_at(_name, article_layer_bytes()), note=GPT34)
    claim(f"4.3.{_name}-layer-scores", "8.4 output",
          f"{_name}: {_scores} GB per layer with materialised scores", _scores, "GB", decimals(2),
          activations_at(_name, article_layer_bytes("materialised")))
    claim(f"4.3.{_name}-all-layers-logits", "8.4 output",
          f"{_name}: {_all} GB for all layers plus logits", _all, "GB", decimals(2),
          activations_at(_name, article_model_bytes()))
claim("4.3.logits-6.3", "4.3 / 8.1", "logits (bf16 + fp32 copy) of one sequence: 6.3 GB", 6.3, "GB",
      decimals(1), activations_at("llama3-70b", logits_bytes()))
claim("4.3.70b-act-182", "4.3", "70B activations at b = 1: 182 GB", 182, "GB", decimals(0),
      activations_at("llama3-70b", article_model_bytes(logits=False)),
      alternative=Alternative("80 x the per-layer 2.28 GB as printed (rounded before multiplying)",
                              lambda: 80 * sp.Rational(228, 100) * BYTE_UNITS["GB"]))
claim("4.3.8b-act-36", "4.3", "8B activations: 36 GB", 36, "GB", decimals(0),
      activations_at("llama3-8b", article_model_bytes(logits=False)),
      alternative=Alternative("32 x the per-layer 1.14 GB as printed (rounded before multiplying)",
                              lambda: 32 * sp.Rational(114, 100) * BYTE_UNITS["GB"]))
claim("4.3.8b-params-16", "4.3", "8B bf16 parameters: 16 GB", 16, "GB", decimals(0),
      state_of("llama3-8b", "bf16", "params"))
claim("4.3.8b-act-twice-params", "4.3", "8B's activations are twice its bf16 parameters", 2, "x",
      significant(1), lambda: activations_at("llama3-8b", article_model_bytes(logits=False))()
      / state_of("llama3-8b", "bf16", "params")())
claim("4.3.70b-act-b4-730", "4.3", "70B activations at b = 4: 730 GB", 730, "GB", significant(2),
      activations_at("llama3-70b", article_model_bytes(logits=False), micro_batch=4), note=GPT34)
claim("4.5.full-recompute-2sbh", "4.5", "full recompute keeps only the layer input, 2sbh bytes",
      2, "x", EXACT, lambda: per_sbh(layer_activation_bytes("gpt", recompute="full")))
claim("4.5.full-recompute-33-percent", "4.5", "full recompute costs about 33 % more FLOP", 33, "%",
      decimals(0), lambda: recompute_factor("full") - 1)
claim("4.4.megatron-34-at-4h", "4.4", "18 + 4f/h is 34 at f = 4h", 34, "x", EXACT,
      lambda: per_sbh(MEGATRON_LAYER).subs(FFN_4H))
claim("4.4.megatron-32-llama3-70b", "4.4", "18 + 4f/h is 32 for Llama 3 70B (f = 3.5h)", 32, "x",
      EXACT, lambda: model("llama3-70b").subs(per_sbh(MEGATRON_LAYER)))
claim("8.4.34-vs-megatron-6-percent", "8.4", "34 and 18 + 4f/h differ by 6 % at f = 3.5h", 6, "%",
      decimals(0), lambda: model("llama3-70b").subs(
          per_sbh(article_layer_bytes()) / per_sbh(MEGATRON_LAYER) - 1))
claim("4.4.overhead-1.05", "4.4", "the without-SP estimator adds a 5 % overhead", 5, "%",
      decimals(0), lambda: MEGATRON_OVERHEAD - 1)

# --- 5 memory outside tensors -----------------------------------------------------------
claim("5.4.h100-79.6-gib", "5.4", "an 80 GB card reports about 79.6 GiB (mem_get_info)", 79.6,
      "GiB", decimals(1), lambda: sp.Integer(NVIDIA_SMI_TOTAL["h100"]),
      note="derive checks the unit conversion only: the driver's total for an H100 80GB HBM3 "
           "(nvidia-smi 81559 MiB, a measurement) is 79.65 GiB; the card carries 80 GiB of HBM "
           "(85.9 GB, sold as '80 GB'), of which the driver keeps about 0.35 GiB - a figure "
           "derive cannot derive")
for _side, _printed in (("low", 65), ("high", 75)):
    claim(f"5.4.usable-{_side}-{_printed}-gib", "5.4",
          f"{'many groups, heavy fragmentation' if _side == 'low' else 'a tuned configuration'}: "
          f"about {_printed} GiB usable", _printed, "GiB", decimals(0),
          lambda _side=_side: sp.Integer(usable_bytes("h100")[_side == "high"]),
          note="the article's own ends: 65-75 GiB here, 68-74 GiB in 8.1 and self-test 5; "
               + BUDGET_RANGE)
for _side, _printed in (("low", 68), ("high", 74)):
    claim(f"8.1.usable-{_side}-{_printed}-gib", "8.1 / 9 Q5",
          f"usable for tensors on an 80 GB card: {_side} end about {_printed} GiB", _printed, "GiB",
          decimals(0), lambda _side=_side: sp.Integer(usable_bytes("h100")[_side == "high"]),
          note=BUDGET_RANGE)
claim("5.3.large-segment-20-mib", "5.3", "large_segment_size 20971520 is 20 MiB", 20, "MiB",
      EXACT, lambda: sp.Integer(K_LARGE_BUFFER))
