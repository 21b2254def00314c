#!/usr/bin/env bash
# Installs the real renderers for tests/test_renderers.py and tests/test_web_browser.py (they fail, never skip,
# without them). Run by `make test`; each step is skipped when already satisfied.
set -euo pipefail
cd "$(dirname "$0")/.."

# pdflatex: Debian's texlive-latex-base + texlive-latex-recommended, only if missing.
if ! command -v pdflatex >/dev/null 2>&1; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        texlive-latex-base texlive-latex-recommended
fi
# chromium + chromedriver: Debian's, for tests/test_web_browser.py (Selenium drives them; no download).
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver
fi
# node: the machine's Node.js; Debian's only if the machine has none.
if ! command -v node >/dev/null 2>&1; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm
fi
# katex: the version pinned in tests/katex/package-lock.json, into tests/katex/node_modules.
pinned=$(node -p 'require("./tests/katex/package.json").dependencies.katex')
installed=$(node -p 'try { require("./tests/katex/node_modules/katex/package.json").version } catch (e) { "" }')
if [ "$pinned" != "$installed" ]; then
    (cd tests/katex && npm ci --no-audit --no-fund)
fi

