"""Departures of transformers' saved tensors from the forms that hold at every other shape (issue 31).

Each is a row of derive's transformers tables (``derive.architectures.saved``,
``derive.architectures.operations.edges``) that exists only under a condition, held against the form a
reader would write without it. Measured exactly against transformers 5.23 /
PyTorch 2.13 (CPU, bf16) by ``python -m derive.validate --hf``.
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.operations.attention import hf_eager_attention, hf_sdpa_attention
from derive.architectures.operations.edges import gemma_edges_saved, hf_edges_saved
from derive.architectures.operations.norm import gemma_rms_norm
from derive.architectures.saved import gemma_layer_saved, gpt2_layer_saved, llama_layer_saved
from derive.identities import identity
from derive.symbols import L, L_w, V, a, b, g, h, k, s, w
from derive.tensors import Ledger

TOPIC = "activations"
TRANSFORMERS = "transformers 5.23"


def _named(ledger: Ledger, *names: str) -> sp.Expr:
    """Bytes of the rows whose names start with one of ``names``."""
    return Ledger([row for row in ledger if row.name.startswith(names)]).bytes()


@identity("transformers' loss keeps b s int64 targets (not at b = 1)", topic=TOPIC,
          claim=8 * b * s, where={b: 1}, holds=False,
          source=f"{TRANSFORMERS} transformers/loss/loss_utils.py ForCausalLMLoss: labels padded "
                 "to s + 1, shifted by [..., 1:].contiguous(), which copies nothing when b = 1",
          assumptions=("nll_loss keeps the targets it is given", "b = 1: the shifted view keeps "
                       "the padded storage, s + 1 int64"))
def hf_targets_single_sequence() -> sp.Expr:
    return _named(hf_edges_saved(k), "loss: targets", "loss: padded label")


@identity("transformers' q and attention output at width h/a (not when head_dim != h/a)",
          topic=TOPIC, claim=4 * b * s * h, where={k: 2 * h / a}, holds=False,
          source=f"{TRANSFORMERS} models/llama/modeling_llama.py LlamaAttention: q_proj [h, a k], "
                 "o_proj [a k, h] with k = config.head_dim (Qwen3-0.6B: k = 2h/a)",
          assumptions=("q after RoPE and o_proj's input, bf16", "k = 2h/a as in Qwen3-0.6B"))
def hf_head_width() -> sp.Expr:
    return _named(llama_layer_saved("hf-sdpa", k), "q after RoPE", "attention output")


@identity("transformers' eager K and V repeated to a heads (not at g = b = 1)", topic=TOPIC,
          claim=4 * b * a * s * k, where={g: 1, b: 1}, holds=False,
          source=f"{TRANSFORMERS} integrations/sdpa_attention.py repeat_kv (expand + reshape: a "
                 "view when g = 1); PyTorch 2.13 aten/src/ATen/native/LinearAlgebra.cpp "
                 "_matmul_impl folds [b, a] without a copy only at b = 1",
          assumptions=("eager_attention_forward: QK^T keeps K, PV keeps V", "bf16"))
def hf_eager_kv_view() -> sp.Expr:
    return _named(Ledger(hf_eager_attention(k)), "k ", "v ")


@identity("transformers' sdpa keeps K, V at g heads and no mask (not at s >= w)", topic=TOPIC,
          claim=4 * b * g * s * k, where={w: s, a: 32, g: 8}, holds=False,
          source=f"{TRANSFORMERS} masking_utils.py _ignore_causal_mask_sdpa (no skip when "
                 "kv_length >= sliding window), integrations/sdpa_attention.py use_gqa_in_sdpa "
                 "(no enable_gqa with a mask: repeat_kv); PyTorch 2.13 "
                 "aten/src/ATen/native/transformers/attention.cpp convert_boolean_attn_mask",
          assumptions=("a sliding window w reached (s = w); a = 32, g = 8 as in Mistral 7B",
                       "the CPU flash kernel keeps the mask as "
                       "bf16 [b, 1, s, s] in every layer", "g = 1: the repeat is a stride-0 view"))
def hf_sdpa_window_mask() -> sp.Expr:
    return _named(Ledger(hf_sdpa_attention(k, window=True)), "k ", "v", "sliding-window mask")


# ---- Gemma 2 / 3 (models/gemma2/modeling_gemma2.py, models/gemma3/modeling_gemma3.py) ----

@identity("transformers' RMSNorm keeps 6bsh + 4bs (not Gemma's)", topic=TOPIC,
          claim=6 * b * s * h + 4 * b * s, holds=False,
          source=f"{TRANSFORMERS} models/gemma2/modeling_gemma2.py Gemma2RMSNorm.forward: "
                 "x * rstd * (1.0 + weight.float()) before the cast (LlamaRMSNorm casts first)",
          assumptions=("fp32 upcast input and rstd as LlamaRMSNorm", "Gemma: x * rstd kept in "
                       "fp32, and the fp32 vector 1 + w made at every call"))
def hf_gemma_norm() -> sp.Expr:
    return Ledger(gemma_rms_norm("norm", (b, s, h))).bytes()


@identity("transformers' eager attention keeps 6bask + 6bas^2 (not with Gemma 2's soft-capping)",
          topic=TOPIC, claim=6 * b * a * s * k + 6 * b * a * s**2, where={b: 2, g: 2},
          holds=False,
          source=f"{TRANSFORMERS} models/gemma2/modeling_gemma2.py eager_attention_forward: "
                 "tanh(scores / attn_logit_softcapping) keeps its bf16 result",
          assumptions=("q, K and V repeated to a heads, fp32 softmax, bf16 probabilities (b = 2, "
                       "g = 2: no view)", "Gemma3Attention passes no softcap: Gemma 3 keeps the "
                       "Llama rows"))
def hf_gemma_softcap() -> sp.Expr:
    return _named(gemma_layer_saved("eager", False, softcap=True), "q after", "k ", "v ",
                  "softmax", "probabilities", "attention scores tanh")


@identity("transformers' loss keeps 4bsV of logits (not under final_logit_softcapping)",
          topic=TOPIC, claim=4 * b * s * V, holds=False,
          source=f"{TRANSFORMERS} models/gemma2/modeling_gemma2.py Gemma2ForCausalLM.forward "
                 "(Gemma3ForCausalLM alike): tanh(logits / final_logit_softcapping)",
          assumptions=("fp32 log-probabilities kept by the loss", "the cap's bf16 tanh result "
                       "[b, s, V] kept by tanh"))
def hf_gemma_logit_softcap() -> sp.Expr:
    return _named(gemma_edges_saved(False, True), "loss: log-prob", "output: logits tanh")


@identity("transformers' RoPE keeps one cos/sin pair, 4sk (not Gemma 3 with both layer types)",
          topic=TOPIC, claim=4 * s * k, where={L: 2, L_w: 1}, holds=False,
          source=f"{TRANSFORMERS} models/gemma3/modeling_gemma3.py Gemma3TextModel.forward: "
                 "rotary_emb(x, position_ids, layer_type) for each layer type in layer_types",
          assumptions=("bf16 cos and sin [s, k]", "one sliding_attention and one full_attention "
                       "layer"))
def hf_gemma_rope_pairs() -> sp.Expr:
    return _named(gemma_edges_saved(True, False), "rope")


@identity("transformers' GPT-2 keeps q, k, v as c_attn's output, 6bsh (not with its cache)",
          topic=TOPIC, claim=6 * b * s * h, holds=False,
          source=f"{TRANSFORMERS} models/gpt2/modeling_gpt2.py GPT2Attention.forward (q, k, v "
                 "split from c_attn), cache_utils.py DynamicLayer.update: torch.cat copies k and v",
          assumptions=("sdpa: q a view of c_attn's bf16 [b, s, 3h] output", "use_cache (the "
                       "config default): k and v kept as the cache's bf16 copies"))
def hf_gpt2_cache_copies() -> sp.Expr:
    return _named(gpt2_layer_saved("sdpa"), "c_attn output", "k (", "v (")
