"""The reply to one Streamable HTTP POST, and the guard that cancels its request.

``Reply`` is JSON until the handler sends something early, then SSE (resumable on a
handshake session: ``_sse_resume.KeptStream``); ``CancelGuard`` cancels the request's
task when the client goes away or sends ``notifications/cancelled``. ``HttpApp._request``
and ``_http_batch`` write through these; nothing here decides what is sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from ..protocol.framing import SSE_KEEPALIVE, sse_event
from ..protocol.jsonrpc import encode
from ._asgi import KEEPALIVE_SECONDS, SSE_HEADERS, ASGISend, Receive, wait_disconnect
from ._redis_sessions import SessionStoreUnavailable
from ._redis_streams import StreamMirror
from ._sse_resume import RESUME_GRACE, KeptStream

__all__ = ["CancelGuard", "Reply"]

log = logging.getLogger("modelctx.http")


class CancelGuard:
    """Cancels the request's task when the client disconnects or sends
    notifications/cancelled, and remembers that it did, so the cancellation is told
    apart from a server shutdown. A reply the client can resume (its SSE events have
    ids) is not cancelled by a disconnect: ``on_gone`` is called instead."""

    __slots__ = ("task", "requested", "disconnected", "running", "detached", "on_gone")

    def __init__(self, task: asyncio.Task[None] | None) -> None:
        self.task = task
        self.requested = False
        self.disconnected = False
        self.running = True
        self.detached = False  # the reply was closed early: a disconnect is expected
        self.on_gone: Callable[[], None] | None = None  # set while the reply is resumable

    def cancel(self, msg: Any = None) -> None:
        if self.running and not self.requested and self.task is not None:
            self.requested = True
            self.task.cancel()

    async def watch(self, receive: Receive) -> None:
        await wait_disconnect(receive)
        if not self.running or self.detached:
            return
        if self.on_gone is not None:
            # 2025-11-25: a disconnection SHOULD NOT be taken for a cancellation; the
            # request runs on into its kept stream, for the client's GET with Last-Event-ID.
            self.on_gone()
            return
        self.disconnected = True
        self.cancel()

    def settle(self) -> None:
        """Take back our cancellation request so the task runs on normally."""
        if self.task is not None and self.task.cancelling():
            self.task.uncancel()


class Reply:
    """The reply to one POST: JSON until the handler sends early, then SSE.

    On a handshake session it is also the request's ``ResponseStream``, and its SSE is
    resumable: it opens a ``KeptStream`` of the session (mirrored in Redis with a
    store), its events carry ids and are kept, and when the connection breaks the
    request runs on and its remaining events go to the kept stream alone; ``close``
    ends the SSE early on purpose (SEP-1699) the same way. Without room for another
    kept stream the SSE has no ids and a disconnect cancels the request.
    """

    __slots__ = (
        "_send", "started", "closed", "_ended", "_lock", "_keepalive", "_session", "_guard", "_kept", "_store",
        "_grace",
    )

    def __init__(
        self, send: ASGISend, session: Any = None, guard: CancelGuard | None = None, store: Any = None
    ) -> None:
        self._send = send
        self.started = False
        self.closed = False  # nothing more goes to the connection (it broke, or close())
        self._ended = False  # the ASGI response is complete
        self._lock: asyncio.Lock | None = None
        self._keepalive: asyncio.Task[None] | None = None
        self._session = session
        self._guard = guard
        self._kept: KeptStream | None = None
        self._store = store
        self._grace: asyncio.Task[None] | None = None  # runs while the connection is gone

    def _open_kept(self) -> KeptStream | None:
        session = self._session
        if self._kept is None and session is not None and not session.closed:
            store = self._store
            mirror_for = None if store is None else lambda stream_id: StreamMirror(store, session.id, stream_id)
            self._kept = KeptStream.open(session, mirror_for)
            if self._kept is None:
                log.debug("session %s: every resumable stream is in use; this reply has no event ids", session.id)
        return self._kept

    async def _start(self) -> None:
        self.started = True
        self._lock = asyncio.Lock()
        if self._open_kept() is not None and self._guard is not None:
            self._guard.on_gone = self._gone
        await self._send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        self._keepalive = asyncio.ensure_future(self._ping())

    def _gone(self) -> None:
        """The connection broke: what follows is kept for the client's resumption, as
        long as a client follows the stream within ``RESUME_GRACE`` seconds."""
        self.closed = True
        if self._keepalive is not None:
            self._keepalive.cancel()
        if self._grace is None:
            self._grace = asyncio.ensure_future(self._wait_for_follower())

    async def _wait_for_follower(self) -> None:
        kept, guard = self._kept, self._guard
        assert kept is not None and guard is not None
        while not kept.done:
            await asyncio.sleep(RESUME_GRACE)
            if kept.done or kept.followed():
                continue
            if self._store is not None and self._session is not None:
                try:
                    if await self._store.stream_followed(self._session.id, kept.id):
                        continue  # through another replica
                except SessionStoreUnavailable:
                    pass  # no replica can read it either
            log.debug("stream %s: no client came back within %gs; the request is cancelled", kept.id, RESUME_GRACE)
            guard.disconnected = True
            guard.cancel()
            return

    def drop(self) -> None:
        """The request ended unanswered after its client left: end the kept stream."""
        self.closed = True
        if self._kept is not None:
            self._kept.end()

    async def event(self, message: dict[str, Any]) -> None:
        if self.closed:
            if self._kept is not None:
                self._kept.add(message)
            return
        if not self.started:
            await self._start()
        assert self._lock is not None
        body = self._kept.add(message) if self._kept is not None else sse_event(encode(message))
        if self.closed:  # the connection broke while the stream opened
            return
        async with self._lock:
            await self._send({"type": "http.response.body", "body": body, "more_body": True})

    async def _ping(self) -> None:
        assert self._lock is not None
        try:
            while not self.closed:
                await asyncio.sleep(KEEPALIVE_SECONDS)
                async with self._lock:
                    await self._send(
                        {"type": "http.response.body", "body": SSE_KEEPALIVE, "more_body": True}
                    )
        except (OSError, asyncio.CancelledError):
            return

    async def finish(self, response: dict[str, Any] | None) -> None:
        if self._grace is not None:
            self._grace.cancel()
        kept = self._kept
        body = b""
        if kept is not None:
            if response is not None:
                body = kept.add(response)
            kept.end()
        elif response is not None:
            body = sse_event(encode(response))
        if self._ended:
            return
        if self.closed:
            body = b""  # the connection broke: the client resumes to get the rest
        self.closed = self._ended = True
        if self._keepalive is not None:
            self._keepalive.cancel()
        assert self._lock is not None
        try:
            async with self._lock:
                await self._send({"type": "http.response.body", "body": body, "more_body": False})
        except OSError:
            if kept is None:
                raise
            return
        if kept is not None and body:
            kept.delivered()  # the client has it all: only the result stays, should it resume

    async def close(self, retry_ms: int) -> None:
        """End the SSE reply with a priming event and keep what follows (SEP-1699)."""
        session = self._session
        if self.closed or session is None or session.closed:
            return
        kept = self._open_kept()
        if kept is None:
            log.debug("session %s: every resumable stream is in use; the reply stays open", session.id)
            return
        # From here the client leaving is the polling, not a cancellation.
        if self._guard is not None:
            self._guard.detached = True
        self.closed = self._ended = True
        try:
            if not self.started:
                await self._start()
            assert self._keepalive is not None and self._lock is not None
            self._keepalive.cancel()
            priming = kept.priming(retry_ms)
            async with self._lock:
                await self._send({"type": "http.response.body", "body": priming, "more_body": False})
        except OSError:
            pass  # the client is already gone; it can still resume
