"""A handshake-era session: the state ``initialize`` creates (2025-11-25 lifecycle.mdx).

On stdio the session lives on the process's one connection; on Streamable HTTP it is
named by ``Mcp-Session-Id`` and has a connection of its own. It remembers the
negotiated version and the client's capabilities, the ``logging/setLevel`` threshold
and ``resources/subscribe`` URIs, and carries the server-to-client requests of that
era (elicitation, sampling, roots) through its ``ServerConnection``, which matches
their responses by id and keeps their deadlines. Modern requests never touch a session.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import ConnectionClosed, RequestTimeout, error_from_wire
from ..protocol._connection import Answer, Cancel, Event, Ignore, Notify, Outbound, ServerConnection
from ..protocol._jsonrpc import Notification, Response

__all__ = ["HandshakeSession", "Send", "act", "fail", "resolve", "settle"]

log = logging.getLogger("modelctx.server")

Send = Callable[[dict[str, Any]], Awaitable[None]]


class HandshakeSession:
    def __init__(
        self,
        session_id: str,
        version: str,
        capabilities: dict[str, Any],
        client_info: dict[str, Any] | None,
        connection: ServerConnection | None = None,
    ) -> None:
        self.id = session_id
        self.version = version
        self.capabilities = capabilities
        self.client_info = client_info
        #: The connection the session's requests run on: the stdio process's, or one
        #: of its own on HTTP (where each POST is a separate exchange).
        self.connection = connection if connection is not None else ServerConnection()
        self._owns_connection = connection is None
        self._waiting: set[Outbound] = set()
        self.initialized = False
        self.log_rank: int | None = 0  # every level until logging/setLevel says otherwise
        self.subscriptions: set[str] = set()
        self.last_seen = time.monotonic()
        self.closed = False
        # Where messages unrelated to any request go (stdout, or the HTTP GET stream).
        self.outbound: Send | None = None
        self.listener: asyncio.Task[None] | None = None
        self.http_stream_open = False  # an HTTP GET stream is attached
        # Responses ended early that the client may resume with GET and Last-Event-ID,
        # by stream id, oldest first (transports/_sse_resume.py keeps and bounds them).
        self.streams: dict[str, Any] = {}
        #: Who opened the session (the authenticated principal, if any).
        self.principal: Any = None

    def touch(self) -> None:
        self.last_seen = time.monotonic()

    async def request(self, method: str, params: dict[str, Any], send: Send, timeout: float) -> Any:
        """Send a server-to-client request on ``send`` and wait for its result.

        Raises the client's JSON-RPC error, ``RequestTimeout`` after ``timeout``
        seconds, or ``ConnectionClosed`` when the session ends first.
        """
        if self.closed:
            raise ConnectionClosed(f"the session closed before {method} could be sent")
        loop = asyncio.get_running_loop()
        outbound = self.connection.request(method, params, now=loop.time(), timeout=timeout)
        outbound.handle = future = loop.create_future()
        self._waiting.add(outbound)
        try:
            async with asyncio.timeout_at(outbound.deadline):
                await send(outbound.message)
                return await future
        except TimeoutError:
            raise RequestTimeout(
                f"the client did not answer {method} within {timeout:g}s"
            ) from None
        finally:
            self._waiting.discard(outbound)
            self.connection.forget(outbound)
            if not future.done():
                future.cancel()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for outbound in list(self._waiting):
            fail(outbound, ConnectionClosed("the session was closed"))
        if self._owns_connection:  # an HTTP session: its requests end with it
            running, _ = self.connection.close()
            for inbound in running:
                if inbound.handle is not None:
                    inbound.handle.cancel()
        if self.listener is not None:
            self.listener.cancel()
        for stream in self.streams.values():
            stream.end()  # a client resuming it gets what is kept, then the end
        self.streams.clear()
        # Drop what may point back at the session (the GET stream's sender, the
        # listener task, waiters), so a closed session is freed by reference counting
        # alone, not left to a full collection.
        self.outbound = None
        self.listener = None
        self._waiting.clear()


def act(event: Event, notify: Callable[[Notification], None]) -> None:
    """Do what a connection's event asks of any transport: cancel a running request,
    pass a notification up (``notify``), settle one of our requests. Serving a request
    and answering a rejected frame are the transport's own (they need its I/O)."""
    if isinstance(event, Cancel):
        if event.inbound.handle is not None:
            event.inbound.handle.cancel()
    elif isinstance(event, Notify):
        notify(event.notification)
    elif isinstance(event, Answer):
        settle(event)
    elif isinstance(event, Ignore):
        log.debug("ignored: %s", event.why)


def settle(event: Answer) -> None:
    """Hand the peer's response to the request of ours waiting for it."""
    if event.outbound.handle is not None:
        resolve(event.outbound.handle, event.response)


def resolve(future: asyncio.Future[Any], response: Response) -> None:
    """Complete ``future`` with ``response``: its result, or its error as our exception."""
    if future.done():
        return
    if response.error is not None:
        future.set_exception(error_from_wire(response.error))
    else:
        future.set_result(response.result)


def fail(outbound: Outbound, exc: BaseException) -> None:
    """The request of ours will get no response: wake its waiter with ``exc``."""
    future = outbound.handle
    if future is not None and not future.done():
        future.set_exception(exc)
