"""``python -m derive.check``: prove every registered identity; exit 1 on any failure.

``--claims`` instead evaluates the numeric claims of every document (``derive.claims``:
the article and the papers it builds on), ``--document NAME`` those of one:
each holds, does not hold (reported, exit 0), is unconfirmed (a paper's printed
value not confirmed against a source: no verdict) or is pending; exit 1 only when a
derivation raises, exit 2 for an unknown document.
"""
from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Sequence

import sympy as sp

from derive.identities import prove_all
from derive.inputs import OneLineParser
from derive.options.messages import writes_stdout

if TYPE_CHECKING:
    from derive.claims import Claim, Verdict


def claims_main(as_json: bool, entries: list["Claim"]) -> int:
    """Evaluate ``entries``; print one line each and a summary; 1 if a derivation raises."""
    from derive.claims import evaluate

    verdicts: list[Verdict] = []
    errors: list[str] = []
    for entry in entries:
        try:
            verdicts.append(evaluate(entry))
        except Exception as error:  # a derivation that raises is a failure of derive, not the article
            errors.append(f"ERROR {entry.id}: {type(error).__name__}: {error}")
    counts = {status: sum(v.status == status for v in verdicts)
              for status in ("holds", "does not hold", "unconfirmed", "pending")}
    if as_json:
        by_document = {name: {status: sum(v.status == status and v.claim.document == name
                                          for v in verdicts) for status in counts}
                       for name in dict.fromkeys(v.claim.document for v in verdicts)}
        json.dump({"claims": [v.record() for v in verdicts], "documents": by_document,
                   "errors": errors, **counts}, sys.stdout, indent=2)
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
              f"{counts['does not hold']} do not hold, {counts['unconfirmed']} unconfirmed, "
              f"{counts['pending']} pending, "
              f"{len(errors)} errors")
    return 1 if errors else 0


@writes_stdout("python -m derive.check")
def main(argv: Sequence[str] | None = None) -> int:
    """Print one line per identity and a summary; return the exit status."""
    parser = OneLineParser(prog="python -m derive.check", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print the proofs as JSON")
    parser.add_argument("--claims", action="store_true",
                        help="evaluate the numeric claims of every document instead of the identities")
    parser.add_argument("--document", metavar="NAME",
                        help="evaluate the claims of one document only (implies --claims), e.g. "
                             "'Korthikanti et al. 2022' or 'the article'")
    args = parser.parse_args(argv)
    if args.claims or args.document is not None:
        from derive.claims import all_claims, documents

        if args.document is not None and args.document not in documents():
            print(f"--document: unknown document {args.document!r} (known: "
                  f"{'; '.join(documents())})", file=sys.stderr)
            return 2
        return claims_main(args.json, all_claims(args.document))
    proofs = prove_all(apart=True)
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
