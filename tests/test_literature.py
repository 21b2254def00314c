"""The papers' claims: counts per document, derived values against the papers' printed numbers, --document."""
import json
import subprocess
import sys
from collections import Counter
from fractions import Fraction

import pytest

from derive import check
from derive.claims import ARTICLE, CLAIMS, all_claims, documents, evaluate

PAPERS = ("Chowdhery et al. 2022", "Dubey et al. 2024", "Hoffmann et al. 2022", "Kaplan et al. 2020",
          "Korthikanti et al. 2022", "Narayanan et al. 2021", "Rajbhandari et al. 2020")


@pytest.fixture(scope="module")
def verdicts():
    return {entry.id: evaluate(entry) for entry in all_claims()}


def test_documents_are_the_article_then_seven_papers():
    assert documents() == [ARTICLE, *PAPERS]


def test_at_least_150_paper_claims_each_naming_its_document(verdicts):
    papers = [v for v in verdicts.values() if v.claim.document != ARTICLE]
    assert len(papers) >= 150
    assert all(v.claim.document in PAPERS for v in papers)
    assert all(v.status in ("holds", "does not hold") for v in papers)


#: document -> (hold, do not hold), as derive judges them today.
COUNTS = {
    ARTICLE: (103, 8),
    "Chowdhery et al. 2022": (5, 2),
    "Dubey et al. 2024": (7, 7),
    "Hoffmann et al. 2022": (7, 3),
    "Kaplan et al. 2020": (15, 1),
    "Korthikanti et al. 2022": (41, 8),
    "Narayanan et al. 2021": (26, 9),
    "Rajbhandari et al. 2020": (63, 8),
}


def test_counts_per_document(verdicts):
    counted = Counter((v.claim.document, v.status) for v in verdicts.values())
    for name, (hold, fail) in COUNTS.items():
        assert (counted[name, "holds"], counted[name, "does not hold"]) == (hold, fail), name


def test_every_paper_claim_that_does_not_hold_says_why(verdicts):
    for v in verdicts.values():
        if v.claim.document != ARTICLE and v.status == "does not hold":
            assert v.claim.alternative is not None or v.claim.note, v.claim.id
            assert v.reason.count(";") >= 1, v.claim.id


# --- derived values against the printed numbers, each recomputed by hand ---------------------------

def test_narayanan_1t_parameters_by_hand(verdicts):
    l, hid, vocab, seq = 128, 25600, 51200, 2048
    # Eq. 2, 12lh^2 + 13lh + (V + s)h, plus derive's final LayerNorm (2h)
    by_hand = 12 * l * hid**2 + 13 * l * hid + (vocab + seq) * hid + 2 * hid
    entry = verdicts["narayanan.table1.1008.0b-parameters"]
    assert entry.derived == Fraction(by_hand, 10**9) and entry.printed == "1008.0"
    assert entry.status == "holds"


def test_narayanan_aggregate_is_gpus_times_printed_throughput(verdicts):
    entry = verdicts["narayanan.table1.1008.0b-aggregate"]
    assert entry.derived == Fraction(3072 * 163, 1000)          # 500.736 petaFLOP/s, printed 502.0
    assert entry.status == "does not hold" and "163.4 teraFLOP/s per GPU" in entry.reason


def test_narayanan_training_days_follow_eq4_not_the_full_count(verdicts):
    gpt3 = verdicts["narayanan.5.1.gpt3-175b-days"]
    # 8TP/(nX) with P = GPT-3's 174.6B parameters (96 layers, h = 12288, V = 51200, s = 2048)
    p = 12 * 96 * 12288**2 + 13 * 96 * 12288 + (51200 + 2048) * 12288 + 2 * 12288
    eight_tp = Fraction(8 * 300 * 10**9 * p, 1024 * 140 * 10**12 * 86400)
    assert round(eight_tp) == 34
    assert gpt3.status == "does not hold" and gpt3.printed == "35"
    assert f"reproduces it ({float(eight_tp):.6g})" in gpt3.reason


def test_zero_table1_cells_by_hand(verdicts):
    psi = Fraction(75, 10) * 10**9
    os_64 = verdicts["rajbhandari.table1.7.5B-P_os-dp64"]
    assert os_64.derived == (4 * psi + 12 * psi / 64) / 10**9 and os_64.printed == "31.4"
    all_64 = verdicts["rajbhandari.table1.7.5B-P_os+g+p-dp64"]
    assert all_64.derived == Fraction(1875, 1000) and all_64.printed == "1.88"
    # 41.25 rounds half up to the paper's 41.3
    assert verdicts["rajbhandari.table1.7.5B-P_os+g-dp4"].printed == "41.3"
    cut = verdicts["rajbhandari.table1.1T-P_os-dp64"]           # 4000 + 12000/64 = 4187.5
    assert cut.derived == Fraction(41875, 10) and cut.status == "does not hold"
    assert "truncated" in cut.reason and "reproduces it (4187)" in cut.reason


def test_korthikanti_table5_by_hand(verdicts):
    b, l, s, hid, vocab = 64, 96, 2048, 12288, 51200
    eq7 = 72 * b * l * s * hid**2 * (1 + Fraction(s, 6 * hid) + Fraction(vocab, 12 * hid * l))
    mfu = 100 * eq7 / (Fraction(1375, 100) * 64 * 312 * 10**12)
    assert verdicts["korthikanti.table5.175B-mfu"].derived == mfu
    assert verdicts["korthikanti.table5.175B-mfu"].printed == "51.4"
    eq8 = 72 * b * l * s * hid**2 * (1 + Fraction(s, 3 * hid) + Fraction(vocab, 12 * hid * l))
    hfu = verdicts["korthikanti.table5.175B-hfu"]
    assert hfu.status == "does not hold"
    assert f"reproduces it ({float(100 * eq8 / (Fraction(1375, 100) * 64 * 312 * 10**12)):.6g})" \
        in hfu.reason


def test_korthikanti_selective_memory_share_is_five_as_over_h(verdicts):
    # GPT-3: 5as/h = 80, 80 / (34 + 80) = 70.2 %
    assert verdicts["korthikanti.5.175B-memory-saved"].derived == Fraction(100 * 80, 114)


def test_palm_540b_parameters_by_hand(verdicts):
    l, hid, q, ffn, vocab = 118, 18432, 48 * 256, 4 * 18432, 256000
    layer = 2 * hid * q + 2 * hid * 256 + 3 * hid * ffn + hid     # q, o; one k/v head; SwiGLU; 1 norm
    n = l * layer + vocab * hid + hid
    entry = verdicts["chowdhery.table1.540B-N"]
    assert entry.derived == Fraction(n, 10**9) and entry.printed == "540.36"
    assert "reproduces it (540.354)" in entry.reason


def test_palm_mfu_by_hand(verdicts):
    l, hid, q, ffn, vocab, seq = 118, 18432, 48 * 256, 4 * 18432, 256000, 2048
    gemm_params = l * (2 * hid * q + 2 * hid * 256 + 3 * hid * ffn) + vocab * hid
    per_token = 6 * gemm_params + 12 * l * q * seq
    assert verdicts["chowdhery.appendixB.540b-mfu"].derived == Fraction(
        100 * 238300 * per_token, 6144 * 275 * 10**12)


def test_llama3_table4_and_compute(verdicts):
    assert verdicts["dubey.table4.16384gpu-s131072.gpus"].derived == 8 * 16 * 16 * 8
    tokens = verdicts["dubey.table4.8192gpu-s8192.tokens"]
    assert tokens.derived == Fraction(8192 * 32 * 64, 10**6) and "2^20" in tokens.reason
    assert verdicts["dubey.table4.8192gpu-s8192.mfu"].derived == Fraction(100 * 430, 989)
    compute = verdicts["dubey.1.405b-compute"]
    assert compute.status == "does not hold" and "6N per token" in compute.reason


def test_kaplan_and_chinchilla_terms(verdicts):
    assert verdicts["kaplan.table1.total-forward"].status == "holds"
    assert verdicts["kaplan.2.1.c-6n"].derived == 6
    assert verdicts["hoffmann.F.softmax"].status == "does not hold"
    assert "reproduces it" in verdicts["hoffmann.F.total-forward"].reason
    assert verdicts["hoffmann.F.backward"].derived == 2


def test_a_changed_printed_value_stops_holding():
    entry = CLAIMS["narayanan.table1.529.6b-parameters"]
    from dataclasses import replace

    assert evaluate(entry).status == "holds"
    assert evaluate(replace(entry, value=529.7)).status == "does not hold"


# --- the command line --------------------------------------------------------------------------

def test_document_option_json_lists_only_that_document():
    out = subprocess.run([sys.executable, "-m", "derive.check", "--document", "Korthikanti et al. 2022",
                          "--json"], capture_output=True, text=True, check=True).stdout
    report = json.loads(out)
    assert {entry["document"] for entry in report["claims"]} == {"Korthikanti et al. 2022"}
    assert (report["holds"], report["does not hold"]) == COUNTS["Korthikanti et al. 2022"]
    assert list(report["documents"]) == ["Korthikanti et al. 2022"]
    assert report["documents"]["Korthikanti et al. 2022"]["does not hold"] == 8


def test_claims_option_checks_every_document(capsys):
    assert check.main(["--claims"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    hold = sum(h for h, _ in COUNTS.values())
    fail = sum(f for _, f in COUNTS.values())
    assert last == f"{hold + fail} claims: {hold} hold, {fail} do not hold, 0 pending, 0 errors"


# --- the sheet's section ------------------------------------------------------------------------

def test_sheet_section_counts_and_lists_every_claim_that_does_not_hold(sheet, tables, verdicts):
    assert "## The literature, checked" in sheet
    per_document = {row["document"]: row for row in tables["literature_documents"]["rows"]}
    for name, (hold, fail) in COUNTS.items():
        assert (per_document[name]["hold"], per_document[name]["do_not_hold"]) == (hold, fail)
    listed = [row["id"] for row in tables["literature_not_holding"]["rows"]]
    assert listed == [key for key, v in verdicts.items()
                      if v.claim.document != ARTICLE and v.status == "does not hold"]
    assert "Table A4" in per_document["Hoffmann et al. 2022"]["scope"]
