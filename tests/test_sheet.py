"""The committed sheet is what make derive writes, byte for byte, and carries the article's numbers."""
import json
import re
import xml.etree.ElementTree as ET

import pytest
from jinja2 import nodes

from derive.render.__main__ import ROOT, TEMPLATES, environment

SVG = "{http://www.w3.org/2000/svg}"


def test_committed_formulas_are_fresh(fresh):
    committed = ROOT / "formulas"
    assert sorted(p.name for p in committed.iterdir()) == sorted(p.name for p in fresh.iterdir()), \
        "formulas/ holds other files than make derive writes: run make derive"
    for path in fresh.iterdir():
        assert (committed / path.name).read_bytes() == path.read_bytes(), \
            f"formulas/{path.name} is stale: run make derive"


def test_sheet_carries_the_article_numbers(fresh):
    sheet = (fresh / "sheet.md").read_text()
    # the article, section 3.5: resident state of 8B / 70B / 405B at 16 bytes/parameter
    assert "| llama3-8b | 128.48 GB | 144.54 GB |" in sheet
    assert "| llama3-70b | 1.13 TB | 1.27 TB |" in sheet
    assert "| llama3-405b | 6.49 TB | 7.31 TB |" in sheet
    assert "70,553,706,496" in sheet
    # Megatron dist_optimizer.md: 20 / 4 + 16/d, 18 / 6 + 12/d, 16 / 8 + 8/d
    assert r"| bf16 | bf16-fp32grad | $18$ | $6 + \frac{12}{d}$ |" in sheet
    assert r"| fp16 | fp16-megatron | $20$ | $4 + \frac{16}{d}$ |" in sheet
    assert r"| fp32 | fp32 | $16$ | $8 + \frac{8}{d}$ |" in sheet
    # ZeRO section 5.1 with K = 12: 4 + 12/d, 2 + 14/d, 16/d
    assert r"| bf16 | adam | $16$ | $4 + \frac{12}{d}$ | $2 + \frac{14}{d}$ | $\frac{16}{d}$ |" in sheet
    tex = (fresh / "sheet.tex").read_text()
    assert r"\documentclass" in tex and "1.13 TB" in tex and r"$6 + \frac{12}{d}$" in tex


#: The sheet's tables that print sizes in decimal units (issue 27: memory in GiB, GB only where a source
#: is quoted): tables reproducing the article's, quoting sources or data sheets, and traffic over links.
DECIMAL_TABLES = {
    "Resident state (parameters, gradients, optimizer)",                  # the article's section 8.4 output
    "Activations per model, the article's convention (s = 8192, b = 1)",  # the article's section 4.3 table
    "GPUs that hold the resident state (bf16 + Adam, 16 B/param)",        # the article's self-test
    "Per-GPU budget: h100 (80.00 GiB of HBM, sold as '80 GB')",           # sources quoted in the rows
    "Per-GPU budget: a100 (80.00 GiB of HBM, sold as '80 GB')",
    "Hardware presets", "Systems (derive.systems): dense peaks, HBM, links per GPU",    # data sheets
    "Bytes one rank sends per training step, by group (ring collectives, the most loaded rank)",  # traffic
    "The collectives of llama3-70b at t 8, p 4, d 64 (sequence parallel), per rank and step",
    "The article's numeric claims", "Claims per document", "The papers' claims that do not hold",
}


def test_memory_tables_are_in_binary_units(sheet, tables):
    heading, decimal = None, set()
    for line in sheet.splitlines():
        if line.startswith("**"):
            heading = line.strip("*")
        elif line.startswith("|") and re.search(r"\d ?[KMGT]B\b(?!/s)", line):
            decimal.add(heading)
    assert decimal == DECIMAL_TABLES
    # the MoE table's exact bytes (tables.json) are printed in GiB on the sheet
    for row in tables["moe_models"]["rows"]:
        line = next(line for line in sheet.splitlines() if line.startswith(f"| {row['model']} |"))
        assert f"| {row['states'] / 2**30:.2f} GiB | {row['activations'] / 2**30:.2f} GiB |" in line


def test_tables_json_holds_exact_values_with_units(fresh):
    data = json.loads((fresh / "tables.json").read_text())
    assert data["units"]["GB"] == 10**9 and data["units"]["GiB"] == 2**30
    tables = data["tables"]
    resident = {row["model"]: row for row in tables["resident_state"]["rows"]}
    # the article's N for Llama 3 70B times 16 and 18 bytes
    assert resident["llama3-70b"]["bf16"] == 16 * 70_553_706_496
    assert resident["llama3-70b"]["bf16-fp32grad"] == 18 * 70_553_706_496
    assert {c["key"]: c["unit"] for c in tables["resident_state"]["columns"]}["bf16"] == "B"
    rows = {(r["precision"], r["optimizer"]): r for r in tables["bytes_per_parameter"]["rows"]}
    assert rows["bf16-fp32grad", "adam"]["zero0"] == 18
    assert rows["bf16-fp32grad", "adam"]["zero1"] == "6 + 12/d"
    assert rows["fp16", "sgd"]["zero2"] == "2 + 6/d"
    models = {r["model"]: r for r in tables["llama3_models"]["rows"]}
    assert models["llama3-405b"]["L"] == 126 and models["llama3-8b"]["g"] == 8
    departures = [r for r in tables["identities"]["rows"] if r["status"] == "departs"]
    assert departures and all(r["difference"] != 0 for r in departures)
    text = (fresh / "tables.json").read_text()
    assert text == json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_bytes_per_parameter_figure_stacks_the_ledger(fresh):
    root = ET.parse(fresh / "bytes_per_parameter.svg").getroot()
    bars = {}
    for group in root.iter(f"{SVG}g"):
        label = group.find(f"{SVG}text").text
        rects = [r for r in group.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
        bars[label] = rects
    assert len(bars) == 5 * 4  # five precisions x plain / ZeRO-1 / ZeRO-2 / ZeRO-3
    width = {label: sum(float(r.get("width")) for r in rects) for label, rects in bars.items()}
    # bar length is proportional to bytes/parameter: 18 vs 16, and ZeRO-1 at d = 8 is 4 + 12/8
    assert width["bf16-fp32grad plain"] / width["bf16 plain"] == pytest.approx(18 / 16, rel=1e-3)
    assert width["bf16 ZeRO-1"] / width["bf16 plain"] == pytest.approx(5.5 / 16, rel=1e-3)
    assert len(bars["bf16 plain"]) == 5 and len(bars["fp16-megatron plain"]) == 6
    titles = [r.find(f"{SVG}title").text for r in bars["bf16 plain"]]
    assert titles == ["bf16 parameters: 2", "bf16 gradients: 2", "fp32 master parameters: 4",
                      "adam exp_avg: 4", "adam exp_avg_sq: 4"]


ARITHMETIC = (nodes.Add, nodes.Sub, nodes.Mul, nodes.Div, nodes.FloorDiv, nodes.Mod, nodes.Pow,
              nodes.Neg, nodes.Pos)
NUMERIC_FILTERS = {"sum", "round", "int", "float", "abs", "filesizeformat"}


def test_templates_do_no_arithmetic():
    env = environment()
    templates = sorted(p for p in TEMPLATES.rglob("*.j2"))
    assert len(templates) >= 6
    for path in templates:
        tree = env.parse(path.read_text())
        found = [type(node).__name__ for node in tree.find_all(ARITHMETIC)]
        found += [node.name for node in tree.find_all(nodes.Filter) if node.name in NUMERIC_FILTERS]
        assert not found, f"{path.relative_to(ROOT)} computes in the template: {found}"


def test_sheet_tex_draws_the_same_bars(fresh):
    import re

    rows = {}
    for line in (fresh / "sheet.tex").read_text().splitlines():
        if " & \\textcolor{legend" in line:
            label = line.split(" & ")[0]
            rows[label] = [float(w) for w in re.findall(r"\\rule\{([0-9.]+)pt\}", line)]
    assert len(rows) == 5 * 4
    assert sum(rows["bf16-fp32grad plain"]) / sum(rows["bf16 plain"]) == pytest.approx(18 / 16, rel=1e-3)
    assert sum(rows["fp16-megatron ZeRO-1"]) / sum(rows["bf16 plain"]) == pytest.approx(6 / 16, rel=1e-3)
