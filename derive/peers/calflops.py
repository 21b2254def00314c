"""calflops 0.3.2 and torch's FlopCounterMode on small HF models, read from derive's GEMM table.

Both see derive-full (every GEMM, the whole score square): FlopCounterMode counts the
three passes of every GEMM; calflops counts the forward and multiplies by
1 + compute_bp_factor (= 3, derive's forward + dgrad + wgrad), adding element-wise
FLOPs of its own and missing what it does not wrap.
"""
from __future__ import annotations

import sympy as sp

from derive.architectures.decoder import FAMILIES
from derive.architectures.gemms import flops
from derive.architectures.tables import model_gemms, parameter_count
from derive.peers import Reproduction, model_of
from derive.symbols import L, b, s

#: Families whose HF attention calls SDPA with is_causal and no mask (the CPU flash kernel);
#: transformers' GPT-2 passes its mask, so SDPA takes the math path that FlopCounterMode counts.
FLASH_ON_CPU = ("llama",)
SDPA_CALFLOPS = "scaled_dot_product_attention not counted"
SDPA_COUNTER = "CPU flash-attention kernel counted as 0"


def _calflops_extras(family: str, eager: bool, tokens: int) -> tuple[tuple[str, sp.Expr], ...]:
    """calflops' departures from derive's forward, with how often each applies in one forward."""
    extras = []
    if eager:
        extras.append(("softmax counted at one FLOP per score", L * tokens))
    else:
        extras.append((SDPA_CALFLOPS, L * tokens))
    if family == "llama":
        extras.append(("SiLU counted at one FLOP per element", L * tokens))
    else:
        extras.append(("LayerNorm counted at 5 FLOPs per element", (2 * L + 1) * tokens))
        extras.append(("addmm bias counted once per call", L))
    return tuple(extras)


def reproduce(record: dict, models: dict[str, dict]) -> dict[str, Reproduction]:
    """Each number of one calflops or FlopCounterMode record, as derive reproduces it."""
    model = model_of(record["model"], models)
    family, eager = model.family, record["attn"] == "eager"
    batch, seq = record["kwargs"]["input_ids"]
    tokens = batch * seq
    values = tuple((model.values | {s: seq, b: batch}).items())
    gemms = model_gemms(FAMILIES[family], "full")
    forward = tokens * flops(gemms, "forward")
    if record["call"].startswith("calflops"):
        extras = _calflops_extras(family, eager, tokens)
        passes = 1 + record["kwargs"]["compute_bp_factor"]
        scale = sp.nsimplify(passes)
        macs = tuple((name, count) for name, count in extras if name == SDPA_CALFLOPS)
        return {
            "flops": Reproduction("convention derive-full, forward x (1 + compute_bp_factor)", forward,
                                  extras, values, scale=scale),
            "macs": Reproduction("convention derive-full, forward multiply-adds x (1 + compute_bp_factor)",
                                 forward / 2, tuple((name, count / 2) for name, count in macs), values,
                                 scale=scale),
            "params": Reproduction("parameter table (N)", parameter_count(FAMILIES[family]), (), values),
        }
    missing = ((SDPA_COUNTER, L * tokens),) if not eager and family in FLASH_ON_CPU else ()
    weights = tokens * flops(gemms.where("weight"))
    biased = tokens * flops(gemms.where("weight", "layer"), "forward")
    out = {"total": Reproduction("convention derive-full (forward + dgrad + wgrad)", tokens * flops(gemms),
                                 missing, values),
           "by_op.aten.bmm": Reproduction("derive-full score GEMMs (QK^T, PV)",
                                          tokens * flops(gemms.where("attention_score")), missing, values)}
    if family == "gpt":   # GPT-2's Conv1D runs its forward as torch.addmm(bias, x, W)
        out["by_op.aten.addmm"] = Reproduction("forward of the biased layer GEMMs", biased, (), values)
        out["by_op.aten.mm"] = Reproduction("every other weight-GEMM pass", weights - biased, (), values)
    else:
        out["by_op.aten.mm"] = Reproduction("every weight-GEMM pass", weights, (), values)
    return out
