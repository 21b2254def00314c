"""The sheet's activation, placement and budget sections: the article's numbers, the regenerated figures, tables.json."""
import re
import xml.etree.ElementTree as ET

import pytest
import sympy as sp

SVG = "{http://www.w3.org/2000/svg}"
GB = 10**9
#: Llama 3 70B's N as the article prints it (section 1.3).
N_70B = 70_553_706_496


def test_section_order_follows_the_article(sheet):
    headings = [line[3:] for line in sheet.splitlines() if line.startswith("## ")]
    keys = ["The four states", "Where each framework", "Bytes per parameter", "Llama 3 models",
            "Activations", "What a GPU", "Identities"]
    positions = [next(i for i, title in enumerate(headings) if title.startswith(k)) for k in keys]
    assert positions == sorted(positions)


def test_article_activations_per_model(sheet):
    # the article, section 4.3 (s = 8192, b = 1): per layer fused / materialised, all layers + logits
    assert "| llama3-8b | 1.14 GB | 11.88 GB | 36.51 GB | 6.30 GB | 42.81 GB |" in sheet
    assert "| llama3-70b | 2.28 GB | 23.76 GB | 182.54 GB | 6.30 GB | 188.84 GB |" in sheet
    assert "| llama3-405b | 4.56 GB | 47.51 GB | 574.99 GB | 6.30 GB | 581.29 GB |" in sheet


def test_table2_six_closed_forms(sheet):
    rows = [
        r"| no parallelism | $s b h \left(34 + \frac{5 a s}{h}\right)$ |",
        r"| tensor parallel | $s b h \left(10 + \frac{24}{t} + \frac{5 a s}{h t}\right)$ |",
        r"| tensor + sequence parallel | $s b h \left(\frac{34}{t} + \frac{5 a s}{h t}\right)$ |",
        r"| tensor parallel + selective recompute | $s b h \left(10 + \frac{24}{t}\right)$ |",
        r"| tensor + sequence parallel + selective recompute | $\frac{34}{t}\, s b h$ |",
        r"| full recompute | $2 s b h$ |",
    ]
    for row in rows:
        assert row in sheet


def test_gpt_closed_form_and_its_split(sheet, tables):
    assert r"$s b h \left(34 + \frac{5 a s}{h}\right)$" in sheet
    assert r"$s b h \left(18 + \frac{4 f}{h} + \frac{5 a s}{h}\right)$" in sheet
    assert "$34 = 10 + 24$" in sheet
    assert "$6 s b V$" in sheet and "$16 s b$" in sheet
    assert "- norm statistics ignored" in sheet
    saved = tables["gpt_saved_tensors"]["rows"]
    assert len(saved) == 19  # 15 tensors of Korthikanti 4.1 + 4 LayerNorm statistics
    assert sum(1 for row in saved if row["score"]) == 3
    assert [row["tensor"] for row in saved if not row["counted"]] == [
        "input_layernorm mean", "input_layernorm rstd",
        "post_attention_layernorm mean", "post_attention_layernorm rstd"]
    assert {row["per_token"] for row in saved if row["score"]} == {"2*a*s", "a*s"}


def test_profile_coefficients(sheet):
    # eager 53 / 52.5 / 50.25, fused 34 / 33.5 / 31.75, Megatron's 18 + 4f/h 32 / 32 / 31
    assert (r"| Llama eager profile | $24 + \frac{8 f}{h} + \frac{4 h_{kv}}{h}$ | $53$ | "
            r"$\frac{105}{2} = 52.5$ | $\frac{201}{4} = 50.25$ |") in sheet
    assert (r"| Llama fused profile | $12 + \frac{6 f}{h} + \frac{4 h_{kv}}{h}$ | $34$ | "
            r"$\frac{67}{2} = 33.5$ | $\frac{127}{4} = 31.75$ |") in sheet
    assert r"(GPT, selective) | $18 + \frac{4 f}{h}$ | $32$ | $32$ | $31$ |" in sheet
    # 5as/h = 320 at s = 8192 for all three (the article, section 4.1)
    assert r"| GPT layer, materialised scores (the article) | $34 + \frac{5 a s}{h}$ | $354$ | $354$ | $354$ |" in sheet


def _mermaid(sheet: str) -> list[tuple[str, str]]:
    block = sheet.split("```mermaid\n", 1)[1].split("```", 1)[0]
    return re.findall(r'^\s+n\d+\["(.*)"\]:::(\w+)$', block, flags=re.M)


def _h_per_token(label: str) -> int:
    return sum(int(n or 1) for n in re.findall(r": (\d*)h B/token", label))


def test_mermaid_chart_regenerates_the_articles_figure(sheet):
    nodes = _mermaid(sheet)
    classes = [cls for _, cls in nodes]
    # 10 nodes of the article's figure + the two LayerNorms' statistics; one score-matrix node
    assert len(nodes) == 12 and classes.count("score") == 1 and classes.count("stats") == 2
    # orange (replicated) 10h, blue (TP-shardable) 24h at f = 4h: the article's 34 = 10 + 24
    assert sum(_h_per_token(label) for label, cls in nodes if cls == "full") == 10
    assert sum(_h_per_token(label) for label, cls in nodes if cls == "tp") == 24
    score = next(label for label, cls in nodes if cls == "score")
    assert score.split("<br/>") == ["softmax output: 2as B/token", "attention dropout mask: as B/token",
                                    "attention dropout output: 2as B/token"]
    assert ("GELU input: 8h B/token<br/>fc2 input: 8h B/token", "tp") in nodes
    assert "classDef tp fill:#dbeafe" in sheet and "classDef full fill:#ffedd5" in sheet


def _y_to_bytes(root) -> callable:
    ticks = {}
    for text in root.iter(f"{SVG}text"):
        if text.get("class") == "tick":
            value, unit = text.text.split()
            assert unit == "GiB"                            # memory in binary units (issue 27)
            ticks[int(value.replace(",", ""))] = float(text.get("y"))
    zero, top = ticks[0], max(ticks)
    per_pixel = top * 2**30 / (zero - ticks[top])
    return lambda y: (zero - y) * per_pixel


def test_memory_timeline_geometry_matches_the_ledger(fresh):
    root = ET.parse(fresh / "memory_timeline.svg").getroot()
    to_bytes = _y_to_bytes(root)
    bands = {p.get("data-band"): [tuple(map(float, xy.split(",")))
                                  for xy in p.get("points").split()]
             for p in root.iter(f"{SVG}polygon")}
    assert list(bands) == ["optimizer", "params", "grads", "activations"]
    events = len(bands["activations"]) // 2
    assert events == 1 + 80 + 1 + 1 + 80 + 1 + 1  # start, 80 layers, logits, head, 80 layers, embedding, step
    top = bands["activations"][:events]
    # flat resident state: 12N optimizer + 2N bf16 parameters, 14 x the article's N
    assert to_bytes(bands["optimizer"][0][1]) == pytest.approx(12 * N_70B, rel=1e-4)
    assert to_bytes(top[0][1]) == pytest.approx(14 * N_70B, rel=1e-4)
    # end of forward: + 188.84 GB of activations and logits; end of backward: + 2N of gradients
    assert to_bytes(top[81][1]) == pytest.approx(14 * N_70B + 188.84e9, rel=1e-4)
    assert to_bytes(top[-2][1]) == pytest.approx(16 * N_70B, rel=1e-4)
    assert to_bytes(top[-1][1]) == pytest.approx(14 * N_70B, rel=1e-4)
    # activations rise monotonically through forward
    assert all(a[1] >= b[1] for a, b in zip(top[:82], top[1:82]))
    line = next(l for l in root.iter(f"{SVG}line") if l.get("class") == "simple-sum")
    assert to_bytes(float(line.get("y1"))) == pytest.approx(16 * N_70B + 188.84e9, rel=1e-4)
    marks = [t.text for t in root.iter(f"{SVG}text") if t.text and t.text.startswith("end of")]
    # 14 N + 188.84 GB = 1176.59 GB = 1.07 TiB; 16 N = 1128.86 GB = 1.03 TiB (TiB = 2^40 B)
    assert [f"{value * GB / 2**40:.2f}" for value in (1176.59, 1128.86)] == ["1.07", "1.03"]
    assert marks == ["end of forward (logits): 1.07 TiB", "end of backward (embedding): 1.03 TiB"]


def test_sheet_tex_draws_the_timeline_bars(fresh):
    rows = {}
    for line in (fresh / "sheet.tex").read_text().splitlines():
        if " & \\textcolor{timeline" in line:
            rows[line.split(" & ")[0]] = [float(w) for w in re.findall(r"\\rule\{([0-9.]+)pt\}", line)]
    assert list(rows) == ["start of step", "end of forward (logits)", "end of backward (embedding)",
                          "after the optimizer step"]
    ratio = sum(rows["end of forward (logits)"]) / sum(rows["start of step"])
    assert ratio == pytest.approx((14 * N_70B + 188.84e9) / (14 * N_70B), rel=1e-3)
    assert sum(rows["end of backward (embedding)"]) / sum(rows["start of step"]) == \
        pytest.approx(16 / 14, rel=1e-3)


def test_tables_json_carries_the_new_tables(tables):
    per_model = {row["model"]: row for row in tables["activations_per_model"]["rows"]}
    assert round(per_model["llama3-70b"]["total"] / GB, 2) == 188.84
    assert per_model["llama3-8b"]["logits"] == 6 * 8192 * 128256
    forms = [row["form"] for row in tables["korthikanti_table2"]["rows"]]
    assert forms[0] == "s*b*h*(5*a*s/h + 34)" and forms[-1] == "s*b*h*(2)"
    coefficients = {row["layer"]: row for row in tables["activation_coefficients"]["rows"]}
    assert coefficients["Llama eager profile"]["llama3-70b"] == "105/2"
    gpus = {row["model"]: row for row in tables["self_test_gpus"]["rows"]}
    # the article's self-test 1: 2 / 17 / 93 at 70 GB; 70 GiB gives 2 / 16 / 87
    assert [gpus[m]["gb70"] for m in ("llama3-8b", "llama3-70b", "llama3-405b")] == [2, 17, 93]
    assert [gpus[m]["gib70"] for m in ("llama3-8b", "llama3-70b", "llama3-405b")] == [2, 16, 87]
    assert [gpus[m]["usable_low"] for m in ("llama3-8b", "llama3-70b", "llama3-405b")] == [2, 17, 97]
    assert [gpus[m]["usable_high"] for m in ("llama3-8b", "llama3-70b", "llama3-405b")] == [2, 15, 82]
    assert gpus["llama3-70b"]["resident"] == 16 * N_70B
    placement = {row["placement"]: row for row in tables["placement"]["rows"]}
    assert placement["megatron"]["bytes_per_parameter"] == 18
    assert placement["megatron"]["sharded_bytes_per_parameter"] == "6 + 12/d"
    assert placement["torchtitan-fsdp2"]["sharded_bytes_per_parameter"] == "16/d"
    assert placement["deepspeed-zero0"]["bytes_per_parameter"] == 16
    usable = tables["budget_h100"]["rows"][-1]
    assert usable["item"] == "usable for tensors"
    assert round(usable["low"] / 2**30, 2) == 62.49 and round(usable["high"] / 2**30, 2) == 74.16
    assert "budget_a100" in tables and tables["budget_a100"]["rows"][1]["low"] == int(79.25 * 2**30)
    states = {row["account"]: row for row in tables["states"]["rows"]}
    L, V, a, b, h, s = sp.symbols("L V a b h s", positive=True, integer=True)
    article = L * s * b * h * (34 + 5 * a * s / h) + 6 * s * b * V  # the article, sections 4.1 and 4.3
    assert sp.expand(sp.sympify(states["activations"]["bytes"], locals=dict(
        L=L, V=V, a=a, b=b, h=h, s=s)) - article) == 0


def test_sheet_states_budget_in_both_units(sheet):
    assert r"| activations | activations | $L s b h \left(34 + \frac{5 a s}{h}\right) + 6 s b V$ |" in sheet
    assert "62.49 GiB to 74.16 GiB (67.10 GB to 79.63 GB)" in sheet
    assert "| 70 GiB (75.16 GB) | 70 GB (65.19 GiB) |" in sheet
    assert "| llama3-405b | 6.49 TB | 87 | 93 | 97 | 82 |" in sheet
