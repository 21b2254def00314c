"""Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models" (Chinchilla, arXiv 2203.15556), Appendix F.

Appendix F counts the forward FLOPs of one sequence operation by operation,
with key_size x num_heads free of d_model, a dense block of two d_model x
ffw_size matrices, and the backward pass at twice the forward. Each GEMM term
is read off derive's GPT tables at head width k (``layer_parameters(GPT, head_dim=k)`` and the score
GEMMs at width k), per sequence (s tokens): seq_len = s, d_model = h,
ffw_size = f, num_heads = a, key_size = k, vocab_size = V.

What cannot be reproduced (Table A4) is stated in the document's scope below.
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.decoder import GPT
from derive.architectures.tables import layer_parameters, output_gemms
from derive.architectures.gemms import attention_score_gemms, flops, weight_gemms
from derive.accounts.flops import flops_per_token
from derive.claims import EXACT, Alternative, document
from derive.claims._papers import as_printed, input_embedding_flops
from derive.conventions import CONVENTIONS
from derive.symbols import L, V, a, f, h, k, s

_claim = document(
    "Hoffmann et al. 2022", "arXiv 2203.15556, Training Compute-Optimal Large Language Models "
    "(Chinchilla)",
    "Appendix F is checked term by term against a public transcription of it, Table A4 against a "
    "full-text copy of the paper. Table A4's sequence length is not "
    "printed: s = 2048 is assumed (nanoGPT's scaling_laws.ipynb reproduces the table with it). Rows "
    "73M and 1.1B are not reproduced by any reading: the ratio needs the unrounded parameter count, "
    "which includes relative-position parameters that derive's GPT table does not hold."
).claim

QKV, PROJECT = "attention.query_key_value.weight", "attention.dense.weight"
FC1, FC2 = "mlp.dense_h_to_4h.weight", "mlp.dense_4h_to_h.weight"
NOT_A_GEMM = "derive's FLOP count is GEMMs only (derive.architectures.gemms)"
#: Appendix F, transcribed term by term (and the backward pass as twice the forward: x3 in all).
APPENDIX_F = ("public Gradio calculator 'described in DeepMind's Chinchilla scaling law paper (see "
              "Appendix F)' (deepmind_flops: embeddings 2 n_ctx n_vocab d_model, QKV, logits, softmax "
              "3 n_heads n_ctx^2, reductions, project, dense block, final logits; forward x 3)")


def claim(*args: object, **kwargs: object) -> object:
    """Register an Appendix F claim, read against the transcription above."""
    return _claim(*args, checked_against=APPENDIX_F, **kwargs)


def _weights(*names: str) -> sp.Expr:
    """Forward FLOPs of one sequence through the named weight GEMMs of a GPT layer at head width k."""
    layer = weight_gemms(layer_parameters(GPT, head_dim=k)).filter(lambda gemm: gemm.name in names)
    return sp.expand(s * flops(layer, "forward"))


def _score(name: str) -> sp.Expr:
    """Forward FLOPs of one sequence through QK^T or PV over the full square, a heads of width k."""
    gemms = attention_score_gemms("full", a, k).filter(lambda gemm: gemm.name.startswith(name))
    return sp.expand(s * flops(gemms, "forward"))


def _layer_forward() -> sp.Expr:
    """One layer's GEMMs, one sequence, forward: projections, scores, dense block."""
    return sp.expand(s * (flops(weight_gemms(layer_parameters(GPT, head_dim=k)), "forward")
                          + flops(attention_score_gemms("full", a, k), "forward")))


def _model_forward() -> sp.Expr:
    return sp.expand(L * _layer_forward() + s * flops(output_gemms(GPT), "forward"))


claim("hoffmann.F.embeddings", "Appendix F", "embeddings: 2 x seq_len x vocab_size x d_model",
      2 * s * V * h, "FLOP", EXACT, lambda: s * input_embedding_flops(),
      alternative=Alternative("the lookup read as a one-hot [V] x [V, h] product (the output "
                              "head's GEMM, transposed)",
                              lambda: sp.expand(s * flops(output_gemms(GPT), "forward"))),
      note=NOT_A_GEMM + ": derive counts the input embedding lookup as an index (0 FLOPs)")
claim("hoffmann.F.kqv", "Appendix F", "key, query and value projections: 2 x 3 x seq_len x d_model "
      "x (key_size x num_heads)", 2 * 3 * s * h * (k * a), "FLOP", EXACT, lambda: _weights(QKV))
claim("hoffmann.F.logits", "Appendix F", "key @ query logits: 2 x seq_len x seq_len x (key_size x "
      "num_heads)", 2 * s * s * (k * a), "FLOP", EXACT, lambda: _score("attention.scores"),
      note="the full square: no causal halving")
claim("hoffmann.F.softmax", "Appendix F", "softmax: 3 x num_heads x seq_len x seq_len",
      3 * a * s * s, "FLOP", EXACT,
      lambda: sp.expand(s * flops(attention_score_gemms("full", a, k), "forward"))
      - _score("attention.scores") - _score("attention.context"),
      note=NOT_A_GEMM + ": softmax is elementwise (exp, sum, divide), outside derive's count")
claim("hoffmann.F.reductions", "Appendix F", "softmax @ query reductions: 2 x seq_len x seq_len x "
      "(key_size x num_heads)", 2 * s * s * (k * a), "FLOP", EXACT,
      lambda: _score("attention.context"))
claim("hoffmann.F.final-linear", "Appendix F", "final linear: 2 x seq_len x (key_size x num_heads) "
      "x d_model", 2 * s * (k * a) * h, "FLOP", EXACT, lambda: _weights(PROJECT))
claim("hoffmann.F.dense-block", "Appendix F", "dense block: 2 x seq_len x (d_model x ffw_size + "
      "d_model x ffw_size)", 2 * s * (h * f + h * f), "FLOP", EXACT, lambda: _weights(FC1, FC2))
claim("hoffmann.F.final-logits", "Appendix F", "final logits: 2 x seq_len x d_model x vocab_size",
      2 * s * h * V, "FLOP", EXACT, lambda: sp.expand(s * flops(output_gemms(GPT), "forward")))
_ATTENTION = 2 * 3 * s * h * (k * a) + 2 * s * s * (k * a) + 3 * a * s * s + 2 * s * s * (k * a) \
    + 2 * s * (k * a) * h
_FORWARD = 2 * s * V * h + L * (_ATTENTION + 2 * s * (h * f + h * f)) + 2 * s * h * V
claim("hoffmann.F.total-forward", "Appendix F", "total forward: embeddings + num_layers x (total "
      "attention + dense block) + logits", _FORWARD, "FLOP", EXACT, _model_forward,
      alternative=Alternative("the 'hoffmann' convention (derive.conventions: Appendix F's count, "
                              "one-hot embedding and softmax included) over one sequence's forward",
                              lambda: sp.expand(s * CONVENTIONS["hoffmann"]("gpt") / 3)),
      note="derive's GEMMs miss the embedding product (2sVh) and softmax (3as^2 per layer)")
claim("hoffmann.F.backward", "Appendix F", "backward pass = 2 x forward pass", 2, "x", EXACT,
      lambda: sp.cancel((L * s * (flops(weight_gemms(layer_parameters(GPT, head_dim=k)), "dgrad", "wgrad")
                                  + flops(attention_score_gemms("full", a, k), "dgrad"))
                         + s * flops(output_gemms(GPT), "dgrad", "wgrad")) / _model_forward()))


# --- Table A4: Appendix F's count over 6ND at six shapes ---------------------------------------
FULLTEXT = "a full-text copy of arXiv 2203.15556 (ar5iv-style)"
TABLE_A4_READ = (f"{FULLTEXT}, Appendix F, Table A4: parameters / layers / d_model / ffw_size / "
                 "heads / k/q size / FLOP ratio (ours/6ND): 73M 10 640 2560 10 64 1.03; 305M 20 1024 "
                 "4096 16 64 1.10; 552M 24 1280 5120 10 128 1.08; 1.1B 26 1792 7168 14 128 1.04; 1.6B "
                 "28 2048 8192 16 128 1.03; 6.8B 40 3584 14336 28 128 0.99; vocabulary 32,000 (Table "
                 "A8)")
#: Table A4 as printed: parameters (as named), layers, d_model, ffw_size, heads, key size, ratio.
TABLE_A4 = (("73M", 73 * 10**6, 10, 640, 2560, 10, 64, "1.03"),
            ("305M", 305 * 10**6, 20, 1024, 4096, 16, 64, "1.10"),
            ("552M", 552 * 10**6, 24, 1280, 5120, 10, 128, "1.08"),
            ("1.1B", 11 * 10**8, 26, 1792, 7168, 14, 128, "1.04"),
            ("1.6B", 16 * 10**8, 28, 2048, 8192, 16, 128, "1.03"),
            ("6.8B", 68 * 10**8, 40, 3584, 14336, 28, 128, "0.99"))
#: Table A8: vocabulary; the sequence length Table A4 assumes is not printed (2048 assumed).
A4_VOCAB, A4_SEQ = 32000, 2048
_A4_WHY = ("derive's count is GEMMs only: no softmax (3as^2 per layer) and no embedding product, "
           "but the output head's 2sVh")
_A4_UNROUNDED = ("; the ratio needs the unrounded parameter count (the table prints {0}), which "
                 "includes relative-position parameters derive's GPT table does not hold")


def _a4(per_token: sp.Expr, parameters: int, layers: int, hidden: int, ffw: int, heads: int,
        key: int) -> sp.Expr:
    """FLOPs of one sequence over 6ND for it (D = s tokens, N = Table A4's parameters)."""
    values = {L: layers, h: hidden, f: ffw, a: heads, k: key, V: A4_VOCAB, s: A4_SEQ}
    return per_token.xreplace(values) / (6 * sp.Integer(parameters))


for _name, _n, _layers, _hidden, _ffw, _heads, _key, _ratio in TABLE_A4:
    _shape = (_n, _layers, _hidden, _ffw, _heads, _key)
    _rounded = _name in ("73M", "1.1B")
    _claim(f"hoffmann.tableA4.{_name}-ratio", "Table A4", f"{_name} ({_layers} layers, d_model "
           f"{_hidden}, {_heads} heads of {_key}): Appendix F's count is {_ratio} x 6ND",
           float(_ratio), "ratio", as_printed(_ratio),
           lambda _shape=_shape: _a4(flops_per_token(GPT, "full"), *_shape),
           alternative=Alternative(
               "Appendix F's count (derive.conventions 'hoffmann') without its embedding and logit "
               "terms (V = 0), as nanoGPT's scaling_laws.ipynb reports the authors confirmed",
               lambda _shape=_shape: _a4(CONVENTIONS["hoffmann"]("gpt").subs(V, 0), *_shape)),
           note=_A4_WHY + (_A4_UNROUNDED.format(_name) if _rounded else ""),
           checked_against=TABLE_A4_READ)
