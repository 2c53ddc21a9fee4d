"""JSON-RPC batches over Streamable HTTP, for a 2025-03-26 session (``Feature.BATCH``).

``HttpApp._post`` hands a body that is a JSON array here when the exchange decided so
(``_exchange.HttpExchange.post``: the POST names a session of this process whose
revision has batches); any other array is refused there as stdio refuses it (-32600,
no ``Mcp-Session-Id``, before ``initialize``, another revision). The batch is read by the
session's ``ServerConnection.receive_batch`` (the one reader stdio uses too: an empty
or oversized batch, past ``MAX_BATCH``, is refused whole; ``initialize`` inside one is
refused alone) and answered here (transports/streamable-http.mdx of 2025-03-26):

- notifications and responses only: ``202 Accepted``, no body;
- requests among them: each is served at once, in a task of its own (cancellable by
  ``notifications/cancelled`` like a single POST's), and the responses go back together
  as one ``application/json`` array: the items' refusals first, then the responses in
  the batch's order (clients match them by id). A request cancelled meanwhile is left
  out; when nothing is left, ``202``.
- The choice for early messages: a handler that sends before the batch is done
  (progress, logging, a server-to-client request) turns the reply into SSE, as one
  request's ``_http_reply.Reply`` does: those messages go out as they come, then each response as
  an event once all are done, then the stream closes.

The requests count toward ``max_requests_per_session`` like single POSTs: a batch that
would take the session past it is refused whole (429), nothing of it run. The client
leaving cancels every request of the batch.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..errors import InternalError
from ..protocol.connection import Batch, Inbound, Reject, Serve
from ..protocol.jsonrpc import error_response
from ._asgi import ASGISend, Receive, send_empty, send_json, wait_disconnect
from ._http_reply import Reply
from .server_seam import Peer
from .session import HandshakeSession, act

if TYPE_CHECKING:
    from .http import HttpApp

__all__ = ["serve_batch"]

log = logging.getLogger("modelctx.server")


async def serve_batch(
    app: HttpApp, session: HandshakeSession, body: bytes, receive: Receive, send: ASGISend, principal: Any
) -> None:
    """Serve ``body``, a JSON array, as a batch of ``session`` (the exchange checked
    that the POST names it and that its revision has batches, ``_exchange.ServeBatch``)."""
    connection = session.connection
    before = len(connection.inflight)
    batch = connection.receive_batch(body)
    if isinstance(batch, Reject):
        await send_json(send, 400, batch.response)
        return
    serves = [event.inbound for event in batch.events if isinstance(event, Serve)]
    if serves and before + len(serves) > app.max_requests_per_session:
        for inbound in serves:
            connection.cancel(inbound)
        error = InternalError(
            f"Too many requests in flight: this batch of {len(serves)} requests would take the session "
            f"past {app.max_requests_per_session} running at once; wait for some to finish, or send "
            "a smaller batch"
        )
        await send_json(send, 429, error_response(None, error), [(b"retry-after", b"1")])
        return
    await _BatchReply(app, session, principal, send).serve(batch, receive)


class _BatchReply:
    """The reply to one batch: a JSON array, or SSE once a handler sends early."""

    def __init__(self, app: HttpApp, session: HandshakeSession, principal: Any, send: ASGISend) -> None:
        self._app = app
        self._session = session
        self._peer = Peer(None, session, principal, on_open=app._opened)
        self._stream = Reply(send)
        self._send = send
        self._lock = asyncio.Lock()  # one writer at a time while the SSE starts

    async def _event(self, message: dict[str, Any]) -> None:
        async with self._lock:
            await self._stream.event(message)

    async def serve(self, batch: Batch, receive: Receive) -> None:
        answers: list[dict[str, Any]] = []
        tasks: list[asyncio.Task[dict[str, Any] | None]] = []
        loop = asyncio.get_running_loop()
        for event in batch.events:
            if isinstance(event, Serve):
                task = loop.create_task(self._serve_one(event.inbound))
                event.inbound.handle = task  # notifications/cancelled cancels it
                tasks.append(task)
            elif isinstance(event, Reject):
                answers.append(event.response)
            else:  # notifications (a cancellation among them), answers to our requests
                act(event, lambda note: self._app.server.notify(note, self._peer))
        watcher = loop.create_task(wait_disconnect(receive))
        gone = False
        try:
            if tasks:
                running = asyncio.gather(*tasks, return_exceptions=True)
                either: list[asyncio.Future[Any]] = [running, watcher]
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                if not running.done():  # the client left: nobody reads the answers
                    gone = True
                    for task in tasks:
                        task.cancel()
                outcomes = await running
            else:
                outcomes = []
        except asyncio.CancelledError:  # the server stops: the requests stop with it
            for task in tasks:
                task.cancel()
            raise
        finally:
            watcher.cancel()
        if gone:
            return
        for outcome in outcomes:
            if isinstance(outcome, dict):
                answers.append(outcome)
            elif isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
                log.error("a batched request failed", exc_info=outcome)
        if self._stream.started:
            for answer in answers:
                await self._event(answer)
            async with self._lock:
                await self._stream.finish(None)
        elif answers:
            # A batch response is a JSON array; send_json encodes any JSON value.
            await send_json(self._send, 200, answers)  # type: ignore[arg-type]
        else:
            await send_empty(self._send, 202)

    async def _serve_one(self, inbound: Inbound) -> dict[str, Any] | None:
        """One request of the batch: its response, None when it was cancelled."""
        connection = self._session.connection
        try:
            response = await self._app.server.handle(inbound.request, self._peer, self._event, None)
        except asyncio.CancelledError:
            connection.cancel(inbound)
            raise
        return connection.finish(inbound, response)

