"""Published per-token FLOP counts (Kaplan, PaLM, Narayanan, Korthikanti, Chinchilla) and ZeRO's activation estimate: the CLAIM side, each literal form with its source.

Called without a family each is the paper's form in its own symbols (N, k, the
identities prove it); with a family it is read on that family's tables (the
sheet and the report evaluate it). ``derive.identities.flops`` proves where each
equals the count derived GEMM by GEMM (``derive.accounts.flops``) and where it departs.
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.decoder import FAMILIES
from derive.architectures.gemms import Gemm, flops
from derive.architectures.tables import model_gemms, model_parameters, parameter_count
from derive.dtypes import dtype_bytes
from derive.inputs import choose
from derive.symbols import L, N, V, a, b, f, h, k, s


def six_n(family: str | None = None) -> sp.Expr:
    """6N with N = every parameter (Kaplan et al. 2020, section 2.1): 6 = the three passes of a 1 x 1 weight GEMM."""
    per_parameter = Gemm("one parameter", 1, 1, 1, {"weight"}).training
    return per_parameter * (N if family is None else parameter_count(FAMILIES[family]))


def six_n_gemm(family: str = "llama") -> sp.Expr:
    """6 N_GEMM: the weight GEMMs alone (no attention scores)."""
    return flops(model_gemms(FAMILIES[family], "none"))


def layer_gemm_parameters(family: str = "llama") -> sp.Expr:
    """Kaplan's non-embedding N: the layers' weight matrices (biases and norms neglected)."""
    return model_parameters(FAMILIES[family]).where("gemm", "layer").numel()


def kaplan_forward(family: str | None = None) -> sp.Expr:
    """Kaplan et al. 2020, Table 1: C_forward = 2N + 2 n_layer n_ctx d_attn (N non-embedding, d_attn = h)."""
    return 2 * (N if family is None else layer_gemm_parameters(family)) + 2 * L * s * h


def kaplan(family: str | None = None) -> sp.Expr:
    """Kaplan et al. 2020, section 2.1: training = 3 C_forward (backward ~ 2x forward)."""
    return 3 * kaplan_forward(family)


def palm(family: str | None = None) -> sp.Expr:
    """Chowdhery et al. 2022 (PaLM), appendix B: 6N + 12LHQT with H Q = a k (k = h/a on a family), T = s."""
    if family is None:
        return 6 * N + 12 * L * a * k * s
    return 6 * parameter_count(FAMILIES[family]) + 12 * L * a * (h / a) * s


def narayanan(family: str | None = None) -> sp.Expr:
    """Narayanan et al. 2021, section 5.1 / appendix: 72Bslh^2(1 + s/6h + V/12lh), per token (/ Bs); GPT layer, any family's shape."""
    return 72 * L * h**2 * (1 + s / (6 * h) + V / (12 * L * h))


def narayanan_recompute(family: str | None = None) -> sp.Expr:
    """Narayanan et al. 2021, section 5.1: 96Bslh^2(1 + s/6h + V/16lh) with activation recompute, per token."""
    return 96 * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h))


def eight_n(family: str | None = None) -> sp.Expr:
    """Narayanan et al. 2021, Eq. 4 (training time ~ 8TP/nX): 8N per token, forward + backward + recomputed forward."""
    return 8 * (N if family is None else parameter_count(FAMILIES[family]))


def hoffmann(family: str = "gpt") -> sp.Expr:
    """Hoffmann et al. 2022 (Chinchilla), Appendix F, per token: 3 x forward, one-hot embedding and softmax counted."""
    matrices = 3 if choose("family", family, ("llama", "gpt")) == "llama" else 2   # SwiGLU or fc1/fc2
    attention = 2 * 3 * h * (k * a) + 2 * s * (k * a) + 3 * a * s + 2 * s * (k * a) + 2 * (k * a) * h
    forward = 2 * V * h + L * (attention + 2 * matrices * h * f) + 2 * h * V
    return 3 * forward


def korthikanti_selective(family: str | None = None) -> sp.Expr:
    """Korthikanti et al. 2022, Appendix A, Eq. 8: 72Bslh^2(1 + s/3h + V/12lh) with selective recompute, per token (/ Bs)."""
    return 72 * L * h**2 * (1 + s / (3 * h) + V / (12 * L * h))


def rajbhandari_activations() -> sp.Expr:
    """Rajbhandari et al. 2020 (ZeRO), section 3.2, footnote 3: 'total activations is about 12 x hidden dim x batch x seq length x transformer layers', in fp16 bytes."""
    return dtype_bytes("fp16") * 12 * h * b * s * L
