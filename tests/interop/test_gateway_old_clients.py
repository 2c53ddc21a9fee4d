"""The gateway serves the installed base (issue 21): real old official clients reach servers
through ``modelctx gateway --http``, over the deprecated HTTP+SSE transport (mcp 1.2.0 speaks
2024-11-05, mcp 1.9.4 2025-03-26) and (1.9.4) Streamable HTTP, while the gateway's upstream is
a modelctx server on stdio that uses what later revisions added.

Each old client runs in its own venv (scripts/test.sh makes them) as a subprocess, so the
current SDK never shares its interpreter.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import SERVERS
from tests.support.wire import free_port, wait_until

LEGACY_SERVER = SERVERS / "legacy_server.py"
PYTHONS = {"1.2.0": "MODELCTX_MCP_1_2_0_PYTHON", "1.9.4": "MODELCTX_MCP_1_9_4_PYTHON"}
REVISIONS = {"1.2.0": "2024-11-05", "1.9.4": "2025-03-26"}

# What the old client does: list the gateway's tools, call one, and report what it saw.
CLIENT = """
import json, sys
import anyio
from mcp import ClientSession

async def main(kind, url):
    if kind == "sse":
        from mcp.client.sse import sse_client as connect
    else:
        from mcp.client.streamable_http import streamablehttp_client as connect
    async with connect(url) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            opened = await session.initialize()
            tools = await session.list_tools()
            added = await session.call_tool("legacy_add", {"a": 2, "b": 3})
            print(json.dumps({
                "protocolVersion": opened.protocolVersion,
                "tools": sorted(tool.name for tool in tools.tools),
                "fields": sorted(next(t for t in tools.tools if t.name == "legacy_add").model_dump(exclude_none=True)),
                "added": [block.text for block in added.content],
                "isError": added.isError,
            }))

anyio.run(main, sys.argv[1], sys.argv[2])
"""


def old_python(version: str) -> str:
    path = os.environ.get(PYTHONS[version])
    if not path or not Path(path).exists():
        pytest.fail(f"mcp {version} is not installed in its own venv ({PYTHONS[version]}; run scripts/test.sh)")
    return path


def _answers(port: int, process: subprocess.Popen[bytes], log: Path) -> bool:
    if process.poll() is not None:
        pytest.fail(f"the gateway exited with {process.returncode}:\n{log.read_text(errors='replace')}")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def gateway(tmp_path_factory) -> Iterator[str]:
    """``modelctx gateway --http`` in front of the legacy server (stdio); yields its base URL."""
    directory = tmp_path_factory.mktemp("gateway-old-clients")
    upstream = {"command": sys.executable, "args": ["-m", "modelctx", "serve", str(LEGACY_SERVER)], "approval": "allow"}
    config = directory / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"legacy": upstream}}))
    port = free_port()
    log = directory / "gateway.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "modelctx", "gateway", "--config", str(config), "--http", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until(lambda: _answers(port, process, log), f"the gateway on port {port}")
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait(timeout=30)


def run_old_client(version: str, kind: str, url: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        [old_python(version), "-c", CLIENT, kind, url], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, f"mcp {version} over {kind} through the gateway failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout)


@pytest.mark.parametrize(("version", "kind"), [("1.2.0", "sse"), ("1.9.4", "sse"), ("1.9.4", "http")])
def test_an_old_client_reaches_the_gateways_tools_in_its_own_revision(gateway, version, kind):
    url = f"{gateway}/sse" if kind == "sse" else f"{gateway}/mcp"

    seen = run_old_client(version, kind, url)

    assert seen["protocolVersion"] == REVISIONS[version]
    assert "legacy_add" in seen["tools"]
    assert seen["added"] == ['{"sum":5}']  # structured content folded into text for old revisions
    assert seen["isError"] is False
    assert "outputSchema" not in seen["fields"] and "title" not in seen["fields"]
