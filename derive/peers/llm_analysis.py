"""llm-analysis 0.2.2's LLMAnalysis methods, read from derive's parameter, state and GEMM tables.

Every memory figure is a parameter subset of derive's table times the bytes per parameter
of one state account (:func:`~derive.accounts.state.state_bytes` of ``bf16-fp32grad`` +
Adam: bf16 weights, fp32 gradients, fp32 master and moments) under ZeRO over ``dp_size``;
FLOPs are derive's GEMM table with the full score square (``derive-full``), forward or
backward, times batch x sequence tokens.
"""
from __future__ import annotations

import sympy as sp

from derive.accounts.activations import layer_activations, logits_bytes
from derive.accounts.state import state_bytes
from derive.architectures.decoder import FAMILIES
from derive.architectures.gemms import flops
from derive.architectures.tables import edge_parameters, layer_parameters, model_gemms, model_parameters
from derive.peers import Reproduction, model_of
from derive.symbols import L, N, b, d, s

STAGES = {"NONE": 0, "STAGE_1": 1, "STAGE_2": 2, "STAGE_3": 3}
LLAMA = {"mlp": "MLP counted as two h x f matrices", "embedding": "input embedding and output head counted once (tied)",
         "flops": "MLP FLOPs taken as 16 h^2 (two matrices at f = 4h)"}
GPT = {"attention": "attention biases not counted", "mlp": "MLP biases not counted",
       "norm": "LayerNorm bias not counted", "embedding": "learned position embedding not counted"}


def _subsets(family: str) -> dict[str, tuple[sp.Expr, tuple[tuple[str, sp.Expr], ...]]]:
    """Parameter subsets llm-analysis counts: derive's count and the departures (name, times) from it."""
    layer, edges = layer_parameters(FAMILIES[family]), edge_parameters(FAMILIES[family])
    attention = layer.where("attention").without("norm").numel()
    mlp = layer.where("mlp").without("norm").numel()
    norms = layer.where("norm").numel()
    embedding, final = edges.without("norm").numel(), edges.where("norm").numel()
    if family == "llama":
        per_layer = ((LLAMA["mlp"], 1),)
        return {"attn": (attention, ()), "mlp": (mlp, per_layer), "layernorm": (norms, ()),
                "layer": (layer.numel(), per_layer), "embedding": (embedding, ((LLAMA["embedding"], 1),)),
                "last_layernorm": (final, ()),
                "total": (model_parameters(FAMILIES[family]).numel(), ((LLAMA["mlp"], L), (LLAMA["embedding"], 1)))}
    layer_departures = ((GPT["attention"], 1), (GPT["mlp"], 1), (GPT["norm"], 2))
    return {"attn": (attention, ((GPT["attention"], 1),)), "mlp": (mlp, ((GPT["mlp"], 1),)),
            "layernorm": (norms, ((GPT["norm"], 2),)), "layer": (layer.numel(), layer_departures),
            "embedding": (embedding, ((GPT["embedding"], 1),)), "last_layernorm": (final, ((GPT["norm"], 1),)),
            "total": (model_parameters(FAMILIES[family]).numel(),
                      tuple((name, L * times) for name, times in layer_departures)
                      + ((GPT["embedding"], 1), (GPT["norm"], 1)))}


def _per_parameter(account: str, stage: int, ranks: int) -> sp.Expr:
    """Bytes per parameter of one account of bf16-fp32grad + Adam under ZeRO ``stage`` over ``ranks``."""
    held = state_bytes("bf16-fp32grad", "adam", stage, d)
    return sp.expand(getattr(held, account) / N).subs(d, ranks)


def reproduce(record: dict, models: dict[str, dict]) -> dict[str, Reproduction]:
    """Each number of one llm-analysis record, as derive reproduces it."""
    model = model_of(record["model"], models)
    family = model.family
    values = tuple(model.values.items())
    method = record["call"].split(".")[-1]
    subsets = _subsets(family)
    ranks = record["parallelism"]["dp_size"]
    stage = STAGES[record["kwargs"].get("ds_zero", "NONE")]

    def counted(subset: str, scale: sp.Expr = 1, view: str = "parameter table") -> Reproduction:
        derived, departures = subsets[subset]
        return Reproduction(view, derived, departures, values, scale=scale)

    if method.startswith("get_num_params_"):
        subset = method.removeprefix("get_num_params_").removeprefix("per_layer_")
        return {"": counted(subset)}
    if method == "get_weight_memory_per_layer":
        return {"": counted("layer", _per_parameter("params", stage, ranks), "bf16 weights of one layer")}
    if method == "get_memory_embedding":
        return {"": counted("embedding", _per_parameter("params", stage, ranks), "bf16 embedding weights")}
    if method.startswith("get_memory_optimizer_state_and_gradient_"):
        subset = "layer" if method.endswith("per_layer") else "embedding"
        return {"optimizer_state": counted(subset, _per_parameter("optimizer", stage, ranks),
                                           "fp32 master + Adam moments (bf16-fp32grad + adam)"),
                "gradient": counted(subset, _per_parameter("grads", stage, ranks),
                                    "fp32 gradients (bf16-fp32grad + adam)")}
    if "activation" in method:
        return _activations(record, model)
    tokens = record["kwargs"]["batch_size"] * record["kwargs"]["seq_len"]
    seq = (model.values | {s: record["kwargs"]["seq_len"]}).items()
    backward = method == "get_num_flops_bwd_total"
    passes = ("dgrad", "wgrad") if backward else ("forward",)
    departures = ((LLAMA["flops"], L * tokens * (2 if backward else 1)),) if family == "llama" else ()
    return {"": Reproduction("convention derive-full, " + ("backward" if backward else "forward"),
                             tokens * flops(model_gemms(FAMILIES[family], "full"), *passes), departures, tuple(seq))}



#: Departures of llm-analysis's per-layer activations from derive's table, block by block.
_GPT_BLOCKS = {
    ("none", True): {"attn": (("flash attention counted as 2sbh + 4abs 16-bit elements", 1),)},
    ("none", False): {"attn": (("attention dropout mask not counted", 1),)},
}
_LLAMA_ATTENTION = (("k and v counted at width h (GQA ignored)", 1),
                    ("attention-output dropout mask counted without dropout", 1))


def _blocks(family: str, recompute: str, flash: bool) -> dict[str, tuple[tuple[str, int], ...]]:
    """Departures per llm-analysis block (attn, mlp, layernorm) for one family and policy."""
    if recompute == "full":
        return {"attn": (), "mlp": (), "layernorm": (("full recompute: the kept layer input is in no block", 1),)}
    norms = (("norm input counted in fp32", 2),)
    if family == "gpt":
        attention = _GPT_BLOCKS.get((recompute, flash), {}).get("attn", ())
        return {"attn": attention, "mlp": (("MLP dropout mask not counted", 1),), "layernorm": norms}
    kernel = (("flash attention counted as 2sbh + 4abs 16-bit elements", 1),) if recompute == "none" else (
        ("selective recompute: the flash kernel's logsumexp not counted", 1),)
    return {"attn": _LLAMA_ATTENTION + kernel,
            "mlp": (("SwiGLU's gate and up counted as one f-wide tensor", 1),), "layernorm": norms}


def _activations(record: dict, model) -> dict[str, Reproduction]:
    """llm-analysis's activation bytes: derive's saved-tensor table (GPT, or Llama with fused kernels)."""
    kw = record["kwargs"]
    values = tuple((model.values | {s: kw["seq_len"], b: kw["batch_size"]}).items())
    if record["call"].endswith("output_embedding"):
        return {"": Reproduction("bf16 logits and their fp32 copy", logits_bytes(),
                                 (("logits kept once in 16 bits", 1),), values)}
    recompute = kw["activation_recomputation"].lower()
    if model.family == "gpt":
        attention = "fused" if kw["flash_attn"] and recompute == "none" else "materialised"
        table = layer_activations("gpt", attention, recompute=recompute)
    else:
        table = layer_activations("llama-fused", "fused", recompute=recompute)
    view = f"saved-tensor table ({model.family}, {recompute} recompute)"
    blocks = {"attn": table.where("attention"), "mlp": table.where("mlp"), "layernorm": table.where("norm")}
    departures = _blocks(model.family, recompute, kw["flash_attn"])
    out = {key: Reproduction(view, rows.bytes(), departures[key], values) for key, rows in blocks.items()}
    in_blocks = () if recompute == "full" else sum(departures.values(), ())   # full: only the total holds it
    out["total"] = Reproduction(view, table.bytes(), in_blocks, values)
    return out
