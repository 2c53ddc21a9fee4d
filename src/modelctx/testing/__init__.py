"""Helpers for testing your own MCP server.

Async context managers, each with deadlines and a clean teardown:

* ``connected(server)``: a ``Client`` for a ``Server`` object, in this process.
* ``spawned("server.py")``: a ``Client`` for a real subprocess on stdio (a ``.py`` file
  runs as ``python -m modelctx serve FILE``; any command line works too).
* ``served_http(server_or_file)``: a real Streamable HTTP server on 127.0.0.1 and a
  ``Client`` for it; the returned object's ``url`` is its endpoint.

For pytest without an async runner, the plugin ``modelctx.testing.plugin`` gives the
fixtures ``mcp_client``, ``mcp_stdio_client`` and ``mcp_http_client``, whose clients are
``SyncClient``: blocking calls that return the result.
"""

from __future__ import annotations

from ._connect import DEFAULT_TIMEOUT, ServedHttp, connected, served_http, server_command, spawned
from ._sync import LoopThread, SyncClient

__all__ = [
    "DEFAULT_TIMEOUT",
    "LoopThread",
    "ServedHttp",
    "SyncClient",
    "connected",
    "served_http",
    "server_command",
    "spawned",
]
