"""The article's claims: values that hold, ones that do not, pending ones, and the CLI."""
import re
import subprocess
import sys
from collections import Counter
from fractions import Fraction

import pytest

from derive import check, claims
from derive.claims import ARTICLE, CLAIMS, Claim, all_claims, decimals, evaluate, significant

#: One worker runs this module under make test's --dist loadgroup: its module fixtures are built once.
pytestmark = pytest.mark.xdist_group("claims")


@pytest.fixture(scope="module")
def verdicts():
    return {entry.id: evaluate(entry) for entry in all_claims(ARTICLE)}


def test_at_least_40_claims_with_section_unit_and_precision():
    entries = all_claims()
    assert len(entries) >= 40
    assert all(e.section and e.unit in claims.UNITS and e.rounding.describe() for e in entries)


@pytest.mark.parametrize("claim_id, printed", [
    ("1.3.llama3-8b-N", "8.03"),
    ("1.3.llama3-70b-N", "70.55"),
    ("1.3.llama3-405b-N", "405.85"),
    ("3.5.8b-resident", "128.48"),
    ("open.70b-resident", "1.13"),
    ("3.5.405b-resident", "6.49"),
    ("8.4.70b-resident-18", "1.27"),
    ("8.4.70b-grads-fp32", "282.21"),
    ("8.4.llama3-70b-optim", "846.64"),
    ("6.1.70b-n-gemm", "69.5"),
    ("6.1.70b-n-gemm-gap", "1.5"),
    ("3.5.70b-at-least-15", "15"),
    ("3.1.bf16-roundoff-percent", "0.4"),
])
def test_claims_that_hold(verdicts, claim_id, printed):
    assert verdicts[claim_id].status == "holds"
    assert verdicts[claim_id].printed == printed


def test_70b_resident_in_tb_is_the_independent_sum():
    # 70,553,706,496 parameters x 16 bytes (Llama 3 70B shape, counted by hand).
    n = 80 * (2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192) + 2 * 128256 * 8192 + 8192
    assert evaluate(CLAIMS["open.70b-resident"]).derived == Fraction(16 * n, 10**12)


def test_self_test_card_counts_do_not_hold_and_say_why(verdicts):
    assert verdicts["9.q1.llama3-8b-cards-70gib"].status == "holds"
    seventy = verdicts["9.q1.llama3-70b-cards-70gib"]
    assert seventy.status == "does not hold"
    assert seventy.printed == "16"
    assert "70 GB (10^9 bytes) in place of 70 GiB reproduces it" in seventy.reason
    assert verdicts["9.q1.llama3-405b-cards-70gib"].printed == "87"


def test_pending_claims_are_not_judged():
    entry = Claim("test.pending", "test", "", 1, "x", decimals(0), None, pending="needs a module")
    verdict = evaluate(entry)
    assert verdict.status == "pending" and verdict.derived is None
    assert verdict.reason == "needs a module"


def test_no_claim_of_the_article_is_pending(verdicts):
    statuses = Counter(v.status for v in verdicts.values())
    assert statuses == {"holds": 103, "does not hold": 8}


#: Every claim that does not hold, and the phrase of its reason that says why.
DOES_NOT_HOLD = {
    "4.1.score-ten-times-34": "320/34 = 9.4",
    "4.3.70b-act-182": "80 x the per-layer 2.28 GB as printed (rounded before multiplying) "
                       "reproduces it (182.4)",
    "4.3.8b-act-36": "32 x the per-layer 1.14 GB as printed (rounded before multiplying) "
                     "reproduces it (36.48)",
    "5.4.usable-low-65-gib": "65-75 GiB here, 68-74 GiB in 8.1",
    "5.4.usable-high-75-gib": "65-75 GiB here, 68-74 GiB in 8.1",
    "8.1.usable-low-68-gib": "the article's items alone at their worst",
    "9.q1.llama3-70b-cards-70gib": "70 GB (10^9 bytes) in place of 70 GiB reproduces it",
    "9.q1.llama3-405b-cards-70gib": "70 GB (10^9 bytes) in place of 70 GiB reproduces it",
}


def test_the_claims_that_do_not_hold_and_why(verdicts):
    failing = {key for key, verdict in verdicts.items() if verdict.status == "does not hold"}
    assert failing == set(DOES_NOT_HOLD)
    for key, why in DOES_NOT_HOLD.items():
        assert why in verdicts[key].reason, key
    assert verdicts["4.3.70b-act-182"].printed == "183"
    assert verdicts["4.3.8b-act-36"].printed == "37"
    assert verdicts["4.1.score-ten-times-34"].printed == "9"


# Llama 3 70B by hand: L, h, a, kv heads, f, V, s.
L70, H70, A70, G70, F70, V70, S = 80, 8192, 64, 8, 28672, 128256, 8192
KV70 = G70 * H70 // A70
#: 6 x the GEMM parameters (q, k, v, o, gate, up, down per layer; the head) + 6Lsh causal scores.
FLOP_PER_TOKEN_70B = (6 * (L70 * (2 * H70**2 + 2 * H70 * KV70 + 3 * H70 * F70) + H70 * V70)
                      + 6 * L70 * S * H70)


def test_70b_flops_per_token_and_times_against_a_hand_count(verdicts):
    assert FLOP_PER_TOKEN_70B == 449_222_541_312
    assert verdicts["open.70b-flop-per-token"].derived == FLOP_PER_TOKEN_70B
    assert verdicts["8.4.llama3-70b-seq-seconds"].derived == Fraction(S * FLOP_PER_TOKEN_70B,
                                                                      989 * 10**12)
    step = Fraction(4194304 * FLOP_PER_TOKEN_70B, 1024 * 989 * 10**12)
    assert verdicts["6.4.70b-step-1.86"].derived == step
    days = Fraction(15 * 10**12, 4194304) * step / Fraction(2, 5) / 86400
    assert verdicts["6.4.days-193"].derived == days and 192.5 < days < 192.53
    mfu = Fraction(4194304 * 2, 9) * FLOP_PER_TOKEN_70B / (1024 * 989 * 10**12)
    assert verdicts["7.3.mfu-41.3"].derived == 100 * mfu
    assert verdicts["7.3.hfu-full-55.1"].derived == 100 * mfu * Fraction(4, 3)
    # selective recompute re-runs the causal QK^T and PV forwards: 2Lsh per token
    selective = 1 + Fraction(2 * L70 * S * H70, FLOP_PER_TOKEN_70B)
    assert verdicts["7.3.hfu-selective-42.3"].derived == 100 * mfu * selective


def test_activation_claims_against_hand_counts(verdicts):
    layer = 34 * S * H70                       # the article's 34sbh at b = 1
    assert verdicts["open.70b-act-per-layer"].derived == Fraction(layer, 10**9)
    assert verdicts["4.3.70b-act-182"].derived == Fraction(L70 * layer, 10**9)
    assert verdicts["4.3.logits-6.3"].derived == Fraction(6 * S * V70, 10**9)
    assert verdicts["4.3.llama3-70b-layer-scores"].derived == Fraction(
        layer + 5 * A70 * S * S, 10**9)
    assert verdicts["4.4.megatron-32-llama3-70b"].derived == 18 + 4 * F70 // H70
    assert "Llama fused profile" in verdicts["open.70b-act-per-layer"].reason


def test_the_driver_capacity_claim_states_what_derive_checks(verdicts):
    capacity = verdicts["5.4.h100-79.6-gib"]
    assert capacity.status == "holds" and capacity.derived == Fraction(81559, 1024)
    assert "unit conversion only" in capacity.reason and "cannot derive" in capacity.reason


def test_a_wrong_value_does_not_hold():
    entry = Claim("test.8b", "test", "8B is 8.04 B", 8.04, "billion parameters", decimals(2),
                  CLAIMS["1.3.llama3-8b-N"].derive)
    verdict = evaluate(entry)
    assert verdict.status == "does not hold" and "prints as 8.03" in verdict.reason


def test_significant_figures_round_182_to_180():
    entry = Claim("test.sig", "test", "", 180, "GB", significant(2), lambda: 182_500_000_000)
    assert evaluate(entry).status == "holds"


def test_bad_unit_names_the_field():
    with pytest.raises(ValueError, match="^unit: "):
        Claim("x", "s", "t", 1, "furlongs", decimals(0), lambda: 1)


def test_cli_prints_each_claim_and_a_summary(capsys):
    assert check.main(["--claims"]) == 0
    out = capsys.readouterr().out.splitlines()
    summary = re.fullmatch(r"(\d+) claims: (\d+) hold, (\d+) do not hold, (\d+) unconfirmed, (\d+) pending, "
                           r"0 errors",
                           out[-1])
    assert summary and int(summary[1]) == len(out) - 1 >= 40
    assert int(summary[3]) >= 3
    assert all(re.match(r"(holds|does not hold|unconfirmed|pending) +\S+ +\[", line) for line in out[:-1])
    line = next(l for l in out if "9.q1.llama3-70b" in l)
    assert line.startswith("does not hold") and "derived 15.019 cards" in line


def test_a_derivation_that_raises_fails_the_cli(monkeypatch, capsys):
    all_claims()
    registry = dict(CLAIMS)
    monkeypatch.setattr(claims, "CLAIMS", registry)
    registry["test.raises"] = Claim("test.raises", "test", "", 1, "x", decimals(0),
                                    lambda: 1 / 0)
    assert check.main(["--claims"]) == 1
    assert "ERROR test.raises: ZeroDivisionError" in capsys.readouterr().out


def test_plain_check_does_not_load_the_claims():
    code = "import sys; from derive import check; check.main([]); print('derive.claims' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "False"


def test_cli_json_lists_every_claim_with_its_status(capsys):
    import json

    assert check.main(["--claims", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["claims"]) == (report["holds"] + report["does not hold"] + report["unconfirmed"]
                                     + report["pending"])
    by_id = {entry["id"]: entry for entry in report["claims"]}
    assert by_id["8.4.70b-grads-fp32"]["status"] == "holds"
    assert by_id["8.4.70b-grads-fp32"]["rounding"] == "2 decimals"
    assert by_id["8.4.70b-grads-fp32"]["document"] == "the article"
    assert by_id["5.4.h100-79.6-gib"]["status"] == "holds"
    assert by_id["4.3.70b-act-182"]["status"] == "does not hold"
    assert report["pending"] == 0
    assert report["errors"] == []


def test_document_option_selects_one_document(capsys):
    assert check.main(["--document", ARTICLE]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "111 claims: 103 hold, 8 do not hold, 0 unconfirmed, 0 pending, 0 errors"


def test_unknown_document_is_one_stderr_line_and_exit_2(capsys):
    assert check.main(["--document", "Nobody 1999"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("--document: unknown document 'Nobody 1999'")


def test_large_segment_claim_reads_the_allocator_constant(monkeypatch, verdicts):
    # 20 MiB = 20 * 2^20 bytes: the allocator's kLargeBuffer, not a literal in the claim
    assert verdicts["5.3.large-segment-20-mib"].derived == 20
    from derive.claims import article_activations

    monkeypatch.setattr(article_activations, "K_LARGE_BUFFER", 21 * 2**20)
    assert evaluate(CLAIMS["5.3.large-segment-20-mib"]).status == "does not hold"
