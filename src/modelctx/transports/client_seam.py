"""What a client needs from a transport: send messages, hear back, cancel, close.

A client transport carries JSON-RPC messages between one ``ClientSession`` and one
server. It is an adapter only: it knows framing (lines, HTTP bodies, SSE), processes
and sockets; the session knows ids, deadlines, eras and what messages mean.

Inbound traffic goes to a ``TransportEvents`` object the session supplies:

* ``message(msg)``: any decoded message from the server (responses, notifications,
  handshake-era server requests), in the order received;
* ``request_failed(id, exc)``: one request can no longer be answered (an HTTP error
  with no JSON-RPC body, a stream broken before its response);
* ``closed(exc)``: the connection is gone (process exited, socket closed, or the
  client closed it); reported once, and nothing follows it. Every pending request
  fails with ``exc``.
"""

from __future__ import annotations

import abc
from collections.abc import Hashable
from typing import Any, Protocol

from ..protocol import Message

__all__ = ["ClientTransport", "TransportEvents", "Outgoing"]


class TransportEvents(Protocol):
    def message(self, message: Message, related: str | int | None = None) -> None:
        """A message from the peer; ``related``: the id of the request on whose reply
        stream it came, when the transport knows one (Streamable HTTP)."""

    def request_failed(self, request_id: str | int, exc: BaseException) -> None: ...

    def closed(self, exc: BaseException) -> None: ...


class Outgoing:
    """One message to send, with what an HTTP transport needs to send it.

    ``headers``: the 2026-07-28 mirrored headers (``MCP-Protocol-Version``,
    ``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*``), lower-case names, computed by the
    session; a transport without headers ignores them. ``request_id`` is set for
    requests. ``handshake`` says the message belongs to a handshake-era session.
    """

    __slots__ = ("message", "headers", "request_id", "handshake")

    def __init__(
        self,
        message: dict[str, Any],
        headers: dict[str, str] | None = None,
        request_id: str | int | None = None,
        handshake: bool = False,
    ) -> None:
        self.message = message
        self.headers = headers or {}
        self.request_id = request_id
        self.handshake = handshake


class ClientTransport(abc.ABC):
    """The client side of one connection to one server."""

    #: How errors name this server, e.g. "stdio server 'python weather.py'".
    name: str = "server"
    #: Which era a probe should try first over this transport ("stdio" or "http").
    kind: str = "stdio"
    #: Whether ``send`` uses ``Outgoing.headers``: False lets the session skip computing them.
    sends_headers: bool = True

    @abc.abstractmethod
    async def connect(self, events: TransportEvents) -> None:
        """Open the connection (start the process, check the URL) within a deadline."""

    @abc.abstractmethod
    async def send(self, outgoing: Outgoing) -> None:
        """Send one message. Replies arrive through ``events``, never as a return value.

        Raises ``ConnectionClosed`` if the connection is already gone.
        """

    def send_nowait(self, outgoing: Outgoing) -> bool:
        """Send one message now, from a callback, when that needs no waiting: True when
        it was handed to the connection; False (the default) when ``send`` must be used."""
        return False

    @abc.abstractmethod
    async def cancel(self, request_id: str | int, reason: str | None = None) -> None:
        """Cancel a request on the wire: ``notifications/cancelled`` on stdio, closing
        the request's response stream on HTTP."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close the connection and release everything; safe to call twice."""

    @property
    def handshake_only(self) -> bool:
        """True when the connection carries the handshake era only (the HTTP+SSE
        transport of 2024-11-05): the client sends ``initialize`` without a probe."""
        return False

    def end_handshake_session(self) -> None:  # noqa: B027 - an optional hook, a no-op by default
        """Forget a handshake-era session (HTTP: the Mcp-Session-Id); no-op elsewhere."""

    def diagnostics(self) -> str:
        """Extra words for error messages (e.g. the last lines of a server's stderr)."""
        return ""

    @property
    def credential_key(self) -> str | None:
        """What identifies the credentials in use, for private cache entries."""
        return None

    @property
    def configuration(self) -> Hashable | None:
        """What identifies the server this transport starts (a command, its environment
        and folder), so a client can remember its era across processes; None: nothing."""
        return None

    def relaunch(self) -> ClientTransport | None:
        """A new, unconnected transport that starts the same server again (a stdio
        command), for a client whose server ended on its era probe; None if it cannot."""
        return None
