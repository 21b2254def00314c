"""Bytes transformers keeps for backward over a whole model read from its config (``--profile hf-sdpa / hf-eager``).

One training step of one micro-batch of a ``*ForCausalLM`` with labels, as
transformers 5.23 runs it in bf16 with ``attn_implementation`` sdpa or eager:
the edges (token ids, RoPE cos/sin, final norm, head input, fp32 loss;
``derive.architectures.operations.edges.hf_edges_saved`` or, for the MoE families,
``derive.architectures.saved.eager_edges``) and every layer's rows
(``derive.architectures.saved.llama_layer_saved`` for the Llama-layout
families, Phi 3's fused projections and OLMo 2's post-norms included, Qwen 2 / 3's
L_w sliding layers (use_sliding_window, from max_window_layers on, or layer_types)
beside L - L_w full ones;
``derive.architectures.saved.neox_layer_saved`` for GPT-NeoX; ``gemma_layers_saved``
for Gemma 2 / 3 (L_w sliding and L - L_w full layers, soft-capping);
``gpt2_layer_saved`` for GPT-2 without dropout;
``derive.architectures.saved.eager_layer`` for Mixtral, Qwen2-MoE (its
sigmoid-gated shared expert), Qwen3-MoE and DeepSeek-V3, whose MLA under sdpa takes
the CPU flash kernel where k_v = k_nope + k_rope and the fp32 math path elsewhere). The rows
that exist only under a condition (b = 1, g = b = 1 under eager attention, s >= w under
sdpa, k_v = k_nope + k_rope for DeepSeek's sdpa kernel, a, s > 1 for Phi 3's output copy,
b = 1 or a = 1 for GPT-2's eager q, 0 < L_w < L for Gemma 3's second RoPE pair) carry it
as a Piecewise count, so the expressions stay exact at every shape. ``derive.validate.hf_random``
compares these sums with transformers' own models at random shapes. A config whose dropout
or another setting keeps tensors derive does not list (``Layout.dropout``, ``Layout.unmodelled``)
is refused, naming the field.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import sympy as sp

from derive.accounts.activations import PRE_NORMS, llama_layer_form
from derive.accounts.hf_profiles import EXPERTS_IMPLEMENTATIONS, HF_PROFILES
from derive.architectures.decoder import Layout
from derive.architectures.operations.edges import (gemma_edges_saved, gpt2_edges_saved,
                                                  hf_edges_saved, neox_edges_saved)
from derive.architectures.operations.experts import EXPERTS
from derive.architectures.operations.rows import ACTIVATION, SINGLE_SEQUENCE, STATISTICS
from derive.architectures.saved import (eager_edges, eager_layer, gemma_layers_saved,
                                        gpt2_layer_saved, llama_layer_saved, neox_layer_saved)
from derive.inputs import choose
from derive.hf import from_config, load_config
from derive.hf_families import DENSE
from derive.model import MOE_FAMILIES, Model
from derive.symbols import L, L_E, L_w, k, k_rope
from derive.tensors import Ledger

if tuple(EXPERTS) != EXPERTS_IMPLEMENTATIONS:  # the names the CLI offers are the tables this module has
    raise ValueError(f"experts_implementation: derive.accounts.hf_profiles names {EXPERTS_IMPLEMENTATIONS}, "
                     f"derive.architectures.operations.experts.EXPERTS holds {tuple(EXPERTS)}")
#: Families whose dense layer is the Llama layer of llama_layer_saved (q/k head norms for Qwen 3,
#: fused qkv_proj and gate_up_proj for Phi 3, post-norms and projection q/k norms for OLMo 2).
LLAMA_LAYER_FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "phi3", "olmo2")
#: Families transformers refuses to run under sdpa (their PreTrainedModel's _supports_sdpa is False).
NO_SDPA = {"gemma2": "Gemma2PreTrainedModel._supports_sdpa is False: sdpa has no softcapping"}
#: Gemma's layer tables (derive.architectures.saved.gemma_layers_saved): model_type -> q/k head norms.
GEMMA_FAMILIES = {"gemma2": False, "gemma3_text": True}
#: OLMo 2's layer norms, as derive.hf reads them: after attention and after the MLP.
POST_NORMS = DENSE["olmo2"].layout.layer_norms


@dataclass(frozen=True)
class SavedForBackward:
    """Bytes one micro-batch keeps for backward: the model's edges and all its layers (symbolic)."""

    edges: sp.Expr
    layers: sp.Expr

    @property
    def total(self) -> sp.Expr:
        """The whole model's bytes kept for backward."""
        return self.layers + self.edges


def implementation_of(profile: str) -> str:
    """'hf-sdpa' -> 'sdpa'; a ValueError naming the profile otherwise."""
    return choose("profile", profile, HF_PROFILES).removeprefix("hf-")


def refuse_dropout(model: Model, profile: str) -> None:
    """A ValueError naming the first dropout field a config turns on (its masks are not modelled), or another unmodelled setting."""
    if model.layout is not None and model.layout.dropout:
        name, p = model.layout.dropout[0]
        raise ValueError(f"profile: {profile}: {name} = {p:g}: transformers' dropout masks are not "
                         f"modelled (set {name} to 0 for the bytes kept without dropout)")
    if model.layout is not None and model.layout.unmodelled:
        raise ValueError(f"profile: {profile}: {model.layout.unmodelled[0]}: the tensors "
                         "transformers keeps under this setting are not modelled")


def dense_saved(model: Model, profile: str) -> SavedForBackward:
    """A dense config's whole model under ``profile`` (hf-sdpa / hf-eager), heads of width k.

    A partial rotary config (Phi 3's partial_rotary_factor, ``derive.hf.rotary_width``) keeps
    cos / sin k_rope wide.
    """
    implementation = implementation_of(profile)
    model.require_dense("model")
    refuse_dropout(model, profile)
    layout = model.layout
    if model.model_type == "gpt_neox" and layout is not None:
        layer = neox_layer_saved(implementation, layout.parallel)
        edges = neox_edges_saved("k_rope" in dict(model.sizes))
        return SavedForBackward(edges.bytes(), layer.times(L).bytes())
    if model.model_type in GEMMA_FAMILIES and layout is not None:
        return gemma_saved(model, implementation)
    if model.model_type == "gpt2" and layout is not None:
        layer, edges = gpt2_layer_saved(implementation), gpt2_edges_saved()
        return SavedForBackward(edges.bytes(), layer.times(L).bytes())
    fused = layout is not None and layout.qkv_fused
    post_norms = layout is not None and layout.layer_norms == POST_NORMS
    unfused = layout and replace(layout, qkv_fused=False, gate_up_fused=False)
    if post_norms and layout.qk_norm == "projection":  # OLMo 2: the Llama layer, norms moved
        unfused = replace(unfused, layer_norms=PRE_NORMS, qk_norm="none")
    if (layout is None or model.model_type not in LLAMA_LAYER_FAMILIES
            or layout.gate_up_fused != fused or not llama_layer_form(unfused)):
        raise ValueError(f"profile: {profile}: transformers' saved tensors are modelled for "
                         f"{', '.join(LLAMA_LAYER_FAMILIES)}, gpt_neox, "
                         f"{', '.join(GEMMA_FAMILIES)}, gpt2 and the MoE families, not "
                         f"{model.model_type or model.family} ({model.name})")
    sizes = dict(model.sizes)
    window = "w" in sizes

    def layer(sliding: bool) -> Ledger:
        return llama_layer_saved(f"hf-{implementation}", k, qk_norm=layout.qk_norm == "head",
                                 window=sliding, fused=fused, post_norms=post_norms)

    if "L_w" in sizes:  # Qwen's layer_types: L_w sliding layers (from max_window_layers on)
        if sizes["L_w"] and not window:
            raise ValueError(f"profile: {profile}: layer_types: sliding_attention layers without "
                             "a sliding window (use_sliding_window, sliding_window) are not modelled")
        layers = layer(True).times(L_w) + layer(False).times(L - L_w)
    else:
        layers = layer(window).times(L)
    olmo2 = STATISTICS if post_norms else ACTIVATION  # Olmo2RMSNorm and its RoPE keep fp32
    rotary = k_rope if "k_rope" in sizes else k
    edges = hf_edges_saved(rotary, normalised=olmo2, rope=olmo2)
    return SavedForBackward(edges.bytes(), layers.bytes())


def gemma_saved(model: Model, implementation: str) -> SavedForBackward:
    """Gemma 2 / 3 (derive.architectures.saved.gemma_layers_saved): sdpa refused where transformers refuses it."""
    if implementation == "sdpa" and model.model_type in NO_SDPA:
        raise ValueError(f"profile: hf-sdpa: transformers runs {model.model_type} under eager "
                         f"only ({NO_SDPA[model.model_type]}); use hf-eager")
    sizes = dict(model.sizes)
    if implementation == "sdpa" and sizes.get("L_w") and "w" not in sizes:
        raise ValueError("sliding_window: null with sliding_attention layers is not modelled")
    qk_norm = GEMMA_FAMILIES[model.model_type]
    layers = gemma_layers_saved(implementation, qk_norm, model.layout.attention_softcap)
    edges = gemma_edges_saved(qk_norm, model.layout.logit_softcap)
    return SavedForBackward(edges.bytes(), layers.bytes())


def moe_saved(features: Layout, profile: str, window: bool = False,
              experts: str = "grouped_mm") -> SavedForBackward:
    """An MoE model (its ``derive.model.Model.layout``): L - L_E dense and L_E MoE layers.

    The b = 1 rows of the eager MoE tables are a flag there (``single_sequence``); here
    they enter as ``Piecewise(..., Eq(b, 1))`` of the two tables.
    """
    implementation = implementation_of(profile)
    choose("experts_implementation", experts, EXPERTS_IMPLEMENTATIONS)

    def at(single: bool) -> tuple[Ledger, Ledger]:
        layers = eager_layer(features, False, single, implementation, window).times(L - L_E)
        if features.moe is not None:  # a config whose every layer is dense has no MoE block
            layers += eager_layer(features, True, single, implementation, window, experts).times(L_E)
        return eager_edges(features, single), layers

    (edges_one, layers_one), (edges, layers) = at(True), at(False)
    return SavedForBackward(
        sp.Piecewise((edges_one.bytes(), SINGLE_SEQUENCE), (edges.bytes(), True)),
        sp.Piecewise((layers_one.bytes(), SINGLE_SEQUENCE), (layers.bytes(), True)))


def model_saved(model: Model, config, profile: str, experts: str = "grouped_mm") -> SavedForBackward:
    """The rows of ``model`` (read from the parsed ``config`` by from_config) under ``profile``."""
    if model.model_type in MOE_FAMILIES:
        implementation_of(profile)
        refuse_dropout(model, profile)
        window = "w" in dict(model.sizes)
        layer_types = config.get("layer_types") or ()
        if model.model_type == "qwen2_moe" and (config.get("use_sliding_window")
                                                 or "sliding_attention" in layer_types):
            raise ValueError(f"profile: {profile}: transformers' Qwen sliding-window layers "
                             "(use_sliding_window, layer_types) are not modelled")
        saved = moe_saved(model.layout, profile, window, experts)
        if "L_E" in dict(model.sizes):
            return saved
        # every layer dense (mlp_only_layers, first_k_dense_replace = L): no MoE layer at all
        return SavedForBackward(saved.edges, saved.layers.xreplace({L_E: 0}))
    return dense_saved(model, profile)


def config_saved(config, profile: str, experts: str = "grouped_mm") -> tuple[Model, SavedForBackward]:
    """(the Model from_config reads, its bytes kept for backward under ``profile``) for a config or its path."""
    parsed, _ = load_config(config)
    model = from_config(parsed)
    return model, model_saved(model, parsed, profile, experts)
