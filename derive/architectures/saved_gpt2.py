"""GPT-2 as transformers 5.23 trains it without dropout (models/gpt2/modeling_gpt2.py): tensors kept for backward.

Departures from the GPT-NeoX rows (``derive.architectures.saved_neox``): learned positions
(``wpe`` keeps the int64 position ids [1, s]) instead of RoPE; Conv1D's ``addmm`` keeps its input
as nn.Linear does; q, k and v are views of ``c_attn``'s output, and with ``use_cache`` (the
default) DynamicLayer.update's ``torch.cat`` copies k and v, which the attention keeps; q stays a
view, so sdpa keeps c_attn's whole [b, s, 3h] storage, eager only where torch.matmul folds it
without a copy (:data:`Q_VIEW`), else a [b, a, s, k] copy;
eager_attention_forward's softmax stays bf16 (no fp32 upcast: one [b, a, s, s] tensor kept by
softmax and by PV); under eager ``reshape(...).contiguous()`` copies the attention output for
``c_proj`` (under sdpa it is the kernel's output); and the gelu_new MLP
(NewGELUActivation.forward, composed of pow, tanh and multiplies) keeps its input, the tanh,
0.5 x and 1 + tanh. The dropouts are refused by derive.accounts.hf_saved unless 0.
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.saved import ACTIVATION, SINGLE_SEQUENCE, STATISTICS, _row, when
from derive.architectures.saved_edges import INDEX_DTYPE, hf_edges_saved
from derive.architectures.saved_neox import layer_norm
from derive.symbols import a, b, f, h, k, s
from derive.tensors import Ledger

#: Eager attention: q (a strided view of c_attn's output) folds to [b a, s, k] without a copy only
#: at b = 1 or a = 1 (torch.matmul's reshape), so QK^T keeps c_attn's whole [b, s, 3h] storage.
Q_VIEW = sp.Or(SINGLE_SEQUENCE, sp.Eq(a, 1))
#: transformers' GPT-2 activation whose rows derive lists (GPT2Config.activation_function default).
ACTIVATION_FUNCTION = "gelu_new"


def gpt2_layer_saved(attention: str) -> Ledger:
    """GPT2Block.forward: ln_1, c_attn, attention, c_proj, ln_2, c_fc, gelu_new, c_proj."""
    x = _row("layer input", (b, s, h), ACTIVATION, "replicated", "norm", "layer_input",
             note="kept by ln_1")
    rows = layer_norm("ln_1", x)
    rows += [
        _row("c_attn input", (b, s, h), ACTIVATION, "replicated", "attention",
             note="ln_1 output, kept by Conv1D's addmm"),
        *when(_row("c_attn output (q viewed)", (b, s, 3 * h), ACTIVATION, "tp_shardable",
                   "attention", note="q is a view of it, kept by the attention: the whole storage"),
              sp.true if attention == "sdpa" else Q_VIEW),
        *when(_row("q (matmul's copy)", (b, a, s, k), ACTIVATION, "tp_shardable", "attention",
                   note="torch.matmul folds [b, a] of the strided q view by a copy"),
              sp.false if attention == "sdpa" else sp.Not(Q_VIEW)),
        _row("k (DynamicCache copy)", (b, a, s, k), ACTIVATION, "tp_shardable", "attention",
             note="torch.cat in DynamicLayer.update (use_cache), kept by the attention"),
        _row("v (DynamicCache copy)", (b, a, s, k), ACTIVATION, "tp_shardable", "attention",
             note="torch.cat in DynamicLayer.update (use_cache), kept by the attention"),
    ]
    if attention == "sdpa":
        rows.append(_row("softmax logsumexp", (b, a, s), STATISTICS, "tp_shardable",
                         "softmax_statistics", "attention",
                         note="kept by scaled_dot_product_attention"))
    else:
        rows.append(_row("softmax output (bf16)", (b, a, s, s), ACTIVATION, "tp_shardable",
                         "score_matrix", "attention",
                         note="softmax in the scores' dtype, kept by softmax and by PV"))
    rows.append(_row("attention output", (b, s, a * k), ACTIVATION, "tp_shardable", "attention",
                     note="c_proj's input (sdpa: the kernel's output; eager: the contiguous copy)"))
    rows += layer_norm("ln_2", _row("ln_2 input", (b, s, h), ACTIVATION, "replicated", "norm",
                                    note="attention output + layer input"))
    rows += [
        _row("c_fc input", (b, s, h), ACTIVATION, "replicated", "mlp", note="ln_2 output"),
        _row("gelu_new input", (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="c_fc output, kept by torch.pow(x, 3)"),
        _row("gelu_new tanh", (b, s, f), ACTIVATION, "tp_shardable", "mlp", note="kept by tanh"),
        _row("gelu_new 0.5 x", (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="kept by the multiply with 1 + tanh"),
        _row("gelu_new 1 + tanh", (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="kept by the multiply with 0.5 x"),
        _row("c_proj input", (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="gelu_new output, kept by Conv1D's addmm"),
    ]
    return Ledger(rows)


def gpt2_edges_saved() -> Ledger:
    """The edges (hf_edges_saved) without RoPE, with wpe's position ids and the final LayerNorm ln_f."""
    final = layer_norm("ln_f", _row("ln_f input", (b, s, h), ACTIVATION, "replicated", "output"))
    edges = [row for row in hf_edges_saved(k, final_norm=final) if "rope" not in row.tags]
    positions = _row("embedding: position ids", (s,), INDEX_DTYPE, "embedding", "replicated",
                     note="arange(s)[None], kept by wpe")
    return Ledger([*edges, positions])
