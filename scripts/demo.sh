#!/usr/bin/env bash
# Install modelctx in a venv and run the demo: a real server process on stdio and HTTP,
# listed and called by a small client over its pipes (examples/demo.py); then the
# reference servers joined by the gateway and driven by the `modelctx` command line
# (examples/servers_demo.py). No API key is needed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q -e ".[http,servers]"
.venv/bin/python examples/demo.py "$@"
exec .venv/bin/python examples/servers_demo.py
