"""Published per-token FLOP counts: the CLAIM side, each literal form with its source.

Kaplan et al. 2020, PaLM (Chowdhery et al. 2022), Narayanan et al. 2021 and
Megatron-LM's ``num_floating_point_operations`` each count training FLOPs
their own way; every one is a named :class:`Convention` here, never a
default. ``derive.identities.flops`` proves where each equals the count
derived GEMM by GEMM (``derive.accounts.flops``) and where it departs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sympy as sp

from derive.accounts.flops import Number, flops_per_token
from derive.architectures.gemms import Gemm, flops, model_gemms
from derive.architectures.parameters import model_parameters, parameter_count
from derive.inputs import choose
from derive.symbols import L, N, V, a, f, g, h, k, s


def six_n(family: str | None = None) -> sp.Expr:
    """6N with N = every parameter (Kaplan et al. 2020, section 2.1): 6 = the three passes of a 1 x 1 weight GEMM."""
    per_parameter = Gemm("one parameter", 1, 1, 1, {"weight"}).training
    return per_parameter * (N if family is None else parameter_count(family))


def six_n_gemm(family: str = "llama") -> sp.Expr:
    """6 N_GEMM: the weight GEMMs alone (no attention scores)."""
    return flops(model_gemms(family, "none"))


def layer_gemm_parameters(family: str = "llama") -> sp.Expr:
    """Kaplan's non-embedding N: the layers' weight matrices (biases and norms neglected)."""
    return model_parameters(family).where("gemm", "layer").numel()


def kaplan_forward(family: str = "llama") -> sp.Expr:
    """Kaplan et al. 2020, Table 1: C_forward = 2N + 2 n_layer n_ctx d_attn (N non-embedding, d_attn = h)."""
    return 2 * layer_gemm_parameters(family) + 2 * L * s * h


def kaplan(family: str = "llama") -> sp.Expr:
    """Kaplan et al. 2020, section 2.1: training = 3 C_forward (backward ~ 2x forward)."""
    return 3 * kaplan_forward(family)


def palm(family: str = "llama") -> sp.Expr:
    """Chowdhery et al. 2022 (PaLM), appendix B: 6N + 12LHQT with H Q = a k = h, T = s."""
    return 6 * parameter_count(family) + 12 * L * a * (h / a) * s


def narayanan(family: str = "gpt") -> sp.Expr:
    """Narayanan et al. 2021, section 5.1 / appendix: 72Bslh^2(1 + s/6h + V/12lh), per token (/ Bs)."""
    return 72 * L * h**2 * (1 + s / (6 * h) + V / (12 * L * h))


def narayanan_recompute(family: str = "gpt") -> sp.Expr:
    """Narayanan et al. 2021, section 5.1: 96Bslh^2(1 + s/6h + V/16lh) with activation recompute, per token."""
    return 96 * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h))


def eight_n(family: str | None = None) -> sp.Expr:
    """Narayanan et al. 2021, Eq. 4 (training time ~ 8TP/nX): 8N per token, forward + backward + recomputed forward."""
    return 8 * (N if family is None else parameter_count(family))


def hoffmann(family: str = "gpt") -> sp.Expr:
    """Hoffmann et al. 2022 (Chinchilla), Appendix F, per token: 3 x forward, one-hot embedding and softmax counted."""
    matrices = 3 if choose("family", family, ("llama", "gpt")) == "llama" else 2   # SwiGLU or fc1/fc2
    attention = 2 * 3 * h * (k * a) + 2 * s * (k * a) + 3 * a * s + 2 * s * (k * a) + 2 * (k * a) * h
    forward = 2 * V * h + L * (attention + 2 * matrices * h * f) + 2 * h * V
    return 3 * forward


def korthikanti_selective(family: str = "gpt") -> sp.Expr:
    """Korthikanti et al. 2022, Appendix A, Eq. 8: 72Bslh^2(1 + s/3h + V/12lh) with selective recompute, per token (/ Bs)."""
    return 72 * L * h**2 * (1 + s / (3 * h) + V / (12 * L * h))


def megatron_num_floating_point_operations(tokens: Number, seqlen_squared_sum: Number, *,
                                           swiglu: bool, query_groups: Number = g,
                                           kv_channels: Number = k, output_gate: bool = False) -> sp.Expr:
    """megatron/training/training.py num_floating_point_operations (transformer_flops, dense, core_v0.18.0), one batch."""
    passes, fma = 3, 2                                   # forward_backward_ and fma_expansion_factor
    ffn = 3 if swiglu else 2                             # ffn_expansion_factor
    q = kv_channels * a                                  # query_projection_size
    kv = kv_channels * query_groups                      # key_ and value_projection_size
    gate = q if output_gate else 0
    linear = passes * fma * (L * (h * (q + 2 * kv + gate) + q * h + h * f * ffn) + h * V)
    core = passes * fma * q / 2 * 2 * L                  # "/ 2 causal mask", "* 2 QK^T and (QK^T)V"
    return sp.expand(tokens * linear + seqlen_squared_sum * core)


def megatron(family: str = "llama") -> sp.Expr:
    """Megatron's count per token for one unpacked sequence of s tokens (sum of s_i^2 / tokens = s)."""
    llama = choose("family", family, ("llama", "gpt")) == "llama"
    return megatron_num_floating_point_operations(1, s, swiglu=llama, query_groups=g if llama else a)


@dataclass(frozen=True)
class Convention:
    """A named way to count training FLOPs per token, with its source and assumptions."""

    name: str
    per_token: Callable[[str], sp.Expr]
    source: str
    assumptions: tuple[str, ...]

    def __call__(self, family: str = "llama") -> sp.Expr:
        """FLOPs per token of a ``family`` model under this convention."""
        return self.per_token(family)


CONVENTIONS: dict[str, Convention] = {c.name: c for c in (
    Convention("6N", six_n, "Kaplan et al. 2020, section 2.1 (C ~ 6N); the article, section 6.1",
               ("N = every parameter, input embedding and norms included",
                "no attention-score term, no recompute")),
    Convention("6N_GEMM", six_n_gemm, "the article, section 6.1 (N_GEMM: layer matrices + output head)",
               ("weight GEMMs only: no input lookup, norms or biases", "no attention-score term")),
    Convention("derive-causal", lambda family: flops_per_token(family, "causal"),
               "derived GEMM by GEMM (derive.architectures.gemms); the article, section 6.2",
               ("QK^T and PV over s/2 keys on average (causal mask, Megatron's / 2)", "no recompute")),
    Convention("derive-full", lambda family: flops_per_token(family, "full"),
               "derived GEMM by GEMM (derive.architectures.gemms); the article, section 6.2",
               ("QK^T and PV over all s keys (no mask skipping)", "no recompute")),
    Convention("kaplan", kaplan, "Kaplan et al. 2020, Table 1 and section 2.1 (3 x C_forward)",
               ("N = non-embedding parameters: layer matrices only (biases, norms neglected)",
                "attention: 2 n_layer n_ctx d_attn forward (QK^T over the full context only)",
                "de-embedding (output head) FLOPs left out of the total", "no recompute")),
    Convention("palm", palm, "Chowdhery et al. 2022 (PaLM), appendix B: 6N + 12LHQT",
               ("N = every parameter (as quoted; PaLM ties input and output embeddings)",
                "H Q = a k = h; T = s; full score square, no causal halving", "no recompute")),
    Convention("narayanan", narayanan,
               "Narayanan et al. 2021 (Megatron-LM at scale), section 5.1: 72Bslh^2(1 + s/6h + V/12lh) / Bs",
               ("GPT layer, f = 4h, MHA; biases and norms neglected",
                "full score square, no causal halving", "logit layer counted (6hV)", "no recompute")),
    Convention("narayanan-recompute", narayanan_recompute,
               "Narayanan et al. 2021, section 5.1: 96Bslh^2(1 + s/6h + V/16lh) / Bs",
               ("as 'narayanan'", "full activation recompute of every layer (one extra layer forward)",
                "the logit layer is not recomputed (its term stays 6hV): HARDWARE FLOPs")),
    Convention("hoffmann", hoffmann,
               "Hoffmann et al. 2022 (Chinchilla), Appendix F: per-operation forward count, "
               "backward = 2 x forward",
               ("input embedding counted as a one-hot product (2Vh)", "softmax counted (3as per "
                "layer)", "full score square, no causal halving", "key_size x num_heads = a k; "
                "dense block: the family's FFN matrices", "MHA projections (3 a k wide; no GQA)",
                "no recompute")),
    Convention("narayanan-8P", eight_n,
               "Narayanan et al. 2021, section 5.1, Eq. 4: training time ~ 8TP/(nX)",
               ("N = every parameter", "2 forward + 4 backward + 2 recomputed forward FLOPs per "
                "parameter", "no attention-score or logit term")),
    Convention("korthikanti-selective", korthikanti_selective,
               "Korthikanti et al. 2022, Appendix A, Eq. 8: 72Bslh^2(1 + s/3h + V/12lh) / Bs",
               ("GPT layer, f = 4h, MHA; biases and norms neglected",
                "full score square, no causal halving",
                "selective recompute counted as 12Bs^2h per layer: three times the forward of "
                "QK^T and PV (derive's selective recompute runs it once: 4Bs^2h)",
                "HARDWARE FLOPs (the paper's HFU numerator in Table 5)")),
    Convention("megatron", megatron,
               "megatron/training/training.py num_floating_point_operations (core_v0.18.0), per token",
               ("3 passes x 2 FLOP per multiply-add over the layer GEMMs and one h x V logit GEMM",
                "SwiGLU factor 3 (llama) or 2 (gpt); GQA kv width g k; kv_channels k = h/a",
                "attention over sum s_i^2 with causal / 2; one unpacked sequence gives s per token",
                "V is the padded vocabulary; no recompute (model FLOPs)")),
)}
