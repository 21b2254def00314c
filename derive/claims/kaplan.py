"""Kaplan et al. 2020, "Scaling Laws for Neural Language Models" (arXiv 2001.08361), Table 1 and section 2.1.

Table 1 counts parameters and forward FLOPs per token of a GPT-style decoder,
operation by operation, with d_attn = d_model (a heads of width h/a), d_ff
free, biases and norms neglected. Each row is read off derive's GPT parameter
table (``derive.architectures.tables.layer_parameters`` / ``edge_parameters`` of the GPT layout) and GEMM
table (``derive.architectures.tables.layer_gemms``): n_layer = L, d_model = h, d_ff = f,
n_ctx = s, n_vocab = V.
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.decoder import GPT
from derive.architectures.gemms import flops
from derive.architectures.tables import edge_parameters, layer_gemms, layer_parameters, output_gemms
from derive.claims import EXACT, Alternative, document
from derive.claims._papers import input_embedding_flops
from derive.symbols import FFN_4H, L, V, f, h, s

claim = document("Kaplan et al. 2020", "arXiv 2001.08361, Scaling Laws for Neural Language "
                 "Models", "Every claim read in a Markdown copy of the paper's ar5iv page (section "
                 "2.1 and Table 1, both columns). The scaling-law fits (exponents, N_c, D_c) are "
                 "measurements, not accounts, and are not checked.").claim

#: The paper's section 2.1 and Table 1 (parameters and FLOPs columns), as copied from ar5iv.
PAPER = ("a Markdown copy of https://ar5iv.labs.arxiv.org/html/2001.08361 (section 2.1 and "
         "Table 1 with both columns)")

#: Table 1's FLOPs column, transcribed row by row in public code and discussed on the HF forum.
TABLE1_FLOPS = ("public code transcribing Table 1's FLOPs column (openai_flops_per_token: embeddings "
                "4 d_model, QKV, mask 2 n_layer n_ctx d_attn, project, feedforward, logits 2 d_model "
                "n_vocab) and "
                "https://discuss.huggingface.co/t/understanding-flops-per-token-estimates-from-"
                "openais-scaling-laws/23133 (C_forward = 2N + the mask term; de-embed left out)")

QKV, PROJECT = "attention.query_key_value.weight", "attention.dense.weight"
FC1, FC2 = "mlp.dense_h_to_4h.weight", "mlp.dense_4h_to_h.weight"
WEIGHTS = (QKV, PROJECT, FC1, FC2)
BOTH = f"{PAPER}; {TABLE1_FLOPS}"
#: derive counts GEMMs: a lookup and an addition are not.
NOT_A_GEMM = ("derive's FLOP count is GEMMs only (derive.architectures.gemms): the embedding "
              "lookup is an index, not a GEMM, and adding the position embedding is elementwise")


def _params(*names: str) -> sp.Expr:
    """L x the named weight matrices of derive's GPT layer (no biases)."""
    layer = layer_parameters(GPT)
    return sp.expand(L * sum(layer[name].numel for name in names))


def _forward(*names: str, attention: str = "causal") -> sp.Expr:
    """L x the forward FLOPs per token of the named GEMMs of derive's GPT layer."""
    layer = layer_gemms(GPT, attention).filter(lambda gemm: gemm.name in names)
    return sp.expand(L * flops(layer, "forward"))


def _scores(attention: str) -> sp.Expr:
    return sp.expand(L * flops(layer_gemms(GPT, attention).where("attention_score"), "forward"))


# --- Table 1, row by row ------------------------------------------------------------------------
claim("kaplan.table1.embed-parameters", "Table 1", "Embed: (n_vocab + n_ctx) d_model parameters",
      (V + s) * h, "parameters", EXACT,
      lambda: edge_parameters(GPT).where("embedding").numel() + edge_parameters(GPT).where("position").numel(),
      checked_against=PAPER)
claim("kaplan.table1.embed-flops", "Table 1", "Embed: 4 d_model FLOPs per token", 4 * h, "FLOP",
      EXACT, input_embedding_flops, note=NOT_A_GEMM, checked_against=BOTH)
claim("kaplan.table1.qkv-parameters", "Table 1", "Attention QKV: n_layer d_model 3 d_attn",
      L * h * 3 * h, "parameters", EXACT, lambda: _params(QKV),
      checked_against=PAPER)
claim("kaplan.table1.qkv-flops", "Table 1", "Attention QKV: 2 n_layer d_model 3 d_attn FLOPs",
      2 * L * h * 3 * h, "FLOP", EXACT, lambda: _forward(QKV), checked_against=BOTH)
claim("kaplan.table1.mask-flops", "Table 1", "Attention mask: 2 n_layer n_ctx d_attn FLOPs",
      2 * L * s * h, "FLOP", EXACT, lambda: _scores("causal"),
      note="holds for QK^T and PV together over the causal half (s/2 keys on average); Kaplan's "
           "row names QK^T over the whole context only, which is the same number",
      checked_against=BOTH)
claim("kaplan.table1.project-parameters", "Table 1", "Attention project: n_layer d_attn d_model",
      L * h * h, "parameters", EXACT, lambda: _params(PROJECT),
      checked_against=PAPER)
claim("kaplan.table1.project-flops", "Table 1", "Attention project: 2 n_layer d_attn d_embd FLOPs",
      2 * L * h * h, "FLOP", EXACT, lambda: _forward(PROJECT), checked_against=BOTH)
claim("kaplan.table1.ffn-parameters", "Table 1", "Feedforward: n_layer 2 d_model d_ff",
      L * 2 * h * f, "parameters", EXACT, lambda: _params(FC1, FC2),
      checked_against=PAPER)
claim("kaplan.table1.ffn-flops", "Table 1", "Feedforward: 2 n_layer 2 d_model d_ff FLOPs",
      2 * L * 2 * h * f, "FLOP", EXACT, lambda: _forward(FC1, FC2), checked_against=BOTH)
claim("kaplan.table1.deembed-flops", "Table 1", "De-embed: 2 d_model n_vocab FLOPs", 2 * h * V,
      "FLOP", EXACT, lambda: flops(output_gemms(GPT), "forward"), checked_against=BOTH)
claim("kaplan.table1.total-parameters", "Table 1", "total non-embedding N = 2 d_model n_layer "
      "(2 d_attn + d_ff)", 2 * h * L * (2 * h + f), "parameters", EXACT, lambda: _params(*WEIGHTS),
      alternative=Alternative("every non-embedding parameter of derive's GPT table (biases and "
                              "norms included, which Kaplan neglects)",
                              lambda: sp.expand(L * layer_parameters(GPT).numel())),
      checked_against=PAPER)
claim("kaplan.table1.total-forward", "Table 1", "C_forward = 2N + 2 n_layer n_ctx d_attn",
      2 * 2 * h * L * (2 * h + f) + 2 * L * s * h, "FLOP", EXACT,
      lambda: _forward(*WEIGHTS) + _scores("causal"),
      note="the layers' forward with causal scores; the de-embedding is left out of C_forward",
      checked_against=BOTH)

# --- section 2.1 ---------------------------------------------------------------------------------
claim("kaplan.2.1.n-12-l-h2", "2.1", "N ~ 12 n_layer d_model^2 with d_attn = d_ff/4 = d_model",
      12 * L * h**2, "parameters", EXACT, lambda: _params(*WEIGHTS).subs(FFN_4H),
      checked_against=PAPER)
claim("kaplan.2.1.c-6n", "2.1", "training compute C ~ 6N per token: the backward pass is twice the "
      "forward", 6, "x", EXACT,
      lambda: sp.cancel(flops(layer_gemms(GPT, "none")) / _params(*WEIGHTS).subs(L, 1)),
      checked_against=f"{PAPER} (section 2.1: C ~ 6N; section 3.3: C = 6NBS); "
                      "https://rainy-amount-ca8.notion.site/Scaling-Laws-for-Neural-Language-Models-"
                      "218f138c207e80e482eef0b45d00587f (notes on section 1.3: 'C: compute used for "
                      "training (6NBS)', N without embeddings)")
claim("kaplan.2.1.backward-2x", "2.1", "the backward pass costs twice the forward", 2, "x", EXACT,
      lambda: sp.cancel(flops(layer_gemms(GPT, "causal"), "dgrad", "wgrad")
                        / flops(layer_gemms(GPT, "causal"), "forward")),
      checked_against=PAPER + " (section 2.1: 'approximately twice the compute as the forwards pass')")
claim("kaplan.2.1.context-share", "2.1", "the context term over 2N is n_ctx/(12 d_model) at "
      "d_attn = d_ff/4 = d_model", s / (12 * h), "ratio", EXACT,
      lambda: sp.cancel((_scores("causal") / _forward(*WEIGHTS)).subs(FFN_4H)),
      checked_against=PAPER + " (section 2.1 prints C_forward ~ 2N + 2 n_layer n_ctx d_model and "
                              "the threshold d_model > n_ctx/12, where this ratio is 1)")
