"""modelctx: the Model Context Protocol for Python.

Serve tools, resources and prompts with ``Server``; the protocol core lives in
``modelctx.protocol`` and every exception in ``modelctx.errors``. Names load on first
use, so ``import modelctx.protocol`` pulls in no event loop and no HTTP stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# The errors a server author raises or meets: loaded with the package (errors.py is tiny).
from .errors import (
    InvalidParams,
    MCPError,
    ProtocolError,
    RegistrationError,
    ResourceNotFound,
    ToolError,
)

__version__ = "0.1.0"

# Loaded on first use, by __getattr__: the server framework.
_SERVER_NAMES = frozenset(
    {
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
    }
)

__all__ = [
    "Audio",
    "CacheHint",
    "Context",
    "Elicit",
    "ElicitResult",
    "ElicitUrl",
    "EmbeddedResource",
    "Image",
    "InvalidParams",
    "ListRoots",
    "MCPError",
    "ProtocolError",
    "RegistrationError",
    "ResourceLink",
    "ResourceNotFound",
    "Sample",
    "Server",
    "ServerConfig",
    "Text",
    "ToolError",
    "ToolResult",
    "__version__",
]

if TYPE_CHECKING:
    from .server import (
        Audio,
        CacheHint,
        Context,
        Elicit,
        ElicitResult,
        ElicitUrl,
        EmbeddedResource,
        Image,
        ListRoots,
        ResourceLink,
        Sample,
        Server,
        ServerConfig,
        Text,
        ToolResult,
    )


def __getattr__(name: str) -> Any:
    if name in _SERVER_NAMES:
        from . import server

        return getattr(server, name)
    raise AttributeError(f"module 'modelctx' has no attribute {name!r}")
