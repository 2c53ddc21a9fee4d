"""modelctx: the Model Context Protocol for Python.

Serve tools, resources and prompts with ``Server``; talk to any MCP server with
``Client``; join many servers into one tool set for a model with ``Host``. The protocol core lives in ``modelctx.protocol`` and every exception in
``modelctx.errors``. Names load on first use, so ``import modelctx.protocol`` pulls in
no event loop and no HTTP stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    InvalidParams,
    MCPError,
    ProtocolError,
    RegistrationError,
    ResourceNotFound,
    ToolError,
)

__version__ = "0.1.0"

# Name -> the subpackage that defines it, imported on first use.
_LAZY = {
    "Server": "server",
    "ServerConfig": "server",
    "Context": "server",
    "ElicitResult": "server",
    "Elicit": "server",
    "ElicitUrl": "server",
    "Sample": "server",
    "ListRoots": "server",
    "CacheHint": "server",
    "Text": "server",
    "Image": "server",
    "Audio": "server",
    "ResourceLink": "server",
    "EmbeddedResource": "server",
    "ToolResult": "server",
    "Client": "client",
    "ClientHandlers": "client",
    "ClientOptions": "client",
    "Host": "host",
}

__all__ = [  # noqa: RUF022 - grouped: server, client, errors
    "Server",
    "ServerConfig",
    "Context",
    "ElicitResult",
    "Elicit",
    "ElicitUrl",
    "Sample",
    "ListRoots",
    "CacheHint",
    "Text",
    "Image",
    "Audio",
    "ResourceLink",
    "EmbeddedResource",
    "ToolResult",
    "Client",
    "ClientHandlers",
    "ClientOptions",
    "Host",
    "MCPError",
    "ProtocolError",
    "ToolError",
    "ResourceNotFound",
    "InvalidParams",
    "RegistrationError",
    "__version__",
]

if TYPE_CHECKING:
    from .client import Client as Client
    from .client import ClientHandlers as ClientHandlers
    from .client import ClientOptions as ClientOptions
    from .host import Host as Host
    from .server import Audio as Audio
    from .server import CacheHint as CacheHint
    from .server import Context as Context
    from .server import Elicit as Elicit
    from .server import ElicitResult as ElicitResult
    from .server import ElicitUrl as ElicitUrl
    from .server import EmbeddedResource as EmbeddedResource
    from .server import Image as Image
    from .server import ListRoots as ListRoots
    from .server import ResourceLink as ResourceLink
    from .server import Sample as Sample
    from .server import Server as Server
    from .server import ServerConfig as ServerConfig
    from .server import Text as Text
    from .server import ToolResult as ToolResult


def __getattr__(name: str) -> Any:
    package = _LAZY.get(name)
    if package is None:
        raise AttributeError(f"module 'modelctx' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f".{package}", __name__), name)
