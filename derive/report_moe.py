"""The report for an MoE model: total and active N, states per GPU under t / e / t_E / p / d, activations, FLOPs per token.

Every number is a substitution into the expressions of ``derive.accounts.experts``
and ``derive.architectures.moe_model``; the layout is checked the way Megatron's
argument validation checks it (t divides the heads, e divides E, t_E divides
f_E, t_E e p divides the world t p d).
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from derive import megatron_moe
from derive.accounts.experts import (EXPERT_DATA_PARALLEL, moe_resident_bytes,
                                     first_stage_parameters, moe_first_stage_activation_bytes)
from derive.architectures.gemms import flops
from derive.architectures.moe_model import model_gemms, model_parameters
from derive.architectures.saved_moe import PROFILES
from derive.inputs import choose, positive_int
from derive.moe_presets import MoEModel
from derive.symbols import D, E, a, b, d, e, f_E, g, p, s, t, t_E
from derive.units import format_memory


@dataclass(frozen=True)
class MoELayout:
    """A parallel layout: tensor t, expert e, expert-tensor t_E, pipeline p, data d; micro-batch b."""

    tp: int = 1
    ep: int = 1
    etp: int = 1
    pp: int = 1
    dp: int = 1
    micro_batch: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "ep", "etp", "pp", "dp", "micro_batch"):
            positive_int(name, getattr(self, name))

    def check(self, model: MoEModel) -> None:
        """ValueError naming the option a model's shape does not divide."""
        sizes = model.values
        for option, divisor, field, dividend in (
                ("--tp", self.tp, "heads", sizes[a]), ("--tp", self.tp, "kv heads", sizes.get(g, sizes[a])),
                ("--ep", self.ep, "experts", sizes[E]), ("--etp", self.etp, "expert width", sizes[f_E]),
                ("--ep", self.etp * self.ep * self.pp, "world (tp pp dp)",
                 self.tp * self.pp * self.dp)):
            if dividend % divisor:
                raise ValueError(f"{option}: {divisor} does not divide the {field} ({dividend})")

    @property
    def values(self) -> dict[sp.Symbol, int]:
        return {t: self.tp, e: self.ep, t_E: self.etp, p: self.pp, d: self.dp, b: self.micro_batch}


def moe_figures(model: MoEModel, layout: MoELayout, profile: str = "fused") -> dict[str, float]:
    """Every number the MoE report prints, exact integers where they are."""
    choose("profile", profile, PROFILES)
    layout.check(model)
    at = {**layout.values}
    features = model.features
    table = model_parameters(features)
    stage = first_stage_parameters(table, layout.pp == 1)
    flops_per_token = flops(model_gemms(features))
    latent = None if features.attention == "gqa" else features.attention == "mla"
    megatron = megatron_moe.flops_per_token(latent, features.last_moe, features.shared, False)
    if not features.mtp:
        megatron = megatron.xreplace({D: 0})
    activations = moe_first_stage_activation_bytes(
        profile, features, t, layout.tp > 1, p)
    return {
        "parameters": model.parameters,
        "active_parameters": model.active_parameters,
        "mtp_parameters": model.mtp_parameters,
        "stage_parameters": model.subs(stage.numel(), **_names(at)),
        "stage_expert_parameters": model.subs(stage.where("routed_expert").numel(), **_names(at)),
        "expert_data_parallel": model.subs(EXPERT_DATA_PARALLEL, **_names(at)),
        "state_bytes": model.subs(moe_resident_bytes(stage, "bf16-fp32grad", "adam", zero_stage=1), **_names(at)),
        "state_bytes_plain": model.subs(moe_resident_bytes(stage, "bf16-fp32grad", "adam"), **_names(at)),
        "activation_bytes": model.subs(activations, **_names(at)),
        "flops_per_token": model.subs(flops_per_token),
        "megatron_flops_per_token": model.subs(megatron),
    }


def _names(values: dict[sp.Symbol, int]) -> dict[str, int]:
    return {symbol.name: n for symbol, n in values.items()}


def render_moe(model: MoEModel, layout: MoELayout, profile: str = "fused") -> str:
    """The text report."""
    v = {key: float(value) for key, value in moe_figures(model, layout, profile).items()}
    lines = [
        f"{model.name} (MoE; {model.source})",
        f"  parameters N            {v['parameters'] / 1e9:10.2f} B   active per token "
        f"{v['active_parameters'] / 1e9:.2f} B"
        + (f"   MTP modules {v['mtp_parameters'] / 1e9:.2f} B" if v["mtp_parameters"] else ""),
        f"  layout                  t = {layout.tp}, e = {layout.ep}, t_E = {layout.etp}, "
        f"p = {layout.pp}, d = {layout.dp} (EDP = {int(v['expert_data_parallel'])}), b = {layout.micro_batch}",
        f"  first stage, one GPU    {v['stage_parameters'] / 1e9:10.3f} B parameters "
        f"({v['stage_expert_parameters'] / 1e9:.3f} B routed experts)",
        f"  states per GPU          {format_memory(v['state_bytes']):>14} (Megatron bf16, distributed "
        f"optimizer: 6 + 12/d, experts 6 + 12/EDP); {format_memory(v['state_bytes_plain'])} without",
        f"  activations per GPU     {format_memory(v['activation_bytes']):>14} ({profile} profile, "
        f"first stage, {layout.pp} micro-batch(es) in flight, s = {model.values[s]})",
        f"  FLOPs per token         {v['flops_per_token'] / 1e9:10.1f} GFLOP (derived: 6 N_active_GEMM "
        f"+ scores, router included); Megatron {v['megatron_flops_per_token'] / 1e9:.1f}",
    ]
    return "\n".join(lines)
