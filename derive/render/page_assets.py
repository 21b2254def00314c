"""The page's inline assets: its data block and scripts made safe to inline, their CSP hashes, KaTeX inlined.

KaTeX comes from the pinned npm package (tests/katex), its fonts as data: URIs, so the page
needs no server and makes no network request.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KATEX = ROOT / "tests" / "katex" / "node_modules" / "katex" / "dist"


def script_json(data: object) -> str:
    """``data`` as JSON safe inside <script type="application/json">: no <, >, & characters."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def inline_script(text: str) -> str:
    """``text`` checked to be safe between <script> tags (no closing tag, no comment opener)."""
    lowered = text.lower()
    if "</script" in lowered or "<!--" in lowered:
        raise ValueError("script: text holds </script or <!-- and cannot be inlined")
    return text


def csp_hash(text: str) -> str:
    """The CSP source expression that allows exactly this inline script."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def katex_assets(dist: Path = KATEX) -> tuple[str, str]:
    """(katex.min.js, katex.min.css with each font as a woff2 data: URI) from the pinned package."""
    if not (dist / "katex.min.js").exists():
        raise ValueError(f"katex: {dist} is missing; run `cd tests/katex && npm ci` (make derive does)")
    css = (dist / "katex.min.css").read_text(encoding="utf-8")

    def inline(match: re.Match[str]) -> str:
        font = (dist / "fonts" / f"{match.group(1)}.woff2").read_bytes()
        return f"src:url(data:font/woff2;base64,{base64.b64encode(font).decode()}) format(\"woff2\")"

    css, count = re.subn(r"src:url\(fonts/([A-Za-z0-9_-]+)\.woff2\)[^;}]*", inline, css)
    if not count:
        raise ValueError("katex: no @font-face src found in katex.min.css")
    return inline_script((dist / "katex.min.js").read_text(encoding="utf-8")), css
