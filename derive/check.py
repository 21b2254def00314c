"""``python -m derive.check``: prove every registered identity; exit 1 on any failure.

``--claims`` instead evaluates the article's numeric claims (``derive.claims``):
each holds, does not hold (reported, exit 0) or is pending; exit 1 only when a
derivation raises.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Sequence

import sympy as sp

from derive.identities import prove_all

if TYPE_CHECKING:
    from derive.claims import Verdict


def claim_record(verdict: "Verdict") -> dict[str, object]:
    """A JSON-ready description of one claim's verdict."""
    entry = verdict.claim
    return {"id": entry.id, "section": entry.section, "text": entry.text,
            "value": entry.printed_value, "unit": entry.unit,
            "precision": entry.precision.describe(), "status": verdict.status,
            "derived": None if verdict.derived is None else str(verdict.derived),
            "printed": verdict.printed, "reason": verdict.reason}


def claims_main(as_json: bool) -> int:
    """Evaluate every article claim; print one line each and a summary; 1 if a derivation raises."""
    from derive.claims import all_claims, evaluate

    verdicts: list[Verdict] = []
    errors: list[str] = []
    for entry in all_claims():
        try:
            verdicts.append(evaluate(entry))
        except Exception as error:  # a derivation that raises is a failure of derive, not the article
            errors.append(f"ERROR {entry.id}: {type(error).__name__}: {error}")
    counts = {status: sum(v.status == status for v in verdicts)
              for status in ("holds", "does not hold", "pending")}
    if as_json:
        json.dump({"claims": [claim_record(v) for v in verdicts], "errors": errors, **counts},
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for v in verdicts:
            entry = v.claim
            line = f"{v.status:13} {entry.id:34} [{entry.section}] {entry.printed_value} {entry.unit}"
            if v.status == "holds":
                line += f"  (derived {v.printed})" + (f" -- {v.reason}" if v.reason else "")
            else:
                line += f"  -- {v.reason}"
            print(line)
        for error in errors:
            print(error)
        print(f"{len(verdicts) + len(errors)} claims: {counts['holds']} hold, "
              f"{counts['does not hold']} do not hold, {counts['pending']} pending, "
              f"{len(errors)} errors")
    return 1 if errors else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Print one line per identity and a summary; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m derive.check", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print the proofs as JSON")
    parser.add_argument("--claims", action="store_true",
                        help="evaluate the article's numeric claims instead of the identities")
    args = parser.parse_args(argv)
    if args.claims:
        return claims_main(args.json)
    proofs = prove_all()
    failed = [proof for proof in proofs if not proof.passed]
    if args.json:
        json.dump({"proofs": [proof.record() for proof in proofs],
                   "passed": len(proofs) - len(failed), "failed": len(failed)},
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for proof in proofs:
            mark = "ok  " if proof.passed else "FAIL"
            line = f"{mark} {proof.verdict:8} {proof.identity.name}"
            if not proof.zero:
                line += f"   [derived - claim = {sp.sstr(proof.difference)}]"
            print(line)
        print(f"{len(proofs) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
