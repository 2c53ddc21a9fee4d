"""Resumable SSE replies of handshake-era sessions (2025-11-25, SEP-1699 polling).

A handler may end its SSE reply early (``Context.close_sse_stream``): the reply closes
after a priming event (an ``id`` and a ``retry`` time with empty data), and what the
request sends afterwards is kept in the session as a ``KeptStream``. The client comes
back with GET and ``Last-Event-ID``; ``resume`` replays what came after that id and
follows the stream until the request ends. 2026-07-28 has no resumability: modern
replies never get here. Memory is bounded: ``KEPT_STREAMS`` streams per session,
``KEPT_EVENTS`` events per stream (oldest dropped first; the response is always the
newest event, so it is kept).
"""

from __future__ import annotations

import asyncio
import secrets
from collections import deque
from typing import Any

from ..protocol._framing import sse_event
from ..protocol._jsonrpc import encode
from ._asgi import SSE_HEADERS, ASGISend, Receive, wait_disconnect, wait_or_keepalive

__all__ = ["KeptStream", "kept_after", "resume", "KEPT_STREAMS", "KEPT_EVENTS"]

KEPT_STREAMS = 4  # resumable streams per handshake session
KEPT_EVENTS = 256  # events kept per resumable stream


class KeptStream:
    """A resumable stream: what one request sent after its SSE reply closed early.

    Events are numbered from 1 (0 is the priming event) and carry the SSE id
    ``<stream id>:<n>``; at most ``KEPT_EVENTS`` are kept. ``end`` marks the
    request over (its response, if any, is the last event).
    """

    __slots__ = ("id", "events", "done", "changed", "_next")

    def __init__(self, stream_id: str) -> None:
        self.id = stream_id
        self.events: deque[tuple[int, bytes]] = deque(maxlen=KEPT_EVENTS)
        self.done = False
        self.changed = asyncio.Event()  # replaced after each change; readers hold the old one
        self._next = 1

    @classmethod
    def open(cls, session: Any) -> KeptStream | None:
        """A new stream in ``session``, making room by dropping finished ones; None
        if every stream the session may keep is still running."""
        streams: dict[str, KeptStream] = session.streams
        finished = [key for key, kept in streams.items() if kept.done]
        for key in finished[: max(0, len(streams) - KEPT_STREAMS + 1)]:
            del streams[key]
        if len(streams) >= KEPT_STREAMS:
            return None
        kept = cls(secrets.token_hex(8))
        streams[kept.id] = kept
        return kept

    def priming(self, retry_ms: int) -> bytes:
        return b"id: %s:0\nretry: %d\ndata: \n\n" % (self.id.encode(), retry_ms)

    def add(self, message: dict[str, Any]) -> None:
        if self.done:
            return
        n = self._next
        self._next += 1
        self.events.append((n, b"id: %s:%d\n%s" % (self.id.encode(), n, sse_event(encode(message)))))
        self._changed()

    def end(self) -> None:
        self.done = True
        self._changed()

    def after(self, n: int) -> list[tuple[int, bytes]]:
        return [event for event in self.events if event[0] > n]

    def _changed(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


def kept_after(session: Any, last_event_id: str | None) -> tuple[KeptStream | None, int]:
    """The kept stream ``Last-Event-ID`` names and the number after which to resume."""
    if not last_event_id:
        return None, 0
    stream_id, _, n = last_event_id.rpartition(":")
    kept = session.streams.get(stream_id)
    if kept is None or not n.isdigit():
        return None, 0
    return kept, int(n)


async def resume(session: Any, kept: KeptStream, after: int, receive: Receive, send: ASGISend) -> None:
    """Replay ``kept`` after event ``after``, then follow it until the request ends."""
    cursor = after
    session.touch()
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    watcher = asyncio.ensure_future(wait_disconnect(receive))
    try:
        while not watcher.done():
            changed = kept.changed
            events = kept.after(cursor)
            for cursor, event in events:  # noqa: B007 - the last one read is where to go on
                await send({"type": "http.response.body", "body": event, "more_body": True})
            if events:
                continue  # more may have come while we sent
            if kept.done:
                break
            await wait_or_keepalive(asyncio.ensure_future(changed.wait()), watcher, send, session.touch)
    except OSError:
        pass
    finally:
        watcher.cancel()
    try:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except OSError:
        pass
