"""Authorization (OAuth 2.1) for MCP over HTTP.

``DevAuthorizationServer`` is a development authorization server (``modelctx
auth-server``). Names load on first use, so importing this package does not load
Authlib or Starlette.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DevAuthorizationServer"]


def __getattr__(name: str) -> Any:
    if name == "DevAuthorizationServer":
        from ._dev_server import DevAuthorizationServer

        return DevAuthorizationServer
    raise AttributeError(f"module 'modelctx.auth' has no attribute {name!r}")
