"""The sheet's layouts section: the scatter places every layout on the right side of the usable range."""
from __future__ import annotations

import re
from pathlib import Path

SVG = Path(__file__).resolve().parents[1] / "formulas" / "layouts.svg"


def _limits(svg: str) -> list[float]:
    return [float(y) for y in re.findall(r'<line class="limit" x1="[\d.]+" y1="([\d.]+)"', svg)]


def test_feasible_dots_sit_below_the_usable_low_line_and_the_rest_above():
    svg = SVG.read_text()
    low_y, high_y = sorted(_limits(svg), reverse=True)      # the low end is drawn lower (larger y)
    groups = re.findall(r'<g class="layout" data-legend="([^"]+)"[^>]*>(.*?)</g>', svg, re.S)
    dots = [(legend, y) for legend, body in groups for y in re.findall(r'<circle cx="[\d.]+" cy="([\d.]+)"', body)]
    assert dots and {legend for legend, _ in groups} == {"fits", "tight: inside the usable range&#39;s uncertainty",
                                                          "over the usable range"}
    for legend, y in dots:
        y = float(y)
        if legend == "fits":
            assert y >= low_y - 0.5
        elif legend == "over the usable range":
            assert y <= high_y + 0.5
        else:
            assert high_y - 0.5 <= y <= low_y + 0.5


def test_legend_counts_match_the_plan_table():
    sheet = (SVG.parent / "sheet.md").read_text()
    svg = SVG.read_text()
    over = int(re.search(r"over the usable range \((\d+)\)", svg).group(1))
    tight = int(re.search(r"tight: inside the usable range&#39;s uncertainty \((\d+)\)", svg).group(1))
    assert f"| memory over the GPU's usable range (above its high end) | {over:,} |" in sheet
    assert f"{tight:,} of the " in sheet and "memory inside the usable range's uncertainty" not in sheet
