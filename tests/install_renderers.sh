#!/usr/bin/env bash
# Installs the real renderers for tests/test_renderers.py and tests/test_web_browser.py (without them they
# skip with one line naming the tool, and fail under CI=true). Run by `make test`; each step is skipped when already satisfied.
set -euo pipefail
cd "$(dirname "$0")/.."

# katex: the version pinned in tests/katex/package-lock.json, into tests/katex/node_modules (no root needed).
install_katex() {
    local pinned installed
    pinned=$(node -p 'require("./tests/katex/package.json").dependencies.katex')
    installed=$(node -p 'try { require("./tests/katex/node_modules/katex/package.json").version } catch (e) { "" }')
    if [ "$pinned" != "$installed" ]; then
        (cd tests/katex && npm ci --no-audit --no-fund)
    fi
}

# apt-get needs root: as root run it, with sudo use sudo, else say what to run and leave the rest to
# the tests (without CI=true they skip what needs a missing tool, naming it and this script).
APT="env DEBIAN_FRONTEND=noninteractive apt-get"
missing=()
for tool in pdflatex chromium chromedriver node; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        APT="sudo env DEBIAN_FRONTEND=noninteractive apt-get"
    else
        echo "install_renderers.sh: ${missing[*]} missing and installing needs root; run:" >&2
        echo "  sudo apt-get install -y --no-install-recommends texlive-latex-base texlive-latex-recommended chromium chromium-driver nodejs npm" >&2
        echo "  (or as root: bash tests/install_renderers.sh); the tests needing them skip until then (fail under CI=true)" >&2
        if [ "${CI:-}" = "true" ]; then exit 1; fi
        if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
            install_katex
        fi
        exit 0
    fi
fi

# pdflatex: Debian's texlive-latex-base + texlive-latex-recommended, only if missing.
if ! command -v pdflatex >/dev/null 2>&1; then
    $APT update
    $APT install -y --no-install-recommends \
        texlive-latex-base texlive-latex-recommended
fi
# chromium + chromedriver: Debian's, for tests/test_web_browser.py (Selenium drives them; no download).
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    $APT update
    $APT install -y --no-install-recommends chromium chromium-driver
fi
# node: the machine's Node.js; Debian's only if the machine has none.
if ! command -v node >/dev/null 2>&1; then
    $APT update
    $APT install -y --no-install-recommends nodejs npm
fi
install_katex

