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
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from ..errors import ConnectionClosed, RequestTimeout, error_from_wire
from ..protocol import Notification, Response
from ..protocol.connection import Answer, Cancel, Event, Ignore, Notify, Outbound, ServerConnection
from .identity import principal_key

__all__ = [
    "HandshakeSession",
    "SessionTable",
    "Send",
    "act",
    "fail",
    "principal_key",
    "resolve",
    "settle",
]

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
        #: The standalone GET stream's kept events (``_sse_resume.standalone``), once a GET came.
        self.standalone: Any = None
        #: Who opened the session (the authenticated principal, if any).
        self.principal: Any = None
        #: When its record in a shared store was last written or renewed (monotonic);
        #: None where sessions live in this process only.
        self.stored_at: float | None = None
        self._on_close: list[Callable[[], object]] = []

    def on_close(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback`` when the session closes (DELETE, expiry, shutdown); returns
        what takes it back. A GET stream ends by it at once, not at its next keep-alive."""
        self._on_close.append(callback)

        def forget() -> None:
            if callback in self._on_close:
                self._on_close.remove(callback)

        return forget

    def touch(self) -> None:
        self.last_seen = time.monotonic()

    def in_use(self) -> bool:
        """A request running, an HTTP GET stream open, or a resumable stream still running."""
        return bool(
            self.connection.inflight
            or self.http_stream_open
            or any(not kept.done for kept in self.streams.values())
        )

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
        if self.standalone is not None:
            self.standalone.end()  # its GET, if one is attached, ends now
        callbacks, self._on_close = self._on_close, []
        for callback in callbacks:
            callback()
        # Drop what may point back at the session (the GET stream's sender, the
        # listener task, waiters), so a closed session is freed by reference counting
        # alone, not left to a full collection.
        self.outbound = None
        self.listener = None
        self._waiting.clear()


# Sessions in use skipped, at most, to find an idle one to evict (SessionTable).
EVICTION_TRIES = 32


class SessionTable:
    """The handshake-era sessions of one HTTP app, by id, in use order.

    ``max_sessions`` bounds the whole table; ``per_principal`` (None: no quota) bounds
    what one principal holds. Before ``initialize`` runs, ``admit`` makes room: at the
    principal's quota it evicts that principal's own least recently used idle session,
    at the table's cap the least recently used idle one of anybody; a session in use
    is never evicted. Each table is an ``OrderedDict`` kept in use order (``find`` moves
    a session to the end), so the candidates are at the front: admission looks at no
    more than ``EVICTION_TRIES`` sessions in use before it gives up and refuses.
    Another principal's sessions count only against the table's cap, so a principal
    flooding initialize evicts its own sessions first and never refuses anyone else's
    while the table has room. Principals are told apart by ``principal_key`` (the one
    identity rule, ``_identity``): a session is found only for the principal that opened it.
    """

    __slots__ = ("max_sessions", "per_principal", "idle_seconds", "_all", "_owned")

    FULL = "full"  # admit(): every session of the table is in use
    QUOTA = "quota"  # admit(): every session of this principal is in use

    def __init__(self, max_sessions: int, per_principal: int | None, idle_seconds: float) -> None:
        self.max_sessions = max_sessions
        self.per_principal = per_principal
        self.idle_seconds = idle_seconds
        self._all: OrderedDict[str, HandshakeSession] = OrderedDict()
        # Per principal key, only while it holds a session (an empty one is deleted, so
        # a flood of distinct principals leaves nothing behind).
        self._owned: dict[str | None, OrderedDict[str, HandshakeSession]] = {}

    def __len__(self) -> int:
        return len(self._all)

    def __iter__(self) -> Iterator[HandshakeSession]:
        return iter(list(self._all.values()))

    def owned_by(self, principal: Any) -> int:
        """How many sessions ``principal`` holds."""
        return len(self._owned.get(principal_key(principal), ()))

    def find(self, session_id: str, principal: Any) -> HandshakeSession | None:
        """The live session ``session_id`` of ``principal``, now the most recently used;
        None when unknown, another principal's, closed or expired (an expired one not
        in use is dropped)."""
        session = self._all.get(session_id)
        if session is None or principal_key(session.principal) != principal_key(principal):
            return None
        if session.closed or time.monotonic() - session.last_seen > self.idle_seconds:
            if not session.in_use():
                self.drop(session)
            return None
        self._all.move_to_end(session_id)
        if self.per_principal is not None:
            self._owned[principal_key(principal)].move_to_end(session_id)
        return session

    def get(self, session_id: str) -> HandshakeSession | None:
        """The session ``session_id`` as held here, whoever opened it and however idle
        (for messages another replica forwards, already bound to the session)."""
        session = self._all.get(session_id)
        return None if session is None or session.closed else session

    def in_use(self) -> list[HandshakeSession]:
        """The sessions with a request running or a stream open."""
        return [session for session in self._all.values() if not session.closed and session.in_use()]

    def admit(self, principal: Any) -> str | None:
        """Make room for one more session of ``principal``: None when there is room,
        else ``QUOTA`` or ``FULL`` (nothing evicted is in use)."""
        if self.per_principal is not None:
            own = self._owned.get(principal_key(principal))
            if own is not None and not self._evict(own, self.per_principal):
                return self.QUOTA
        return None if self._evict(self._all, self.max_sessions) else self.FULL

    def add(self, session: HandshakeSession) -> None:
        """Index a session ``initialize`` opened. Admission was checked before it ran;
        initializes that ran side by side since may go past a bound by their number,
        never evict a session in use."""
        self.admit(session.principal)
        self._all[session.id] = session
        if self.per_principal is not None:
            key = principal_key(session.principal)
            self._owned.setdefault(key, OrderedDict())[session.id] = session

    def drop(self, session: HandshakeSession) -> None:
        """Remove and close ``session`` (DELETE, expiry, eviction)."""
        if self._all.pop(session.id, None) is not None and self.per_principal is not None:
            key = principal_key(session.principal)
            own = self._owned.get(key)
            if own is not None:
                own.pop(session.id, None)
                if not own:
                    del self._owned[key]
        session.close()

    def close_all(self) -> None:
        for session in self._all.values():
            session.close()
        self._all.clear()
        self._owned.clear()

    def _evict(self, table: OrderedDict[str, HandshakeSession], limit: int) -> bool:
        """Evict from ``table`` (in use order) idle sessions until it holds fewer than
        ``limit``; False when ``EVICTION_TRIES`` sessions in use came first."""
        tries = EVICTION_TRIES
        while len(table) >= limit and tries:
            oldest = next(iter(table.values()))
            if oldest.closed or not oldest.in_use():
                self.drop(oldest)
            else:  # in use: to the back, so the next look starts past it
                table.move_to_end(oldest.id)
                tries -= 1
        return len(table) < limit


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
