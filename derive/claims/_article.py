"""The source article's figures and the derivations its claims share (derive.claims.article and its parts)."""
from __future__ import annotations

from typing import Callable

import sympy as sp

from derive.megatron import activations as megatron_activations
from derive.accounts.activations import layer_activation_bytes, layer_activations
from derive.accounts.flops import flops_per_token, mfu, step_time_lower_bound
from derive.accounts.state import resident_bytes, state_bytes
from derive.architectures.decoder import GPT, LLAMA
from derive.architectures.tables import layer_gemms
from derive.architectures.gemms import flops
from derive.presets import ARTICLE_EXAMPLE, hardware, model
from derive.symbols import FFN_4H, b, h, s
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


def state_of(name: str, precision: str, account: str | None = None) -> Callable[[], sp.Expr]:
    def derive() -> sp.Expr:
        held = state_bytes(precision, "adam")
        return model(name).at(held.total if account is None else getattr(held, account))
    return derive


def cards_for(name: str, per_card: sp.Expr) -> Callable[[], sp.Expr]:
    return lambda: model(name).at(resident_bytes("bf16", "adam")) / per_card


def activations_at(name: str, expr: sp.Expr, micro_batch: int = 1) -> Callable[[], sp.Expr]:
    """Activation bytes ``expr`` at preset ``name`` (s = 8192) and micro-batch ``micro_batch``."""
    return lambda: model(name).subs(expr, b=micro_batch)


def per_token(name: str) -> sp.Expr:
    """Model FLOPs per token of preset ``name``: GEMM tables, causal scores, no recompute."""
    return model(name).subs(flops_per_token(LLAMA, "causal"))


def sequence_seconds(name: str) -> sp.Expr:
    """One s-token sequence on one H100 at peak (the article, section 6.4)."""
    return step_time_lower_bound(model(name).seq, per_token(name), 1, PEAK)


def step_seconds(mfu_target: sp.Expr = 1, gpus: int = STEP_GPUS) -> sp.Expr:
    return step_time_lower_bound(STEP_TOKENS, per_token(EXAMPLE.model), gpus, PEAK, mfu_target)


def training_days(gpus: int) -> sp.Expr:
    """15T tokens at 40 % MFU on ``gpus`` H100s, in days (the article, section 6.4)."""
    steps = sp.Rational(PRETRAINING_TOKENS, STEP_TOKENS)
    return steps * step_seconds(EXAMPLE.target_mfu, gpus) / DAY


def observed_mfu() -> sp.Expr:
    return mfu(sp.Rational(STEP_TOKENS) / STEP_SECONDS, per_token("llama3-70b"), STEP_GPUS, PEAK)


def score_to_weight_flops(sequence: int) -> sp.Expr:
    """A GPT layer's causal score FLOPs over its weight FLOPs at f = 4h, h = 8192: s/12h."""
    layer = layer_gemms(GPT, "causal")
    ratio = flops(layer.where("attention_score")) / flops(layer.where("weight"))
    return ratio.subs(FFN_4H).subs({h: 8192, s: sequence})


def per_sbh(expr: sp.Expr) -> sp.Expr:
    return sp.cancel(expr / SBH)


#: Megatron's per-layer bytes on one rank (SP + selective, t = 1): sbh(18 + 4f/h).
MEGATRON_LAYER = layer_activation_bytes(**megatron_activations.MEGATRON_LAYER)
SCORES = layer_activations("gpt").where("score_matrix").bytes()
MATERIALISED = layer_activation_bytes("gpt", softmax_statistics=False).subs(FFN_4H)


H100 = sp.Integer(hardware("h100").memory_bytes)
GIB_70 = 70 * BYTE_UNITS["GiB"]
GB_70 = 70 * BYTE_UNITS["GB"]
MIXED_UP_70 = "70 GB (10^9 bytes) in place of 70 GiB"
