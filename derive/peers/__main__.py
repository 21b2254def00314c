"""python -m derive.peers [DIR]: print docs/validation.md's peers table from DIR/peers_*.json (default tests/reference)."""
from __future__ import annotations

import sys
from pathlib import Path

from derive.peers.table import load, markdown


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit 2 with one line if a reference file is missing."""
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0] if args else "tests/reference")
    try:
        references = load(folder)
    except FileNotFoundError as missing:
        print(f"DIR: no reference file {missing.filename}", file=sys.stderr)
        return 2
    except ValueError as bad:                      # json.JSONDecodeError is a ValueError
        print(f"DIR: a reference file in {folder} is not valid JSON ({bad})", file=sys.stderr)
        return 2
    sys.stdout.write(markdown(references))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
