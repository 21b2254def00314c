"""The papers' claims: counts per document, derived values against the papers' printed numbers, --document."""
import json
from collections import Counter
from fractions import Fraction

import pytest

from derive import check
from derive.claims import ARTICLE, CLAIMS, all_claims, documents, evaluate

#: One worker runs this module under make test's --dist loadgroup: its module fixtures are built once.
pytestmark = pytest.mark.xdist_group("literature")

PAPERS = ("Chowdhery et al. 2022", "DeepSeek-AI 2024", "Dubey et al. 2024", "Hoffmann et al. 2022",
          "Kaplan et al. 2020", "Korthikanti et al. 2022", "NVIDIA Transformer Engine docs",
          "Narayanan et al. 2021", "Rajbhandari et al. 2020")


@pytest.fixture(scope="module")
def verdicts():
    return {entry.id: evaluate(entry) for entry in all_claims()}


def test_documents_are_the_article_then_the_papers_and_docs():
    assert documents() == [ARTICLE, *PAPERS]


def test_at_least_150_paper_claims_each_naming_its_document(verdicts):
    papers = [v for v in verdicts.values() if v.claim.document != ARTICLE]
    assert len(papers) >= 150
    assert all(v.claim.document in PAPERS for v in papers)
    assert all(v.status in ("holds", "does not hold", "unconfirmed") for v in papers)


#: document -> (hold, do not hold, unconfirmed), as derive judges them today.
COUNTS = {
    ARTICLE: (103, 8, 0),
    "Chowdhery et al. 2022": (23, 4, 0),
    "DeepSeek-AI 2024": (1, 0, 0),
    "NVIDIA Transformer Engine docs": (3, 0, 0),
    "Dubey et al. 2024": (6, 8, 0),
    "Hoffmann et al. 2022": (7, 9, 0),
    "Kaplan et al. 2020": (15, 1, 0),
    "Korthikanti et al. 2022": (49, 16, 0),
    "Narayanan et al. 2021": (51, 13, 0),
    "Rajbhandari et al. 2020": (87, 16, 0),
}


def test_counts_per_document(verdicts):
    counted = Counter((v.claim.document, v.status) for v in verdicts.values())
    for name, expected in COUNTS.items():
        statuses = ("holds", "does not hold", "unconfirmed")
        assert tuple(counted[name, status] for status in statuses) == expected, name


def test_a_verdict_about_a_paper_needs_a_source(verdicts):
    for v in verdicts.values():
        if v.claim.document == ARTICLE:
            continue
        judged = v.status in ("holds", "does not hold")
        assert judged == bool(v.claim.checked_against), v.claim.id
        assert v.record()["checked_against"] == v.claim.checked_against


def test_an_unconfirmed_claim_gives_derives_value_and_no_verdict(verdicts):
    cell = verdicts["rajbhandari.table1.1T-P_os-dp64"]          # 4000 + 12000/64 = 4187.5 GB
    assert cell.derived == Fraction(41875, 10) and "Table 1" in cell.claim.checked_against
    assert cell.status == "does not hold" and "reproduces it (4187)" in cell.reason
    from dataclasses import replace

    unsourced = evaluate(replace(cell.claim, checked_against=""))
    assert unsourced.status == "unconfirmed" and unsourced.derived == Fraction(41875, 10)
    assert unsourced.reason.startswith("no verdict") and "4188" in unsourced.reason


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
    assert entry.status == "holds" and "1008b" in entry.claim.checked_against
    peak = verdicts["narayanan.table1.1008.0b-percent-of-peak"]   # 163 / 312 = 52.2 %
    assert peak.derived == Fraction(16300, 312) and peak.status == "holds"
    eq2 = verdicts["narayanan.eq2"]                               # read in a transcription of Eq. 2
    assert eq2.status == "does not hold" and "final LayerNorm" in eq2.reason


def test_narayanan_aggregate_is_gpus_times_printed_throughput(verdicts):
    assert "502 petaFLOP/s" in verdicts["narayanan.table1.1008.0b-aggregate"].claim.checked_against
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


def test_zero_figure1_by_hand(verdicts):
    psi = Fraction(75, 10) * 10**9
    os_64 = verdicts["rajbhandari.figure1.7.5b-P_os"]
    assert os_64.derived == (4 * psi + 12 * psi / 64) / 10**9 and os_64.printed == "31.4"
    assert os_64.status == "holds" and "velog.io" in os_64.claim.checked_against
    all_64 = verdicts["rajbhandari.figure1.7.5b-P_os+g+p"]      # 16 x 7.5 / 64 = 1.875 GB
    assert all_64.derived == Fraction(1875, 1000) and all_64.printed == "1.9"
    # Table 1 rounds its small cells half up: 2 x 7.5 + 14 x 7.5 / 4 = 41.25 prints as 41.3
    assert verdicts["rajbhandari.table1.7.5B-P_os+g-dp4"].printed == "41.3"
    assert verdicts["rajbhandari.table1.7.5B-P_os+g-dp4"].status == "holds"


def test_zero_table2_scales_a_rounded_size(verdicts):
    one = verdicts["rajbhandari.table2.mp1-P_os"]               # 32 GB / (4 + 12/64) bytes
    assert one.derived == Fraction(32 * 64, 4 * 64 + 12) and one.status == "holds"
    sixteen = verdicts["rajbhandari.table2.mp16-P_os"]          # 16 x 7.642 = 122.3, printed 121.6
    assert sixteen.derived == 16 * Fraction(32 * 64, 4 * 64 + 12) and sixteen.printed == "122.3"
    assert sixteen.status == "does not hold" and "reproduces it (121.6)" in sixteen.reason
    assert verdicts["rajbhandari.table2.mp16-P_os+g+p"].derived == 2048      # printed 2T
    assert verdicts["rajbhandari.table2.mp16-P_os+g+p"].status == "holds"
    assert verdicts["rajbhandari.5.4.dp64-P_os+g-fits-14b"].derived == Fraction(32 * 64, 2 * 64 + 14)


def test_zero_gpt2_activations_follow_footnote_3(verdicts):
    entry = verdicts["rajbhandari.3.2.gpt2-activations-60gb"]
    sbh = 1024 * 32 * 1600
    # derive: 48 layers of sbh(34 + 5as/h) bytes, a = 25; the paper: 12 fp16 values per sbh
    assert entry.derived == Fraction(48 * sbh * (34 + Fraction(5 * 25 * 1024, 1600)), 10**9)
    assert entry.status == "does not hold"
    assert f"reproduces it ({48 * sbh * 12 * 2 / 10**9:.6g})" in entry.reason


def test_narayanan_appendix_and_table2_days_by_hand(verdicts):
    assert verdicts["narayanan.appendix.layer-recompute"].status == "holds"
    assert verdicts["narayanan.appendix.logit-total"].status == "holds"
    l, hid, vocab, seq = 105, 20480, 51200, 2048                   # the 529.6B model
    per_token = 96 * l * hid**2 * (1 + Fraction(seq, 6 * hid) + Fraction(vocab, 16 * l * hid))
    days = Fraction(300 * 10**9) * per_token / (560 * 171 * 10**12 * 86400)
    entry = verdicts["narayanan.table2.ptd-529.6b-560gpu-days"]
    assert entry.derived == days and round(days) == 156 and entry.status == "holds"
    off = verdicts["narayanan.table2.ptd-175b-768gpu-days"]       # 43.51 at 149, printed 43
    assert off.status == "does not hold" and "43.37 to 43.66 days" in off.reason


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
    assert entry.status == "does not hold" and "reproduces it (540.354)" in entry.reason
    assert "540.35B" in entry.claim.checked_against
    assert verdicts["chowdhery.table1.8B-N"].status == "holds"           # 8.63B, read in Table 1


def test_palm_mfu_by_hand(verdicts):
    l, hid, q, ffn, vocab, seq = 118, 18432, 48 * 256, 4 * 18432, 256000, 2048
    gemm_params = l * (2 * hid * q + 2 * hid * 256 + 3 * hid * ffn) + vocab * hid
    per_token = 6 * gemm_params + 12 * l * q * seq
    assert verdicts["chowdhery.appendixB.540b-mfu"].derived == Fraction(
        100 * 238300 * per_token, 6144 * 275 * 10**12)


def test_llama3_table4_and_compute(verdicts):
    assert verdicts["dubey.table4.16384gpu-s8192.gpus"].derived == 8 * 1 * 16 * 128
    tokens = verdicts["dubey.table4.8192gpu-s8192.tokens"]
    assert tokens.derived == Fraction(8192 * 32 * 64, 10**6) and "2^20" in tokens.reason
    assert verdicts["dubey.table4.8192gpu-s8192.mfu"].derived == Fraction(100 * 430, 989)
    assert verdicts["dubey.table4.8192gpu-s8192.mfu"].status == "holds"
    assert verdicts["dubey.table4.16384gpu-s8192.mfu"].status == "does not hold"  # 400/989 = 40.4 %
    compute = verdicts["dubey.1.405b-compute"]
    assert compute.status == "does not hold" and "6N per token" in compute.reason
    assert verdicts["dubey.1.almost-50x-llama2"].status == "holds"


def test_kaplan_and_chinchilla_terms(verdicts):
    assert verdicts["kaplan.table1.total-forward"].status == "holds"
    assert verdicts["kaplan.table1.total-parameters"].status == "holds"
    assert verdicts["kaplan.2.1.n-12-l-h2"].status == "holds"
    assert verdicts["kaplan.2.1.c-6n"].derived == 6
    assert verdicts["hoffmann.F.softmax"].status == "does not hold"
    assert "reproduces it" in verdicts["hoffmann.F.total-forward"].reason
    assert verdicts["hoffmann.F.backward"].derived == 2


def test_a_changed_printed_value_stops_holding():
    entry = CLAIMS["korthikanti.table5.175B-mfu"]
    from dataclasses import replace

    assert evaluate(entry).status == "holds"
    assert evaluate(replace(entry, value=51.5)).status == "does not hold"


# --- the command line --------------------------------------------------------------------------

def test_document_option_json_lists_only_that_document(capsys):
    assert check.main(["--document", "Korthikanti et al. 2022", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {entry["document"] for entry in report["claims"]} == {"Korthikanti et al. 2022"}
    assert (report["holds"], report["does not hold"], report["unconfirmed"]) == \
        COUNTS["Korthikanti et al. 2022"]
    assert list(report["documents"]) == ["Korthikanti et al. 2022"]
    assert report["documents"]["Korthikanti et al. 2022"]["does not hold"] == 16
    by_id = {entry["id"]: entry for entry in report["claims"]}
    assert "ml-engineering" in by_id["korthikanti.table5.22B-mfu"]["checked_against"]
    assert "2.7% and 1.6%" in by_id["korthikanti.5.175B-flops-overhead"]["checked_against"]


def test_claims_option_checks_every_document(capsys):
    assert check.main(["--claims"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    hold, fail, unconfirmed = (sum(counts[i] for counts in COUNTS.values()) for i in range(3))
    assert last == (f"{hold + fail + unconfirmed} claims: {hold} hold, {fail} do not hold, "
                    f"{unconfirmed} unconfirmed, 0 pending, 0 errors")
