"""Bytes per parameter: every precision x optimizer, plain and under ZeRO 1-3, and Megatron's distributed optimizer."""
from __future__ import annotations

import sympy as sp

from derive.accounts.state import (
    FP8_PRECISIONS,
    OPTIMIZERS,
    PRECISIONS,
    bytes_per_parameter,
    partitioned,
    state_ledger,
)
from derive.conventions.megatron import (
    MEGATRON_RECIPES,
    distributed_optimizer_bytes_per_parameter,
)
from derive.render.figures import Bar, Segment, stacked_bars
from derive.render.sheet import Column, Drawing, Section, Table, math_cell, text_cell
from derive.symbols import N, d

STAGES = (0, 1, 2, 3)
STAGE_NAMES = {0: "plain", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}
#: data-parallel ranks at which the figure draws the sharded shares (one 8-GPU node).
FIGURE_RANKS = 8
PER_RANK = "B/param per rank"


def bytes_per_parameter_table() -> Table:
    """Resident bytes per parameter per rank, every precision x optimizer x ZeRO stage (ZeRO section 5.1)."""
    rows = tuple(
        {"precision": text_cell(precision), "optimizer": text_cell(optimizer),
         **{f"zero{stage}": math_cell(bytes_per_parameter(precision, optimizer, stage))
            for stage in STAGES}}
        for precision in PRECISIONS for optimizer in OPTIMIZERS
    )
    return Table(
        "bytes_per_parameter", "Resident bytes per parameter, per data-parallel rank",
        (Column("precision", "precision"), Column("optimizer", "optimizer"),
         *(Column(f"zero{stage}", STAGE_NAMES[stage], unit=PER_RANK) for stage in STAGES)),
        rows,
        note="d data-parallel ranks; ZeRO-1 partitions optimizer state (fp32 master included), "
             "ZeRO-2 also gradients, ZeRO-3 also parameters. FP8 precisions: N_8 parameters in "
             "n_8 layer matrices are quantised (the FP8 section gives them at each model).",
    )


def megatron_table() -> Table:
    """Megatron's table of bytes/parameter, plain and with the distributed optimizer (dist_optimizer.md)."""
    rows = tuple(
        {"precision": text_cell(precision), "recipe": text_cell(recipe),
         "plain": math_cell(distributed_optimizer_bytes_per_parameter(precision, False)),
         "distributed": math_cell(distributed_optimizer_bytes_per_parameter(precision, True))}
        for precision, recipe in MEGATRON_RECIPES.items()
    )
    return Table(
        "megatron_distributed_optimizer", "Megatron: plain and distributed optimizer (Adam)",
        (Column("precision", "Megatron precision"), Column("recipe", "derive recipe"),
         Column("plain", "plain", unit=PER_RANK),
         Column("distributed", "distributed optimizer", unit=PER_RANK)),
        rows,
        note="Megatron-LM docs/user-guide/features/dist_optimizer.md; the distributed optimizer "
             "is ZeRO-1 over d.",
    )


def composition_bars(optimizer: str = "adam", ranks: int = FIGURE_RANKS) -> list[Bar]:
    """One bar per precision x ZeRO stage: each resident tensor's bytes/parameter at ``ranks`` ranks.

    The FP8 precisions are drawn in the FP8 section, at a model (their rows depend on N_8 / N).
    """
    bars = []
    for precision in (name for name in PRECISIONS if name not in FP8_PRECISIONS):
        for stage in STAGES:
            held = partitioned(state_ledger(precision, optimizer), stage).where("resident")
            segments = tuple(
                Segment(tensor.name, (tensor.bytes / N).subs(d, ranks), tensor.bytes.has(d))
                for tensor in held
            )
            total = bytes_per_parameter(precision, optimizer, stage)
            value = total.subs(d, ranks)
            label = f"{sp.sstr(total)} = {float(value):g}" if total.has(d) else sp.sstr(total)
            bars.append(Bar(f"{precision} {STAGE_NAMES[stage]}", label, segments))
    return bars


def composition_figure(optimizer: str = "adam", ranks: int = FIGURE_RANKS) -> Drawing:
    """formulas/bytes_per_parameter.svg: the state ledger's tensors stacked, one bar per precision x sharding."""
    context = stacked_bars(
        composition_bars(optimizer, ranks),
        title=f"Resident bytes per parameter per rank, {optimizer}, by precision and sharding",
        subtitle=f"one colour per tensor of the state ledger; sharded tensors drawn at d = {ranks}",
        axis="bytes per parameter", sharded_legend=f"partitioned over d (drawn at d = {ranks})",
        tick_step=2,
    )
    return Drawing("bytes_per_parameter.svg", "svg/stacked_bars.svg.j2",
                  f"Composition of the resident bytes per parameter ({optimizer}); sharded "
                  f"tensors at d = {ranks}.", context, tex_template="tex/stacked_bars.tex.j2")


def bytes_per_parameter_section() -> Section:
    """Bytes per parameter by precision, optimizer and sharding, with the composition figure."""
    return Section(
        "bytes_per_parameter", "Bytes per parameter",
        intro=("Each entry is the sum over the state ledger after partitioning: nothing here is "
               "typed, the 16, 18 and 6 + 12/d come out of the tensors.",),
        tables={"bytes_per_parameter": bytes_per_parameter_table(),
                "megatron_distributed_optimizer": megatron_table()},
        figures=(composition_figure(),),
    )
