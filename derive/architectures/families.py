"""Parameter and GEMM tables of the GPT and Llama families and of a layout, walked through the operation registry.

Tags on every parameter (derive.architectures.parameters): ``layer`` (held once per layer;
``count`` is L), ``embedding``, ``position``, ``output``, ``norm``, ``bias``, and ``gemm`` for every
matrix that sits in a GEMM (the weights 6 FLOP/parameter/token apply to: layer matrices and the
output head, not the input lookup nor norms); a layer's tensors also name their block.
Weight GEMMs come from the parameter tables (derive.architectures.gemms.weight_gemms): the sum
over them is 6 N_GEMM per token by construction of the table, not by typing 6.
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.decoder import Layout, layer_steps, model_rows
from derive.architectures.gemms import weight_gemms
from derive.architectures.operations.registry import parameter_table, score_table, step
from derive.architectures.saved import gpt_layer_steps, llama_layer_steps
from derive.inputs import choose
from derive.symbols import L, a, h, s
from derive.tensors import Ledger


def llama_layer(head_dim: sp.Expr = h / a) -> Ledger:
    """The Llama layer's parameters: the steps of Meta's reference (derive.architectures.saved, the eager profile) walked."""
    return parameter_table(llama_layer_steps("eager", head_dim)).map(lambda t: t.tagged("layer"))


def gpt_layer(head_dim: sp.Expr = h / a) -> Ledger:
    """The GPT layer's parameters (derive.architectures.saved.gpt_layer_steps walked)."""
    return parameter_table(gpt_layer_steps(head_dim=head_dim)).map(lambda t: t.tagged("layer"))


def llama_edges() -> Ledger:
    """Untied input embedding and output head, and the final RMSNorm."""
    return parameter_table((step("embedding", "embedding", name="tok_embeddings.weight"),
                            step("norm", "norm", name="norm", width=h, kind="rms"),
                            step("output", "head", name="output.weight")))


def gpt_edges() -> Ledger:
    """Word embedding tied to the output head (so it is also a GEMM), learned positions, final LayerNorm."""
    return parameter_table((
        step("embedding", "embedding", name="word_embeddings.weight (tied output head)", tied=True),
        step("embedding", "positions", name="position_embeddings.weight", length=s),
        step("norm", "norm", name="final_layernorm", width=h, kind="layer")))


FAMILIES = {
    "llama": (llama_layer, llama_edges),
    "gpt": (gpt_layer, gpt_edges),
}

#: The Llama family's form: pre-RMSNorms, SwiGLU, untied head, RoPE; Meta's row names.
LLAMA = Layout(family="llama")
#: The GPT family's form (Megatron's GPT): LayerNorms, biases, a plain GeLU MLP, fused QKV,
#: learned positions, the word embedding tied to the head; Megatron's row names.
GPT = Layout(norm="layer", qkv_fused=True, qkv_bias=True, o_bias=True, gated=False, mlp_bias=True,
             tied=True, learned_positions=True, family="gpt")
#: family name -> its layout.
LAYOUTS = {"llama": LLAMA, "gpt": GPT}


def family_tables(layout: Layout) -> tuple[Ledger, Ledger]:
    """(one layer, the edges) of a family layout's reference tables (GPT, LLAMA)."""
    layer, edges = FAMILIES[choose("family", layout.family, FAMILIES)]
    return layer(), edges()


def model_parameters(family: str) -> Ledger:
    """Every parameter tensor of a ``family`` model: L layers plus the edges."""
    layer, edges = family_tables(LAYOUTS[choose("family", family, LAYOUTS)])
    return layer.times(L) + edges


def parameter_count(family: str) -> sp.Expr:
    """N, summed over the parameter table."""
    return model_parameters(family).numel()


def gemm_parameter_count(family: str) -> sp.Expr:
    """N_GEMM: the parameters that sit in a GEMM (layer matrices and the output head)."""
    return model_parameters(family).where("gemm").numel()


def llama_layer_gemms(mask: str = "causal", head_dim: sp.Expr | None = None) -> Ledger:
    """One Llama layer: q, k, v, o, gate, up, down weight GEMMs and QK^T, PV."""
    steps = llama_layer_steps("eager", h / a if head_dim is None else head_dim)
    return weight_gemms(parameter_table(steps).map(lambda t: t.tagged("layer"))) + score_table(steps, mask)


def gpt_layer_gemms(mask: str = "causal") -> Ledger:
    """One GPT layer: fused QKV, projection, fc1, fc2 and QK^T, PV."""
    steps = gpt_layer_steps()
    return weight_gemms(parameter_table(steps).map(lambda t: t.tagged("layer"))) + score_table(steps, mask)


LAYER_GEMMS = {"llama": llama_layer_gemms, "gpt": gpt_layer_gemms}


def output_gemms(family: str = "llama") -> Ledger:
    """The output head (logits): one [h] x [h, V] GEMM per token; GPT's is the tied word embedding."""
    _, edges = FAMILIES[choose("family", family, FAMILIES)]
    return weight_gemms(edges())


def layout_gemms(layout: Layout, mask: str = "causal") -> Ledger:
    """Every GEMM of one token of a model read from its config: its table's matrices, and QK^T, PV of a heads of width k.

    MoE and MLA layers are issue 15's: a ValueError, not a wrong number.
    """
    if not layout.dense:
        raise ValueError("family: FLOPs of MoE / MLA layers are not modelled yet "
                         "(derive counts their parameters)")
    return weight_gemms(model_rows(layout)) + score_table(layer_steps(layout), mask).times(L)


def model_gemms(layout: Layout = LLAMA, mask: str = "causal",
                head_dim: sp.Expr | None = None) -> Ledger:
    """Every GEMM of one token's forward: L layers (weights and scores) plus the output head.

    ``layout`` is a family's (GPT, LLAMA: its reference tables) or a config's (derive.hf.from_config).
    """
    if not layout.family:
        return layout_gemms(layout, mask)
    family = layout.family
    layer = LAYER_GEMMS[choose("family", family, FAMILIES)]
    if head_dim is None:
        return layer(mask).times(L) + output_gemms(family)
    if family != "llama":
        raise ValueError(f"head_dim: only the llama family has a free head width, not {family!r}")
    return llama_layer_gemms(mask, head_dim).times(L) + output_gemms(family)
