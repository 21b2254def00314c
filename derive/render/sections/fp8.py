"""FP8 / FP4 training: bytes per parameter and saved-tensor coefficients by recipe, GEMM dtypes and traffic (derive.recipes)."""
from __future__ import annotations

import sympy as sp

from derive.accounts.activations import layer_activation_bytes
from derive.accounts.state import FP8_PRECISIONS, bytes_per_parameter
from derive.conventions.fp8 import (
    GEMM_KINDS,
    dispatch_bytes_per_element,
    flops_by_dtype,
    gather_ratio,
    gemm_dtype,
    gradient_reduction_dtype,
)
from derive.presets import LLAMA3_MODELS, model
from derive.recipes import RECIPES
from derive.render.sheet import Cell, Column, Section, Table, math_cell, text_cell
from derive.symbols import b, h, s
from derive.units import format_memory

#: The rows of the bytes-per-parameter table: (precision, optimizer, --fp8-param-gather, label).
STATE_ROWS = (
    ("bf16", "adam", False, "bf16 (the article's 16)"),
    ("bf16-fp32grad", "adam", False, "Megatron bf16 (18)"),
    *((name, "adam", False, name) for name in FP8_PRECISIONS),
    *((name, "adam", True, f"{name}, --fp8-param-gather") for name in FP8_PRECISIONS),
    ("fp8-blockwise", "adamw-bf16", False, "DeepSeek-V3: block-wise, BF16 moments"),
)
SBH = s * b * h
PER_PARAMETER = "B/param"


def decimal_cell(value: sp.Expr, digits: int = 3) -> Cell:
    """An exact rational: its SymPy string in the JSON, ``digits`` decimals on the sheet.

    Taken as it is (``sp.nsimplify`` would search a nearby simple number: 18 + 4 n_8 / N became 18).
    """
    value = sp.sympify(value)
    if not value.is_Rational:
        raise ValueError(f"value: {value} is not an exact rational")
    return Cell(sp.sstr(value), f"{float(value):.{digits}f}")


def state_table() -> Table:
    """Resident bytes per parameter by recipe: the closed form in N, N_8, n_8 and its value at each Llama 3 model."""
    models = [model(name) for name in LLAMA3_MODELS]
    rows = []
    for precision, optimizer, gather, label in STATE_ROWS:
        options = {"fp8_param_gather": True} if gather else {}
        form = bytes_per_parameter(precision, optimizer, **options)
        rows.append({"recipe": text_cell(label), "optimizer": text_cell(optimizer),
                     "form": math_cell(form),
                     **{m.name: decimal_cell(m.at(form)) for m in models}})
    return Table(
        "fp8_bytes_per_parameter", "Resident bytes per parameter by FP8 recipe",
        (Column("recipe", "recipe", width="0.22\\linewidth"), Column("optimizer", "optimizer"),
         Column("form", "closed form", unit=PER_PARAMETER),
         *(Column(m.name, m.name, unit=PER_PARAMETER) for m in models)),
        tuple(rows),
        note="N_8 parameters in n_8 layer matrices are quantised (the embedding, norms and head "
             "stay 16-bit); the FP8 weight and its transpose are cached across micro-batches; "
             "delayed scaling adds a 1024-step amax history for 5 FP8 tensors per GEMM.",
    )


def saved_table() -> Table:
    """Bytes per layer per micro-batch by recipe: the llama-fused and GPT tables with linear inputs re-typed."""
    llama70 = model("llama3-70b")
    rows = []
    for name in (None, *RECIPES):
        fused = layer_activation_bytes("llama-fused", "fused", softmax_statistics=False, recipe=name)
        gpt = layer_activation_bytes("gpt", "materialised", softmax_statistics=False, recipe=name)
        rows.append({"recipe": text_cell(name or "bf16"),
                     "llama_fused": math_cell(sp.expand(fused / SBH)),
                     "gpt": math_cell(sp.expand(gpt / SBH)),
                     "llama70": Cell(int(llama70.at(fused, b=1)),
                                     format_memory(llama70.at(fused, b=1), 3))})
    return Table(
        "fp8_saved_coefficients", "Saved-for-backward bytes per layer over sbh, by recipe",
        (Column("recipe", "recipe"), Column("llama_fused", "llama-fused", unit="B / sbh"),
         Column("gpt", "GPT, materialised scores", unit="B / sbh"),
         Column("llama70", "Llama 3 70B layer, s = 8192, b = 1", unit="B")),
        tuple(rows),
        note="Linear inputs kept for the weight gradient in FP8 with their scales; norms, "
             "attention, activation-function inputs and the head stay 16-bit; the attention output "
             "is kept 16-bit by flash attention and in FP8 by linear_proj. Statistics left out.",
    )


def gemm_table() -> Table:
    """Which GEMMs run in FP8 under each recipe, and the FP8 share of a Llama 3 70B token's training FLOPs."""
    llama70 = model("llama3-70b")
    rows = []
    for precision in ("bf16", *FP8_PRECISIONS):
        split = flops_by_dtype(precision, llama70.architecture)
        total = sp.Add(*split.values())
        low = RECIPES[precision].element if precision in RECIPES else None
        share = llama70.at(split.get(low, 0) / total, s=llama70.seq)
        rows.append({"precision": text_cell(precision),
                     **{kind: text_cell(gemm_dtype(precision, kind)) for kind in GEMM_KINDS},
                     "share": decimal_cell(share)})
    return Table(
        "fp8_gemms", "GEMM dtypes by recipe",
        (Column("precision", "precision"), *(Column(kind, kind) for kind in GEMM_KINDS),
         Column("share", "FP8 / FP4 share of Llama 3 70B FLOPs (s = 8192)")),
        tuple(rows),
        note="An MFU figure names its peak: the dense BF16 peak (bf16-peak) or the dense FP8 "
             "peak (fp8-peak, twice as high on H100 and B200); derive.conventions.fp8.MFU_PEAKS.",
    )


def traffic_table() -> Table:
    """Parameter all-gather, MoE dispatch and gradient-reduction dtypes by recipe."""
    rows = tuple(
        {"precision": text_cell(name), "gather": math_cell(gather_ratio(name)),
         "dispatch": math_cell(dispatch_bytes_per_element(name) / 2),
         "reduce": text_cell(gradient_reduction_dtype(name))}
        for name in FP8_PRECISIONS)
    return Table(
        "fp8_traffic", "Traffic relative to bf16, by recipe",
        (Column("precision", "precision"),
         Column("gather", "parameter all-gather (--fp8-param-gather)", unit="x bf16"),
         Column("dispatch", "MoE dispatch", unit="x bf16"),
         Column("reduce", "gradient reduction dtype")),
        rows,
        note="Scales travel with the data (E8M0 per 32, fp32 per 128 x 128 block or 1 x 128 tile); "
             "DeepSeek-V3 dispatches in FP8 and combines in BF16 (section 3.3.4).",
    )


def fp8_section() -> Section:
    """FP8 and MXFP8 training counted from the recipes' tensors."""
    return Section(
        "fp8", "FP8 training by recipe",
        intro=("Each recipe (Transformer Engine's delayed, current, MXFP8, block-wise and NVFP4 "
               "scaling; block-wise is DeepSeek-V3's 1 x 128 / 128 x 128 scheme) is a named convention in "
               "derive.recipes; the rows below are sums over the state ledger and the saved-tensor "
               "tables with the quantised rows re-typed, proved in identities.fp8.",),
        tables={"fp8_bytes_per_parameter": state_table(), "fp8_saved_coefficients": saved_table(),
                "fp8_gemms": gemm_table(), "fp8_traffic": traffic_table()},
    )
