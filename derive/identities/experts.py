"""Mixture of Experts, MLA and MTP: where Megatron-LM's numbers depart from the tables.

The claim side of each departure is Megatron's convention (``derive.megatron``, core_v0.18.0,
megatron/training/theoretical_memory_usage.py compute_weight_and_optimizer_memory and
compute_activation_memory, megatron/training/training.py num_floating_point_operations); the
derived side is derive's own table. Each is a departure (``holds=False``); :data:`DEPARTURES`
sizes each for DeepSeek-V3 and Mixtral 8x7B at :data:`LAYOUT`. The features the MoE
identities of the topic modules (parameters, state, flops, megatron) are stated at, their
topic and their sources are here too.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import sympy as sp

from derive.accounts.activations import layer_activation_bytes
from derive.accounts.experts import first_stage_parameters, moe_layer_activations
from derive.architectures.decoder import Layout, moe_layout
from derive.architectures.gemms import flops
from derive.architectures.tables import model_gemms, model_parameters
from derive.evaluation import substitute
from derive.identities import Sided, identity
from derive.megatron.activations import MEGATRON_LAYER
from derive.megatron.flops import flops_per_token
from derive.megatron.tables import moe_reading
from derive.megatron.weights import first_stage
from derive.symbols import b, d, e, p, t, t_E
from derive.tensors import Ledger

TOPIC = "Mixture of Experts"
MEMORY = "megatron/training/theoretical_memory_usage.py compute_weight_and_optimizer_memory (core_v0.18.0)"
FLOPS = "megatron/training/training.py num_floating_point_operations (transformer_flops, core_v0.18.0)"
#: The features the MoE identities are stated at: GQA experts; MLA with shared experts and MTP.
GQA = moe_layout("gqa")
MLA_MTP = moe_layout("mla", shared=True, mtp=True)


# ---- departures: Megatron vs the tables ----

#: The layout departures are sized at: t = 8, e = 8, t_E = 1, p = 4, d = 32 (1024 GPUs), b = 1.
LAYOUT: dict[sp.Symbol, int] = {t: 8, e: 8, t_E: 1, p: 4, d: 32, b: 1}


def _derived_first_stage(features: Layout, duplicated_latents: bool = True) -> Ledger:
    """The first of p > 1 stages on one rank (derive.accounts.experts.first_stage_parameters)."""
    return first_stage_parameters(model_parameters(features), False, duplicated_latents)


def _megatron_first_stage(features: Layout) -> Ledger:
    return first_stage(moe_reading(features), single_stage=False)


def mla_down_projections() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) first-stage parameters per GPU: Megatron splits MLA's duplicated latents by t."""
    features = moe_layout("mla", shared=True)
    return (_derived_first_stage(features, duplicated_latents=False).numel(),
            _derived_first_stage(features).numel())


def mtp_projection_and_norms() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) parameters of D MTP modules: Megatron counts only their layers."""
    table = model_parameters(MLA_MTP).where("mtp")
    return table.where("layer").numel(), table.numel()


def mtp_stage() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) first-stage parameters per GPU: Megatron puts the MTP block there."""
    features = moe_layout("mla", shared=True, mtp=True)
    counted = _megatron_first_stage(features).where("mtp").numel()
    return counted, sp.Integer(0)


def _gemm_flops(tag: str) -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) FLOPs per token of the GEMMs tagged ``tag``: Megatron counts none."""
    gemms = model_gemms(moe_layout("gqa", shared=True, gate=True))
    return sp.Integer(0), flops(gemms.where(tag))


def latent_norm_flops() -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) FLOPs per token Megatron gives MLA's latent norms and the MTP norms."""
    counted = flops_per_token(moe_reading(moe_layout("mla", shared=True)), False)
    derived = flops(model_gemms(MLA_MTP).without("router"))
    return counted, derived


def activations_ignore_moe(features: Layout) -> tuple[sp.Expr, sp.Expr]:
    """(Megatron, derived) bytes per MoE layer per GPU, SP + selective: Megatron prices a dense
    GPT layer of width f (ffn_hidden_size); derived: the fused MoE/MLA layer, statistics left aside."""
    counted = layer_activation_bytes(**MEGATRON_LAYER, tensor_parallel=t,
                                     sequence_parallel=True)
    derived = moe_layer_activations("fused", features, softmax_statistics=False).bytes()
    return counted, derived


@dataclass(frozen=True)
class Departure(Sided):
    """One way Megatron's MoE numbers depart from the tables, the pair it is read from, its unit."""

    name: str
    sides: Callable[[], tuple[sp.Expr, sp.Expr]]
    unit: str
    assumptions: tuple[str, ...]
    source: str = MEMORY
    needs: str = ""

    @property
    def difference(self) -> sp.Expr:
        """derived - Megatron, exactly."""
        counted, derived = self.pair
        return sp.expand(derived - counted)


DEPARTURES: tuple[Departure, ...] = (
    Departure("MLA down projections and latent norms divided by t", mla_down_projections,
              "parameters per GPU (first stage)",
              ("Transformer Engine spec: linear_q_down_proj, linear_kv_down_proj and their norms "
               "are duplicated on every TP rank (megatron/core/models/gpt/gpt_layer_specs.py)",),
              needs="mla"),
    Departure("MTP projection and norms not counted", mtp_projection_and_norms, "parameters",
              ("each MTP module: enorm, hnorm, eh_proj [2h, h], final norm besides its layer "
               "(megatron/core/transformer/multi_token_prediction.py MultiTokenPredictionLayer)",),
              needs="mtp"),
    Departure("MTP block counted on the first stage", mtp_stage, "parameters per GPU (first stage)",
              ("the MTP block lives on the last pipeline stage (gpt_model.py, mtp_process)",),
              needs="mtp"),
    Departure("activation estimators ignore MoE (GQA layer)", lambda: activations_ignore_moe(GQA),
              "bytes per MoE layer per GPU",
              ("SP + selective recompute; Megatron: the GPT table at f = ffn_hidden_size",
               "derived: fused profile, k_E token copies (dropless), router scores, routing map, "
               "permutation map; norm statistics and logsumexp left aside"),
              source=MEMORY.replace("compute_weight_and_optimizer_memory", "compute_activation_memory"),
              needs="gqa"),
    Departure("activation estimators ignore MoE and MLA", lambda: activations_ignore_moe(
                  moe_layout("mla", shared=True)), "bytes per MoE layer per GPU",
              ("SP + selective recompute; Megatron: the GPT table at f = ffn_hidden_size",
               "derived: fused profile, MLA latents and their norms' inputs, q/k of width "
               "d_n + k_rope, v of width k_v, shared expert"),
              source=MEMORY.replace("compute_weight_and_optimizer_memory", "compute_activation_memory"),
              needs="mla"),
    Departure("router GEMM not counted", lambda: _gemm_flops("router"), "FLOPs per token",
              ("the router [h, E] is a GEMM of every MoE layer (router.py TopKRouter.gating)",),
              source=FLOPS),
    Departure("shared-expert gate GEMM not counted", lambda: _gemm_flops("shared_expert_gate"),
              "FLOPs per token", ("Qwen2-MoE's gate [h, 1] is a GEMM of every MoE layer "
                                  "(shared_experts.py SharedExpertMLP.gate_weight)",),
              source=FLOPS, needs="gate"),
    Departure("MLA latent and MTP norms priced as GEMMs", latent_norm_flops,
              "FLOPs per token", ("Megatron's 6 (r_q + r_kv) per layer and 6 (3h) per MTP "
                                  "module are element-wise norms, not GEMMs",), source=FLOPS,
              needs="mla"),
)


def applies(entry: Departure, features: Layout) -> bool:
    """Whether a model with ``features`` can show the departure."""
    return {"": True, "mla": features.attention != "gqa", "gqa": features.attention == "gqa",
            "mtp": features.mtp, "gate": features.moe.shared_gate}[entry.needs]


def sizes(values: dict[sp.Symbol, int], features: Layout) -> dict[str, sp.Expr | None]:
    """Every departure's size (derived - Megatron) for one model at :data:`LAYOUT`; None where it cannot arise."""
    at = {**values, **LAYOUT}
    return {entry.name: (substitute(entry.difference, at)
                         if applies(entry, features) else None) for entry in DEPARTURES}


def _register(entry: Departure) -> None:
    @identity(f"Megatron MoE: {entry.name}", topic=TOPIC, claim=entry,
              key="experts." + re.sub(r"\W+", "_", entry.name).strip("_"),
              source=entry.source, assumptions=entry.assumptions, holds=False)
    def derived() -> sp.Expr:
        return entry.pair[1]


for _entry in DEPARTURES:
    _register(_entry)
