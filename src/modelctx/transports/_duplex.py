"""Serving one duplex connection (stdio pipes, an in-process pair) on the event loop.

The rules of the conversation live in ``ServerConnection`` (protocol/connection.py);
this is the part that needs a loop: a request runs as its own task (so requests are
served concurrently and a cancellation can stop one), unless the app's fast lane takes
it, which serves it from loop callbacks and holds it as a ``_FastCall``; what the
connection says to send is sent, and ``shutdown`` ends it all within a bounded time
whatever handlers do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

from ..errors import ConnectionClosed
from ..protocol.connection import (
    Batch,
    Event,
    Inbound,
    Reject,
    Serve,
    ServerConnection,
)
from ..protocol.jsonrpc import Notification
from ..protocol.versions import Feature, features
from .server_seam import FastLane, Peer, ServerApp
from .session import HandshakeSession, Send, act, fail

__all__ = ["DuplexServer"]

log = logging.getLogger("modelctx.server")


class DuplexServer:
    """One connection's requests, served as tasks; ``send`` writes one message."""

    def __init__(
        self,
        app: ServerApp,
        send: Send,
        principal: Any = None,
        send_now: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        """``send_now``: write one message from a callback if that needs no waiting
        (False: ``send`` it in a task)."""
        self.connection = ServerConnection()
        self.peer = Peer(self.connection, principal=principal, on_open=self._opened)
        self._app = app
        self._send = send
        self._send_now = send_now
        # An app's optional fast lane (see ``_seam.FastLane``): it takes some requests
        # without a task, and answers them through a future.
        self._fast: FastLane | None = getattr(app, "serve_fast", None)
        self._loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Future[Any]] = set()
        self._calls: set[_FastCall] = set()  # requests the fast lane holds
        # Who waits in ``room`` (the stdin reader): its limit and future, woken by the
        # request whose end brings the count under that limit.
        self._room: list[tuple[int, asyncio.Future[None]]] = []

    def _opened(self, session: HandshakeSession) -> None:
        session.outbound = self._send  # messages of no request go down the same pipe

    # -- in ------------------------------------------------------------------------------
    def receive_data(self, data: bytes) -> None:
        """Take in one frame (a line of stdio); a malformed one is answered, never raised."""
        event = self.connection.receive_data(data)
        if isinstance(event, Reject) and data.lstrip().startswith(b"[") and self._batches():
            batch = self.connection.receive_batch(data)
            if isinstance(batch, Batch):
                self._spawn(self._serve_batch(batch))
                return
            event = batch
        self._act(event)

    def _batches(self) -> bool:
        """Does this connection's session take JSON-RPC batches (2025-03-26 only)?"""
        session = self.peer.session
        return session is not None and Feature.BATCH in features(session.version)

    async def _serve_batch(self, batch: Batch) -> None:
        """Serve a batch's requests at once and send their responses as one array (the
        items' refusals among them); a request cancelled meanwhile is left out, and a
        batch of notifications only is not answered (JSON-RPC 2.0, Batch)."""
        answers: list[dict[str, Any]] = []
        running: list[asyncio.Task[dict[str, Any] | None]] = []
        for event in batch.events:
            if isinstance(event, Serve):
                task = self._loop.create_task(self._serve_one(event.inbound))
                event.inbound.handle = task
                self._tasks.add(task)
                task.add_done_callback(self._ended)
                running.append(task)
            elif isinstance(event, Reject):
                answers.append(event.response)
            else:
                act(event, self._notify)
        for outcome in await asyncio.gather(*running, return_exceptions=True):
            if isinstance(outcome, dict):
                answers.append(outcome)
            elif isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
                log.error("a batched request failed", exc_info=outcome)
        if answers:
            # A batch response is a JSON array; the writers encode any JSON value.
            await self._send(cast(dict[str, Any], answers))

    async def _serve_one(self, inbound: Inbound) -> dict[str, Any] | None:
        """``_serve`` for a request of a batch: its response is returned, not sent."""
        try:
            response = await self._app.handle(inbound.request, self.peer, self._send)
        except asyncio.CancelledError:
            self.connection.cancel(inbound)
            raise
        return self.connection.finish(inbound, response)

    def _act(self, event: Event) -> None:
        if isinstance(event, Serve):
            inbound = event.inbound
            if self._fast is not None and self._serve_fast(inbound, self._fast):
                return
            task = self._loop.create_task(self._serve(inbound))
            inbound.handle = task
            self._tasks.add(task)
            task.add_done_callback(self._ended)
        elif isinstance(event, Reject):
            self._spawn(self._send(event.response))
        else:
            act(event, self._notify)

    def _notify(self, notification: Notification) -> None:
        self._app.notify(notification, self.peer)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = self._loop.create_task(_await(work))
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if self._room:
            self._make_room()

    def _make_room(self) -> None:
        """A request ended: wake the waiters of ``room`` whose limit it is now under."""
        served = len(self._tasks) + len(self._calls)
        waiting = self._room
        for entry in list(waiting):
            limit, waiter = entry
            if served < limit:
                waiting.remove(entry)
                if not waiter.done():
                    waiter.set_result(None)

    async def _serve(self, inbound: Inbound) -> None:
        try:
            response = await self._app.handle(inbound.request, self.peer, self._send)
        except asyncio.CancelledError:
            self.connection.cancel(inbound)
            return  # cancelled: nothing more is sent for this request
        # A handler may swallow its CancelledError and return: the request was still
        # cancelled, so the connection says not to answer (cancellation.mdx).
        message = self.connection.finish(inbound, response)
        if message is not None:
            await self._send(message)

    def _serve_fast(self, inbound: Inbound, fast: FastLane) -> bool:
        """Offer ``inbound`` to the app's fast lane; True when it took it. What it took
        is held by a ``_FastCall`` (counted, drained and cancelled as the tasks are)
        and answered from the lane's callback, as ``_serve`` answers."""
        call = _FastCall(self, inbound)
        cancel = fast(inbound.request, self.peer, self._send, call.respond)
        if cancel is None:
            return False
        call.stop = cancel
        inbound.handle = call
        self._calls.add(call)
        return True

    def _answer(self, inbound: Inbound, response: dict[str, Any] | None) -> None:
        """Send the answer of a request the fast lane served (None: it was cancelled)."""
        message = self.connection.finish(inbound, response)
        if message is not None and not (self._send_now is not None and self._send_now(message)):
            self._spawn(self._send(message))

    def busy(self, limit: int) -> bool:
        """Whether ``limit`` or more requests are being served."""
        return len(self._tasks) + len(self._calls) >= limit

    def _running(self) -> list[asyncio.Future[Any]]:
        """What to wait on for the requests being served: their tasks, and a future for
        each request the fast lane holds (made only now: a call served and answered
        from callbacks needs none)."""
        running = [t for t in self._tasks if not t.done()]
        running.extend(call.ended() for call in self._calls)
        return running

    async def room(self, limit: int) -> None:
        """Wait until fewer than ``limit`` requests are being served (back-pressure:
        the caller reads no more frames until then). Constant time whatever the count:
        one future, set by the request whose end makes the room."""
        while self.busy(limit):
            waiter: asyncio.Future[None] = self._loop.create_future()
            entry = (limit, waiter)
            self._room.append(entry)
            try:
                await waiter
            finally:
                if entry in self._room:
                    self._room.remove(entry)

    # -- out -----------------------------------------------------------------------------
    async def drain(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the running requests to answer."""
        running = self._running()
        if running:
            await asyncio.wait(running, timeout=timeout)

    async def shutdown(self, grace: float) -> bool:
        """Stop: end the handshake session, cancel what still runs and wait up to
        ``grace`` seconds for it. True when everything ended; False when some handler
        ignored its cancellation (the caller may then leave without it)."""
        session = self.peer.session
        if session is not None:
            session.close()
        _, waiting = self.connection.close()
        for outbound in waiting:
            fail(outbound, ConnectionClosed("the connection closed"))
        for call in list(self._calls):
            call.cancel()  # ends at once: the lane stops its work in its ``cancel``
        running = [t for t in self._tasks if not t.done()]
        for task in running:
            task.cancel()
        if running:
            _, still = await asyncio.wait(running, timeout=grace)
            if still:
                log.warning(
                    "%d request(s) did not stop within %.1fs of being cancelled; leaving them",
                    len(still),
                    grace,
                )
                return False
        return True


class _FastCall:
    """A request the app's fast lane holds: its ``inbound.handle``, as a task is for
    the others. ``respond`` answers it (once); ``cancel`` (the peer's
    notifications/cancelled, or the shutdown) stops the lane's work and leaves it
    unanswered. Either ends it."""

    __slots__ = ("_server", "_inbound", "stop", "_ended", "_done")

    def __init__(self, server: DuplexServer, inbound: Inbound) -> None:
        self._server = server
        self._inbound = inbound
        self.stop: Callable[[], None] | None = None  # the lane's cancel
        self._ended: asyncio.Future[None] | None = None
        self._done = False

    def done(self) -> bool:
        return self._done

    def _end(self) -> None:
        self._done = True
        # The lane's cancel leads back here (through its callbacks), and so does the
        # request's handle: let go of both, and the call is freed by its last reference,
        # not left to the cyclic garbage collector (23 objects a call).
        self.stop = None
        self._inbound.handle = None
        server = self._server
        server._calls.discard(self)
        if server._room:
            server._make_room()
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(None)

    def respond(self, response: dict[str, Any] | None) -> None:
        if self._done:
            return  # cancelled meanwhile: not answered (cancellation.mdx)
        self._end()
        self._server._answer(self._inbound, response)

    def cancel(self) -> bool:
        if self._done:
            return False
        stop = self.stop
        self._end()
        self._server.connection.cancel(self._inbound)
        if stop is not None:
            stop()
        return True

    def ended(self) -> asyncio.Future[None]:
        """A future done when this call ends (for ``drain``, ``room`` and ``shutdown``)."""
        if self._ended is None:
            self._ended = self._server._loop.create_future()
            if self._done:
                self._ended.set_result(None)
        return self._ended


async def _await(work: Awaitable[None]) -> None:
    await work
