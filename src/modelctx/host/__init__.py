"""The host: many MCP servers joined into one set of tools for a model.

``Host`` (``Host.from_file("mcp.json")``, ``async with``) connects the servers of a
configuration (``HostConfig``, ``ServerSpec``, ``load_config``: the ``mcpServers``
format), names their tools for a model (``namespaced``, ``NameMap``), keeps each server
running and its lists fresh (``HostServer``), asks an approval hook before each call
(``ApprovalCheck``; default ``AllowAll``) and a ``HostUI`` when a server wants the user.
``Gateway(host)`` serves the joined set again as one MCP server.
"""

from typing import TYPE_CHECKING, Any

from ._config import HostConfig, HostConfigError, ServerSpec, ToolFilter, load_config
from ._host import AllowAll, ApprovalCheck, Host, SampleCallback, UnknownName
from ._names import NAME_PATTERN, NameMap, namespaced
from ._server import HostServer, RestartPolicy, ServerUnavailable
from ._ui import DenyAllUI, HostUI

if TYPE_CHECKING:
    from ._gateway import Gateway, GatewayUI, serve_gateway

# The gateway is a server: loading it loads modelctx.server, which a host that only
# runs a model loop does not need. Its names load on first use.
_GATEWAY_NAMES = frozenset({"Gateway", "GatewayUI", "serve_gateway"})


def __getattr__(name: str) -> Any:
    if name in _GATEWAY_NAMES:
        from . import _gateway

        return getattr(_gateway, name)
    raise AttributeError(f"module 'modelctx.host' has no attribute {name!r}")

__all__ = [
    "NAME_PATTERN",
    "AllowAll",
    "ApprovalCheck",
    "DenyAllUI",
    "Gateway",
    "GatewayUI",
    "Host",
    "HostConfig",
    "HostConfigError",
    "HostServer",
    "HostUI",
    "NameMap",
    "RestartPolicy",
    "SampleCallback",
    "ServerSpec",
    "ServerUnavailable",
    "ToolFilter",
    "UnknownName",
    "load_config",
    "namespaced",
    "serve_gateway",
]
