"""The source article's numeric claims (seed/000_8738b2343f4a5190.txt), in reading order.

Sections are the article's chapter numbers ("3.5" is chapter three, part 5;
"8.4 output" the sample output of its CLI; "9 Q1" self-test question 1).
Texts paraphrase what is claimed. Activation claims are read under the
article's stated convention (section 4 and 8.4: the GPT table's 34 at f = 4h,
FlashAttention, statistics ignored, applied to Llama 3 as well; how far that is
from the Llama tables is a departure proven in ``derive.identities``); FLOP
claims from the GEMM tables (causal scores, no recompute), seconds at the
H100's dense 989 TFLOP/s.

Here: the document, the opening and chapters 1-3 (and 8.4's state accounts); chapters 4-5 in
derive.claims.article_activations, 6, 7 and 9 in derive.claims.article_flops (registered after these,
in reading order); the figures and derivations they share in derive.claims._article.
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.activations import article_layer_bytes, article_model_bytes
from derive.accounts.state import (
    bytes_per_parameter,
    resident_bytes,
    state_bytes,
    state_ledger,
)
from derive.claims import ARTICLE, CEIL, EXACT, decimals, document, significant
from derive.claims._article import (
    GPT34,
    H100,
    activations_at,
    cards_for,
    per_token,
    sequence_seconds,
    state_of,
)
from derive.conventions.megatron import distributed_optimizer_bytes_per_parameter
from derive.dtypes import unit_roundoff
from derive.presets import model
from derive.symbols import N, d


claim = document(ARTICLE, "seed/000_8738b2343f4a5190.txt (Chinese), the first of a nine-part series "
                 "on large-scale training engineering").claim

# --- opening -----------------------------------------------------------------------------
claim("open.70b-resident", "opening", "70B, bf16 mixed precision + Adam: parameters, gradients "
      "and optimizer state total 1.13 TB", 1.13, "TB", decimals(2), state_of("llama3-70b", "bf16"))
claim("open.70b-14x-h100", "opening", "1.13 TB is 14 times one 80 GB H100", 14, "x", decimals(0),
      cards_for("llama3-70b", H100))
claim("open.70b-act-per-layer", "opening", "at s = 8192 each 70B layer needs 2.3 GB of activations",
      2.3, "GB", decimals(1), activations_at("llama3-70b", article_layer_bytes()), note=GPT34)
claim("open.70b-act-80-layers", "opening", "80 layers make 180 GB of activations", 180, "GB",
      significant(2), activations_at("llama3-70b", article_model_bytes(logits=False)), note=GPT34)
claim("open.70b-flop-per-token", "opening", "forward + backward is 4.5e11 FLOP per token (70B)",
      4.5e11, "FLOP/token", significant(2), lambda: per_token("llama3-70b"))
claim("open.70b-seq-seconds", "opening", "one 8192-token sequence takes 3.7 s on one H100 at peak",
      3.7, "s", decimals(1), lambda: sequence_seconds("llama3-70b"))

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
      state_of("llama3-70b", "bf16", "grads"))
claim("2.2.70b-act-180", "2.2", "70B, b = 1, FlashAttention: 180 GB of activations", 180, "GB",
      significant(2), activations_at("llama3-70b", article_model_bytes(logits=False)), note=GPT34)

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
      "GB", decimals(2), state_of("llama3-8b", "bf16"))
claim("3.5.8b-resident-128", "3.5 / 9 Q1", "8B: 128 GB of resident state", 128, "GB", decimals(0),
      state_of("llama3-8b", "bf16"))
claim("3.5.405b-resident", "3.5 / 8.4 output", "405B: 6.49 TB resident", 6.49, "TB", decimals(2),
      state_of("llama3-405b", "bf16"))
claim("3.5.8b-two-cards", "3.5", "8B needs at least two 80 GB cards for its state", 2, "cards",
      CEIL, cards_for("llama3-8b", H100))
claim("3.5.70b-14-h100s", "3.5", "70B's 1.13 TB is the memory of 14 H100s", 14, "cards",
      decimals(0), cards_for("llama3-70b", H100))
claim("3.5.70b-at-least-15", "3.5 / 8.1", "70B needs at least 15 cards even with no waste", 15,
      "cards", CEIL, cards_for("llama3-70b", H100))
claim("3.5.405b-checkpoint-12N", "3.5", "405B checkpoint at 12N is about 5 TB", 5, "TB",
      decimals(0), state_of("llama3-405b", "bf16", "optimizer"))
claim("3.5.405b-checkpoint-14N", "3.5", "405B checkpoint at 14N is about 6 TB", 6, "TB",
      decimals(0), lambda: model("llama3-405b").at(state_bytes("bf16", "adam").optimizer
                                + state_bytes("bf16", "adam").params))

# --- 8.4 sample output: the accounts ------------------------------------------------------
for _name, _params, _optim, _unit in (("llama3-8b", 16.06, 96.36, "GB"),
                                      ("llama3-70b", 141.11, 846.64, "GB"),
                                      ("llama3-405b", 811.71, 4.87, "TB")):
    claim(f"8.4.{_name}-params", "8.4 output", f"{_name}: bf16 params {_params} GB", _params, "GB",
          decimals(2), state_of(_name, "bf16", "params"))
    claim(f"8.4.{_name}-optim", "8.4 output", f"{_name}: optimizer {_optim} {_unit}", _optim, _unit,
          decimals(2), state_of(_name, "bf16", "optimizer"))
claim("8.4.70b-resident-18", "8.4 output", "70B at 18 bytes/parameter: 1.27 TB resident", 1.27,
      "TB", decimals(2), state_of("llama3-70b", "bf16-fp32grad"))
claim("8.4.70b-grads-fp32", "8.4 output", "70B at 18 bytes/parameter: fp32 grads 282.21 GB", 282.21,
      "GB", decimals(2), state_of("llama3-70b", "bf16-fp32grad", "grads"))
