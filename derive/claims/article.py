"""The source article's numeric claims (seed/000_8738b2343f4a5190.txt), in reading order.

Sections are the article's chapter numbers ("3.5" is chapter three, part 5;
"8.4 output" the sample output of its CLI; "9 Q1" self-test question 1).
Texts paraphrase what is claimed. Activation claims are read under the
article's stated convention (section 4 and 8.4: the GPT table's 34 at f = 4h,
FlashAttention, statistics ignored, applied to Llama 3 as well; how far that is
from the Llama tables is a departure proven in ``derive.identities``); FLOP
claims from the GEMM tables (causal scores, no recompute), seconds at the
H100's dense 989 TFLOP/s.
"""
from __future__ import annotations

from typing import Callable

import sympy as sp

from derive.megatron import activations as megatron_activations
from derive.accounts.activations import (
    article_layer_bytes,
    article_model_bytes,
    layer_activation_bytes,
    layer_activations,
    logits_bytes,
)
from derive.accounts.allocator import K_LARGE_BUFFER
from derive.accounts.budget import NVIDIA_SMI_TOTAL, usable_bytes
from derive.accounts.flops import (
    flops_per_token,
    hfu,
    mfu,
    recompute_factor,
    step_time_lower_bound,
)
from derive.accounts.state import (
    bytes_per_parameter,
    resident_bytes,
    state_bytes,
    state_ledger,
)
from derive.architectures.families import gpt_layer_gemms, model_parameters
from derive.architectures.gemms import flops
from derive.claims import (
    ARTICLE,
    AT_LEAST,
    CEIL,
    EXACT,
    Alternative,
    decimals,
    document,
    significant,
)
from derive.conventions import CONVENTIONS
from derive.conventions.megatron import (
    MEGATRON_OVERHEAD,
    distributed_optimizer_bytes_per_parameter,
)
from derive.dtypes import unit_roundoff
from derive.presets import ARTICLE_EXAMPLE, hardware, model
from derive.symbols import FFN_4H, N, a, b, d, h, s
from derive.units import BYTE_UNITS

#: Dense bf16 peak of one H100, exactly (989 TFLOP/s).
PEAK = sp.Integer(int(hardware("h100").peak_flops))
SBH = s * b * h
LLAMA3 = ("llama3-8b", "llama3-70b", "llama3-405b")
#: The article's step example (sections 6.4 and 7.3): 2^22 tokens per step on 1024 H100s.
EXAMPLE = ARTICLE_EXAMPLE
STEP_TOKENS, STEP_GPUS, STEP_SECONDS = EXAMPLE.step_tokens, EXAMPLE.gpus, EXAMPLE.step_seconds
PRETRAINING_TOKENS = EXAMPLE.training_tokens
DAY = 86400
#: How derive's usable range (derive.accounts.budget) is paired.
BUDGET_RANGE = ("derive.accounts.budget pairs every loss at its worst (low end) or best (high end): "
                "driver capacity 79.11-79.6 GiB, context 0.5-1 GiB and NCCL 1-3 GiB (the "
                "article's), margin 0-1 GiB, fragmentation 5-15 % of reserved (the article's, "
                "about 11 GiB at 15 %), 1-8 cuBLAS workspaces of 32 MiB and 0-256 MiB more; the "
                "article's items alone at their worst (79.6 - 1 - 3 GiB, 15 %) leave 64.3 GiB")
#: Where the attention-FLOP ratios hold only under N ~ 12Lh^2.
TWELVE_LH2 = ("s/12h: a GPT layer's weight GEMMs at f = 4h (12h^2 per layer); Llama 3 70B's own "
              "causal score FLOPs over its weight FLOPs are 7.7 % at s = 8192 and 124 % at s = 128K")
#: Where an activation claim holds only under the article's convention.
GPT34 = ("the article's GPT convention (34 at f = 4h, MHA, no norm statistics) applied to Llama 3; "
         "derive's Llama fused profile sbh(12 + 4h_kv/h + 6f/h) gives 1.14 / 2.25 / 4.26 GB per "
         "layer for 8B / 70B / 405B, the eager profile 1.78 / 3.52 / 6.74 GB")


def _state(name: str, precision: str, account: str | None = None) -> Callable[[], sp.Expr]:
    def derive() -> sp.Expr:
        held = state_bytes(precision, "adam")
        return model(name).at(held.total if account is None else getattr(held, account))
    return derive


def _cards(name: str, per_card: sp.Expr) -> Callable[[], sp.Expr]:
    return lambda: model(name).at(resident_bytes("bf16", "adam")) / per_card


def _acts(name: str, expr: sp.Expr, micro_batch: int = 1) -> Callable[[], sp.Expr]:
    """Activation bytes ``expr`` at preset ``name`` (s = 8192) and micro-batch ``micro_batch``."""
    return lambda: model(name).subs(expr, b=micro_batch)


def _per_token(name: str) -> sp.Expr:
    """Model FLOPs per token of preset ``name``: GEMM tables, causal scores, no recompute."""
    return model(name).subs(flops_per_token("llama", "causal"))


def _sequence_seconds(name: str) -> sp.Expr:
    """One s-token sequence on one H100 at peak (the article, section 6.4)."""
    return step_time_lower_bound(model(name).seq, _per_token(name), 1, PEAK)


def _step_seconds(mfu_target: sp.Expr = 1, gpus: int = STEP_GPUS) -> sp.Expr:
    return step_time_lower_bound(STEP_TOKENS, _per_token(EXAMPLE.model), gpus, PEAK, mfu_target)


def _days(gpus: int) -> sp.Expr:
    """15T tokens at 40 % MFU on ``gpus`` H100s, in days (the article, section 6.4)."""
    steps = sp.Rational(PRETRAINING_TOKENS, STEP_TOKENS)
    return steps * _step_seconds(EXAMPLE.target_mfu, gpus) / DAY


def _observed_mfu() -> sp.Expr:
    return mfu(sp.Rational(STEP_TOKENS) / STEP_SECONDS, _per_token("llama3-70b"), STEP_GPUS, PEAK)


def _score_to_weight_flops(sequence: int) -> sp.Expr:
    """A GPT layer's causal score FLOPs over its weight FLOPs at f = 4h, h = 8192: s/12h."""
    layer = gpt_layer_gemms("causal")
    ratio = flops(layer.where("attention_score")) / flops(layer.where("weight"))
    return ratio.subs(FFN_4H).subs({h: 8192, s: sequence})


def _per_sbh(expr: sp.Expr) -> sp.Expr:
    return sp.cancel(expr / SBH)


#: Megatron's per-layer bytes on one rank (SP + selective, t = 1): sbh(18 + 4f/h).
MEGATRON_LAYER = layer_activation_bytes(**megatron_activations.MEGATRON_LAYER)
SCORES = layer_activations("gpt").where("score_matrix").bytes()
MATERIALISED = layer_activation_bytes("gpt", softmax_statistics=False).subs(FFN_4H)


claim = document(ARTICLE, "seed/000_8738b2343f4a5190.txt (Chinese), the first of a nine-part series "
                 "on large-scale training engineering").claim

H100 = sp.Integer(hardware("h100").memory_bytes)
GIB_70 = 70 * BYTE_UNITS["GiB"]
GB_70 = 70 * BYTE_UNITS["GB"]
MIXED_UP_70 = "70 GB (10^9 bytes) in place of 70 GiB"

# --- opening -----------------------------------------------------------------------------
claim("open.70b-resident", "opening", "70B, bf16 mixed precision + Adam: parameters, gradients "
      "and optimizer state total 1.13 TB", 1.13, "TB", decimals(2), _state("llama3-70b", "bf16"))
claim("open.70b-14x-h100", "opening", "1.13 TB is 14 times one 80 GB H100", 14, "x", decimals(0),
      _cards("llama3-70b", H100))
claim("open.70b-act-per-layer", "opening", "at s = 8192 each 70B layer needs 2.3 GB of activations",
      2.3, "GB", decimals(1), _acts("llama3-70b", article_layer_bytes()), note=GPT34)
claim("open.70b-act-80-layers", "opening", "80 layers make 180 GB of activations", 180, "GB",
      significant(2), _acts("llama3-70b", article_model_bytes(logits=False)), note=GPT34)
claim("open.70b-flop-per-token", "opening", "forward + backward is 4.5e11 FLOP per token (70B)",
      4.5e11, "FLOP/token", significant(2), lambda: _per_token("llama3-70b"))
claim("open.70b-seq-seconds", "opening", "one 8192-token sequence takes 3.7 s on one H100 at peak",
      3.7, "s", decimals(1), lambda: _sequence_seconds("llama3-70b"))

# --- 1.3 parameter counts ------------------------------------------------------------------
for _name, _printed in (("llama3-8b", 8.03), ("llama3-70b", 70.55), ("llama3-405b", 405.85)):
    claim(f"1.3.{_name}-N", "1.3 / 8.4 output", f"{_name}: N = {_printed} B parameters", _printed,
          "billion parameters", decimals(2), lambda _name=_name: model(_name).parameters)

# --- 2.1 what each state is ----------------------------------------------------------------
claim("2.1.adam-moments-8", "2.1", "Adam's two fp32 moments are 8 bytes per parameter", 8,
      "bytes/parameter", EXACT, lambda: state_bytes("fp32", "adam").optimizer / N)
claim("2.1.optimizer-12", "2.1", "fp32 master + two moments: 12 bytes per parameter", 12,
      "bytes/parameter", EXACT, lambda: state_bytes("bf16", "adam").optimizer / N)
claim("2.1.optimizer-share", "2.1", "the optimizer's 12 bytes are 3/4 of the resident state",
      sp.Rational(3, 4), "ratio", EXACT,
      lambda: state_bytes("bf16", "adam").optimizer / resident_bytes("bf16", "adam"))
claim("2.1.sgd-momentum-4", "2.1", "SGD with momentum keeps 4 bytes per parameter", 4,
      "bytes/parameter", EXACT, lambda: state_bytes("fp32", "sgd-momentum").optimizer / N)

# --- 2.2 timeline ----------------------------------------------------------------------------
claim("2.2.70b-grads-141", "2.2", "70B: 141 GB of bf16 gradients", 141, "GB", decimals(0),
      _state("llama3-70b", "bf16", "grads"))
claim("2.2.70b-act-180", "2.2", "70B, b = 1, FlashAttention: 180 GB of activations", 180, "GB",
      significant(2), _acts("llama3-70b", article_model_bytes(logits=False)), note=GPT34)

# --- 3.1 why fp32 master weights ----------------------------------------------------------
claim("3.1.bf16-roundoff", "3.1", "bf16 relative precision is about 2^-8", sp.Rational(1, 256),
      "ratio", EXACT, lambda: sp.Rational(unit_roundoff("bf16")))
claim("3.1.bf16-roundoff-percent", "3.1 / 9 Q2", "2^-8 is about 0.4 %", 0.4, "%", decimals(1),
      lambda: sp.Rational(unit_roundoff("bf16")))

# --- 3.2 sixteen bytes ----------------------------------------------------------------------
claim("3.2.bf16-adam-16", "3.2", "bf16 mixed precision + Adam: 16 bytes per parameter", 16,
      "bytes/parameter", EXACT, lambda: bytes_per_parameter("bf16", "adam"))
claim("3.2.params-2N", "3.2", "params_bytes = 2N", 2 * N, "B", EXACT,
      lambda: state_bytes("bf16", "adam").params)
claim("3.2.grads-2N", "3.2", "grads_bytes = 2N", 2 * N, "B", EXACT,
      lambda: state_bytes("bf16", "adam").grads)
claim("3.2.optim-12N", "3.2", "optim_bytes = 12N", 12 * N, "B", EXACT,
      lambda: state_bytes("bf16", "adam").optimizer)
claim("3.2.optimizer-75-percent", "3.2", "the optimizer account is 75 % of the state", 75, "%",
      decimals(0), lambda: state_bytes("bf16", "adam").optimizer / resident_bytes("bf16", "adam"))
claim("3.2.zero-16N", "3.2", "ZeRO's (2 + 2 + K)N with K = 12 is 16N", 16 * N, "B",
      EXACT, lambda: resident_bytes("fp16", "adam"))

# --- 3.3 eighteen bytes ---------------------------------------------------------------------
claim("3.3.fp32-grads-18", "3.3", "fp32 gradients: 2 + 4 + 4 + 4 + 4 = 18 bytes per parameter", 18,
      "bytes/parameter", EXACT, lambda: bytes_per_parameter("bf16-fp32grad", "adam"))
claim("3.3.fp32-grads-plus-2", "3.3", "fp32 gradients add 2 bytes to the 16", 2,
      "bytes/parameter", EXACT,
      lambda: bytes_per_parameter("bf16-fp32grad", "adam") - bytes_per_parameter("bf16", "adam"))
claim("3.3.not-20", "3.3", "a persistent bf16 gradient next to the fp32 one would make it 20", 20,
      "bytes/parameter", EXACT, lambda: state_ledger("bf16-fp32grad", "adam").bytes() / N)
claim("3.3.fp16-16", "3.3", "fp16 training is also 16 bytes per parameter", 16, "bytes/parameter",
      EXACT, lambda: bytes_per_parameter("fp16", "adam"))
claim("3.3.fp32-16", "3.3", "fp32 training is 4 + 4 + 8 = 16 bytes per parameter", 16,
      "bytes/parameter", EXACT, lambda: bytes_per_parameter("fp32", "adam"))

# --- 3.4 Megatron's table -------------------------------------------------------------------
for _precision, _plain, _sharded in (("bf16", 18, 6 + 12 / d), ("fp16", 20, 4 + 16 / d),
                                     ("fp32", 16, 8 + 8 / d)):
    claim(f"3.4.megatron-{_precision}", "3.4", f"Megatron {_precision}: {_plain} bytes per parameter",
          _plain, "bytes/parameter", EXACT,
          lambda _p=_precision: distributed_optimizer_bytes_per_parameter(_p, distributed=False))
    claim(f"3.4.megatron-{_precision}-distributed", "3.4",
          f"Megatron {_precision} with the distributed optimizer: {sp.sstr(_sharded)} bytes per parameter",
          _sharded, "bytes/parameter", EXACT,
          lambda _p=_precision: distributed_optimizer_bytes_per_parameter(_p, distributed=True))

# --- 3.5 the three models' resident state ---------------------------------------------------
claim("3.5.8b-resident", "3.5 / 8.4 output", "8B: 128.48 GB resident (16 bytes/parameter)", 128.48,
      "GB", decimals(2), _state("llama3-8b", "bf16"))
claim("3.5.8b-resident-128", "3.5 / 9 Q1", "8B: 128 GB of resident state", 128, "GB", decimals(0),
      _state("llama3-8b", "bf16"))
claim("3.5.405b-resident", "3.5 / 8.4 output", "405B: 6.49 TB resident", 6.49, "TB", decimals(2),
      _state("llama3-405b", "bf16"))
claim("3.5.8b-two-cards", "3.5", "8B needs at least two 80 GB cards for its state", 2, "cards",
      CEIL, _cards("llama3-8b", H100))
claim("3.5.70b-14-h100s", "3.5", "70B's 1.13 TB is the memory of 14 H100s", 14, "cards",
      decimals(0), _cards("llama3-70b", H100))
claim("3.5.70b-at-least-15", "3.5 / 8.1", "70B needs at least 15 cards even with no waste", 15,
      "cards", CEIL, _cards("llama3-70b", H100))
claim("3.5.405b-checkpoint-12N", "3.5", "405B checkpoint at 12N is about 5 TB", 5, "TB",
      decimals(0), _state("llama3-405b", "bf16", "optimizer"))
claim("3.5.405b-checkpoint-14N", "3.5", "405B checkpoint at 14N is about 6 TB", 6, "TB",
      decimals(0), lambda: model("llama3-405b").at(state_bytes("bf16", "adam").optimizer
                                + state_bytes("bf16", "adam").params))

# --- 8.4 sample output: the accounts ------------------------------------------------------
for _name, _params, _optim, _unit in (("llama3-8b", 16.06, 96.36, "GB"),
                                      ("llama3-70b", 141.11, 846.64, "GB"),
                                      ("llama3-405b", 811.71, 4.87, "TB")):
    claim(f"8.4.{_name}-params", "8.4 output", f"{_name}: bf16 params {_params} GB", _params, "GB",
          decimals(2), _state(_name, "bf16", "params"))
    claim(f"8.4.{_name}-optim", "8.4 output", f"{_name}: optimizer {_optim} {_unit}", _optim, _unit,
          decimals(2), _state(_name, "bf16", "optimizer"))
claim("8.4.70b-resident-18", "8.4 output", "70B at 18 bytes/parameter: 1.27 TB resident", 1.27,
      "TB", decimals(2), _state("llama3-70b", "bf16-fp32grad"))
claim("8.4.70b-grads-fp32", "8.4 output", "70B at 18 bytes/parameter: fp32 grads 282.21 GB", 282.21,
      "GB", decimals(2), _state("llama3-70b", "bf16-fp32grad", "grads"))

# --- 4 activations (the article's GPT-34 convention, FlashAttention, b = 1) --------------------
claim("4.1.score-term-320", "4.1", "5as/h = 320 at s = 8192, a = 64, h = 8192", 320, "x", EXACT,
      lambda: _per_sbh(SCORES).subs({s: 8192, a: 64, h: 8192}))
claim("4.1.score-ten-times-34", "4.1", "320 is ten times 34", 10, "x", significant(1),
      lambda: (_per_sbh(SCORES) / _per_sbh(article_layer_bytes())).subs({s: 8192, a: 64, h: 8192}),
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
          _acts(_name, article_layer_bytes()), note=GPT34)
    claim(f"4.3.{_name}-layer-scores", "8.4 output",
          f"{_name}: {_scores} GB per layer with materialised scores", _scores, "GB", decimals(2),
          _acts(_name, article_layer_bytes("materialised")))
    claim(f"4.3.{_name}-all-layers-logits", "8.4 output",
          f"{_name}: {_all} GB for all layers plus logits", _all, "GB", decimals(2),
          _acts(_name, article_model_bytes()))
claim("4.3.logits-6.3", "4.3 / 8.1", "logits (bf16 + fp32 copy) of one sequence: 6.3 GB", 6.3, "GB",
      decimals(1), _acts("llama3-70b", logits_bytes()))
claim("4.3.70b-act-182", "4.3", "70B activations at b = 1: 182 GB", 182, "GB", decimals(0),
      _acts("llama3-70b", article_model_bytes(logits=False)),
      alternative=Alternative("80 x the per-layer 2.28 GB as printed (rounded before multiplying)",
                              lambda: 80 * sp.Rational(228, 100) * BYTE_UNITS["GB"]))
claim("4.3.8b-act-36", "4.3", "8B activations: 36 GB", 36, "GB", decimals(0),
      _acts("llama3-8b", article_model_bytes(logits=False)),
      alternative=Alternative("32 x the per-layer 1.14 GB as printed (rounded before multiplying)",
                              lambda: 32 * sp.Rational(114, 100) * BYTE_UNITS["GB"]))
claim("4.3.8b-params-16", "4.3", "8B bf16 parameters: 16 GB", 16, "GB", decimals(0),
      _state("llama3-8b", "bf16", "params"))
claim("4.3.8b-act-twice-params", "4.3", "8B's activations are twice its bf16 parameters", 2, "x",
      significant(1), lambda: _acts("llama3-8b", article_model_bytes(logits=False))()
      / _state("llama3-8b", "bf16", "params")())
claim("4.3.70b-act-b4-730", "4.3", "70B activations at b = 4: 730 GB", 730, "GB", significant(2),
      _acts("llama3-70b", article_model_bytes(logits=False), micro_batch=4), note=GPT34)
claim("4.5.full-recompute-2sbh", "4.5", "full recompute keeps only the layer input, 2sbh bytes",
      2, "x", EXACT, lambda: _per_sbh(layer_activation_bytes("gpt", recompute="full")))
claim("4.5.full-recompute-33-percent", "4.5", "full recompute costs about 33 % more FLOP", 33, "%",
      decimals(0), lambda: recompute_factor("full") - 1)
claim("4.4.megatron-34-at-4h", "4.4", "18 + 4f/h is 34 at f = 4h", 34, "x", EXACT,
      lambda: _per_sbh(MEGATRON_LAYER).subs(FFN_4H))
claim("4.4.megatron-32-llama3-70b", "4.4", "18 + 4f/h is 32 for Llama 3 70B (f = 3.5h)", 32, "x",
      EXACT, lambda: model("llama3-70b").subs(_per_sbh(MEGATRON_LAYER)))
claim("8.4.34-vs-megatron-6-percent", "8.4", "34 and 18 + 4f/h differ by 6 % at f = 3.5h", 6, "%",
      decimals(0), lambda: model("llama3-70b").subs(
          _per_sbh(article_layer_bytes()) / _per_sbh(MEGATRON_LAYER) - 1))
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

# --- 6 FLOPs: N_GEMM, 6N, the attention share, seconds per sequence -----------------------
_70B = model("llama3-70b")
claim("6.1.70b-gemm-layers", "6.1", "70B: the layer GEMMs hold 68.45 B parameters", 68.45,
      "billion parameters", decimals(2),
      lambda: _70B.subs(model_parameters("llama").where("gemm", "layer").numel()))
claim("6.1.70b-gemm-output", "6.1", "70B: the output head holds 1.05 B parameters", 1.05,
      "billion parameters", decimals(2),
      lambda: _70B.subs(model_parameters("llama").where("output").numel()))
claim("6.1.70b-n-gemm", "6.1", "70B: N_GEMM = 69.5 B", 69.5, "billion parameters", decimals(1),
      lambda: _70B.gemm_parameters)
claim("6.1.70b-n-gemm-gap", "6.1 / 8.1", "N_GEMM and N differ by 1.5 %", 1.5, "%", decimals(1),
      lambda: sp.Rational(_70B.parameters - _70B.gemm_parameters, _70B.parameters))
claim("6.1.six-flop", "6.1", "6 FLOP per parameter per token (2 forward, 4 backward)", 6, "x",
      EXACT, lambda: CONVENTIONS["6N"].per_token(None) / N)
claim("6.2.attention-8-percent", "6.2", "6Lsh / 6N is about 8 % at s = h = 8192 (N ~ 12Lh^2)", 8,
      "%", decimals(0), lambda: _score_to_weight_flops(8192), note=TWELVE_LH2)
claim("6.2.attention-130-percent", "6.2", "and about 130 % at s = 128K", 130, "%", significant(2),
      lambda: _score_to_weight_flops(131072), note=TWELVE_LH2)
for _name, _six_n, _with_attn, _seconds in (("llama3-8b", 48, 51, 0.43),
                                           ("llama3-70b", 423, 449, 3.72),
                                           ("llama3-405b", 2435, 2524, 20.91)):
    claim(f"8.4.{_name}-6n", "8.4 output", f"{_name}: 6N = {_six_n} GFLOP per token", _six_n,
          "GFLOP/token", decimals(0),
          lambda _name=_name: model(_name).subs(CONVENTIONS["6N"]("llama")))
    claim(f"8.4.{_name}-flop-attn", "8.4 output / 8.1",
          f"{_name}: {_with_attn} GFLOP per token with causal attention", _with_attn, "GFLOP/token",
          decimals(0), lambda _name=_name: _per_token(_name))
    claim(f"8.4.{_name}-seq-seconds", "8.4 output / 8.1",
          f"{_name}: one 8192-token sequence on one H100 takes at least {_seconds} s", _seconds,
          "s", decimals(2), lambda _name=_name: _sequence_seconds(_name))

# --- 6.4 / 7 step time, days, MFU and HFU (70B, 2^22 tokens per step, 1024 H100s) ----------
claim("6.4.70b-step-1.86", "6.4 / 8.4 output", "70B, 4M tokens, 1024 H100s: at least 1.86 s per "
      "step", 1.86, "s", decimals(2), lambda: _step_seconds())
claim("6.4.70b-step-4.65", "6.4 / 8.4 output", "4.65 s per step at 40 % MFU", 4.65, "s",
      decimals(2), lambda: _step_seconds(sp.Rational(2, 5)))
claim("6.4.steps-3.6e6", "6.4", "15T tokens are 3.6e6 steps of 4M tokens", 3.6e6, "steps",
      significant(2), lambda: sp.Rational(PRETRAINING_TOKENS, STEP_TOKENS))
claim("6.4.days-193", "6.4", "15T tokens on 1024 H100s at 40 % MFU: about 193 days", 193, "days",
      decimals(0), lambda: _days(STEP_GPUS))
claim("6.4.days-24", "6.4", "the same on 8192 H100s: 24 days", 24, "days", decimals(0),
      lambda: _days(EXAMPLE.large_gpus))
claim("7.1.attention-6-percent", "7.1", "6N with and without the attention term differ by 6 % "
      "(70B, s = 8192)", 6, "%", decimals(0),
      lambda: _per_token("llama3-70b") / model("llama3-70b").subs(CONVENTIONS["6N"]("llama")) - 1)
claim("7.2.hfu-four-thirds", "7.2 / 9 Q4", "full recompute: HFU = 4/3 MFU", sp.Rational(4, 3),
      "ratio", EXACT, lambda: recompute_factor("full"))
claim("8.4.70b-tokens-per-second", "8.4 output", "4.5 s per step is 932 K tokens/s", 932000,
      "tokens/s", significant(3), lambda: sp.Rational(STEP_TOKENS) / STEP_SECONDS)
claim("7.3.mfu-41.3", "7.3 / 8.4 output / 9 Q4", "4.5 s per step: MFU 41.3 %", 41.3, "%",
      decimals(1), _observed_mfu)
claim("7.3.hfu-selective-42.3", "7.3 / 8.4 output", "HFU with selective recompute 42.3 %", 42.3,
      "%", decimals(1), lambda: _observed_mfu() * model("llama3-70b").subs(
          recompute_factor("selective")))
claim("7.3.hfu-full-55.1", "7.3 / 8.4 output / 9 Q4", "HFU with full recompute 55.1 %", 55.1, "%",
      decimals(1), lambda: hfu(sp.Rational(STEP_TOKENS) / STEP_SECONDS, _per_token("llama3-70b"),
                               STEP_GPUS, PEAK, recompute_factor("full")))
claim("7.5.430-tflops-43-percent", "7.5", "430 TFLOP/s/GPU on an H100 is 43 % MFU", 43, "%",
      decimals(0), lambda: sp.Integer(430 * 10**12) / PEAK)

# --- 9 self-test ------------------------------------------------------------------------
for _name, _cards_printed in (("llama3-8b", 2), ("llama3-70b", 17), ("llama3-405b", 93)):
    claim(f"9.q1.{_name}-cards-70gib", "9 Q1",
          f"{_name}: {_cards_printed} cards at about 70 GiB usable each hold the state",
          _cards_printed, "cards", CEIL, _cards(_name, sp.Integer(GIB_70)),
          alternative=Alternative(MIXED_UP_70, _cards(_name, sp.Integer(GB_70))))
