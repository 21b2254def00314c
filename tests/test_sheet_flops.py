"""The sheet's FLOPs, utilisation, Megatron and claims sections carry the article's numbers and the registries."""
import math

import pytest
import sympy as sp

from derive import claims as claim_registry
from derive.claims import ARTICLE, EXACT, Claim, all_claims, evaluate_all
from derive.conventions import CONVENTIONS
from derive.identities.megatron import DEPARTURES
from derive.identities.megatron import TOPIC as WEIGHTS_TOPIC
from derive.render.sections.claims import claims_section

N_70B = 70_553_706_496


def rows(tables: dict, key: str, by: str) -> dict:
    return {row[by]: row for row in tables[key]["rows"]}


def test_tables_json_carries_the_new_tables(tables):
    new = {"flops_gemms_llama", "flops_gemms_gpt", "flops_subtotals", "flops_per_token",
           "flops_conventions", "step_time_formula", "step_time_bounds", "mfu_example",
           "recompute_factors", "hardware", "megatron_weight_departures",
           "megatron_other_departures", "claims"}
    assert new <= set(tables)
    sections = {key: tables[key]["section"] for key in new}
    assert sections["flops_conventions"] == "flops" and sections["hardware"] == "utilisation"
    assert sections["claims"] == "claims" and sections["megatron_other_departures"] == "megatron"
    # NVIDIA datasheets: H100 SXM 989 TFLOPS and A100 312 TFLOPS bf16 dense, 80 GB each
    gpus = rows(tables, "hardware", "name")
    assert gpus["h100"]["peak"] == 989e12 and gpus["a100"]["peak"] == 312e12
    assert gpus["h100"]["memory"] == 80 * 10**9


def test_flops_per_token_in_gflop_as_the_article_prints_them(sheet):
    # the article, section 6.4: 6N = 48 / 423 / 2435, causal 51 / 449 / 2524 GFLOP per token
    assert "| llama3-8b | 8,030,261,248 | 48 GFLOP | 45 GFLOP | 51 GFLOP |" in sheet
    assert "| llama3-70b | 70,553,706,496 | 423 GFLOP | 417 GFLOP | 449 GFLOP |" in sheet
    assert "| llama3-405b | 405,853,388,800 | 2,435 GFLOP | 2,422 GFLOP | 2,524 GFLOP |" in sheet
    # the 6 % gap between 6N and the causal count for 70B
    assert "| 449 GFLOP | 481 GFLOP | 6.1 % |" in sheet


def test_step_time_bounds_and_training_days(sheet):
    for name, bound in (("8b", "0.43"), ("70b", "3.72"), ("405b", "20.91")):
        assert f"| one sequence, one GPU | llama3-{name} | 8,192 | 1 | 100 % | {bound} s |" in sheet
    assert "| llama3-70b | 4,194,304 | 1,024 | 100 % | 1.86 s |" in sheet
    assert "| llama3-70b | 4,194,304 | 1,024 | 40 % | 4.65 s |" in sheet
    assert "| 1,024 | 40 % | 193 days |" in sheet
    assert "| 8,192 | 40 % | 24 days |" in sheet


def test_mfu_and_hfu_of_the_observed_step(sheet, fresh):
    assert r"| MFU | $\frac{F R}{G P}$ | 41.3 % |" in sheet
    assert "| HFU, selective recompute |" in sheet and "| 42.3 % |" in sheet
    assert r"| HFU, full recompute | $\frac{4 F R}{3 G P}$ | 55.1 % |" in sheet
    tex = (fresh / "sheet.tex").read_text()
    assert r"41.3 \%" in tex and r"42.3 \%" in tex and r"55.1 \%" in tex


def test_step_and_mfu_values_in_tables_json(tables):
    bounds = tables["step_time_bounds"]["rows"]
    seconds = [row["bound"] for row in bounds]
    # tokens x F / (GPUs x 989e12), with F the exact count of the per-token table
    per_token = rows(tables, "flops_per_token", "model")["llama3-70b"]["causal"]
    assert seconds[3] == pytest.approx(4_194_304 * per_token / (1024 * 989e12))
    assert round(seconds[6] / 86400) == 24
    example = {row["quantity"]: row["value"] for row in tables["mfu_example"]["rows"]}
    assert round(example["MFU"], 3) == 0.413
    assert example["HFU, full recompute"] == pytest.approx(example["MFU"] * 4 / 3)
    factors = rows(tables, "recompute_factors", "policy")
    assert factors["full"]["closed_form"] == "4/3" and factors["full"]["status"] == "proven"
    assert factors["selective"]["closed_form"] == "1 + 2*L*h*s/F"
    assert factors["full-layers"]["status"] == "departs"
    assert 1 < factors["full-layers"]["factor"] < 4 / 3


def test_per_token_table_holds_exact_flops(tables):
    row = rows(tables, "flops_per_token", "model")["llama3-70b"]
    assert row["six_n"] == 6 * N_70B
    # causal - 6 N_GEMM = 6 L s h at L = 80, s = h = 8192 (independent arithmetic)
    assert row["causal"] - row["six_n_gemm"] == 6 * 80 * 8192 * 8192


def test_gemm_tables_have_three_passes_and_scores_have_no_wgrad(tables):
    llama = rows(tables, "flops_gemms_llama", "gemm")
    assert llama["attention.wk"]["shape"] == ["1", "g*h/a", "h"]
    assert llama["attention.wq"]["forward"] == llama["attention.wq"]["wgrad"] == "2*h**2"
    for table in ("flops_gemms_llama", "flops_gemms_gpt"):
        for name, row in rows(tables, table, "gemm").items():
            if name.startswith("attention.scores") or name.startswith("attention.context"):
                assert row["wgrad"] == 0 and row["count"] == "a" and row["dgrad"] == "2*h*s"
            else:
                assert row["wgrad"] != 0
    assert len(llama) == 10 and len(rows(tables, "flops_gemms_gpt", "gemm")) == 7
    closed = {(r["family"], r["subtotal"]): r for r in tables["flops_subtotals"]["rows"]}
    assert closed["llama", "model: causal"]["closed_form"] == "6*L*h*s + 6*N_GEMM"
    assert closed["gpt", "model: full attention"]["closed_form"] == "12*L*h*s + 6*N_GEMM"
    assert closed["llama", "one layer: scores, causal"]["wgrad"] == 0
    assert all(r["status"] in ("proven", None) for r in closed.values())


def test_every_convention_for_70b(sheet, tables):
    conventions = rows(tables, "flops_conventions", "convention")
    assert sorted(conventions) == sorted(CONVENTIONS)
    got = {name: round(row["llama3-70b"] / 1e9, 1) for name, row in conventions.items()}
    assert got == {"6N": 423.3, "6N_GEMM": 417.0, "derive-causal": 449.2, "derive-full": 481.4,
                   "kaplan": 442.9, "palm": 487.7, "narayanan": 457.3,
                   "narayanan-recompute": 607.6, "megatron": 449.2,
                   # 8N; 72Lh^2(1 + s/3h + V/12Lh); Chinchilla's per-operation count (by hand below)
                   "narayanan-8P": 564.4, "korthikanti-selective": 521.7, "hoffmann": 544.5, "torchtitan": 481.4}
    for name in CONVENTIONS:
        assert f"| {name.replace('_', chr(92) + '_')} |" in sheet


def test_every_megatron_departure_with_its_70b_size(sheet, tables):
    departures = rows(tables, "megatron_weight_departures", "departure")
    assert sorted(departures) == sorted(entry.name for entry in DEPARTURES
                                        if entry.topic == WEIGHTS_TOPIC)
    # 70B at t = 8, p = 4, d = 8, computed here: V = 128256 padded to 126 x 1024 = 129024
    expected = {"linear biases not counted": 0, "learned position embedding not counted": 0,
                "padded vocabulary grows with t": -2 * 8192 * (129_024 - 128_256),
                "final norm counted on the first stage": -8192 // 4,
                "fp16 counted at bf16's 18 bytes": 2,
                "fp16 distributed optimizer counted at 6 + 12/d": "-3/2"}
    assert {name: row["llama3-70b"] for name, row in departures.items()} == expected
    assert departures["learned position embedding not counted"]["gpt3-175b"] == 2048 * 12288
    for name, size in (("padded vocabulary grows with t", "-12,582,912"),
                       ("final norm counted on the first stage", "-2,048")):
        line = next(line for line in sheet.splitlines() if line.startswith(f"| {name} |"))
        assert f"| {size} |" in line
    other = rows(tables, "megatron_other_departures", "departure")
    materialised = next(row for name, row in other.items() if name.startswith("Megatron sbh(10 + 24/t)"))
    # 5 a s^2 b / t at a = 64, s = 8192, b = 1, t = 8 bytes
    assert materialised["llama3-70b"] == 5 * 64 * 8192**2 // 8
    assert all(row["status"] == "departs" for row in other.values())


def test_every_claim_with_a_status(sheet, tables):
    shown = rows(tables, "claims", "id")
    assert list(shown) == [entry.id for entry in all_claims(ARTICLE)]
    assert all(row["status"] in ("holds", "does not hold", "pending") for row in shown.values())
    for claim_id, row in shown.items():
        assert f"| {claim_id.replace('_', chr(92) + '_')} |" in sheet
    # 70B at 16 bytes/parameter on 70 GiB cards: 15.02 -> 16, not the article's 17 (GB read as GiB)
    assert math.ceil(16 * N_70B / (70 * 2**30)) == 16
    assert shown["9.q1.llama3-70b-cards-70gib"]["status"] == "does not hold"
    assert "70 GB (10^9 bytes) in place of 70 GiB" in shown["9.q1.llama3-70b-cards-70gib"]["reason"]
    assert shown["open.70b-resident"]["status"] == "holds"


def test_claims_section_is_regenerated_from_the_registry(monkeypatch):
    failing = sum(v.status == "does not hold" for v in evaluate_all(ARTICLE))
    extra = Claim("test.one-plus-one", "test", "1 + 1 = 3", 3, "x", EXACT, lambda: 2,
                  document=ARTICLE)
    monkeypatch.setitem(claim_registry.CLAIMS, extra.id, extra)
    section = claims_section()
    row = {r["id"].text: r for r in section.tables["claims"].rows}["test.one-plus-one"]
    assert row["status"].text == "does not hold" and row["derived"].text == "2 x"
    assert f"{failing + 1} do not hold" in section.intro[0]


def test_departure_sizes_print_bytes_numbers_and_leftover_symbols():
    from derive.render.sections.megatron import _size_cell
    from derive.symbols import b

    # 5 a s^2 / 8 = 2,684,354,560 B = 2.5 x 2^30: memory in GiB
    assert _size_cell(5 * 64 * 8192**2 // 8, "B").text == "2.50 GiB"
    assert _size_cell(sp.Rational(-3, 2), "bytes per parameter").text == "-1.5"
    leftover = _size_cell(2 * b, "B")
    assert leftover.math and leftover.text == "2 b" and leftover.value == "2*b"
