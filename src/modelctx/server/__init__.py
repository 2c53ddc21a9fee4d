"""The server framework: register tools, resources and prompts; serve them anywhere."""

from ._apps import UiCsp, UiResource
from ._bus import Event, LocalBus, SubscriptionBus
from ._content import Audio, EmbeddedResource, Image, ResourceLink, Text, ToolResult
from ._context import (
    Context,
    Elicit,
    ElicitResult,
    ElicitUrl,
    InputRequest,
    ListRoots,
    Sample,
)
from ._files import FileRoot
from ._openapi._routes import RouteMap
from ._redis_bus import RedisBus
from ._redis_tasks import RedisTaskStore
from ._registry import CacheHint
from ._server import Server, ServerConfig, StartupError
from ._task_store import SqliteTaskStore, TaskRecord, TaskStore
from ._transform import ArgTransform

__all__ = [
    "ArgTransform",
    "Audio",
    "CacheHint",
    "Context",
    "Elicit",
    "ElicitResult",
    "ElicitUrl",
    "EmbeddedResource",
    "Event",
    "FileRoot",
    "Image",
    "InputRequest",
    "ListRoots",
    "LocalBus",
    "RedisBus",
    "RedisTaskStore",
    "ResourceLink",
    "RouteMap",
    "Sample",
    "Server",
    "ServerConfig",
    "SqliteTaskStore",
    "StartupError",
    "SubscriptionBus",
    "TaskRecord",
    "TaskStore",
    "Text",
    "ToolResult",
    "UiCsp",
    "UiResource",
]
