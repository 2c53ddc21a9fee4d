"""The server framework: register tools, resources and prompts; serve them anywhere.

The stores and the bus that replicas share (``RedisBus``, ``RedisTaskStore``) and the
SQLite task store load when first named: ``from modelctx import Server`` reads no
SQLite or Redis code (a server makes its task store when it registers a task tool).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
from ._registry import CacheHint
from ._server import REDIS_URL_ENV, Server, ServerConfig, StartupError
from ._task_store import TaskRecord, TaskStore
from ._transform import ArgTransform

if TYPE_CHECKING:
    from ._redis_bus import RedisBus
    from ._redis_tasks import RedisTaskStore
    from ._sqlite_tasks import SqliteTaskStore

# name -> the module (in this package) that defines it, imported on first use
_LAZY = {"RedisBus": "_redis_bus", "RedisTaskStore": "_redis_tasks", "SqliteTaskStore": "_sqlite_tasks"}

__all__ = [
    "REDIS_URL_ENV",
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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'modelctx.server' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f".{module}", __name__), name)
