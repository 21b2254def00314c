"""The MLP operation: plain (GELU; fc1 / fc2) and gated (SwiGLU / GeGLU; gate, up, down) and what each keeps for backward.

A gated MLP's five saved tensors are declared once (:data:`GATED_ROLES`); a *naming* gives the
names, notes and order a framework shows them in: Meta's Llama reference (w1, w3, w2), transformers'
(gate_proj, up_proj, down_proj, or Phi 3's gate_up_proj) and Gemma's GeGLU. Transformer Engine's
fused SwiGLU (Megatron's bias_swiglu) keeps other tensors: its own implementation.
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.operations.rows import (ACTIVATION, BATCH_FIRST, SEQUENCE_FIRST, row)
from derive.symbols import b, f, h, s
from derive.tensors import Tensor

#: The tensors a gated MLP keeps in eager PyTorch: the gate/up input, gate, up, activation(gate), the down input.
GATED_ROLES = ("input", "gate", "up", "activation", "down")
#: A naming: role -> (name, note), in the order the rows are listed.
Naming = dict[str, tuple[str, str]]

#: Meta's Llama reference (llama/model.py FeedForward: w2(silu(w1(x)) * w3(x))).
META_SWIGLU: Naming = {
    "input": ("w1/w3 input", "ffn_norm output, kept by w1 and w3 (one tensor)"),
    "gate": ("gate (w1 output)", "kept by SiLU"),
    "activation": ("SiLU output", "kept by the multiply with up"),
    "up": ("up (w3 output)", "kept by the multiply with SiLU(gate)"),
    "down": ("w2 input", "SiLU(gate) * up, kept by w2"),
}


def hf_gated_naming(input_note: str, fused: bool = False, activation: str = "SiLU",
                    kernel: str = "SiLU") -> Naming:
    """transformers' LlamaMLP (gate_proj, up_proj, down_proj; Phi3MLP's gate_up_proj halves when ``fused``).

    ``activation`` names the activation in the rows (GELU for Gemma's GeGLU), ``kernel`` the op
    that keeps the gate (gelu_pytorch_tanh for Gemma).
    """
    gate, up = (("gate_up_proj output, gate half", "gate_up_proj output, up half") if fused
                else ("gate (gate_proj output)", "up (up_proj output)"))
    return {
        "input": ("gate/up input", input_note),
        "gate": (gate, f"kept by {kernel}"),
        "up": (up, f"kept by the multiply with {activation}(gate)"),
        "activation": (f"{activation} output", "kept by the multiply with up"),
        "down": ("down_proj input", f"{activation}(gate) * up, kept by down_proj"),
    }


def gated_mlp(naming: Naming, tokens: tuple[sp.Expr, ...] = BATCH_FIRST) -> list[Tensor]:
    """A gated MLP in eager PyTorch: the input [tokens, h] (replicated), gate, up, activation and down input [tokens, f]."""
    def kept(role: str) -> Tensor:
        name, note = naming[role]
        if role == "input":
            return row(name, (*tokens, h), ACTIVATION, "replicated", "mlp", note=note)
        return row(name, (*tokens, f), ACTIVATION, "tp_shardable", "mlp", note=note)
    return [kept(role) for role in naming]


def te_fused_swiglu() -> list[Tensor]:
    """Megatron + Transformer Engine: linear_fc1 (gate and up in one), the fused SwiGLU, linear_fc2."""
    return [
        row("linear_fc1 input", (*SEQUENCE_FIRST, h), ACTIVATION, "replicated", "mlp",
            "linear_input", note="pre_mlp_layernorm output, kept by linear_fc1"),
        row("linear_fc1 output (gate and up)", (s, b, 2 * f), ACTIVATION, "tp_shardable", "mlp",
            note="the only tensor the fused SwiGLU keeps"),
        row("linear_fc2 input", (s, b, f), ACTIVATION, "tp_shardable", "mlp", "linear_input",
            note="SwiGLU output, kept by linear_fc2"),
    ]


def plain_mlp(names: tuple[str, str, str], notes: tuple[str, str, str],
              tokens: tuple[sp.Expr, ...] = BATCH_FIRST, linear: bool = False,
              activation: tuple[Tensor, ...] = ()) -> list[Tensor]:
    """A two-matrix MLP: up's input [tokens, h], the activation's input and down's input [tokens, f].

    ``linear`` tags the two linears' inputs ``linear_input`` (Megatron + TE: an FP8 recipe
    re-types them); ``activation``: the rows a composite activation keeps besides its input.
    """
    extra = ("linear_input",) if linear else ()
    (up, act, down), (up_note, act_note, down_note) = names, notes
    return [
        row(up, (*tokens, h), ACTIVATION, "replicated", "mlp", *extra, note=up_note),
        row(act, (*tokens, f), ACTIVATION, "tp_shardable", "mlp", note=act_note),
        *activation,
        row(down, (*tokens, f), ACTIVATION, "tp_shardable", "mlp", *extra, note=down_note),
    ]


def megatron_gelu_mlp() -> list[Tensor]:
    """Megatron's GPT MLP (Korthikanti et al. 2022, section 4.1): fc1, GELU, fc2."""
    return plain_mlp(("fc1 input", "GELU input", "fc2 input"),
                     ("LayerNorm 2 output, kept by fc1", "fc1 output, kept by GELU",
                      "GELU output, kept by fc2"), SEQUENCE_FIRST, linear=True)


def neox_gelu_mlp() -> list[Tensor]:
    """GPTNeoXMLP: dense_h_to_4h, GELU, dense_4h_to_h (models/gpt_neox/modeling_gpt_neox.py)."""
    return plain_mlp(("dense_h_to_4h input", "GELU input", "dense_4h_to_h input"),
                     ("post_attention_layernorm output", "dense_h_to_4h output, kept by GELU",
                      "GELU output"))


def gpt2_gelu_new_mlp() -> list[Tensor]:
    """GPT2MLP: c_fc, gelu_new (NewGELUActivation.forward: pow, tanh and multiplies keep its input,
    the tanh, 0.5 x and 1 + tanh), c_proj."""
    composite = tuple(row(name, (b, s, f), ACTIVATION, "tp_shardable", "mlp", note=note) for name, note in (
        ("gelu_new tanh", "kept by tanh"),
        ("gelu_new 0.5 x", "kept by the multiply with 1 + tanh"),
        ("gelu_new 1 + tanh", "kept by the multiply with 0.5 x")))
    return plain_mlp(("c_fc input", "gelu_new input", "c_proj input"),
                     ("ln_2 output", "c_fc output, kept by torch.pow(x, 3)",
                      "gelu_new output, kept by Conv1D's addmm"), activation=composite)


def eager_swiglu(prefix: str, tokens: sp.Expr, width: sp.Expr, *tags: str) -> list[Tensor]:
    """A SwiGLU MLP in eager PyTorch over ``tokens`` rows: gate (SiLU input), up, SiLU output, down input."""
    return [
        row(f"{prefix} gate", (tokens, width), ACTIVATION, *tags, note="kept by SiLU"),
        row(f"{prefix} up", (tokens, width), ACTIVATION, *tags, note="kept by the multiply"),
        row(f"{prefix} SiLU output", (tokens, width), ACTIVATION, *tags, note="kept by the multiply"),
        row(f"{prefix} down input", (tokens, width), ACTIVATION, *tags, note="kept by down_proj"),
    ]


def hf_swiglu(prefix: str = "mlp", width: sp.Expr = f, tags: tuple[str, ...] = (),
              keeps_input: bool = True) -> list[Tensor]:
    """An MoE model's dense SwiGLU in transformers (DeepseekV3MLP, Qwen2MoeMLP): its [T, h] input, then :func:`eager_swiglu`.

    ``keeps_input`` False: another operation's row is the same input tensor (one tensor, one row).
    """
    kept = row(f"{prefix} input", (b * s, h), ACTIVATION, "replicated", "mlp", *tags,
               note="post_attention_layernorm output, kept by gate_proj and up_proj")
    return ([kept] if keeps_input else []) + eager_swiglu(prefix, b * s, width, "tp_shardable",
                                                          "mlp", *tags)


def te_swiglu(prefix: str, tokens: tuple[sp.Expr, ...], width: sp.Expr, *tags: str) -> list[Tensor]:
    """TE linear_fc1 output kept by the fused SwiGLU (megatron/core/fusions/fused_bias_swiglu.py), fc2 input."""
    return [row(f"{prefix} linear_fc1 output (gate and up)", (*tokens, 2 * width), ACTIVATION, *tags,
                note="the only tensor the fused SwiGLU keeps"),
            row(f"{prefix} linear_fc2 input", (*tokens, width), ACTIVATION, *tags, "linear_input",
                note="SwiGLU output, kept by linear_fc2")]


def te_dense_swiglu() -> list[Tensor]:
    """An MoE model's dense layer under Megatron + TE: linear_fc1's input, then :func:`te_swiglu`."""
    return ([row("linear_fc1 input", (s, b, h), ACTIVATION, "replicated", "mlp", "linear_input")]
            + te_swiglu("mlp", (s, b), f, "tp_shardable", "mlp"))
