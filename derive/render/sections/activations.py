"""Activations (the article, section 4): the GPT layer's saved tensors, Korthikanti's Table 2, the Llama profiles, per-model bytes."""
from __future__ import annotations

import sympy as sp

from derive.accounts.activations import (
    article_layer_bytes,
    article_model_bytes,
    layer_activation_bytes,
    layer_activations,
    logits_bytes,
    model_activation_bytes,
)
from derive.architectures.saved import gpt_layer_saved
from derive.identities import proof
from derive.identities.activations import GPT_ACTIVATIONS, TABLE2_ROWS, table2_key
from derive.presets import LLAMA3_MODELS, MODELS
from derive.printing.factored import coefficient, factored
from derive.printing.latex import tex
from derive.render.closed_forms import coefficient_cell, factored_cell, monomial_text, with_h_kv
from derive.render.sheet import (
    Cell,
    Column,
    Flowchart,
    Node,
    Section,
    Table,
    article_bytes_cell,
    bytes_cell,
    math_cell,
    text_cell,
)
from derive.symbols import FFN_4H, V, b, s
from derive.tensors import Tensor

PER_TOKEN = "B per token and layer"
PER_SBH = "B / (s b h)"
#: the article's worked numbers: one sequence per micro-batch (s from the presets), b = 1.
MICRO_BATCH = 1


def _worked_shape() -> str:
    """'s = 8192, b = 1': the presets' common sequence length and the micro-batch of the tables."""
    lengths = {MODELS[name].seq for name in LLAMA3_MODELS}
    if len(lengths) != 1:
        raise ValueError(f"seq: the Llama 3 presets disagree on s: {sorted(lengths)}")
    return f"s = {lengths.pop()}, b = {MICRO_BATCH}"
LLAMA_PROFILES = ("llama-eager", "llama-fused")
#: LaTeX width of a numeric column in the wide per-model table.
NARROW = "0.11\\linewidth"

#: Mermaid classes of the saved-tensor flowchart (the article's colours: blue TP-shardable, orange replicated).
FLOW_CLASSES: dict[str, tuple[str, str]] = {
    "tp": ("#dbeafe", "#1d4ed8"),
    "full": ("#ffedd5", "#c2410c"),
    "score": ("#ede9fe", "#6d28d9"),
    "stats": ("#f3f4f6", "#6b7280"),
}
FLOW_LEGEND = {
    "tp": "TP-shardable (split over t ranks)",
    "full": "replicated on every TP rank",
    "score": "score matrices [b, a, s, s] (TP-shardable; dropped by fused attention and selective recompute)",
    "stats": "norm statistics (kept by PyTorch; ignored by the closed form)",
}
BLOCKS = ("norm", "attention", "mlp")


def _yes(flag: bool, yes: str, no: str) -> Cell:
    return Cell(flag, yes if flag else no)


def _shape(tensor: Tensor) -> Cell:
    return Cell([sp.sstr(dim) for dim in tensor.shape],
                "[" + ", ".join(tex(dim) for dim in tensor.shape) + "]", math=True)


def per_token(tensor: Tensor) -> sp.Expr:
    """Bytes one tensor keeps per token (its bytes over s b)."""
    return sp.expand(tensor.bytes / (s * b))


def gpt_saved_table() -> Table:
    """Every tensor the GPT layer keeps for backward (derive.architectures.saved.gpt_layer_saved)."""
    rows = tuple(
        {"tensor": text_cell(tensor.name), "shape": _shape(tensor), "dtype": text_cell(tensor.dtype),
         "per_token": math_cell(per_token(tensor)),
         "tp": Cell("tp_shardable" if tensor.has("tp_shardable") else "replicated",
                    "TP-shardable" if tensor.has("tp_shardable") else "replicated"),
         "score": _yes(tensor.has("score_matrix"), "score matrix", ""),
         "selective": _yes(tensor.has("recomputed_selective"), "recomputed", "kept"),
         "counted": _yes(not tensor.has("norm_statistics"), "yes", "no")}
        for tensor in gpt_layer_saved()
    )
    return Table(
        "gpt_saved_tensors", "GPT layer: tensors saved for backward (materialised attention)",
        (Column("tensor", "tensor", width="0.2\\linewidth"), Column("shape", "shape"),
         Column("dtype", "dtype"), Column("per_token", "B / token", unit=PER_TOKEN),
         Column("tp", "under TP"), Column("score", "scores"),
         Column("selective", "selective"), Column("counted", "counted")),
        rows,
        note="B / token: bytes per token and layer, the tensor's bytes over s b (multiply by s b "
             "for one micro-batch). selective: what Korthikanti's selective recompute drops. "
             "counted: in sbh(34 + 5as/h) (the norm statistics are not). Korthikanti et al. 2022, "
             "section 4.1; f kept symbolic (the closed form substitutes f = 4h).",
    )


def gpt_forms() -> list[dict[str, str]]:
    """The GPT layer's sums, each a display equation: total, the 10 + 24 split, scores, statistics, fused."""
    total = proof("activations.gpt_layer_f").derived
    replicated = proof("activations.gpt_replicated").derived
    shardable = proof("activations.gpt_shardable").derived
    scores = proof("activations.gpt_scores").derived
    statistics = proof("activations.gpt_norm_statistics").derived
    fused = layer_activation_bytes("gpt", "fused")
    logsumexp = layer_activations("gpt", "fused").where("softmax_statistics").bytes()
    split = (coefficient(replicated + shardable), coefficient(replicated), coefficient(shardable))
    return [
        {"label": "sum of the counted rows (norm statistics aside)", "tex": tex(factored(total))},
        {"label": "at f = 4h (Korthikanti's closed form)", "tex": tex(factored(total.subs(FFN_4H)))},
        {"label": "replicated rows + TP-shardable rows (scores aside)",
         "tex": f"{tex(split[0])} = {tex(split[1])} + {tex(split[2])}"},
        {"label": "the three score matrices [b, a, s, s]", "tex": tex(scores)},
        {"label": "norm statistics (fp32 mean and rstd of two LayerNorms), left out",
         "tex": tex(factored(statistics, (s, b)))},
        {"label": "fused attention (scores gone, fp32 logsumexp kept)",
         "tex": f"{tex(factored(fused - logsumexp))} + {tex(logsumexp)}"},
        {"label": "logits: bf16 [s, b, V] + the fp32 copy for the loss", "tex": tex(factored(logits_bytes(), (s, b, V)))},
    ]


def table2() -> Table:
    """Korthikanti et al. 2022, Table 2, each row summed from the GPT table's tags at f = 4h (the proven side)."""
    rows = tuple(
        {"policy": text_cell(row.label), "form": factored_cell(proof(table2_key(row)).derived)}
        for row in TABLE2_ROWS
    )
    return Table(
        "korthikanti_table2", "Korthikanti et al. 2022, Table 2: bytes per layer per TP rank",
        (Column("policy", "policy"), Column("form", "bytes per layer", unit="B")),
        rows,
        note="t tensor-parallel ranks; TP divides the TP-shardable rows by t, sequence parallelism "
             "the replicated rows too; selective recompute drops the score matrices; full recompute "
             "keeps only the layer input.",
    )


def _coefficients() -> list[tuple[str, sp.Expr]]:
    """Bytes per sbh of each layer form: the article's GPT 34, Megatron's 18 + 4f/h, the Llama profiles."""
    return [
        ("GPT layer, materialised scores (the article)", coefficient(article_layer_bytes("materialised"))),
        ("GPT layer, fused attention (the article)", coefficient(article_layer_bytes("fused"))),
        ("Megatron compute_activation_memory (GPT, selective)",
         coefficient(layer_activation_bytes("gpt", recompute="selective"))),
        *((f"Llama {arch.removeprefix('llama-')} profile",
           coefficient(layer_activation_bytes(arch, softmax_statistics=False)))
          for arch in LLAMA_PROFILES),
    ]


def coefficients_table() -> Table:
    """Bytes per sbh, symbolic and at each Llama 3 shape."""
    rows = tuple(
        {"layer": text_cell(label), "coefficient": coefficient_cell(with_h_kv(value)),
         **{name: coefficient_cell(MODELS[name].subs(value)) for name in LLAMA3_MODELS}}
        for label, value in _coefficients()
    )
    return Table(
        "activation_coefficients", "Activation coefficient: bytes per s b h of one layer",
        (Column("layer", "layer", width="0.3\\linewidth"),
         Column("coefficient", "coefficient", unit=PER_SBH),
         *(Column(name, name, unit=PER_SBH) for name in LLAMA3_MODELS)),
        rows,
        note="h_kv = g h / a. Llama profiles: eager = PyTorch eager (nn.RMSNorm, SDPA, SiLU * up); "
             "fused = Megatron + Transformer Engine (fused RMSNorm, flash attention, fused SwiGLU); "
             "norm statistics and the logsumexp ignored, as in 34.",
    )


def _at(name: str, expr: sp.Expr) -> sp.Expr:
    """``expr`` at preset ``name`` (Model.at) and the tables' micro-batch."""
    return MODELS[name].at(expr, b=MICRO_BATCH)


def article_activations_table() -> Table:
    """The article's convention (GPT table at f = 4h applied to Llama 3) per model, s from the presets, b = 1."""
    rows = tuple(
        {"model": text_cell(name),
         "fused": article_bytes_cell(_at(name, article_layer_bytes("fused"))),
         "materialised": article_bytes_cell(_at(name, article_layer_bytes("materialised"))),
         "layers": article_bytes_cell(_at(name, article_model_bytes("fused", logits=False))),
         "logits": article_bytes_cell(_at(name, logits_bytes())),
         "total": article_bytes_cell(_at(name, article_model_bytes("fused"))),
         "total_materialised": article_bytes_cell(_at(name, article_model_bytes("materialised")))}
        for name in LLAMA3_MODELS
    )
    return Table(
        "activations_per_model", f"Activations per model, the article's convention ({_worked_shape()})",
        (Column("model", "model"), Column("fused", "per layer, fused", unit="B", width=NARROW),
         Column("materialised", "per layer, materialised", unit="B", width=NARROW),
         Column("layers", "L layers, fused", unit="B", width=NARROW),
         Column("logits", "logits 6sbV", unit="B", width=NARROW),
         Column("total", "L layers + logits, fused", unit="B", width=NARROW),
         Column("total_materialised", "L layers + logits, materialised", unit="B", width=NARROW)),
        rows,
        note="GPT table at f = 4h, norm statistics and logsumexp ignored (the article, section 4.3): "
             "per layer sbh(34 + 5as/h) materialised, 34sbh fused; logits 6sbV. In the article's units "
             "(its section 4.3 table): GB = 10^9 B, TB = 10^12 B.",
    )


def profile_activations_table() -> Table:
    """The Llama profiles per model: per layer and all layers + logits, s from the presets, b = 1."""
    rows = []
    for name in LLAMA3_MODELS:
        row = {"model": text_cell(name)}
        for arch in LLAMA_PROFILES:
            key = arch.removeprefix("llama-")
            row[f"{key}_layer"] = bytes_cell(
                _at(name, layer_activation_bytes(arch, softmax_statistics=False)))
            row[f"{key}_total"] = bytes_cell(
                _at(name, model_activation_bytes(arch, softmax_statistics=False)))
        rows.append(row)
    columns = [Column("model", "model")]
    for arch in LLAMA_PROFILES:
        key = arch.removeprefix("llama-")
        columns += [Column(f"{key}_layer", f"{key}: per layer", unit="B"),
                    Column(f"{key}_total", f"{key}: L layers + logits", unit="B")]
    return Table(
        "activations_llama_profiles", f"Activations per model, Llama profiles ({_worked_shape()})",
        tuple(columns), tuple(rows),
        note="The Llama layer as each profile runs it (GQA, SwiGLU, no dropout; fused attention), "
             "norm statistics and logsumexp ignored; logits 6sbV. GiB = 2^30 B, TiB = 2^40 B.",
    )


def _group_key(tensor: Tensor) -> tuple[object, ...]:
    block = next(tag for tag in BLOCKS if tensor.has(tag))
    scores = tensor.has("score_matrix")
    return (block, tensor.has("tp_shardable"), scores, tensor.has("norm_statistics"),
            tensor.has("dropout") and not scores)


def _flow_class(tensor: Tensor) -> str:
    if tensor.has("norm_statistics"):
        return "stats"
    if tensor.has("score_matrix"):
        return "score"
    return "tp" if tensor.has("tp_shardable") else "full"


def saved_tensor_groups() -> list[tuple[str, list[Tensor]]]:
    """Consecutive rows of the GPT table that one op keeps together, with their flowchart class."""
    groups: list[tuple[tuple[object, ...], list[Tensor]]] = []
    for tensor in gpt_layer_saved():
        if groups and groups[-1][0] == _group_key(tensor):
            groups[-1][1].append(tensor)
        else:
            groups.append((_group_key(tensor), [tensor]))
    return [(_flow_class(tensors[0]), tensors) for _, tensors in groups]


def saved_tensor_flowchart() -> tuple[Flowchart, list[dict[str, object]]]:
    """The article's figure regenerated: one node per group of saved tensors, bytes per token at f = 4h."""
    nodes, plain = [], []
    for index, (cls, tensors) in enumerate(saved_tensor_groups(), start=1):
        lines = [f"{tensor.name}: {monomial_text(per_token(tensor).subs(FFN_4H))} B/token"
                 for tensor in tensors]
        nodes.append(Node(f"n{index}", "\n".join(lines), cls))
        plain.append({"cls": cls, "lines": lines})
    edges = tuple((nodes[i].id, nodes[i + 1].id) for i in range(len(nodes) - 1))
    classes = {name: f"fill:{fill},stroke:{stroke}" for name, (fill, stroke) in FLOW_CLASSES.items()}
    return Flowchart("TB", tuple(nodes), edges, classes), plain


def activations_section() -> Section:
    """The activation ledger, its closed forms, Table 2, the coefficients and per-model bytes, with figures."""
    chart, plain = saved_tensor_flowchart()
    legend = [{"cls": cls, "name": FLOW_LEGEND[cls], "fill": fill[1:].upper(), "stroke": stroke[1:].upper()}
              for cls, (fill, stroke) in FLOW_CLASSES.items()]
    return Section(
        "activations", "Activations: sbh(34 + 5as/h) and the Llama layer",
        intro=("Every byte below is a row of a saved-for-backward table "
               "(derive.architectures.saved); the closed forms are their sums.",),
        tables={"gpt_saved_tensors": gpt_saved_table(), "korthikanti_table2": table2(),
                "activation_coefficients": coefficients_table(),
                "activations_per_model": article_activations_table(),
                "activations_llama_profiles": profile_activations_table()},
        extra={"forms": gpt_forms(), "assumptions": list(GPT_ACTIVATIONS), "flowchart": chart,
               "closed_form": tex(factored(article_layer_bytes("materialised"))),
               "flow_nodes": plain, "flow_legend": legend},
    )
