"""GPT-NeoX as transformers 5.23 trains it (models/gpt_neox/modeling_gpt_neox.py): tensors kept for backward.

A LayerNorm layer (CPU ``native_layer_norm`` keeps its input and a bf16 mean and rstd per
token), the fused query_key_value whose per-head [q, k, v] chunks are views of one output,
RoPE over k_rope of each head's k dimensions (``rotary_pct``, derive.hf.rotary_width) ending in
``torch.cat``, GELU, biases everywhere (a bias keeps nothing), and the parallel residual
(``use_parallel_residual``: both norms read the layer input, one tensor).
"""
from __future__ import annotations

from derive.architectures.saved import (ACTIVATION, _layer_norm, _row, hf_eager_attention,
                                        hf_sdpa_attention)
from derive.architectures.saved_edges import hf_edges_saved
from derive.symbols import a, b, f, h, k, k_rope, s
from derive.tensors import Ledger, Tensor

#: CPU native_layer_norm keeps mean and rstd in the input dtype (derive.architectures.saved).
STATISTICS = ("mean", "rstd")


def layer_norm(prefix: str, input_row: Tensor | None) -> list[Tensor]:
    """nn.LayerNorm on CPU in bf16: its input (None: a tensor another row holds) and bf16 mean / rstd."""
    held = input_row or _row(f"{prefix} input", (b, s, h), ACTIVATION, "replicated", "norm")
    rows = _layer_norm(prefix, held, ACTIVATION, STATISTICS)
    return rows if input_row is not None else rows[1:]


def neox_layer_saved(attention: str, parallel: bool) -> Ledger:
    """GPTNeoXLayer.forward: input_layernorm, attention, post_attention_layernorm, GELU MLP."""
    x = _row("layer input", (b, s, h), ACTIVATION, "replicated", "norm", "layer_input",
             note="kept by input_layernorm" + (" and post_attention_layernorm (parallel)"
                                                if parallel else ""))
    rows = layer_norm("input_layernorm", x)
    rows.append(_row("query_key_value input", (b, s, h), ACTIVATION, "replicated", "attention",
                     note="input_layernorm output, kept by query_key_value"))
    rows += (hf_sdpa_attention(k, heads_first=True) if attention == "sdpa"
             else hf_eager_attention(k))
    rows.append(_row("attention output", (b, s, a * k), ACTIVATION, "tp_shardable", "attention",
                     note="attention.dense's input"))
    rows += layer_norm("post_attention_layernorm", None if parallel else _row(
        "post_attention_layernorm input", (b, s, h), ACTIVATION, "replicated", "norm",
        note="attention output + layer input (sequential residual)"))
    rows += [
        _row("dense_h_to_4h input", (b, s, h), ACTIVATION, "replicated", "mlp",
             note="post_attention_layernorm output"),
        _row("GELU input", (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="dense_h_to_4h output, kept by GELU"),
        _row("dense_4h_to_h input", (b, s, f), ACTIVATION, "tp_shardable", "mlp",
             note="GELU output"),
    ]
    return Ledger(rows)


def neox_edges_saved(rotary: bool) -> Ledger:
    """The edges (derive.architectures.saved_edges.hf_edges_saved) with the final LayerNorm; cos / sin k_rope wide when ``rotary``."""
    final = layer_norm("final_layer_norm", _row("final_layer_norm input", (b, s, h), ACTIVATION,
                                                "replicated", "output"))
    return hf_edges_saved(k_rope if rotary else k, final_norm=final)
