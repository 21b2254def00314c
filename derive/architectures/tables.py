"""A layout's tables: parameters, active parameters and the GEMMs of one token, each a walk of its operations through the registry.

One set of functions for every :class:`~derive.architectures.decoder.Layout`: the GPT and Llama
families' (decoder.GPT, LLAMA: their reference steps, with Megatron's / Meta's row names, from
derive.architectures.saved), a config's (derive.hf.from_config: transformers' names), an MoE,
MLA or MTP model's (decoder.moe_layout). A layer is a sequence of steps
(derive.architectures.operations.registry); its parameter rows, its score GEMMs and what it saves
are what the registry declares for each step. A model is L - L_E dense and L_E MoE layers (L
dense ones without MoE), its edges (embedding, learned positions, final norm, head) and
optionally D multi-token-prediction modules (DeepSeek-V3 report, section 2.2; the registry's
``mtp`` operation) whose layer has the last layer's type.

Tags, besides the blocks': ``layer`` (held once per layer), ``moe_layer`` (held by the L_E MoE
layers) or ``dense_layer`` (by the other L - L_E, in an MoE model), ``mtp`` (an MTP module's
rows), and the edge tags of derive.architectures.parameters (``embedding``, ``position``,
``output``, ``tied``); ``gemm`` on every matrix that sits in a GEMM (layer matrices and the
output head, not the input lookup nor norms), ``buffer`` on a tensor no gradient trains.
Weight GEMMs come from the parameter rows (derive.architectures.gemms.weight_gemms): the sum
over them is 6 N_GEMM per token by construction of the table, not by typing 6. Routed experts
count at k_E of their E copies in the active rows (derive.architectures.moe.active_rows).
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.decoder import FAMILIES, Layout
from derive.architectures.gemms import Gemm, weight_gemms
from derive.architectures.moe import active_rows
from derive.architectures.operations.registry import Step, parameter_table, score_table, step
from derive.architectures.operations.rows import HEAD
from derive.architectures.saved import gpt_layer_steps, llama_layer_steps
from derive.inputs import choose
from derive.symbols import D, L, L_E, a, h, k, s, s_max
from derive.tensors import Ledger

#: The Llama family's edges (Meta's names): untied input embedding and output head, the final RMSNorm.
LLAMA_EDGES = (step("embedding", "embedding", name="tok_embeddings.weight"),
               step("norm", "norm", name="norm", width=h, kind="rms"),
               step("output", "head", name="output.weight"))
#: The GPT family's edges (Megatron's names): the word embedding tied to the output head (so it is
#: also a GEMM), learned positions, the final LayerNorm.
GPT_EDGES = (step("embedding", "embedding", name="word_embeddings.weight (tied output head)", tied=True),
             step("embedding", "positions", name="position_embeddings.weight", length=s),
             step("norm", "norm", name="final_layernorm", width=h, kind="layer"))


# ---- the steps of a layout ----

def _family(layout: Layout) -> str:
    """The layout's family name, checked ("gpt" or "llama")."""
    return choose("family", layout.family, FAMILIES)


def _norm_steps(layout: Layout) -> list[Step]:
    return [step("norm", "norm", name=module, width=h, kind=layout.norm, tags=(block,))
            for module, block in layout.layer_norms]


def _attention_steps(layout: Layout) -> list[Step]:
    """MHA / GQA or MLA (derive.architectures.operations.latent), and the attention sinks."""
    steps = [step("attention", "mla", mla=layout.mla) if layout.mla is not None else step(
        "attention", "projections", names=layout.names, fused=layout.qkv_fused,
        qkv_bias=layout.qkv_bias, o_bias=layout.o_bias, qk_norm=layout.qk_norm, head_dim=k)]
    return steps + ([step("attention", "sinks", heads=a)] if layout.sinks else [])


def _mlp_steps(layout: Layout, moe_layer: bool = False) -> list[Step]:
    """The dense MLP, or an MoE layer's router, routed experts and shared experts (with their gate)."""
    if moe_layer:
        return [step(operation, implementation, moe=layout.moe) for operation, implementation in
                (("router", "router"), ("experts", "routed"), ("shared_experts", "shared"))]
    return [step("mlp", "mlp", names=layout.names, gated=layout.gated, bias=layout.mlp_bias,
                 fused=layout.gate_up_fused)]


def layer_steps(layout: Layout, moe_layer: bool = False, head_dim: sp.Expr | None = None) -> tuple[Step, ...]:
    """The operations of one layer in table order: a family's reference layer (heads ``head_dim`` wide, h/a
    by default: Korthikanti's GPT layer, Meta's Llama layer run eagerly), or a config's norms, attention,
    sinks, and its MLP or MoE block (``moe_layer``; heads k wide)."""
    if layout.family:
        head = HEAD if head_dim is None else head_dim
        return gpt_layer_steps(head_dim=head) if _family(layout) == "gpt" else llama_layer_steps("eager", head)
    if head_dim is not None:
        raise ValueError("head_dim: a config's layout has heads of width k (its head_dim field)")
    return (*_norm_steps(layout), *_attention_steps(layout), *_mlp_steps(layout, moe_layer))


def edge_steps(layout: Layout) -> tuple[Step, ...]:
    """Token embedding (tied to the head or not), learned positions, final norm, output head."""
    if layout.family:
        return GPT_EDGES if _family(layout) == "gpt" else LLAMA_EDGES
    names = layout.names
    steps = [step("embedding", "embedding", name=f"{names['embedding']}.weight", tied=layout.tied)]
    if layout.learned_positions:
        steps.append(step("embedding", "positions", name=f"{names['positions']}.weight",
                          length=s_max))
    steps.append(step("norm", "norm", name=names["final_norm"], width=h, kind=layout.norm))
    if not layout.tied:
        steps.append(step("output", "head", name=f"{names['head']}.weight"))
    return tuple(steps)


# ---- parameters ----

def layer_parameters(layout: Layout, moe_layer: bool = False, head_dim: sp.Expr | None = None) -> Ledger:
    """One layer (dense or, ``moe_layer``, MoE): :func:`layer_steps` walked, tagged ``layer`` and its kind in an MoE model."""
    kind = () if layout.moe is None else ("moe_layer" if moe_layer else "dense_layer",)
    return parameter_table(layer_steps(layout, moe_layer, head_dim)).map(lambda t: t.tagged("layer", *kind))


def edge_parameters(layout: Layout) -> Ledger:
    """The edges' parameter rows: :func:`edge_steps` walked."""
    return parameter_table(edge_steps(layout))


def model_rows(layout: Layout, head_dim: sp.Expr | None = None) -> Ledger:
    """Every tensor of the model, buffers included, MTP modules apart: embedding and positions, L dense layers
    (or L - L_E dense and L_E MoE layers), final norm and head."""
    edges = edge_parameters(layout)
    if layout.moe is None:
        layers = layer_parameters(layout, head_dim=head_dim).times(L)
    else:
        layers = (layer_parameters(layout, head_dim=head_dim).times(L - L_E)
                  + layer_parameters(layout, True, head_dim).times(L_E))
    return Ledger([*edges.where("embedding"), *edges.where("position"), *layers,
                   *edges.without("embedding", "position")])


def parameter_rows(layout: Layout) -> Ledger:
    """The trained tensors N counts: every row but the buffers, MTP modules apart (as published counts leave them)."""
    return model_rows(layout).without("buffer")


def mtp_modules(layout: Layout) -> Ledger:
    """D MTP modules (tag ``mtp``): each its own rows (enorm, hnorm, eh_proj [2h, h], final norm) and a layer of the last layer's type."""
    own = parameter_table((step("mtp", "module"),))
    return (own + layer_parameters(layout, layout.last_moe).without("buffer")).map(
        lambda w: w.tagged("mtp").times(D))


def model_parameters(layout: Layout, head_dim: sp.Expr | None = None) -> Ledger:
    """Every parameter once: layers, edges, and the MTP modules (tag ``mtp``) where the layout has them."""
    table = model_rows(layout, head_dim).without("buffer")
    return table + mtp_modules(layout) if layout.mtp else table


def active_parameters(layout: Layout, head_dim: sp.Expr | None = None) -> Ledger:
    """The parameters one token passes through: routed experts at k_E of E (every row of a dense model)."""
    return active_rows(model_parameters(layout, head_dim))


def parameter_count(layout: Layout) -> sp.Expr:
    """N: every parameter once (a tied embedding once), MTP modules apart, summed over the table."""
    return parameter_rows(layout).numel()


def active_parameter_count(layout: Layout) -> sp.Expr:
    """Parameters a token passes through: N for a dense model, k_E of E routed experts otherwise (MTP apart)."""
    return sp.expand(active_rows(parameter_rows(layout)).numel())


def gemm_parameter_count(layout: Layout) -> sp.Expr:
    """N_GEMM: the parameters that sit in a GEMM (layer matrices and the output head), MTP apart."""
    return parameter_rows(layout).where("gemm").numel()


# ---- GEMMs of one token ----

def score_gemms(layout: Layout, mask: str = "causal", head_dim: sp.Expr | None = None) -> Ledger:
    """QK^T and PV of one layer under ``mask``, as its attention step declares them: width k (GQA), h/a or
    ``head_dim`` (a family's), k_nope + k_rope and k_v (MLA)."""
    return score_table(layer_steps(layout, head_dim=head_dim), mask)


def layer_gemms(layout: Layout, mask: str = "causal", head_dim: sp.Expr | None = None,
                moe_layer: bool = False) -> Ledger:
    """One layer's GEMMs: its active weight GEMMs (q, k, v, o, MLP or experts) and QK^T, PV under ``mask``."""
    weights = weight_gemms(active_rows(layer_parameters(layout, moe_layer, head_dim)))
    return weights + score_table(layer_steps(layout, moe_layer, head_dim), mask)


def output_gemms(layout: Layout) -> Ledger:
    """The output head (logits): one [h] x [h, V] GEMM per token; GPT's is the tied word embedding."""
    return weight_gemms(edge_parameters(layout))


def layer_count(layout: Layout) -> sp.Expr:
    """Layers a token passes through: L, plus one per MTP module."""
    return L + D if layout.mtp else L


def mtp_logit_gemms(layout: Layout) -> Ledger:
    """The shared output head run once more per MTP module (no parameter of its own)."""
    if not layout.mtp:
        return Ledger()
    return output_gemms(layout).map(lambda gemm: Gemm(f"mtp {gemm.name}", gemm.m, gemm.n, gemm.k,
                                                      gemm.tags | {"mtp"}, gemm.count * D))


def model_gemms(layout: Layout, mask: str = "causal", head_dim: sp.Expr | None = None) -> Ledger:
    """Every GEMM of one token's forward: the active weight GEMMs (L layers, the head, MTP modules), the
    scores in L + D layers, the MTP logits; ``head_dim`` frees the Llama family's head width."""
    if head_dim is not None and layout.family != "llama":
        raise ValueError(f"head_dim: only the llama family has a free head width, not "
                         f"{layout.family or 'a config layout'!r}")
    scores = score_gemms(layout, mask, head_dim).times(layer_count(layout))
    return weight_gemms(active_parameters(layout, head_dim)) + scores + mtp_logit_gemms(layout)
