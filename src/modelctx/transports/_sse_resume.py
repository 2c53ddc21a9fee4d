"""Resumable SSE replies of handshake-era sessions (2025-11-25 Resumability and Redelivery).

Every SSE reply of a handshake session is a ``KeptStream``: its events carry the SSE id
``<stream id>:<n>`` (n from 1) and are kept in the session as they are written, so a
client whose connection broke comes back with GET and ``Last-Event-ID`` and ``resume``
replays what came after that id, then follows the stream until the request ends. The
connection breaking is therefore not the request's cancellation (2025-11-25: a
disconnection SHOULD NOT be interpreted as cancelling; the client sends
``notifications/cancelled``). A handler may also end its reply on purpose
(``Context.close_sse_stream``, SEP-1699 polling): the reply closes with a priming event
(the id of the last event, or ``:0``, a ``retry`` time and empty data) and the rest is
kept the same way. 2026-07-28 has no resumability: modern replies never get here.

Memory is bounded: ``KEPT_STREAMS`` streams per session (finished ones are dropped
oldest first to make room; when all are running, a new reply gets no ids and a
disconnect cancels it, as before), ``KEPT_EVENTS`` events per stream (oldest dropped
first; the response is always the newest event, so it is kept). With a Redis
(``ServerConfig.redis_url``) each stream is mirrored there too (``StreamMirror``), so a
GET reaching another replica resumes it (``resume_shared``).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import deque
from typing import Any

from ..protocol import encode
from ..protocol.framing import SSE_KEEPALIVE, sse_event
from ._asgi import KEEPALIVE_SECONDS, SSE_HEADERS, ASGISend, Receive, wait_disconnect, wait_or_keepalive

__all__ = [
    "KEPT_BYTES",
    "KEPT_EVENTS",
    "KEPT_STREAMS",
    "RESUME_GRACE",
    "KeptStream",
    "kept_after",
    "parse_event_id",
    "resume",
    "resume_shared",
    "standalone",
]

log = logging.getLogger("modelctx.http")

KEPT_STREAMS = 8  # resumable streams per handshake session (4 while only closed replies were kept)
KEPT_EVENTS = 256  # events kept per resumable stream
KEPT_BYTES = 1 << 20  # bytes of events kept per stream; the newest event is kept whatever its size
# Seconds a request whose reply connection broke runs on with no client following its
# stream (a GET with Last-Event-ID, here or through another replica): past them the
# client is taken to have gone, and the request is cancelled as a disconnect cancels a
# reply that has no ids. Clients come back after the ``retry`` time (default 1 s).
RESUME_GRACE = 5.0
_SHARED_POLL = 0.2  # seconds between reads of a stream another replica runs
_FOLLOW_MS = int(RESUME_GRACE * 1000)  # each read tells the replica running it for this long
_STREAM_ID_CHARS = frozenset("0123456789abcdef")


class KeptStream:
    """A resumable stream: the events of one request's SSE reply, kept for a resume.

    Events are numbered from 1 and carry the SSE id ``<stream id>:<n>``; at most
    ``KEPT_EVENTS`` of at most ``KEPT_BYTES`` together are kept, the newest always.
    ``end`` marks the request over (its response, if any, is the last event);
    ``delivered`` keeps only that last event once it went out on a live connection.
    ``mirror`` (a ``StreamMirror``) gets each event too.
    """

    __slots__ = ("id", "events", "done", "changed", "mirror", "readers", "read_at", "sent", "_next", "_bytes")

    def __init__(self, stream_id: str, mirror: Any = None) -> None:
        self.id = stream_id
        self.events: deque[tuple[int, bytes]] = deque(maxlen=KEPT_EVENTS)
        self.done = False
        self.changed = asyncio.Event()  # replaced after each change; readers hold the old one
        self.mirror = mirror
        self.readers = 0  # GETs following it now
        self.read_at = 0.0  # when the last of them ended (monotonic)
        self.sent = 0  # the number of the last event a GET following it here sent
        self._next = 1
        self._bytes = 0

    def followed(self) -> bool:
        """Whether a client follows the stream here, or did within ``RESUME_GRACE``."""
        return self.readers > 0 or time.monotonic() - self.read_at < RESUME_GRACE

    @classmethod
    def open(cls, session: Any, mirror_for: Any = None) -> KeptStream | None:
        """A new stream in ``session``, making room by dropping finished ones; None
        if every stream the session may keep is still running. ``mirror_for(stream_id)``,
        if given, makes the stream's ``StreamMirror``."""
        streams: dict[str, KeptStream] = session.streams
        finished = [key for key, kept in streams.items() if kept.done]
        for key in finished[: max(0, len(streams) - KEPT_STREAMS + 1)]:
            dropped = streams.pop(key)
            if dropped.mirror is not None:
                dropped.mirror.drop()
        if len(streams) >= KEPT_STREAMS:
            return None
        stream_id = secrets.token_hex(8)
        kept = cls(stream_id, mirror_for(stream_id) if mirror_for is not None else None)
        streams[kept.id] = kept
        return kept

    def priming(self, retry_ms: int) -> bytes:
        """The event that ends a reply closed early: the id of the last event (0 before
        any), the reconnection time, and empty data (SEP-1699)."""
        return b"id: %s:%d\nretry: %d\ndata: \n\n" % (self.id.encode(), self._next - 1, retry_ms)

    def add(self, message: dict[str, Any]) -> bytes:
        """Keep ``message`` as the next event; returns the event as sent (with its id)."""
        n = self._next
        event = b"id: %s:%d\n%s" % (self.id.encode(), n, sse_event(encode(message)))
        if self.done:
            return event
        self._next += 1
        if len(self.events) == KEPT_EVENTS:
            self._bytes -= len(self.events.popleft()[1])
        self.events.append((n, event))
        self._bytes += len(event)
        while self._bytes > KEPT_BYTES and len(self.events) > 1:
            self._bytes -= len(self.events.popleft()[1])
        if self.mirror is not None:
            self.mirror.add(n, event)
        self._changed()
        return event

    def end(self) -> None:
        if self.done:
            return
        self.done = True
        if self.mirror is not None:
            self.mirror.end()
        self._changed()

    def delivered(self) -> None:
        """The request is over and its last event went out whole on the live connection:
        keep that one alone (a client that lost it in the very last moment resumes to it)."""
        while len(self.events) > 1:
            self._bytes -= len(self.events.popleft()[1])
        if self.mirror is not None:
            self.mirror.delivered()

    def after(self, n: int) -> list[tuple[int, bytes]]:
        return [event for event in self.events if event[0] > n]

    def _changed(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


def standalone(session: Any) -> KeptStream:
    """The session's standalone GET stream, made by its first GET: from then on every
    message of no request (notifications, requests of the session) is one of its events,
    kept as a reply's are (``KEPT_EVENTS``, ``KEPT_BYTES``), whether a GET is attached or
    not. So a GET that comes back, with ``Last-Event-ID`` or without (then from the last
    event sent), gets what the broken one missed. It ends with the session; it is not
    one of ``session.streams`` (it never finishes, and must not hold the session in
    use), and it is this replica's own (never mirrored to Redis)."""
    kept: KeptStream | None = session.standalone
    if kept is None:
        kept = session.standalone = KeptStream(secrets.token_hex(8))

        async def outbound(message: dict[str, Any]) -> None:
            kept.add(message)

        session.outbound = outbound
    return kept


def parse_event_id(last_event_id: str | None) -> tuple[str, int] | None:
    """``(stream id, n)`` of a ``Last-Event-ID`` this server could have minted, else None
    (so nothing a client makes up ever names a Redis key beyond that shape)."""
    if not last_event_id:
        return None
    stream_id, _, n = last_event_id.rpartition(":")
    if not (0 < len(stream_id) <= 32 and _STREAM_ID_CHARS.issuperset(stream_id)) or not n.isdigit():
        return None
    return stream_id, int(n)


def kept_after(session: Any, last_event_id: str | None) -> tuple[KeptStream | None, int]:
    """The kept stream ``Last-Event-ID`` names and the number after which to resume."""
    parsed = parse_event_id(last_event_id)
    if parsed is None:
        return None, 0
    kept = session.streams.get(parsed[0])
    if kept is None:
        return None, 0
    return kept, parsed[1]


async def resume(session: Any, kept: KeptStream, after: int, receive: Receive, send: ASGISend) -> None:
    """Replay ``kept`` after event ``after``, then follow it until the request ends."""
    cursor = after
    session.touch()
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    watcher = asyncio.ensure_future(wait_disconnect(receive))
    kept.readers += 1
    try:
        while not watcher.done():
            changed = kept.changed
            events = kept.after(cursor)
            for cursor, event in events:  # noqa: B007 - the last one read is where to go on
                await send({"type": "http.response.body", "body": event, "more_body": True})
                kept.sent = cursor
            if events:
                continue  # more may have come while we sent
            if kept.done:
                break
            await wait_or_keepalive(asyncio.ensure_future(changed.wait()), watcher, send, session.touch)
    except OSError:
        pass
    finally:
        watcher.cancel()
        kept.readers -= 1
        kept.read_at = time.monotonic()
    await _end_body(send)


async def resume_shared(
    store: Any, session: Any, stream_id: str, after: int, receive: Receive, send: ASGISend
) -> bool:
    """Resume a stream another replica runs (or ran), from its copy in Redis: replay what
    follows event ``after``, then read the copy again every ``_SHARED_POLL`` seconds
    until its end marker. False, having sent nothing, when Redis has no such stream.

    Raises ``SessionStoreUnavailable`` when Redis does not answer the first read; a
    later failure, or the copy expiring (its replica died), ends the stream, and the
    client resumes again from its last id.
    """
    from ._redis_sessions import SessionStoreUnavailable

    entries = await store.stream_events(session.id, stream_id, _FOLLOW_MS)
    if not entries:
        return False
    cursor = after
    session.touch()
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    watcher = asyncio.ensure_future(wait_disconnect(receive))
    loop = asyncio.get_running_loop()
    quiet_since = loop.time()
    try:
        while entries and not watcher.done():
            sent_to, ended = await _send_after(entries, cursor, send)
            if sent_to != cursor:
                cursor, quiet_since = sent_to, loop.time()
            if ended:
                break
            await asyncio.wait((watcher,), timeout=_SHARED_POLL)
            if watcher.done():
                break
            session.touch()
            if loop.time() - quiet_since >= KEEPALIVE_SECONDS:
                quiet_since = loop.time()
                await send({"type": "http.response.body", "body": SSE_KEEPALIVE, "more_body": True})
            try:
                entries = await store.stream_events(session.id, stream_id, _FOLLOW_MS)
            except SessionStoreUnavailable as down:
                log.warning("session %s: stopped following stream %s: %s", session.id, stream_id, down)
                break
    except OSError:
        pass
    finally:
        watcher.cancel()
    await _end_body(send)
    return True


async def _send_after(entries: list[tuple[int, bytes]], cursor: int, send: ASGISend) -> tuple[int, bool]:
    """Send the events of ``entries`` numbered past ``cursor``; the last number sent (or
    ``cursor``), and whether the copy's end marker (a negative number) was among them."""
    ended = False
    for n, event in entries:
        if n < 0:
            ended = True
        elif n > cursor:
            cursor = n
            await send({"type": "http.response.body", "body": event, "more_body": True})
    return cursor, ended


async def _end_body(send: ASGISend) -> None:
    """End the response; a client already gone is no error."""
    try:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except OSError:
        pass
