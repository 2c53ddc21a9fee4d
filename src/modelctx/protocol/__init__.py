"""The protocol core: messages, versions, ``_meta`` keys, framing and header rules.

No I/O happens here: bytes or dicts in, checked values or bytes out. Transports and
participants (server, client) build on it.
"""

from . import headers, meta
from ._request_state import StateSealer
from .framing import LineBuffer, SSEParser, sse_event
from .jsonrpc import (
    Message,
    Notification,
    Request,
    Response,
    decode,
    encode,
    error_response,
    from_object,
    notification,
    request,
    result_response,
)
from .versions import (
    HANDSHAKE_VERSIONS,
    LATEST,
    MODERN_VERSIONS,
    SERVED_VERSIONS,
    SUPPORTED_VERSIONS,
    Feature,
    has,
    is_modern,
)

__all__ = [
    "headers",
    "meta",
    "LineBuffer",
    "SSEParser",
    "sse_event",
    "Message",
    "Notification",
    "Request",
    "Response",
    "decode",
    "encode",
    "error_response",
    "from_object",
    "notification",
    "request",
    "result_response",
    "StateSealer",
    "HANDSHAKE_VERSIONS",
    "LATEST",
    "MODERN_VERSIONS",
    "SERVED_VERSIONS",
    "SUPPORTED_VERSIONS",
    "Feature",
    "has",
    "is_modern",
]
