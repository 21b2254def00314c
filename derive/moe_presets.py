"""Published MoE model shapes (Mixtral 8x7B, DeepSeek-V3, Qwen3-30B-A3B) as symbol values and table features."""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from derive.architectures.moe_model import MoEFeatures, active_parameters, model_parameters
from derive.inputs import choose
from derive.symbols import (BY_NAME, D, E, k_E, L, L_E, V, a, k_nope, k_rope, k_v, f, f_E, f_S, g, h, k,
                            k_g, n_g, r_kv, r_q, s)


@dataclass(frozen=True)
class MoEModel:
    """A named MoE shape: the values of derive's symbols and the rows its tables hold."""

    name: str
    features: MoEFeatures
    values: dict[sp.Symbol, int] = field(hash=False)
    source: str = ""

    def subs(self, expr: sp.Expr, **extra: int) -> sp.Expr:
        """``expr`` with this model's sizes (and ``extra`` symbol=value pairs) substituted."""
        values = {**self.values, **{BY_NAME.get(name, sp.Symbol(name)): n for name, n in extra.items()}}
        return sp.sympify(expr).xreplace({symbol: sp.Integer(n) for symbol, n in values.items()})

    @property
    def parameters(self) -> int:
        """N: every parameter of the main model once (MTP modules apart, as published)."""
        return int(self.subs(model_parameters(self.features).without("mtp").numel()))

    @property
    def active_parameters(self) -> int:
        """Parameters one token passes through in the main model (routed experts: k_E of E)."""
        return int(self.subs(active_parameters(self.features).without("mtp").numel()))

    @property
    def mtp_parameters(self) -> int:
        """Parameters of the MTP modules (0 without them); embedding and head are shared."""
        return int(self.subs(model_parameters(self.features).where("mtp").numel()))


MOE_MODELS: dict[str, MoEModel] = {
    "mixtral-8x7b": MoEModel(
        "Mixtral 8x7B", MoEFeatures("gqa"),
        {L: 32, L_E: 32, h: 4096, a: 32, g: 8, k: 128, f: 14336, E: 8, k_E: 2, f_E: 14336,
         V: 32000, s: 32768},
        "mistralai/Mixtral-8x7B-v0.1 config.json; Jiang et al. 2024 (Mixtral of Experts), Table 1"),
    "deepseek-v3": MoEModel(
        "DeepSeek-V3", MoEFeatures("mla", shared=True, mtp=True, router="sigmoid-grouped"),
        {L: 61, L_E: 58, h: 7168, a: 128, f: 18432, E: 256, k_E: 8, f_E: 2048, f_S: 2048,
         r_q: 1536, r_kv: 512, k_nope: 128, k_rope: 64, k_v: 128, V: 129280, D: 1, n_g: 8, k_g: 4,
         s: 4096},
        "deepseek-ai/DeepSeek-V3 config.json; DeepSeek-V3 report, sections 2 and 4.2 "
        "(61 layers, first 3 dense, 1 shared + 256 routed experts, 8 active, one MTP module, s = 4096)"),
    "qwen3-30b-a3b": MoEModel(
        "Qwen3-30B-A3B", MoEFeatures("gqa", qk_norm=True, weights_dtype="bf16"),
        {L: 48, L_E: 48, h: 2048, a: 32, g: 4, k: 128, f: 6144, E: 128, k_E: 8, f_E: 768,
         V: 151936, s: 32768},
        "Qwen/Qwen3-30B-A3B config.json (48 layers, 128 experts, 8 active, head_dim 128)"),
}


def moe_model(name: str) -> MoEModel:
    """The MoE preset ``name``; ValueError listing the known ones."""
    return MOE_MODELS[choose("model", name, MOE_MODELS)]
