"""Two client behaviours of 2026-07-28, against real servers.

* streamable-http.mdx, Client Behavior: after a ``HeaderMismatch`` (-32020) on
  ``tools/call`` the client SHOULD call ``tools/list`` to see whether the tool's
  ``inputSchema`` changed, then retry with the right ``Mcp-Param-*`` headers. Tested
  with our ``Server`` on real HTTP (uvicorn on 127.0.0.1) whose tool gains an
  ``x-mcp-header`` annotation between the client's list and its call.
* basic/versioning.mdx, Extension Negotiation: both sides declare
  ``capabilities.extensions``. The client sends its own in every request's ``_meta``
  (2026-07-28) and in ``initialize`` (handshake era), and reads the server's from
  ``server/discover`` or ``initialize``. Tested against a server written with the
  official SDK, and, for what the handshake-era server declares (the official SDK leaves
  it out of ``initialize``), against a tiny scripted stdio server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from modelctx import Client, ClientOptions, Server, ServerConfig
from modelctx.errors import HeaderMismatch
from modelctx.protocol.types import v2026_07_28 as wire
from tests.support.wire import async_test, free_port

DEADLINE = 10.0
TEST_DEADLINE = 40.0
MODERN, LEGACY = "2026-07-28", "2025-11-25"
UI = "io.modelcontextprotocol/ui"
UI_SETTINGS = {"mimeTypes": ["text/html;profile=mcp-app"]}


run = async_test(TEST_DEADLINE)  # a fresh loop and a deadline for each test


@contextlib.asynccontextmanager
async def served_over_http(server: Server) -> AsyncIterator[str]:
    """``server`` on Streamable HTTP (uvicorn, this event loop); yields its URL."""
    port = free_port()
    config = uvicorn.Config(
        server.http_app(), host="127.0.0.1", port=port, log_level="warning", lifespan="off", timeout_graceful_shutdown=1
    )
    http = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(http.serve())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while not http.started:
        assert not task.done() and loop.time() < deadline, "uvicorn did not start"
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        http.should_exit = True
        await asyncio.wait_for(task, DEADLINE)


# -- HeaderMismatch: re-list, then retry once ------------------------------------------------------------
def query(region: str, sql: str) -> str:
    """Run a query in a region."""
    return f"{sql} ran in {region}"


ROUTED = {  # the same tool, now asking for its region in an Mcp-Param-Region header
    "type": "object",
    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}, "sql": {"type": "string"}},
    "required": ["region", "sql"],
}


def counting_server(*middleware: Any) -> tuple[Server, list[str]]:
    """A server whose lists stay fresh for a minute (so a stale list sits in the client's
    cache) and that records the methods that reached it, before ``middleware`` runs."""
    reached: list[str] = []

    async def record(call: Any, call_next: Any) -> Any:
        reached.append(call.method)
        return await call_next(call)

    server = Server("routing", config=ServerConfig(ttl_ms=60_000, middleware=[record, *middleware]))
    server.add_tool(query)
    return server, reached


@run
async def test_a_header_mismatch_after_the_tool_changed_relists_and_retries_with_the_new_headers():
    server, reached = counting_server()
    async with served_over_http(server) as url, Client(url, mode=MODERN, timeout=DEADLINE) as client:
        before = {tool.name: tool for tool in await client.tools()}
        server.remove_tool("query")
        server.add_tool(query, input_schema=ROUTED)  # the client's list is now stale

        result = await client.call_tool("query", {"region": "eu-north1", "sql": "SELECT 1"})
        after = {tool.name: tool for tool in await client.tools()}

    assert "x-mcp-header" not in json.dumps(before["query"].input_schema)
    assert isinstance(result, wire.CallToolResult) and result.is_error is not True
    assert result.content[0].text == "SELECT 1 ran in eu-north1"
    assert after["query"].input_schema["properties"]["region"]["x-mcp-header"] == "Region"
    # One rejected call never reached the tool; then a fresh list (not the cached one),
    # then the call with the header; the final tools() is served from the cache.
    assert reached == ["tools/list", "tools/list", "tools/call"]


async def always_mismatched(call: Any, call_next: Any) -> Any:
    if call.method == "tools/call":
        raise HeaderMismatch("Header mismatch: Mcp-Param-Region is required")
    return await call_next(call)


@run
async def test_a_header_mismatch_the_tool_list_does_not_explain_is_raised_after_one_relist():
    server, reached = counting_server(always_mismatched)
    async with served_over_http(server) as url, Client(url, mode=MODERN, timeout=DEADLINE) as client:
        await client.tools()
        with pytest.raises(HeaderMismatch) as caught:
            await client.call_tool("query", {"region": "eu-north1", "sql": "SELECT 1"})

    assert caught.value.remote is True and "Mcp-Param-Region" in str(caught.value)
    # The call, a fresh list that shows the same headers, and no second call.
    assert reached == ["tools/list", "tools/call", "tools/list"]


# -- capabilities.extensions --------------------------------------------------------------------------
OFFICIAL_SERVER = '''
"""An official-SDK server declaring one extension; a tool reports what the client declared."""
import json

from mcp.server.extension import Extension
from mcp.server.mcpserver import Context, MCPServer


class Charts(Extension):
    identifier = "com.example/charts"

    def settings(self):
        return {"kinds": ["bar", "line"]}


mcp = MCPServer("extension-server", extensions=[Charts()], log_level="WARNING")


@mcp.tool()
def declared(ctx: Context) -> str:
    """The extensions the client declared, as the server sees them."""
    capabilities = ctx.client_capabilities
    return json.dumps((capabilities.extensions if capabilities else None) or {})


mcp.run()
'''


@pytest.fixture(scope="module")
def official_server(tmp_path_factory) -> list[str]:
    path = tmp_path_factory.mktemp("official") / "extension_server.py"
    path.write_text(OFFICIAL_SERVER)
    return [sys.executable, str(path)]


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@run
async def test_the_extensions_a_client_declares_reach_the_server_in_either_era(official_server, mode):
    options = ClientOptions(extensions={UI: UI_SETTINGS})
    async with Client(official_server, mode=mode, timeout=DEADLINE, options=options) as client:
        result = await client.call_tool("declared")

    assert client.protocol_version == (MODERN if mode == "auto" else LEGACY)
    assert json.loads(result.content[0].text) == {UI: UI_SETTINGS}


@run
async def test_a_client_reads_the_extensions_a_modern_server_declares_in_discover(official_server):
    async with Client(official_server, timeout=DEADLINE) as client:
        discovered = await client.discover()

    assert client.server_extensions == {"com.example/charts": {"kinds": ["bar", "line"]}}
    assert discovered.capabilities.extensions == {"com.example/charts": {"kinds": ["bar", "line"]}}


@run
async def test_without_declared_extensions_the_client_sends_none(official_server):
    async with Client(official_server, mode=MODERN, timeout=DEADLINE) as client:
        result = await client.call_tool("declared")

    assert json.loads(result.content[0].text) == {}  # extensions are off unless asked for


SCRIPTED_SERVER = '''
"""Answers initialize and server/discover declaring an extension; tools/call echoes the
capabilities the client sent with the request it answers (or with initialize)."""
import json, sys

SERVER_CAPS = {"tools": {}, "extensions": {"com.example/tracing": {"sampled": True}}}
declared = {}
for line in sys.stdin:
    message = json.loads(line)
    method, params = message.get("method"), message.get("params") or {}
    meta = params.get("_meta") or {}
    if "id" not in message:
        continue
    if method == "initialize":
        declared = params.get("capabilities", {})
        result = {"protocolVersion": "2025-11-25", "capabilities": SERVER_CAPS,
                  "serverInfo": {"name": "scripted", "version": "1"}}
    elif method == "server/discover":
        result = {"supportedVersions": ["2026-07-28"], "capabilities": SERVER_CAPS,
                  "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    elif method == "tools/call":
        seen = meta.get("io.modelcontextprotocol/clientCapabilities", declared)
        result = {"content": [{"type": "text", "text": json.dumps(seen)}], "resultType": "complete"}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
'''


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@run
async def test_declared_extensions_are_read_and_sent_with_a_scripted_server_in_either_era(tmp_path: Path, mode):
    path = tmp_path / "scripted.py"
    path.write_text(SCRIPTED_SERVER)
    options = ClientOptions(extensions={UI: UI_SETTINGS, "com.example/tracing": {}})
    async with Client([sys.executable, str(path)], mode=mode, timeout=DEADLINE, options=options) as client:
        result = await client.call_tool("anything")

    assert client.protocol_version == (MODERN if mode == "auto" else LEGACY)
    assert client.server_extensions == {"com.example/tracing": {"sampled": True}}
    sent = json.loads(result.content[0].text)
    assert sent["extensions"] == {UI: UI_SETTINGS, "com.example/tracing": {}}


@pytest.mark.parametrize("identifier", ["tasks", "/tasks", "io.modelcontextprotocol/", "1io.example/x", "io..x/y"])
def test_an_extension_identifier_without_a_valid_prefix_is_refused_at_construction(identifier):
    with pytest.raises(ValueError) as caught:
        ClientOptions(extensions={identifier: {}})

    assert repr(identifier) in str(caught.value) and "prefix" in str(caught.value)


def test_extension_settings_must_be_an_object():
    with pytest.raises(TypeError) as caught:
        ClientOptions(extensions={UI: ["text/html"]})  # type: ignore[dict-item]

    assert UI in str(caught.value) and "{}" in str(caught.value)
