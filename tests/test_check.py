"""python -m derive.check proves identities and fails on a wrong one."""
import json
import subprocess
import sys

import sympy as sp

from derive import check, identities
from derive.symbols import N


def test_check_passes_and_reports_json():
    out = subprocess.run([sys.executable, "-m", "derive.check", "--json"],
                         capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert report["failed"] == 0
    names = {entry["key"]: entry["name"] for entry in report["proofs"]}
    assert names["state.bf16_adam"] == "bf16 + Adam = 16N"
    assert len(names) == len(report["proofs"])
    assert all(entry["source"] for entry in report["proofs"])


def test_a_wrong_claim_fails_the_check(monkeypatch, capsys):
    identities.all_identities()
    registry = dict(identities.REGISTRY)
    monkeypatch.setattr(identities, "REGISTRY", registry)
    registry["test.wrong"] = identities.Identity(
        "test.wrong", "bf16 + Adam = 20N (wrong)", "test", 20 * N,
        registry["state.bf16_adam"].derive, "nowhere")
    assert check.main([]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "-4*N" in out


def test_a_departure_that_holds_fails_the_check(monkeypatch):
    identities.all_identities()
    registry = dict(identities.REGISTRY)
    monkeypatch.setattr(identities, "REGISTRY", registry)
    registry["test.departs"] = identities.Identity(
        "test.departs", "16N departs (wrong)", "test", 16 * N, registry["state.bf16_adam"].derive,
        "nowhere", holds=False)
    assert check.main([]) == 1


def test_difference_reduces_rational_forms():
    d = sp.Symbol("d", positive=True)
    assert identities.difference(6 + 12 / d, (6 * d + 12) / d) == 0


#: Modules a fast command must not load: numpy (derive.printing.python's printers), the PyTorch stack
#: (derive.validate only) and sympy.physics (what sympy.simplify imports on its first call).
HEAVY = ("numpy", "torch", "transformers", "sympy.physics")


def test_check_and_the_dense_report_load_no_heavy_module():
    """issue 28 (bench/run.py): the proofs and `derive --model 70b` start in little more than a SymPy import."""
    for call in ("from derive import check; check.main([])",
                 "from derive import cli; cli.main(['--model', '70b'])"):
        code = (f"import contextlib, io, sys\nwith contextlib.redirect_stdout(io.StringIO()):\n    {call}\n"
                f"print(sorted(name for name in {HEAVY!r} if name in sys.modules))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.splitlines()[-1] == "[]", call


def test_the_dense_report_loads_no_megatron_estimator_nor_the_printed_store():
    """issue 28: derive.megatron (the MoE report's Megatron FLOPs) and derive.printing.cache (the fit's ceiling) load when asked."""
    code = ("import contextlib, io, sys\nfrom derive import cli\nwith contextlib.redirect_stdout(io.StringIO()):\n"
            "    cli.main(['--model', '70b'])\n"
            "print(sorted(name for name in ('derive.megatron', 'derive.printing.cache') if name in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "[]"


def test_a_later_claim_and_a_deferred_where_are_derived_when_proved(monkeypatch):
    """identities.Later / Deferred: nothing is built on registration; proved, they give the value built, once."""
    identities.all_identities()
    monkeypatch.setattr(identities, "REGISTRY", dict(identities.REGISTRY))
    built = []
    d = sp.Symbol("d", positive=True)
    claim = identities.Later(lambda: built.append("claim") or 16 * N)
    where = identities.Deferred(lambda: built.append("where") or {N: 2 * d})
    identities.identity("16N at N = 2d (test)", topic="test", claim=claim, source="nowhere", where=where,
                        key="test.later")(lambda: 32 * d)
    entry = identities.REGISTRY["test.later"]
    assert built == [] and entry.where is where
    proved = identities.prove(entry)
    assert proved.passed and proved.zero and proved.claim == 32 * d and proved.derived == 32 * d
    assert dict(entry.where) == {N: 2 * d} and sorted(built) == ["claim", "where"]
