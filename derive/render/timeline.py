"""Memory of one training step over time (the article, section 2.2): the SVG geometry of derive.accounts.activations.step_moments."""
from __future__ import annotations

from derive.accounts.activations import Moment, step_moments
from derive.presets import MODELS
from derive.render.figures import PALETTE, px
from derive.render.sheet import Drawing
from derive.units import format_memory

#: the four bands, bottom to top.
BANDS = ("optimizer", "params", "grads", "activations")
BAND_NAMES = {"optimizer": "optimizer state (fp32 master + Adam moments)",
              "params": "bf16 parameters", "grads": "bf16 gradients",
              "activations": "activations (+ logits)"}
LEFT, PLOT_WIDTH, TOP, PLOT_HEIGHT = 80, 700, 80, 300
TICK_STEP = 200 * 2**30
#: LaTeX points per byte-axis pixel for the bars sheet.tex draws at the key moments.
TEX_SCALE = 0.5


def timeline_chart(moments: list[Moment], title: str, subtitle: str) -> dict[str, object]:
    """Stacked areas of the bands over the step's events (templates/svg/memory_timeline.svg.j2)."""
    simple = moments[0].bands["optimizer"] + moments[0].bands["params"] + max(
        m.bands["grads"] for m in moments) + max(m.bands["activations"] for m in moments)
    axis_max = TICK_STEP * -(-max(simple, *(m.total for m in moments)) // TICK_STEP)
    x_step = PLOT_WIDTH / (len(moments) - 1)
    xs = [LEFT + i * x_step for i in range(len(moments))]

    def y(value: float) -> float:
        return TOP + PLOT_HEIGHT * (1 - value / axis_max)

    bands, below = [], [0] * len(moments)
    for index, band in enumerate(BANDS):
        above = [low + m.bands[band] for low, m in zip(below, moments)]
        top = [f"{px(x)},{px(y(v))}" for x, v in zip(xs, above)]
        bottom = [f"{px(x)},{px(y(v))}" for x, v in zip(reversed(xs), reversed(below))]
        bands.append({"name": BAND_NAMES[band], "key": band, "fill": PALETTE[index],
                      "points": " ".join(top + bottom)})
        below = above
    layers = (len(moments) - 5) // 2
    marks = []
    for index, anchor in ((layers + 1, "middle"), (len(moments) - 2, "end")):
        moment = moments[index]
        marks.append({"label": f"{moment.label}: {format_memory(moment.total)}",
                      "x": px(xs[index]), "y": px(y(moment.total)), "total": moment.total,
                      "text_y": px(y(moment.total) - 8), "anchor": anchor})
    ticks = [{"y": px(y(value)), "label": f"{value // 2**30:,} GiB"}
             for value in range(0, axis_max + 1, TICK_STEP)]
    phases = [{"label": "forward", "x": px((xs[0] + xs[layers + 1]) / 2)},
              {"label": "backward", "x": px((xs[layers + 1] + xs[-2]) / 2)}]
    legend_top = TOP + PLOT_HEIGHT + 50
    legend = [{"name": band["name"], "fill": band["fill"], "x": px(10 + (i % 2) * 370),
               "y": px(legend_top + (i // 2) * 18), "text_x": px(28 + (i % 2) * 370),
               "text_y": px(legend_top + (i // 2) * 18 + 11)} for i, band in enumerate(bands)]
    width, height = LEFT + PLOT_WIDTH + 40, legend_top + 2 * 18 + 24
    return {
        "title": title, "subtitle": subtitle, "width": str(width), "height": str(height),
        "plot_left": str(LEFT), "plot_right": str(LEFT + PLOT_WIDTH), "plot_top": str(TOP),
        "plot_bottom": str(TOP + PLOT_HEIGHT), "tick_label_x": str(LEFT - 6),
        "phase_y": px(TOP + PLOT_HEIGHT + 16), "axis_max": axis_max,
        "bands": bands, "marks": marks, "ticks": ticks, "phases": phases, "legend": legend,
        "simple_sum": {"label": f"parameters + gradients + optimizer + activations: "
                                f"{format_memory(simple)} (the simple upper bound)",
                       "y": px(y(simple)), "total": simple, "text_y": px(y(simple) - 4)},
        "simple_sum_text_x": str(LEFT + 4),
        "tex": tex_bars(moments, [0, layers + 1, len(moments) - 2, len(moments) - 1], axis_max),
        "moments": [{"label": m.label, **m.bands} for m in moments],
    }


def tex_bars(moments: list[Moment], picks: list[int], axis_max: int) -> dict[str, object]:
    """The same bands at the key moments as horizontal \\rule bars for sheet.tex."""
    names = {band: f"timeline{chr(ord('A') + i)}" for i, band in enumerate(BANDS)}
    bars = []
    for index in picks:
        moment = moments[index]
        rules = [{"colour": names[band],
                  "width": f"{moment.bands[band] / axis_max * PLOT_WIDTH * TEX_SCALE:.2f}pt"}
                 for band in BANDS]
        bars.append({"label": moment.label, "rules": rules,
                     "value": format_memory(moment.total)})
    colours = [{"name": names[band], "hex": PALETTE[i][1:].upper(), "legend": BAND_NAMES[band]}
               for i, band in enumerate(BANDS)]
    return {"bars": bars, "colours": colours}


def memory_timeline_figure(name: str = "llama3-70b") -> Drawing:
    """formulas/memory_timeline.svg: one step of ``name``, bf16 + Adam, b = 1, band by band."""
    moments = step_moments(MODELS[name])
    context = timeline_chart(
        moments, f"Memory of one training step, {name} (bf16 + Adam, s = 8192, b = 1)",
        "fused attention, the article's 34sbh per layer + 6sbV logits; activations rise through "
        "forward, fall through backward")
    return Drawing("memory_timeline.svg", "svg/memory_timeline.svg.j2",
                  f"Memory of one step of {name} over time: resident parameters and optimizer "
                  "state flat, activations peaking at the end of forward, gradients at the end "
                  "of backward (GiB = 2^30 B).", context, tex_template="tex/memory_timeline.tex.j2")
