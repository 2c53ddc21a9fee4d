"""What a ``Client`` is configured with: the handlers that answer the server, and options.

``Client(target, *, mode, timeout, handlers, options)``: the target says where the
server is (a transport object for anything unusual: environment, headers, auth), the
two most used settings stand alone, and the rest come in two groups a reader can
take in at a glance: ``ClientHandlers`` (what the application answers when the server
asks) and ``ClientOptions`` (how the client behaves).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..protocol import Notification

__all__ = [
    "ClientHandlers",
    "ClientOptions",
    "Elicitation",
    "ElicitationHandler",
    "NotificationHandler",
    "RootsHandler",
    "SamplingHandler",
]


@dataclass(frozen=True)
class Elicitation:
    """What a server asks the user (client/elicitation.mdx).

    ``mode`` is "form" (fill in ``requested_schema``) or "url" (open ``url``).
    """

    mode: str
    message: str
    requested_schema: dict[str, Any] | None = None
    url: str | None = None
    server: str = ""


#: ``async (Elicitation) -> {"action": "accept"|"decline"|"cancel", "content": {...}}``
#: (or the server package's ``ElicitResult``).
ElicitationHandler = Callable[[Elicitation], Awaitable[Any]]
#: ``async (CreateMessageRequest params) -> CreateMessageResult dict``.
SamplingHandler = Callable[[dict[str, Any]], Awaitable[Any]]
#: ``async () -> [uri string or {"uri": ..., "name": ...}, ...]``.
RootsHandler = Callable[[], Awaitable[Sequence[Any]]]
#: Called (not awaited) with every notification the server sends outside a request.
NotificationHandler = Callable[[Notification], object]


@dataclass(frozen=True)
class ClientHandlers:
    """How the application answers what a server asks.

    Declaring a handler is what declares the matching client capability: a client
    with no ``sampling`` handler never tells a server it can sample.
    ``elicitation_modes`` narrows the elicitation capability to the modes the
    application can show (client/elicitation.mdx: "form", "url").
    """

    elicitation: ElicitationHandler | None = None
    sampling: SamplingHandler | None = None
    roots: RootsHandler | None = None
    notification: NotificationHandler | None = None
    elicitation_modes: tuple[str, ...] = ("form", "url")

    def capabilities(self, *, modern: bool) -> dict[str, Any]:
        """The client capabilities these handlers declare (``ClientCapabilities``)."""
        caps: dict[str, Any] = {}
        if self.elicitation is not None:
            caps["elicitation"] = {mode: {} for mode in self.elicitation_modes}
        if self.sampling is not None:
            caps["sampling"] = {}
        if self.roots is not None:
            # roots/list_changed does not exist in 2026-07-28; the handshake era has it.
            caps["roots"] = {} if modern else {"listChanged": False}
        return caps


# An extension identifier is a ``_meta`` key with a mandatory prefix
# (basic/versioning.mdx, Extension Negotiation; basic/index.mdx, ``_meta``).
_LABEL = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_EXTENSION_ID = re.compile(rf"{_LABEL}(?:\.{_LABEL})*/[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def _default_client_info() -> dict[str, Any]:
    return {"name": "modelctx", "version": "0.1.0"}


@dataclass(frozen=True)
class ClientOptions:
    """How the client behaves; every field has a default that suits most uses.

    - ``probe_timeout``: how long ``auto`` mode waits for ``server/discover`` before
      it treats the server as handshake-era.
    - ``max_timeout``: the most seconds a request may take in all, however long the
      server keeps reporting progress (each report restarts the request's ``timeout``;
      cancellation.mdx, Timeouts: a maximum SHOULD hold regardless of progress). A
      request whose own ``timeout`` is longer gets that instead.
    - ``max_rounds``: input rounds (multi round-trip) per request before
      ``InputRoundsExceeded``.
    - ``cache``: reuse results as the server's ``ttlMs``/``cacheScope`` allow.
    - ``validate_output``: check ``structuredContent`` against the tool's
      ``outputSchema`` (``OutputSchemaViolation``).
    - ``client_info``: the ``Implementation`` this client names itself with.
    - ``log_level``: the log level asked of the server on every request.
    - ``extensions``: extension identifier to settings (``{}`` = supported, no
      settings), declared in ``capabilities.extensions`` in both eras. Extensions
      are off unless listed here.
    - ``tasks``: declare the tasks extension (io.modelcontextprotocol/tasks), so that
      tools able to run as tasks answer with one; ``Client.call_tool_as_task`` needs it.
      Off by default: with it, such tools answer ``call_tool`` with a task too.
    - ``trace_context``: when the application uses OpenTelemetry and a span is current,
      put its trace context in each request's ``_meta`` (``traceparent``,
      ``tracestate``, ``baggage``), so the server's spans join the client's trace.
      Nothing is imported nor sent without OpenTelemetry; False never sends it.
    """

    probe_timeout: float = 10.0
    max_timeout: float = 600.0
    max_rounds: int = 10
    cache: bool = True
    validate_output: bool = True
    client_info: Mapping[str, Any] = field(default_factory=_default_client_info)
    log_level: str | None = None
    extensions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    tasks: bool = False
    trace_context: bool = True

    def __post_init__(self) -> None:
        for identifier, settings in self.extensions.items():
            if not isinstance(identifier, str) or _EXTENSION_ID.fullmatch(identifier) is None:
                raise ValueError(
                    f"extension identifier {identifier!r} is not a prefixed _meta key; "
                    "use a vendor prefix, e.g. 'com.example/my-extension' "
                    "(basic/versioning.mdx, Extension Negotiation)"
                )
            if not isinstance(settings, Mapping):
                raise TypeError(
                    f"extension {identifier!r}: settings must be an object ({{}} for none), "
                    f"not {type(settings).__name__}"
                )
