"""The client: one connection to one MCP server, in either era, over any transport."""

from ._cache import ResultCache
from ._client import (
    Client,
    Elicitation,
    InputRoundsExceeded,
    ListChanged,
    OutputSchemaViolation,
    ResourceUpdated,
    SubscriptionEvent,
)
from ._session import ClientSession, RequestTimeout
from ..transports._base import ClientTransport, Outgoing, TransportEvents

__all__ = [
    "Client",
    "ClientSession",
    "ClientTransport",
    "Elicitation",
    "InputRoundsExceeded",
    "ListChanged",
    "OutputSchemaViolation",
    "Outgoing",
    "RequestTimeout",
    "ResourceUpdated",
    "ResultCache",
    "SubscriptionEvent",
    "TransportEvents",
]
