#!/usr/bin/env bash
# Install modelctx in a venv and run the demo: a real server process on stdio, listed
# and called by a small client over its pipes.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q -e ".[http]"
exec .venv/bin/python examples/demo.py "$@"
