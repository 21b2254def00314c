"""Geometry of the sheet's SVG figures: every coordinate computed here, printed as text for a template."""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

#: Tableau 10, one colour per legend entry in first-seen order.
PALETTE: tuple[str, ...] = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                            "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")

LABEL_WIDTH = 210
PLOT_WIDTH = 440
VALUE_WIDTH = 190
BAR_HEIGHT = 16
BAR_GAP = 6
TOP = 58
LEGEND_ROW = 18
LEGEND_COLUMNS = 2
#: LaTeX points per SVG pixel when sheet.tex draws the same bars with \rule.
TEX_SCALE = 0.6


@dataclass(frozen=True)
class Segment:
    """One part of a bar: a legend entry, its size, and whether it is drawn hatched."""

    legend: str
    value: sp.Expr
    hatched: bool = False


@dataclass(frozen=True)
class Bar:
    """One bar: its label on the left, its value label on the right, its segments left to right."""

    label: str
    value_label: str
    segments: tuple[Segment, ...]


def px(value: float) -> str:
    """An SVG coordinate or length, two decimals (the same digits on every run)."""
    return f"{value:.2f}"


def stacked_bars(bars: list[Bar], title: str, subtitle: str, axis: str,
                 sharded_legend: str, tick_step: int) -> dict[str, object]:
    """Coordinates, colours and labels of a horizontal stacked-bar chart (templates/svg/stacked_bars.svg.j2)."""
    legends = list(dict.fromkeys(seg.legend for bar in bars for seg in bar.segments))
    if len(legends) > len(PALETTE):
        raise ValueError(f"legend: {len(legends)} entries, the palette has {len(PALETTE)}")
    colour = dict(zip(legends, PALETTE))
    tex_name = {name: f"legend{chr(ord('A') + index)}" for index, name in enumerate(legends)}
    longest = max(float(sum(seg.value for seg in bar.segments)) for bar in bars)
    axis_max = tick_step * -(-longest // tick_step)
    scale = PLOT_WIDTH / axis_max
    drawn = []
    for row, bar in enumerate(bars):
        y = TOP + row * (BAR_HEIGHT + BAR_GAP)
        x = float(LABEL_WIDTH)
        rects = []
        for seg in bar.segments:
            width = float(seg.value) * scale
            rects.append({"x": px(x), "width": px(width), "fill": colour[seg.legend],
                          "hatched": seg.hatched, "title": f"{seg.legend}: {float(seg.value):g}",
                          "tex_colour": tex_name[seg.legend],
                          "tex_width": f"{width * TEX_SCALE:.2f}pt"})
            x += width
        drawn.append({"label": bar.label, "value_label": bar.value_label, "y": px(y),
                      "text_y": px(y + BAR_HEIGHT * 0.75), "value_x": px(x + 6), "rects": rects})
    plot_bottom = TOP + len(bars) * (BAR_HEIGHT + BAR_GAP)
    ticks = [{"x": px(LABEL_WIDTH + value * scale), "label": str(value)}
             for value in range(0, int(axis_max) + 1, tick_step)]
    entries = [*((name, colour[name], False) for name in legends), (f"hatched: {sharded_legend}", "#ffffff", True)]
    tex_legend = [{"name": name, "colour": tex_name[name], "hex": colour[name][1:].upper()}
                  for name in legends]
    legend_top = plot_bottom + 44
    column_width = (LABEL_WIDTH + PLOT_WIDTH + VALUE_WIDTH - 20) / LEGEND_COLUMNS
    legend = []
    for index, (name, fill, hatched) in enumerate(entries):
        row, column = divmod(index, LEGEND_COLUMNS)
        x, y = 10 + column * column_width, legend_top + row * LEGEND_ROW
        legend.append({"name": name, "fill": fill, "hatched": hatched, "x": px(x),
                       "y": px(y), "text_x": px(x + 18), "text_y": px(y + 11)})
    legend_rows = -(-len(entries) // LEGEND_COLUMNS)
    return {
        "title": title, "subtitle": subtitle, "axis": axis,
        "width": str(LABEL_WIDTH + PLOT_WIDTH + VALUE_WIDTH),
        "height": px(legend_top + legend_rows * LEGEND_ROW + 10),
        "bar_height": str(BAR_HEIGHT), "plot_left": str(LABEL_WIDTH),
        "label_x": str(LABEL_WIDTH - 8), "plot_top": px(TOP - 4), "plot_bottom": px(plot_bottom),
        "tick_label_y": px(plot_bottom + 14), "axis_label_x": px(LABEL_WIDTH + PLOT_WIDTH / 2),
        "axis_label_y": px(plot_bottom + 30), "bars": drawn, "ticks": ticks, "legend": legend,
        "tex_legend": tex_legend, "tex_bar_height": f"{BAR_HEIGHT * TEX_SCALE:.2f}pt",
        "tex_shaded_legend": f"light shade: {sharded_legend}",
    }
