"""modelctx: the Model Context Protocol for Python.

Serve tools, resources and prompts with ``Server``; the protocol core lives in
``modelctx.protocol`` and every exception in ``modelctx.errors``. Transports load only
when used: ``import modelctx`` pulls in no HTTP stack.
"""

from .errors import MCPError, ProtocolError, ToolError
from .server import (
    Audio,
    CacheHint,
    Context,
    ElicitResult,
    EmbeddedResource,
    Image,
    ResourceLink,
    Server,
    ServerConfig,
    Text,
    ToolResult,
)

__version__ = "0.1.0"

__all__ = [
    "Server",
    "ServerConfig",
    "Context",
    "ElicitResult",
    "CacheHint",
    "Text",
    "Image",
    "Audio",
    "ResourceLink",
    "EmbeddedResource",
    "ToolResult",
    "MCPError",
    "ProtocolError",
    "ToolError",
    "__version__",
]
