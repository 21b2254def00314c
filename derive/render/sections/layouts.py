"""Layouts that fit (derive.plan): every layout of Llama 3 70B on 1024 H100s at 4M-token steps."""
from __future__ import annotations

import numpy as np

from derive.planning.ranking import COMMUNICATION, REASONS, Plan
from derive.planning.search import plan
from derive.presets import model
from derive.render.figures import PALETTE, Point, scatter_chart
from derive.render.sheet import Cell, Column, Drawing, Section, Table, bytes_cell, int_cell, text_cell
from derive.units import BYTE_UNITS

GiB = BYTE_UNITS["GiB"]
#: The sheet's planning example: the article's 70B step of 4M tokens on 1024 H100s.
EXAMPLE = ("llama3-70b", 1024, 4 * 2**20, "h100")
TOP = 8
#: Legend of the scatter: fits under the usable range's low end, tight (inside the range), over it.
LEGENDS = {"fits": "fits", "tight": "tight: inside the usable range's uncertainty",
           "memory": "over the usable range"}
#: Axis ticks (log scales): memory in GiB, step time in seconds.
MEMORY_TICKS = [8, 16, 32, 64, 128, 256, 512, 1024, 2048]
TIME_TICKS = [1, 2, 4, 8, 16, 32, 64]


def _seconds(value: float) -> Cell:
    return Cell(round(float(value), 4), f"{value:.2f} s")


def top_table(result: Plan, top: int = TOP) -> Table:
    """The ``top`` ranks' first layouts (least memory), with the number of alike layouts (the same predicted step)."""
    c, tight, ranks = result.columns, result.tight(), result.ranks()
    rows = []
    for row in result.ranked():
        if ranks[row] > top:
            break
        if rows and rows[-1]["rank"].value == ranks[row]:
            rows[-1]["alike"] = int_cell(rows[-1]["alike"].value + 1)
            continue
        rows.append({
            "rank": int_cell(int(ranks[row])), "alike": int_cell(0),
            **{key: int_cell(int(c[key][row])) for key in ("t", "p", "v", "c", "d", "b", "m")},
            "recompute": text_cell(str(c["recompute"][row])),
            "zero": int_cell(int(c["zero"][row])),
            "balanced": int_cell(int(c["balanced"][row])),
            "memory": bytes_cell(int(round(c["memory_per_gpu"][row])), "GiB"),
            "fit": text_cell("tight" if tight[row] else "yes"),
            "step_time": _seconds(c["step_time"][row]),
        })
    columns = (Column("rank", "rank"),) + tuple(Column(key, key) for key in (
        "t", "p", "v", "c", "d", "b", "m", "recompute", "zero", "balanced"))
    return Table("plan_top_layouts", f"Fastest layouts that fit: {result.model.name} on "
                 f"{result.gpus} {result.hardware.upper()}s, {result.tokens:,} tokens per step",
                 columns + (Column("memory", "memory per GPU", unit="B"), Column("fit", "fit"),
                            Column("step_time", "step time", unit="s"),
                            Column("alike", "alike layouts (same predicted step)")),
                 tuple(rows), note=COMMUNICATION)


def failure_table(result: Plan) -> Table:
    """How many layouts failed for each reason."""
    rows = tuple({"reason": text_cell(REASONS[key]), "layouts": int_cell(count)}
                 for key, count in result.failures().items())
    return Table("plan_failures", "Layouts that do not fit, by reason",
                 (Column("reason", "reason"), Column("layouts", "layouts")), rows)


def layouts_figure(result: Plan) -> Drawing:
    """formulas/layouts.svg: memory per GPU against step time, every layout with a valid schedule."""
    c, tight = result.columns, result.tight()
    low, high = result.usable
    legend = np.where(tight, "tight", np.where(c["feasible"], "fits", c["reason"]))
    points = [Point(float(c["bound"][row]), float(c["memory_per_gpu"][row]) / GiB, LEGENDS[str(legend[row])])
              for row in range(len(c["t"])) if str(legend[row]) in LEGENDS]
    colours = dict(zip(LEGENDS.values(), (PALETTE[4], PALETTE[1], PALETTE[2])))
    chart = scatter_chart(
        points, colours,
        f"Every layout of {result.model.name} on {result.gpus} {result.hardware.upper()}s, "
        f"{result.tokens:,} tokens per step",
        "memory on the most loaded rank against the compute-bound step time x pipeline bubble "
        "(the table ranks by the predicted step time)",
        "step time (s, log scale)", "memory per GPU (GiB, log scale)", TIME_TICKS, MEMORY_TICKS,
        [(low / GiB, f"usable low {low / GiB:.2f} GiB"), (high / GiB, f"usable high {high / GiB:.2f} GiB")])
    return Drawing("layouts.svg", "svg/scatter.svg.j2",
                  f"Memory per GPU against the compute-bound step time for every layout of "
                  f"{result.model.name} on {result.gpus} {result.hardware.upper()}s at "
                  f"{result.tokens:,}-token steps (layouts whose batch or schedule is invalid "
                  "are left out; points beyond the axes sit on the frame).", chart,
                  tex_template="tex/scatter.tex.j2")


def layouts_section() -> Section:
    """derive.plan's answer for the sheet's example, its top layouts, failures and the scatter."""
    name, gpus, tokens, hardware_name = EXAMPLE
    result = plan(model(name), gpus, tokens, hardware_name)
    return Section(
        key="layouts",
        title="Layouts that fit",
        intro=(
            "python -m derive.plan enumerates every layout (t dividing the query and kv heads, "
            "p up to L with uneven stages, v virtual stages, each p > 1 layout also balanced (the "
            "embedding and the loss one layer slot each, Llama 3's pipeline: p v up to L + 2), "
            "context parallel c, d = GPUs / (t p c), "
            "micro-batch b and "
            "m = T / (s b d), recompute none / selective / full, Megatron's distributed optimizer "
            "on or off) and computes the most loaded rank's memory: the placement's states, the "
            "first stage's in-flight micro-batches (interleaving factor included), the logits on "
            "the last stage, the caching allocator's rounding. A layout fits at or under the high "
            "end of the GPU's usable range (section on the per-GPU budget) and is tight above its "
            f"low end: {int(result.tight().sum()):,} of the {int(result.columns['feasible'].sum()):,} layouts that fit are tight.",
            COMMUNICATION + ".",
        ),
        tables={"top": top_table(result), "failures": failure_table(result)},
        figures=(layouts_figure(result),),
    )
