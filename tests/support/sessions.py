"""Handshake-era sessions on Streamable HTTP, spoken as raw JSON-RPC with httpx.

For the tests that open sessions as a principal and count what the server refuses
(tests/transports/test_http_sessions.py, test_limits.py): ``open_session`` does the
``initialize`` + ``notifications/initialized`` exchange a client does, as ``who`` (a bearer
token, or anonymous), and ``call`` calls a tool in that session.
"""

from __future__ import annotations

from typing import Any, Protocol

import httpx

LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


class Served(Protocol):
    """A served endpoint: anything with the ``url`` of its MCP endpoint."""

    url: str


def bearer(who: str | None) -> dict[str, str]:
    return {} if who is None else {"authorization": f"Bearer {who}"}


def in_session(session_id: str, who: str | None) -> dict[str, str]:
    return {"accept": ACCEPT, "mcp-session-id": session_id, "mcp-protocol-version": LEGACY, **bearer(who)}


def initialize(client: httpx.Client, server: Served, who: str | None) -> httpx.Response:
    message = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    return client.post(server.url, json=message, headers={"accept": ACCEPT, **bearer(who)})


def open_session(client: httpx.Client, server: Served, who: str | None) -> str:
    response = initialize(client, server, who)
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert client.post(server.url, json=initialized, headers=in_session(session_id, who)).status_code == 202
    return session_id


def call(client: httpx.Client, server: Served, session_id: str, who: str | None, id: int, name: str, **arguments: Any) -> httpx.Response:
    message = {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    return client.post(server.url, json=message, headers=in_session(session_id, who))
