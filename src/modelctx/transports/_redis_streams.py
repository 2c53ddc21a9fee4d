"""A resumable SSE stream mirrored in Redis, so that any replica can resume it.

With replicas sharing handshake-era sessions (``ServerConfig.redis_url``), a client whose
reply stream broke may send its GET with ``Last-Event-ID`` to another replica than the
one running the request. The replica running it keeps the stream in its session
(``_sse_resume.KeptStream``) and, through a ``StreamMirror``, appends each event to a
list in Redis (``RedisSessionStore.append_stream``: bounded, with a TTL) that the other
replica reads (``_sse_resume.resume_shared``).

Best effort, off the reply's path: events are queued here and written by one task per
stream, in order, a batch per round trip, so the reply never waits for Redis. Redis
unreachable: the batch is dropped with one warning per stream, and the stream stays
resumable on its own replica. A backlog past the stream's bounds (Redis slow) keeps
its newest events and writes the list again, so the copy never has a gap in the middle.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any

from ._redis_sessions import SessionStoreUnavailable
from ._sse_resume import KEPT_BYTES, KEPT_EVENTS

__all__ = ["StreamMirror"]

log = logging.getLogger("modelctx.http")

_KEEP = KEPT_EVENTS + 1  # the events kept, and the end marker


class StreamMirror:
    """The Redis copy of one kept stream: ``add``, ``end``, ``delivered`` and ``drop``
    return at once. The copy holds what the ``KeptStream`` holds (``KEPT_EVENTS`` events
    of at most ``KEPT_BYTES`` together, the newest always) and the end marker."""

    __slots__ = (
        "_store", "_session_id", "_stream_id", "_pending", "_sizes", "_bytes", "_replace", "_retrim", "_dropped",
        "_task", "_warned",
    )

    def __init__(self, store: Any, session_id: str, stream_id: str) -> None:
        self._store = store
        self._session_id = session_id
        self._stream_id = stream_id
        self._pending: list[str] = []  # entries not written yet
        self._sizes: deque[int] = deque()  # of the entries the copy is to hold, oldest first
        self._bytes = 0
        self._replace = False  # write the copy again from what is pending
        self._retrim = False  # trim the copy to ``_sizes`` even with nothing pending
        self._dropped = False
        self._task: asyncio.Task[None] | None = None
        self._warned = False

    def add(self, n: int, event: bytes) -> None:
        self._queue(f"{n}\n{event.decode()}")

    def end(self) -> None:
        self._queue("end")

    def delivered(self) -> None:
        """Keep only the last event (and the end marker), as ``KeptStream.delivered``."""
        self._trim(2)
        self._retrim = True
        self._kick()

    def drop(self) -> None:
        """The stream is no longer kept: remove its copy (after what is being written)."""
        self._dropped = True
        self._pending.clear()
        self._kick()

    def _queue(self, entry: str) -> None:
        if self._dropped:
            return
        self._pending.append(entry)
        self._sizes.append(len(entry))
        self._bytes += len(entry)
        self._trim(_KEEP)
        self._kick()

    def _trim(self, most: int) -> None:
        while len(self._sizes) > most or (self._bytes > KEPT_BYTES and len(self._sizes) > 2):
            self._bytes -= self._sizes.popleft()
        if len(self._pending) > len(self._sizes):
            # Entries dropped before they were written: what Redis holds would no longer
            # be contiguous with what follows, so the copy is written again.
            del self._pending[: len(self._pending) - len(self._sizes)]
            self._replace = True

    def _kick(self) -> None:
        if self._task is None or self._task.done():
            try:
                self._task = asyncio.get_running_loop().create_task(self._flush())
            except RuntimeError:  # no loop: the server is gone; the TTL removes the copy
                self._task = None

    async def _flush(self) -> None:
        while self._pending or self._dropped or self._retrim:
            try:
                if self._dropped:
                    await self._store.drop_stream(self._session_id, self._stream_id)
                    return
                batch, replace = self._pending, self._replace
                self._pending, self._replace, self._retrim = [], False, False
                keep = max(1, len(self._sizes))
                await self._store.append_stream(self._session_id, self._stream_id, batch, keep, replace=replace)
            except SessionStoreUnavailable as down:
                if not self._warned:
                    self._warned = True
                    log.warning(
                        "session %s: stream %s is resumable on this replica only: %s",
                        self._session_id, self._stream_id, down,
                    )
                if self._dropped:
                    return
                self._replace = True  # what Redis holds now has a gap: start it again
