"""Gemma 2 / Gemma 3 as transformers 5.23 trains them (models/gemma2/modeling_gemma2.py, gemma3/modeling_gemma3.py).

Departures from the Llama rows of ``derive.architectures.saved``, each a row under its condition:

* Gemma2RMSNorm / Gemma3RMSNorm scale before the cast, ``x * rstd * (1.0 + weight.float())``:
  the multiply keeps x * rstd in fp32 and the fp32 vector 1 + w, [h] (or [k] for Gemma 3's
  q_norm / k_norm), made afresh at every call;
* four norms per layer (input, post-attention, pre- and post-feedforward);
* Gemma 2's attention soft-capping (eager_attention_forward, ``softcap``): ``tanh(scores / cap)``
  keeps its bf16 result [b, a, s, s]; Gemma3Attention.forward passes no softcap;
* the final logit soft-capping (Gemma2ForCausalLM / Gemma3ForCausalLM.forward): the bf16
  tanh result [b, s, V];
* Gemma 3's RoPE per layer type (Gemma3TextModel.forward): one cos / sin pair for each type
  in layer_types, so two where sliding and full layers both occur;
* under sdpa (Gemma 3 only: Gemma2PreTrainedModel._supports_sdpa is False) the L_w sliding
  layers take the sliding-window mask rows of ``hf_sdpa_attention`` at s >= w, the others none.

No row: the embedding's sqrt(h) scale (Gemma2TextScaledWordEmbedding: a bf16 buffer, which
``.to(weight.dtype)`` returns as is), query_pre_attn_scalar (a Python float scale) and the
gelu_pytorch_tanh MLP (the SiLU rows' count: its input, output and up).
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.saved import (ACTIVATION, STATISTICS, _row, hf_eager_attention,
                                        hf_rms_norm, hf_sdpa_attention, when)
from derive.architectures.saved_edges import hf_edges_saved
from derive.symbols import L, L_w, V, a, b, f, g, h, k, s
from derive.tensors import Ledger, Tensor


def gemma_rms_norm(prefix: str, shape: tuple[sp.Expr, ...], *tags: str) -> list[Tensor]:
    """Gemma2RMSNorm.forward: LlamaRMSNorm's fp32 input and rstd, x * rstd kept fp32, and 1 + w in fp32."""
    return [*hf_rms_norm(prefix, shape, *tags, normalised=STATISTICS),
            _row(f"{prefix} 1 + weight (fp32)", shape[-1:], STATISTICS, "norm",
                 *(tags or ("replicated",)),
                 note=f"1.0 + {prefix}.weight.float(), a new tensor kept by the multiply")]


def gemma_layer_saved(attention: str, sliding: bool, qk_norm: bool = False,
                      softcap: bool = False) -> Ledger:
    """Gemma2DecoderLayer / Gemma3DecoderLayer: four norms, GQA of width k, GeGLU MLP.

    ``sliding``: a sliding_attention layer (sdpa's mask rows at s >= w); ``qk_norm``: Gemma 3's
    q_norm / k_norm over each head; ``softcap``: Gemma 2's tanh on the eager scores.
    """
    rows = gemma_rms_norm("input_layernorm", (b, s, h))
    rows.append(_row("q/k/v projection input", (b, s, h), ACTIVATION, "replicated", "attention",
                     note="input_layernorm output, kept by q_proj, k_proj and v_proj"))
    if qk_norm:
        rows += [*gemma_rms_norm("q_norm", (b, s, a, k), "tp_shardable", "qk_norm"),
                 *gemma_rms_norm("k_norm", (b, s, g, k), "tp_shardable", "qk_norm")]
    if attention == "sdpa":
        rows += hf_sdpa_attention(k, window=sliding)
    else:
        rows += hf_eager_attention(k)
        if softcap:
            rows.append(_row("attention scores tanh (softcap)", (b, a, s, s), ACTIVATION,
                             "tp_shardable", "score_matrix", "attention",
                             note="tanh(scores / attn_logit_softcapping), kept by tanh"))
    rows.append(_row("attention output", (b, s, a * k), ACTIVATION, "tp_shardable", "attention",
                     note="o_proj's input"))
    rows += gemma_rms_norm("post_attention_layernorm", (b, s, h))
    rows += gemma_rms_norm("pre_feedforward_layernorm", (b, s, h))
    rows += [
        _row("gate/up input", (b, s, h), ACTIVATION, "replicated", "mlp",
             note="pre_feedforward_layernorm output, kept by gate_proj and up_proj"),
        _row("gate (gate_proj output)", (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="kept by gelu_pytorch_tanh"),
        _row("up (up_proj output)", (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="kept by the multiply with GELU(gate)"),
        _row("GELU output", (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="kept by the multiply with up"),
        _row("down_proj input", (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="GELU(gate) * up, kept by down_proj"),
    ]
    rows += gemma_rms_norm("post_feedforward_layernorm", (b, s, h))
    return Ledger(rows)


def gemma_layers_saved(attention: str, qk_norm: bool, softcap: bool) -> Ledger:
    """The L_w sliding_attention layers and the L - L_w full_attention layers."""
    return (gemma_layer_saved(attention, True, qk_norm, softcap).times(L_w)
            + gemma_layer_saved(attention, False, qk_norm, softcap).times(L - L_w))


def gemma_edges_saved(rope_per_layer_type: bool, logit_softcap: bool) -> Ledger:
    """The edges (hf_edges_saved) with Gemma's final norm, Gemma 3's second RoPE pair and the capped logits' tanh.

    ``rope_per_layer_type``: Gemma3RotaryEmbedding runs once per layer type present, so a
    second cos / sin pair exists where 0 < L_w < L.
    """
    both = sp.And(L_w > 0, L_w < L) if rope_per_layer_type else sp.false
    extra = [
        *when(_row("rope (second layer type): cos", (s, k), ACTIVATION, "embedding", "rope",
                   "replicated", note="the other layer type's cos, kept by its layers"), both),
        *when(_row("rope (second layer type): sin", (s, k), ACTIVATION, "embedding", "rope",
                   "replicated", note="the other layer type's sin, kept by its layers"), both),
        *when(_row("output: logits tanh (softcap)", (b, s, V), ACTIVATION, "output", "logits",
                   "tp_shardable", note="tanh(logits / final_logit_softcapping), kept by tanh"),
              sp.true if logit_softcap else sp.false),
    ]
    return hf_edges_saved(k, final_norm=gemma_rms_norm("norm", (b, s, h))) + Ledger(extra)
