"""The server framework: register tools, resources and prompts; serve them anywhere."""

from ._bus import Event, LocalBus, SubscriptionBus
from ._content import Audio, EmbeddedResource, Image, ResourceLink, Text, ToolResult
from ._context import Context, ElicitResult
from ._registry import CacheHint
from ._server import Server, ServerConfig

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
    "Event",
    "LocalBus",
    "SubscriptionBus",
]
