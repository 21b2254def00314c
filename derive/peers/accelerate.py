"""accelerate 1.15.0's ``estimate-memory``, read from derive's tables under the ``largest component`` view.

accelerate sizes the fp32 ``AutoModel`` (no ``lm_head``; buffers included) and splits
training into model / gradients / optimizer / step; derive's ``torch-amp`` placement
(fp32 parameters, fp32 gradients, Adam, and the bf16 autocast copy of the weights)
gives the same components per parameter, and accelerate prints the largest.
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.placement import placement_ledger
from derive.architectures.decoder import FAMILIES
from derive.architectures.tables import parameter_count
from derive.dtypes import dtype_bytes
from derive.peers import Reproduction, model_of, module_sizes
from derive.symbols import N
from derive.views import largest_component

#: accelerate's --dtypes and their bytes per element (int4: two per byte; accelerate divides by 8 from fp32).
ELEMENT_BYTES: dict[str, sp.Expr] = {"float32": sp.Integer(dtype_bytes("fp32")),
                                     "float16": sp.Integer(dtype_bytes("fp16")),
                                     "int8": sp.Integer(dtype_bytes("int8")), "int4": sp.Rational(1, 2)}
AUTOMODEL = ("AutoModel has no lm_head", "rotary inv_freq buffers counted as weights")
STEP = "mixed-precision step counted as the optimizer state alone"
VIEW = "torch-amp placement"


def components(mixed: bool) -> dict[str, sp.Expr]:
    """accelerate's training components per parameter from the torch-amp ledger (mixed: with the autocast copy)."""
    ledger = placement_ledger("torch-amp")
    resident = ledger.where("resident")
    autocast = ledger.where("autocast") if mixed else ledger.where("autocast", "resident")
    return {"model": resident.where("params").bytes() / N,
            "gradients": (resident.where("grads") + autocast).bytes() / N,
            "optimizer": resident.where("optimizer").bytes() / N,
            "step": resident.bytes() / N}


def _automodel(family: str) -> tuple[str, ...]:
    """The departures of accelerate's AutoModel count from derive's N (none for a tied GPT)."""
    return AUTOMODEL if family == "llama" else ()


def reproduce(record: dict, models: dict[str, dict]) -> dict[str, Reproduction]:
    """Each number of one accelerate record, as derive reproduces it."""
    model = model_of(record["model"], models)
    values = tuple(model.values.items())
    count = parameter_count(FAMILIES[model.family])
    automodel = _automodel(model.family)
    call = record["call"].split(".")[-1]

    def sized(per_parameter: sp.Expr, view: str, extra: tuple = ()) -> Reproduction:
        return Reproduction(view, per_parameter * count,
                            tuple((name, per_parameter) for name in automodel) + extra, values)

    def largest(element: sp.Expr) -> Reproduction:
        children = module_sizes(model, top_level=True, without=("output",) if automodel else ())
        return Reproduction("largest component: top-level modules of the parameter table",
                            element * largest_component(children)[1], (), values)

    fp32 = ELEMENT_BYTES["float32"]
    if call == "calculate_maximum_sizes":
        return {"total_size": sized(fp32, "fp32 parameter table"), "largest_layer": largest(fp32)}
    if call == "estimate_training_usage":
        mixed = record["kwargs"]["mixed_precision"] != "float32"
        return _training(record["result"], mixed, sized)
    dtype = record["result"]["dtype"]
    out = {"total_size": sized(ELEMENT_BYTES[dtype], f"{dtype} parameter table"),
           "largest_layer": largest(ELEMENT_BYTES[dtype])}
    if dtype in ("float32", "float16"):
        training = _training(record["result"]["training"], dtype == "float16", sized)
        out.update({f"training.{key}": rep for key, rep in training.items()})
        name, _ = largest_component({key: rep.value for key, rep in training.items()})
        out["training_using_adam"] = training[name]
    return out


def _training(result: dict, mixed: bool, sized) -> dict[str, Reproduction]:
    """Reproductions of accelerate's model / gradients / optimizer / step components."""
    per_parameter = components(mixed)
    out = {}
    for key, value in per_parameter.items():
        extra = ()
        if mixed and key == "step":
            automodel = sized(sp.Integer(1), "")          # accelerate's parameter count itself
            extra = ((STEP, automodel.value),)
        out[key] = sized(value, f"{VIEW}: {key}", extra)
    return {key: out[key] for key in result}
