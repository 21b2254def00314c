#!/usr/bin/env bash
# Install the pinned peers into a throwaway venv (default /tmp/derive-peers-venv).
# Not run by CI: tools/peers/README.md says when to run it.
set -euo pipefail
VENV=${1:-/tmp/derive-peers-venv}
PYTHON=${PYTHON:-python3}
"$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/pip"
"$PIP" install -q --upgrade pip
"$PIP" install -q torch==2.13.0                               # the CPU build derive validates with
DS_BUILD_OPS=0 DS_SKIP_CUDA_CHECK=1 "$PIP" install -q deepspeed==0.19.8  # no CUDA ops built
"$PIP" install -q accelerate==1.15.0 transformers calflops==0.3.2 'fire>=0.5,<0.6'
# llm-analysis 0.2.2 pins huggingface-hub<0.15, which accelerate 1.15 cannot use; the methods
# called here need neither (only fire, installed above).
"$PIP" install -q --no-deps llm-analysis==0.2.2
"$PIP" install -q torchtitan==0.3.0 triton   # torchtitan imports triton at load
"$PIP" freeze > "$VENV/freeze.txt"
echo "$VENV"
