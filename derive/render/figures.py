"""Geometry of the sheet's SVG figures: every coordinate computed here, printed as text for a template."""
from __future__ import annotations

import math
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


@dataclass(frozen=True)
class Point:
    """One point of a scatter chart: x, y (data units) and the legend entry it belongs to."""

    x: float
    y: float
    legend: str


SCATTER_LEFT, SCATTER_TOP, SCATTER_WIDTH, SCATTER_HEIGHT = 70, 60, 560, 320


def scatter_chart(points: list[Point], colours: dict[str, str], title: str, subtitle: str,
                  x_axis: str, y_axis: str, x_ticks: list[float], y_ticks: list[float],
                  lines: list[tuple[float, str]]) -> dict[str, object]:
    """A scatter chart with log axes spanning the first to the last tick (svg/scatter.svg.j2, tex/scatter.tex.j2).

    Points outside the ticks are clipped to the frame; points that land on the
    same pixel with the same legend are drawn once (a 2.5-pixel dot moves at most half a pixel); ``lines`` are
    horizontal reference lines (y, label).
    """
    x_low, x_high = math.log(x_ticks[0]), math.log(x_ticks[-1])
    y_low, y_high = math.log(y_ticks[0]), math.log(y_ticks[-1])

    def x_at(x: float) -> float:
        clipped = min(max(math.log(x), x_low), x_high)
        return SCATTER_LEFT + (clipped - x_low) / (x_high - x_low) * SCATTER_WIDTH

    def y_at(y: float) -> float:
        clipped = min(max(math.log(y), y_low), y_high)
        return SCATTER_TOP + SCATTER_HEIGHT * (1 - (clipped - y_low) / (y_high - y_low))

    bottom = SCATTER_TOP + SCATTER_HEIGHT
    drawn = sorted({(float(round(x_at(point.x))), float(round(y_at(point.y))), point.legend)
                    for point in points}, key=lambda dot: (list(colours).index(dot[2]), dot[0], dot[1]))
    tex_names = {name: f"scatter{chr(ord('A') + index)}" for index, name in enumerate(colours)}
    dots = [{"x": px(x), "y": px(y), "fill": colours[legend], "legend": legend,
             "tex_x": px(x * TEX_SCALE), "tex_y": px((bottom - y) * TEX_SCALE),
             "tex_colour": tex_names[legend]} for x, y, legend in drawn]
    counts = {name: sum(point.legend == name for point in points) for name in colours}
    groups = [{"legend": name, "fill": colour, "dots": [dot for dot in dots if dot["legend"] == name]}
              for name, colour in colours.items()]
    return {
        "title": title, "subtitle": subtitle, "x_axis": x_axis, "y_axis": y_axis,
        "width": str(SCATTER_LEFT + SCATTER_WIDTH + 30), "height": str(bottom + 80),
        "left": str(SCATTER_LEFT), "right": str(SCATTER_LEFT + SCATTER_WIDTH),
        "top": str(SCATTER_TOP), "bottom": str(bottom), "dots": dots, "groups": groups,
        "x_ticks": [{"x": px(x_at(x)), "label": f"{x:g}", "tex_x": px(x_at(x) * TEX_SCALE)}
                    for x in x_ticks],
        "y_ticks": [{"y": px(y_at(y)), "label": f"{y:g}", "tex_y": px((bottom - y_at(y)) * TEX_SCALE)}
                    for y in y_ticks],
        "lines": [{"y": px(y_at(y)), "label": label, "tex_y": px((bottom - y_at(y)) * TEX_SCALE)}
                  for y, label in lines],
        "legend": [{"name": f"{name} ({counts[name]})", "fill": colour, "tex_colour": tex_names[name],
                    "hex": colour[1:].upper(), "x": px(10 + index * 220), "y": px(bottom + 50),
                    "text_x": px(20 + index * 220), "text_y": px(bottom + 54)}
                   for index, (name, colour) in enumerate(colours.items())],
        "x_label_x": px(SCATTER_LEFT + SCATTER_WIDTH / 2), "x_label_y": px(bottom + 32),
        "tick_label_y": px(bottom + 14), "y_label_x": str(SCATTER_LEFT - 8),
        "tex_width": px((SCATTER_LEFT + SCATTER_WIDTH + 30) * TEX_SCALE),
        "tex_height": px((SCATTER_HEIGHT + 10) * TEX_SCALE),
        "tex_left": px(SCATTER_LEFT * TEX_SCALE), "tex_plot_width": px(SCATTER_WIDTH * TEX_SCALE),
        "tex_plot_height": px(SCATTER_HEIGHT * TEX_SCALE),
        "tex_label_x": px((SCATTER_LEFT - 6) * TEX_SCALE),
        "tex_right": px((SCATTER_LEFT + SCATTER_WIDTH) * TEX_SCALE),
    }
