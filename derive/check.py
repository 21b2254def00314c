"""``python -m derive.check``: prove every registered identity; exit 1 on any failure."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

import sympy as sp

from derive.identities import Proof, all_identities, prove


def verdict(proof: Proof) -> str:
    """One word for the outcome."""
    if proof.identity.holds:
        return "proven" if proof.zero else "FAILED"
    return "departs" if not proof.zero else "FAILED (expected a departure, difference is 0)"


def as_record(proof: Proof) -> dict[str, object]:
    """A JSON-ready description of one proof."""
    entry = proof.identity
    return {
        "name": entry.name,
        "topic": entry.topic,
        "holds": entry.holds,
        "passed": proof.passed,
        "verdict": verdict(proof),
        "claim": sp.sstr(proof.claim),
        "derived": sp.sstr(proof.derived),
        "difference": sp.sstr(proof.difference),
        "source": entry.source,
        "assumptions": list(entry.assumptions),
        "where": {sp.sstr(k): sp.sstr(val) for k, val in entry.where.items()},
    }


def run_proofs() -> list[Proof]:
    """Prove every identity in registration order."""
    return [prove(entry) for entry in all_identities()]


def main(argv: Sequence[str] | None = None) -> int:
    """Print one line per identity and a summary; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m derive.check", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print the proofs as JSON")
    args = parser.parse_args(argv)
    proofs = run_proofs()
    failed = [proof for proof in proofs if not proof.passed]
    if args.json:
        json.dump({"proofs": [as_record(proof) for proof in proofs],
                   "passed": len(proofs) - len(failed), "failed": len(failed)},
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for proof in proofs:
            mark = "ok  " if proof.passed else "FAIL"
            line = f"{mark} {verdict(proof):8} {proof.identity.name}"
            if not proof.zero:
                line += f"   [derived - claim = {sp.sstr(proof.difference)}]"
            print(line)
        print(f"{len(proofs) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
