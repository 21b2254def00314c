"""FLOPs GEMM by GEMM, per token under every convention, and the step-time bounds (the article, section 6)."""
from __future__ import annotations

import sympy as sp

from derive.accounts.flops import flops_per_token, step_time_lower_bound
from derive.architectures.decoder import FAMILIES, LLAMA
from derive.architectures.tables import layer_gemms, model_gemms, output_gemms
from derive.architectures.gemms import Gemm, attention_score_gemms, flops
from derive.conventions import CONVENTIONS, six_n, six_n_gemm
from derive.identities import proof
from derive.presets import ARTICLE_EXAMPLE, LLAMA3_MODELS, hardware, model
from derive.printing.latex import tex
from derive.render.quantities import (
    blank_cell,
    days_cell,
    flop_cell,
    percent_cell,
    seconds_cell,
)
from derive.render.sheet import (
    Cell,
    Column,
    Section,
    Table,
    int_cell,
    math_cell,
    text_cell,
)
from derive.symbols import MFU, F, G, P, T
from derive.tensors import Ledger

#: The article's worked example (section 6.4): its model, GPU, step and cluster sizes.
EXAMPLE = ARTICLE_EXAMPLE
EXAMPLE_MODEL = EXAMPLE.model
PASSES = ("forward", "dgrad", "wgrad")
LAYER_TITLES = {"llama": "Llama layer", "gpt": "GPT layer"}


def _shape(gemm: Gemm) -> Cell:
    """m x n x k of one copy, as LaTeX; the JSON keeps the three expressions."""
    sides = (gemm.m, gemm.n, gemm.k)
    return Cell([sp.sstr(side) for side in sides], r" \times ".join(tex(side) for side in sides), math=True)


def _passes(ledger: Ledger) -> dict[str, Cell]:
    """Forward, dgrad, wgrad and their sum over ``ledger``, as expressions."""
    cells = {kind: math_cell(flops(ledger, kind)) for kind in PASSES}
    cells["training"] = math_cell(flops(ledger))
    return cells


def pass_columns(width: str = "") -> tuple[Column, ...]:
    """forward, dgrad, wgrad, total; a LaTeX ``width`` lets a long sum break at its + signs."""
    return tuple(Column(key, title, unit="FLOP/token", width=width)
                 for key, title in (("forward", "forward"), ("dgrad", "dgrad"), ("wgrad", "wgrad"),
                                    ("training", "total")))


def gemm_table(family: str) -> Table:
    """Every GEMM of one layer (causal scores) and the output head: shape, copies, FLOPs of each pass."""
    rows = []
    for where, ledger in (("layer", layer_gemms(FAMILIES[family], "causal")),
                          ("model", output_gemms(FAMILIES[family]))):
        for gemm in ledger:
            rows.append({"gemm": text_cell(gemm.name), "where": text_cell(where),
                         "shape": _shape(gemm), "count": math_cell(gemm.count),
                         **_passes(Ledger([gemm]))})
    return Table(
        f"flops_gemms_{family}", f"GEMMs of the {LAYER_TITLES[family]} and the output head, per token",
        (Column("gemm", "GEMM", width="0.2\\linewidth"), Column("where", "per"),
         Column("shape", "m x n x k"), Column("count", "copies"), *pass_columns()),
        tuple(rows),
        note="One token's row: m = 1 for a weight GEMM. Each pass costs 2mnk per copy. A score GEMM "
             "(QK^T, PV) multiplies two activations: its backward is two dgrads and no wgrad. Scores "
             "are shown under the causal mask (s/2 keys per query on average).",
    )


#: subtotal -> (GEMMs, key of the identity whose claim is the closed form), per family.
def _subtotals(family: str) -> tuple[tuple[str, Ledger, str | None], ...]:
    return (
        ("one layer: weight GEMMs", layer_gemms(FAMILIES[family], "none"), None),
        ("one layer: scores, causal", attention_score_gemms("causal"), "flops.scores_causal"),
        ("one layer: scores, full", attention_score_gemms("full"), "flops.scores_full"),
        ("model: weight GEMMs (L layers + head)", model_gemms(FAMILIES[family], "none"),
         f"flops.{family}.weight_gemms"),
        ("model: causal", model_gemms(FAMILIES[family], "causal"), f"flops.{family}.causal"),
        ("model: full attention", model_gemms(FAMILIES[family], "full"), f"flops.{family}.full"),
    )


def subtotal_table() -> Table:
    """Sums over the GEMM tables beside the closed forms the registry proves them equal to."""
    rows = []
    for family in LAYER_TITLES:
        for name, ledger, identity in _subtotals(family):
            closed = proof(identity) if identity else None
            rows.append({
                "family": text_cell(family), "subtotal": text_cell(name), **_passes(ledger),
                "closed_form": math_cell(closed.identity.claim) if closed else blank_cell(),
                "status": text_cell(closed.verdict) if closed else blank_cell(),
            })
    return Table(
        "flops_subtotals", "Subtotals and their proven closed forms (per token)",
        (Column("family", "family"), Column("subtotal", "subtotal", width="0.1\\linewidth"),
         *pass_columns("0.13\\linewidth"),
         Column("closed_form", "closed form", unit="FLOP/token", width="0.08\\linewidth"),
         Column("status", "proof")),
        tuple(rows),
        note="N_GEMM: the parameters that sit in a GEMM (layer matrices and output head).",
    )


def per_token_table() -> Table:
    """6N, 6N_GEMM and the derived causal / full counts per token for the Llama 3 models (section 6.4)."""
    rows = []
    for name in LLAMA3_MODELS:
        preset = model(name)
        six, causal = preset.at(six_n()), preset.at(flops_per_token(LLAMA, "causal"))
        weights = preset.at(six_n_gemm("llama"))
        rows.append({
            "model": text_cell(name), "N": int_cell(preset.parameters), "six_n": flop_cell(six),
            "six_n_gemm": flop_cell(weights), "causal": flop_cell(causal),
            "full": flop_cell(preset.at(flops_per_token(LLAMA, "full"))),
            "gap": percent_cell(causal / six - 1), "attention": percent_cell(causal / weights - 1),
        })
    return Table(
        "flops_per_token", f"FLOPs per token, s = {model(EXAMPLE_MODEL).seq}",
        (Column("model", "model"), Column("N", "N", unit="parameters"),
         *(Column(key, title, unit=unit, width="0.09\\linewidth") for key, title, unit in (
             ("six_n", "6N", "FLOP/token"), ("six_n_gemm", "6 N_GEMM", "FLOP/token"),
             ("causal", "6 N_GEMM + 6Lsh (causal)", "FLOP/token"),
             ("full", "6 N_GEMM + 12Lsh (full)", "FLOP/token"),
             ("gap", "causal / 6N - 1", "fraction"),
             ("attention", "causal / 6 N_GEMM - 1", "fraction")))),
        tuple(rows),
        note="GFLOP = 10^9 FLOP. The gap is how far 6N falls short of the causal count; the last "
             "column is the attention share beside the weight GEMMs (about s/12h).",
    )


def conventions_table() -> Table:
    """Every named convention of derive.conventions at the three Llama 3 presets, with source and assumptions."""
    rows = []
    for convention in CONVENTIONS.values():
        expr = convention("llama")
        rows.append({
            "convention": text_cell(convention.name),
            **{name: flop_cell(model(name).at(expr), digits=1) for name in LLAMA3_MODELS},
            "source": text_cell(convention.source),
            "assumptions": Cell(list(convention.assumptions), "; ".join(convention.assumptions)),
        })
    return Table(
        "flops_conventions", f"FLOPs per token under each convention, s = {model(EXAMPLE_MODEL).seq}",
        (Column("convention", "convention"),
         *(Column(name, name, unit="FLOP/token") for name in LLAMA3_MODELS),
         Column("source", "source", width="0.17\\linewidth"),
         Column("assumptions", "assumptions", width="0.24\\linewidth")),
        tuple(rows),
        note="GFLOP = 10^9 FLOP, one decimal. kaplan takes the Llama layer matrices as its N; the "
             "narayanan forms are the published GPT-layer expressions (f = 4h, MHA) evaluated at the "
             "Llama shapes.",
    )


def _bound_row(scenario: str, name: str, tokens: int, gpus: int, mfu: float, days: bool = False
               ) -> dict[str, Cell]:
    """One step-time lower bound: tokens x causal FLOPs per token / (GPUs x peak x MFU)."""
    preset = model(name)
    per = preset.at(flops_per_token(LLAMA, "causal"))
    seconds = step_time_lower_bound(tokens, float(per), gpus, hardware(EXAMPLE.gpu).peak_flops, mfu=mfu)
    return {"scenario": text_cell(scenario), "model": text_cell(name), "tokens": int_cell(tokens),
            "gpus": int_cell(gpus), "mfu": percent_cell(mfu, 0),
            "bound": days_cell(seconds) if days else seconds_cell(seconds)}


def step_time_table() -> Table:
    """The article's step-time lower bounds (section 6.4) on H100s."""
    rows = [_bound_row("one sequence, one GPU", name, model(name).seq, 1, 1) for name in LLAMA3_MODELS]
    target = float(EXAMPLE.target_mfu)
    rows += [_bound_row("one step (4M tokens)", EXAMPLE_MODEL, EXAMPLE.step_tokens, EXAMPLE.gpus, mfu)
             for mfu in (1, target)]
    rows += [_bound_row("15T tokens", EXAMPLE_MODEL, EXAMPLE.training_tokens, gpus, target, days=True)
             for gpus in (EXAMPLE.gpus, EXAMPLE.large_gpus)]
    gpu = hardware(EXAMPLE.gpu)
    return Table(
        "step_time_bounds", f"Step-time lower bounds on {gpu.name.upper()} ({gpu.peak_flops / 1e12:.0f} TFLOPS bf16 dense)",
        (Column("scenario", "scenario"), Column("model", "model"), Column("tokens", "tokens"),
         Column("gpus", "GPUs"), Column("mfu", "MFU", unit="fraction"), Column("bound", "at least", unit="s")),
        tuple(rows),
        note="tokens x (6 N_GEMM + 6Lsh) / (GPUs x peak x MFU); the 15T-token rows in days of 86,400 s.",
    )


def step_time_formula() -> Table:
    """The bound as the function users call computes it, on symbols."""
    return Table(
        "step_time_formula", "Step-time lower bound",
        (Column("quantity", "quantity"), Column("expression", "expression")),
        ({"quantity": text_cell("seconds per step (T tokens, F FLOP/token, G GPUs, P peak FLOPS)"),
          "expression": math_cell(step_time_lower_bound(T, F, G, P, mfu=MFU))},),
    )


def flops_section() -> Section:
    """GEMM tables, subtotals, FLOPs per token, conventions and step-time bounds."""
    return Section(
        "flops", "FLOPs per token",
        intro=("Every count below is a sum over GEMM tables built from the parameter tables: each weight "
               "GEMM runs a forward, a dgrad and a wgrad of 2mnk FLOPs each, so the 6 per parameter is a "
               "count of passes; the attention-score GEMMs add 6sh per layer under a causal mask and 12sh "
               "without one.",),
        tables={"flops_gemms_llama": gemm_table("llama"), "flops_gemms_gpt": gemm_table("gpt"),
                "flops_subtotals": subtotal_table(), "flops_per_token": per_token_table(),
                "flops_conventions": conventions_table(), "step_time_formula": step_time_formula(),
                "step_time_bounds": step_time_table()},
    )
