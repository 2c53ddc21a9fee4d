"""``capabilities.extensions``, server side (basic/versioning.mdx, Extension Negotiation).

A server declares the extensions it supports with ``Server(..., extensions={...})``; they
appear in ``capabilities.extensions`` of ``server/discover`` (2026-07-28) and of the
``initialize`` result (handshake era). A handler reads what the client declared in
``ctx.client_capabilities["extensions"]``: per request in ``_meta`` on 2026-07-28, from
``initialize`` on a handshake session.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from modelctx import Server
from tests.support.paths import SERVERS, SPEC
from tests.support.wire import HttpServer, McpHttp, request

EXTENSIONS_SERVER = SERVERS / "extensions_server.py"
DECLARED = {
    "io.modelcontextprotocol/tasks": {},
    "com.example/weather-alerts": {"regions": ["EU", "US"]},
}
CLIENT_EXTENSIONS = {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}


def server_capabilities_schema(revision: str) -> dict[str, Any]:
    schema = json.loads((SPEC / f"schema-{revision}.json").read_text("utf-8"))
    return {"$ref": "#/$defs/ServerCapabilities", "$defs": schema["$defs"]}


def initialize(server: Any, capabilities: dict[str, Any]) -> dict[str, Any]:
    response = server.call(
        {
            "jsonrpc": "2.0",
            "id": "init",
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "modelctx-tests", "version": "0"},
            },
        }
    )
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return response


def tool_text(response: dict[str, Any]) -> str:
    assert "result" in response, response
    return str(response["result"]["content"][0]["text"])


# -- 2026-07-28 --------------------------------------------------------------------------------
def test_discover_lists_the_declared_extensions(start_stdio_server):
    server = start_stdio_server(EXTENSIONS_SERVER)
    capabilities = server.call(request(1, "server/discover"))["result"]["capabilities"]
    assert capabilities["extensions"] == DECLARED
    jsonschema.validate(capabilities, server_capabilities_schema("2026-07-28"))


def test_a_handler_reads_the_extensions_the_request_declared(start_stdio_server):
    server = start_stdio_server(EXTENSIONS_SERVER)
    with_them = request(
        1, "tools/call", {"name": "client_extensions", "arguments": {}}, capabilities={"extensions": CLIENT_EXTENSIONS}
    )
    without = request(2, "tools/call", {"name": "client_extensions", "arguments": {}})
    assert json.loads(tool_text(server.call(with_them))) == CLIENT_EXTENSIONS
    assert json.loads(tool_text(server.call(without))) == {}  # per request: nothing carries over


def test_discover_over_http_lists_the_declared_extensions(tmp_path):
    served = HttpServer(EXTENSIONS_SERVER, tmp_path / "server.log")
    http = McpHttp(served)
    try:
        result = http.call(request(1, "server/discover"))["result"]
        assert result["capabilities"]["extensions"] == DECLARED
        call = request(
            2, "tools/call", {"name": "client_extensions", "arguments": {}}, capabilities={"extensions": CLIENT_EXTENSIONS}
        )
        assert json.loads(tool_text(http.call(call))) == CLIENT_EXTENSIONS
    finally:
        http.close()
        served.stop()


# -- handshake era -------------------------------------------------------------------------------
def test_initialize_lists_the_declared_extensions(start_stdio_server):
    server = start_stdio_server(EXTENSIONS_SERVER)
    capabilities = initialize(server, {})["result"]["capabilities"]
    assert capabilities["extensions"] == DECLARED
    # The 2025-11-25 ServerCapabilities leaves room for members it does not name.
    jsonschema.validate(capabilities, server_capabilities_schema("2025-11-25"))


def test_a_handler_reads_the_extensions_declared_at_initialize(start_stdio_server):
    server = start_stdio_server(EXTENSIONS_SERVER)
    initialize(server, {"extensions": CLIENT_EXTENSIONS})
    response = server.call(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "client_extensions", "arguments": {}}}
    )
    assert json.loads(tool_text(response)) == CLIENT_EXTENSIONS


# -- declaring ---------------------------------------------------------------------------------
def test_a_server_without_extensions_declares_none():
    assert "extensions" not in Server("plain").capabilities()


@pytest.mark.parametrize(
    "identifier",
    ["tasks", "io.modelcontextprotocol/", "/tasks", "1io.example/tasks", "io.example-/tasks", "io..example/x", "a/b/c"],
)
def test_an_extension_identifier_without_a_valid_prefix_and_name_is_refused(identifier):
    with pytest.raises(ValueError, match="needs a vendor prefix and a name"):
        Server("bad", extensions={identifier: {}})


def test_extension_settings_must_be_an_object():
    with pytest.raises(TypeError, match="'com.example/x': its settings must be a dict"):
        Server("bad", extensions={"com.example/x": True})  # type: ignore[dict-item]


def test_valid_identifiers_are_accepted():
    server = Server(
        "good", extensions={"io.modelcontextprotocol/tasks": {}, "com.example.mcp/my_ext.v2": {}, "acme/x": {"a": 1}}
    )
    assert set(server.capabilities()["extensions"]) == {
        "io.modelcontextprotocol/tasks",
        "com.example.mcp/my_ext.v2",
        "acme/x",
    }
