"""The client: one connection to one MCP server, in either era, over any transport.

``Client(target, *, mode, timeout, handlers=ClientHandlers(...), options=ClientOptions(...))``;
its methods return the typed results of ``modelctx.protocol.types.v2026_07_28``.
"""

from ..errors import InputRoundsExceeded, OutputSchemaViolation, RequestTimeout, UrlRefused
from ..transports.client_seam import ClientTransport, Outgoing, TransportEvents
from ..transports.fetch import UrlPolicy, fetch_json
from ._cache import ResultCache
from ._client import Client, ListChanged, ResourceUpdated, SubscriptionEvent, Target
from ._options import ClientHandlers, ClientOptions, Elicitation
from ._session import ClientSession, ProgressCallback
from ._tasks import TaskCancelled, TaskHandle

__all__ = [
    "Client",
    "ClientHandlers",
    "ClientOptions",
    "ClientSession",
    "ClientTransport",
    "Elicitation",
    "InputRoundsExceeded",
    "ListChanged",
    "Outgoing",
    "OutputSchemaViolation",
    "ProgressCallback",
    "RequestTimeout",
    "ResourceUpdated",
    "ResultCache",
    "SubscriptionEvent",
    "Target",
    "TaskCancelled",
    "TaskHandle",
    "TransportEvents",
    "UrlPolicy",
    "UrlRefused",
    "fetch_json",
]
