"""Where things are, for every test and helper: one place, so a moved file is one edit.

``tests/`` mirrors ``src/modelctx/`` (plus ``interop``, ``scale``, ``conformance``, ``docs``
and ``fuzz``); what the tests run or read that is not a test lives under ``tests/fixtures/``.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
SRC = ROOT / "src"
EXAMPLES = ROOT / "examples"
BENCH = ROOT / "bench"
FUZZ = ROOT / "fuzz"
DOCS = ROOT / "docs"

FIXTURES = TESTS / "fixtures"
SERVERS = FIXTURES / "servers"  # server files served as real subprocesses
PEERS = FIXTURES / "peers"  # old official SDK peers, run with their own interpreters
SPEC = FIXTURES / "spec"  # the MCP schemas and examples (its README.md says where from)
OPENAPI = FIXTURES / "openapi"  # OpenAPI documents as published (its NOTICE.md)
CONFORMANCE = FIXTURES / "conformance"  # the conformance suite's server, client and baseline
SAMPLE_SERVER = SERVERS / "sample_server.py"
