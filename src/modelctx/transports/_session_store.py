"""Where an ``HttpApp`` keeps its handshake-era sessions: one interface, two stores.

``SessionStore`` is what the Streamable HTTP exchange and its ASGI adapter ask of
sessions. Every store holds a ``SessionTable`` in this process (capped, expiring, bound
to the principal that opened each session); the exchange looks sessions up there,
without I/O. What may need I/O is asynchronous and only called on a handshake session:

- ``MemorySessions``: the table is all there is; the asynchronous steps do nothing.
- ``RedisSessions``: the table is a cache of the records a ``RedisSessionStore`` keeps
  (``_redis_sessions``): a session named here but not held is rebuilt from its record,
  a held one has its TTL renewed when due, what changes a session is written through,
  a client's answer that belongs to another replica is forwarded there, DELETE removes
  the record for every replica.

Refusals are exceptions the adapter maps to statuses: ``SessionsFull`` (the caps,
503/429), ``SessionGone`` (ended on another replica, 404) and ``SessionStoreUnavailable``
(Redis silent, 503).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ..protocol.connection import ServerConnection
from ..protocol.jsonrpc import Message, Notification
from ._asgi import ASGISend, Receive
from ._redis_sessions import RedisSessionStore, SessionStoreUnavailable, principal_digest
from ._sse_resume import parse_event_id, resume_shared
from .session import HandshakeSession, SessionTable

__all__ = [
    "WRITTEN",
    "MemorySessions",
    "RedisSessions",
    "SessionGone",
    "SessionStore",
    "SessionsFull",
    "store_for",
]

log = logging.getLogger("modelctx.http")

# Methods whose effect on a handshake session a shared store writes (``saved``):
# ``initialize`` creates the record, the others change it.
WRITTEN = frozenset({"initialize", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})

Listener = Callable[[dict[str, Any]], Awaitable[None] | None]


class SessionsFull(Exception):
    """No room for one more session: ``reason`` is ``SessionTable.QUOTA`` or ``.FULL``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SessionGone(Exception):
    """The session ended on another replica while this one served it."""


class SessionStore(Protocol):
    """The sessions of one ``HttpApp``. The table's lookups are synchronous (``find``,
    ``admit``, ``fresh``); the rest may reach a shared store."""

    #: The Redis store behind it (mirrors of resumable streams, HTTP+SSE records), or
    #: None: the sessions live in this process only.
    shared: RedisSessionStore | None

    def __len__(self) -> int: ...

    def find(self, session_id: str, principal: Any) -> HandshakeSession | None:
        """The live session held here, for ``principal`` only (``SessionTable.find``)."""

    def get(self, session_id: str) -> HandshakeSession | None:
        """The session held here, whoever opened it (``SessionTable.get``)."""

    def admit(self, principal: Any) -> str | None:
        """Room for one more session: None, or ``SessionTable.QUOTA``/``FULL``."""

    def fresh(self, session: HandshakeSession) -> bool:
        """True when ``session``, held here, is served without asking the shared store."""

    def add(self, session: HandshakeSession) -> None:
        """Index a session ``initialize`` opened."""

    def drop(self, session: HandshakeSession) -> None:
        """Remove and close a session (here only)."""

    def close_all(self) -> None:
        """Close every session held here (shutdown)."""

    def follow(self) -> None:
        """Start hearing other replicas (idempotent; needs a running loop)."""

    async def resolve(
        self, session_id: str, held: HandshakeSession | None, principal: Any
    ) -> HandshakeSession | None:
        """The session ``session_id`` of ``principal`` as the store knows it (``held``:
        the table's); None when there is none. Raises ``SessionsFull`` (rebuilding it
        found no room) or ``SessionStoreUnavailable``."""

    async def saved(self, method: str, session: HandshakeSession) -> None:
        """Write what a successful ``method`` (one of ``WRITTEN``) did to ``session``.
        Raises ``SessionsFull`` (a new session over the shared caps: dropped),
        ``SessionGone`` or ``SessionStoreUnavailable``."""

    async def one_way(self, session: HandshakeSession, message: Message, body: bytes, unmatched: bool) -> None:
        """After a notification or a response of ``session`` was acted on here;
        ``unmatched``: it names a request this process does not hold."""

    async def delete(self, session: HandshakeSession) -> None:
        """End ``session`` everywhere (DELETE)."""

    async def resume_elsewhere(
        self, session: HandshakeSession, last_event_id: str | None, receive: Receive, send: ASGISend
    ) -> bool:
        """Replay a stream another replica keeps; True once the GET was answered."""

    async def close(self) -> None:
        """Stop hearing other replicas and let go of the shared store."""


class MemorySessions(SessionTable):
    """Sessions in this process only: the table, and nothing to wait for."""

    __slots__ = ()

    shared: RedisSessionStore | None = None

    def fresh(self, session: HandshakeSession) -> bool:
        return True

    def follow(self) -> None:
        return None

    async def resolve(
        self, session_id: str, held: HandshakeSession | None, principal: Any
    ) -> HandshakeSession | None:
        return held

    async def saved(self, method: str, session: HandshakeSession) -> None:
        return None

    async def one_way(self, session: HandshakeSession, message: Message, body: bytes, unmatched: bool) -> None:
        return None

    async def delete(self, session: HandshakeSession) -> None:
        self.drop(session)

    async def resume_elsewhere(
        self, session: HandshakeSession, last_event_id: str | None, receive: Receive, send: ASGISend
    ) -> bool:
        return False

    async def close(self) -> None:
        return None


class RedisSessions(SessionTable):
    """Sessions kept in Redis (``store``), the table a cache of them; ``on_note`` hears
    what other replicas publish, ``listen_for`` gives a rebuilt, initialized session
    the server's bus listener."""

    __slots__ = ("shared", "_on_note", "_listen_for")

    def __init__(
        self,
        max_sessions: int,
        per_principal: int | None,
        idle_seconds: float,
        store: RedisSessionStore,
        on_note: Listener,
        listen_for: Callable[[HandshakeSession], object],
    ) -> None:
        super().__init__(max_sessions, per_principal, idle_seconds)
        self.shared: RedisSessionStore | None = store
        self._on_note = on_note
        self._listen_for = listen_for
        store.limit(max_sessions, per_principal)  # the caps hold in Redis, for every process

    @property
    def _store(self) -> RedisSessionStore:
        assert self.shared is not None
        return self.shared

    def fresh(self, session: HandshakeSession) -> bool:
        return not self._store.due(session)

    def follow(self) -> None:
        self._store.listen(self._on_note, self.in_use)

    def add(self, session: HandshakeSession) -> None:
        # Its server-to-client request ids name this process: unique across replicas.
        session.connection = ServerConnection(id_prefix=self._store.process_id)
        self.follow()  # an app mounted without its lifespan starts hearing here
        super().add(session)

    async def resolve(
        self, session_id: str, held: HandshakeSession | None, principal: Any
    ) -> HandshakeSession | None:
        """The held session with its TTL renewed when due (when Redis does not answer,
        it is served all the same), or else rebuilt from its record."""
        store = self._store
        self.follow()
        if held is None:
            return await self._restore(session_id, principal)
        if store.due(held):
            try:
                alive = await store.touch(held)
            except SessionStoreUnavailable as down:
                # Held here, the session can still be served; only its renewal waits.
                log.warning("session %s served without renewing its TTL: %s", held.id, down)
                held.stored_at = time.monotonic()
                return held
            if not alive:
                self.drop(held)  # deleted or expired on the other replicas
                return None
        return held

    async def _restore(self, session_id: str, principal: Any) -> HandshakeSession | None:
        store = self._store
        record = await store.load(session_id)
        if record is None or record.principal != principal_digest(principal):
            return None
        held = self.find(session_id, principal)
        if held is not None:  # built meanwhile, by a request that ran side by side
            return held
        refused = self.admit(principal)
        if refused is not None:
            raise SessionsFull(refused)
        session = record.build(principal, store.process_id)
        session.stored_at = time.monotonic()  # load renewed its TTL
        super().add(session)
        if session.initialized:
            self._listen_for(session)
        return session

    async def saved(self, method: str, session: HandshakeSession) -> None:
        store = self._store
        if method == "initialize":
            try:
                refused = await store.save(session)
            except SessionStoreUnavailable:
                self.drop(session)  # no replica could serve it
                raise
            if refused is not None:
                self.drop(session)  # the shared cap or quota: no room for it
                raise SessionsFull(refused)
            return
        if not await store.write_through(session):
            self.drop(session)
            raise SessionGone(session.id)

    async def one_way(self, session: HandshakeSession, message: Message, body: bytes, unmatched: bool) -> None:
        if unmatched:  # an answer or a cancellation for another replica
            await self._store.forward(session.id, body)
        elif type(message) is Notification and message.method == "notifications/initialized":
            await self._store.write_through(session)

    async def delete(self, session: HandshakeSession) -> None:
        await self._store.delete(session.id)  # and every replica closes its copy
        self.drop(session)

    async def resume_elsewhere(
        self, session: HandshakeSession, last_event_id: str | None, receive: Receive, send: ASGISend
    ) -> bool:
        parsed = parse_event_id(last_event_id)
        if parsed is None:
            return False
        return await resume_shared(self._store, session, parsed[0], parsed[1], receive, send)

    async def close(self) -> None:
        await self._store.close()


def store_for(
    server: Any,
    given: RedisSessionStore | None,
    max_sessions: int,
    per_principal: int | None,
    idle_seconds: float,
    on_note: Listener,
    listen_for: Callable[[HandshakeSession], object],
) -> SessionStore:
    """The sessions of an app of ``server``: in Redis when ``given`` or the server's
    ``config.redis_url`` names one (``on_note`` hears the other replicas, ``listen_for``
    gives a rebuilt initialized session its bus listener), else in this process."""
    store = given if given is not None else _redis_for(server, idle_seconds)
    if store is None:
        return MemorySessions(max_sessions, per_principal, idle_seconds)
    return RedisSessions(max_sessions, per_principal, idle_seconds, store, on_note, listen_for)


def _redis_for(server: Any, idle_seconds: float) -> RedisSessionStore | None:
    """The shared session store the server's ``config.redis_url`` names, if any."""
    url = getattr(getattr(server, "config", None), "redis_url", None)
    if not url:
        return None
    try:
        # The server's prefix (Server.redis_prefix): replicas of different servers may
        # share one Redis, and their sessions must not meet.
        return RedisSessionStore(url, idle_seconds=idle_seconds, prefix=getattr(server, "redis_prefix", "modelctx:"))
    except ImportError as exc:
        raise ImportError(
            f"redis_url {url!r} needs the redis package for shared sessions: pip install 'modelctx[redis]'"
        ) from exc
