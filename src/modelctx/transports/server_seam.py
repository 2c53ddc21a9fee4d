"""What a server transport needs from a server, and what it tells the server about the peer.

Transports sit below ``server/`` and never import it: they serve anything shaped like
``ServerApp`` (``modelctx.Server`` is one). Each transport describes the other side of
one exchange with a ``Peer``: the connection the message came on, the handshake-era
session if there is one, and the authenticated principal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, runtime_checkable

from ..protocol import Notification, Request
from ..protocol.connection import ServerConnection
from .session import HandshakeSession, Send

__all__ = ["FastLane", "ServerApp", "Peer", "ResponseStream", "Send"]


class ResponseStream(Protocol):
    """The transport's hold on a request's response stream, where it can be closed
    early (handshake-era Streamable HTTP only)."""

    async def close(self, retry_ms: int) -> None:
        """End the response now; keep the request's later messages for the client to
        fetch after ``retry_ms``."""


class Peer:
    """The other side of one exchange, as the transport knows it.

    ``connection``: the connection a duplex transport (stdio, in-process) keeps for the
    peer, which a handshake session opened on it shares; None on HTTP, where each
    session gets a connection of its own. ``on_open`` is how the transport learns of a
    new handshake session (to route its messages, or to index it by id).
    """

    __slots__ = ("connection", "session", "principal", "_on_open")

    def __init__(
        self,
        connection: ServerConnection | None = None,
        session: HandshakeSession | None = None,
        principal: Any = None,
        on_open: Callable[[HandshakeSession], None] | None = None,
    ) -> None:
        self.connection = connection
        self.session = session
        self.principal = principal
        self._on_open = on_open

    def open_session(self, session: HandshakeSession) -> None:
        """Make ``session`` the handshake session of this peer (after ``initialize``)."""
        old = self.session
        if old is not None and old is not session:
            old.close()
        self.session = session
        session.principal = self.principal
        if self._on_open is not None:
            self._on_open(session)


class FastLane(Protocol):
    """An optional ``serve_fast`` method of a ``ServerApp``, which duplex transports
    (stdio, in-process) offer each request before starting a task for it.

    None leaves the request to ``handle``. Taking it, the lane returns ``cancel`` and
    later calls ``respond(response)`` once (None: send nothing), from a loop callback,
    never from within ``serve_fast``; the transport sends it at once. ``cancel()`` is
    called instead when the peer cancels the request or the transport stops: the lane
    stops its work, and ``respond`` is no longer listened to."""

    def __call__(
        self, request: Request, peer: Peer, send: Send, respond: Callable[[dict[str, Any] | None], None]
    ) -> Callable[[], None] | None: ...


@runtime_checkable
class ServerApp(Protocol):
    """A server as its transports see it."""

    @property
    def name(self) -> str: ...

    def handle(
        self, request: Request, peer: Peer, send: Send, stream: ResponseStream | None = None
    ) -> Awaitable[dict[str, Any] | None]:
        """The response to ``request`` (None: send nothing). Never raises but
        ``CancelledError``."""

    def notify(self, notification: Notification, peer: Peer) -> None:
        """Act on a client notification other than ``notifications/cancelled``."""

    def running(self) -> AbstractAsyncContextManager[Any]:
        """Hold while serving: attaches the event loop and runs the lifespan hook
        (raising ``StartupError`` when it fails). Transports enter it before the first
        message and leave it last."""

    def close_subscriptions(self) -> None:
        """End every listen stream with its final response (the server is stopping)."""

    def tool_input_schema(self, name: str) -> dict[str, Any] | None:
        """The ``inputSchema`` of tool ``name`` (for ``Mcp-Param-*`` headers), or None."""

    @property
    def versions(self) -> tuple[str, ...]:
        """The protocol versions this server speaks."""
