"""Published and framework FLOP and memory conventions: the CLAIM side, never a default.

``published`` holds the papers' per-token counts (6N, Kaplan, PaLM, Narayanan);
``megatron`` holds what Megatron-LM types into its code (num_floating_point_operations,
its precision recipes, the 1.05 overhead). :data:`CONVENTIONS` names every per-token
count the sheet and the report evaluate; ``derive.identities.flops`` proves each
against the count derived GEMM by GEMM.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sympy as sp

from derive.accounts.flops import flops_per_token
from derive.architectures.decoder import FAMILIES
from derive.conventions.megatron import (
    MEGATRON_OVERHEAD,
    MEGATRON_RECIPES,
    distributed_optimizer_bytes_per_parameter,
    megatron,
    megatron_num_floating_point_operations,
)
from derive.conventions.published import (
    eight_n,
    hoffmann,
    kaplan,
    kaplan_forward,
    korthikanti_selective,
    layer_gemm_parameters,
    narayanan,
    narayanan_recompute,
    palm,
    six_n,
    six_n_gemm,
)
from derive.conventions.torchtitan import torchtitan


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
    Convention("derive-causal", lambda family: flops_per_token(FAMILIES[family], "causal"),
               "derived GEMM by GEMM (derive.architectures.gemms); the article, section 6.2",
               ("QK^T and PV over s/2 keys on average (causal mask, Megatron's / 2)", "no recompute")),
    Convention("derive-full", lambda family: flops_per_token(FAMILIES[family], "full"),
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
    Convention("torchtitan", torchtitan,
               "torchtitan 0.3.0, torchtitan/models/utils.py get_dense_model_nparams_and_flops (llama3 "
               "Llama3Model.Config.get_nparams_and_flops, head_dims = 2 h/a)",
               ("6 x every parameter but an untied input embedding (norm weights included)",
                "attention: 6 L a (2 h/a) s = 12Lsh, full score square, no causal halving",
                "= PaLM's count minus the 6Vh input embedding; no recompute")),
)}

__all__ = [
    "CONVENTIONS", "Convention", "MEGATRON_OVERHEAD", "MEGATRON_RECIPES",
    "distributed_optimizer_bytes_per_parameter", "eight_n", "hoffmann", "kaplan", "kaplan_forward",
    "korthikanti_selective", "layer_gemm_parameters",
    "megatron", "megatron_num_floating_point_operations", "narayanan", "narayanan_recompute", "palm",
    "six_n", "six_n_gemm", "torchtitan",
]
