"""The HTTP+SSE transport of 2024-11-05, server side: deprecated, served for the installed base.

2024-11-05 basic/transports, "HTTP with SSE"; the official python SDK's
``mcp/server/sse.py`` is the reference behaviour this follows:

1. ``GET /sse`` opens an event stream. Its first event is ``endpoint``, whose data is
   the URI (relative to the server) the client POSTs every message to:
   ``/messages/?session_id=<id>``. Every message of the server (responses,
   notifications, server-to-client requests) follows as an event ``message`` whose
   data is the JSON.
2. ``POST /messages/?session_id=<id>`` carries one JSON-RPC message (or, on a
   2025-03-26 session, a batch) of that session: ``202 Accepted`` once it is handed
   over; what it asks is answered on the stream.

The conversation of one stream is a duplex connection, as a stdio pipe is: the stream
is the pipe out, the POSTs the pipe in. So each stream is served by a ``DuplexServer``
(``_duplex.py``, the one that serves stdio) over its own ``ServerConnection``:
``initialize`` opens a handshake session on it and negotiates through the era table as
on stdio, requests run as tasks, ``notifications/cancelled`` cancels them, and
server-to-client requests are matched by id. The stream closing ends it all: the
session closes, its running requests are cancelled (``DuplexServer.shutdown``) and
nothing of it is left.

Choices, each where the official SDK leaves room:

- A POST whose body is not a JSON-RPC message gets 400 with the JSON-RPC error as its
  body (-32700 for malformed JSON, -32600 for JSON that is not a message), and nothing
  on the stream: the official SDK answers 400 ("Could not parse message") too, and
  nothing it sends on the stream names the failure.
- No ``session_id``, an empty one, one sent twice, or one not of the shape this server
  issues: 400; unknown, ended, or another principal's: 404 (a session id is
  a handle bound to its user, so a stranger's is not confirmed to exist).
- A slow reader: each stream has a queue of ``QUEUE_EVENTS`` encoded events. A handler
  sending when it is full waits for room (back-pressure, as a full pipe holds a stdio
  server); a reader that makes no room within ``slow_reader_seconds`` has its stream
  ended and its session closed, so a peer that stops reading holds at most the queue,
  one waiting message per running request (at most ``max_requests`` of them: past it a
  request POST gets 429) and uvicorn's write buffer.
- Limits: the streams are a table of their own, bounded by ``max_sessions`` and, with
  authentication, ``per_principal`` (the same numbers as the Streamable HTTP sessions):
  an open stream is a live client, so none is evicted; past a bound the GET gets 503
  (the table) or 429 (the principal's quota) with ``Retry-After``. A stream holds its
  session as long as it is open (keep-alive comments every ``KEEPALIVE_SECONDS``, as
  on Streamable HTTP), so there is no idle expiry to wait for: its end is the
  session's end.

Worker processes (``serve_http(workers=N)`` without Redis): a stream's session id names
the worker serving it (``Siblings.name``), and ``holder`` tells ``HttpApp`` which worker
a POST belongs to, so it is relayed there as a Streamable HTTP request is.

Replicas sharing a Redis (``ServerConfig.redis_url``; worker processes with one too): the
stream stays with the replica serving its GET, and that replica keeps a record of it in
Redis (``RedisSessionStore.hold_sse``: the principal's digest, renewed while the stream
is open, gone ``_RECORD_SECONDS`` after its replica is). A POST reaching another replica
is checked there against that record (unknown or another principal's: 404), read and
parsed there (413, 408, 400 as at home), then forwarded on the sessions channel
(``forward_sse``) and answered 202; the holder feeds it to the stream's connection
(``forwarded``). Only the holder counts a session's running requests, so a forwarded
request past ``max_requests`` is refused on the stream (the JSON-RPC error the 429
would carry) instead of with a 429.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, quote

from ..errors import InternalError, InvalidRequest, ProtocolError
from ..protocol.framing import SSE_KEEPALIVE, sse_event
from ..protocol.jsonrpc import Message, Notification, Request, decode, encode, error_response
from ..protocol.versions import Feature, features
from ._asgi import (
    KEEPALIVE_SECONDS,
    SSE_HEADERS,
    ASGISend,
    Receive,
    Scope,
    app_path,
    is_json_type,
    send_empty,
    send_json,
    wait_disconnect,
)
from ._duplex import DuplexServer
from ._redis_sessions import RedisSessionStore, SessionStoreUnavailable, principal_digest
from ._siblings import Siblings
from .identity import principal_key
from .server_seam import ServerApp

__all__ = ["MESSAGES_PATH", "QUEUE_EVENTS", "SSE_PATH", "LegacySse"]

log = logging.getLogger("modelctx.http")

SSE_PATH = "/sse"
MESSAGES_PATH = "/messages"
QUEUE_EVENTS = 256  # encoded events waiting for a slow reader, per stream
_SHUTDOWN_GRACE = 2.0  # seconds a closed stream's cancelled requests get to stop
# Seconds a stream's record in Redis outlives its last renewal (every third of it): a
# replica that died takes its streams' records with it within this time.
_RECORD_SECONDS = 3 * KEEPALIVE_SECONDS

# What ``stream`` issues: 32 hex digits, named after their worker with ``--workers``.
_SESSION_ID = re.compile(r"(?:w[0-9]{1,4}-)?[0-9a-f]{32}")

ReadBody = Callable[[], Awaitable[bytes | None]]


class _Stream:
    """One ``GET /sse``: its queue of events and the duplex connection its POSTs feed."""

    __slots__ = ("id", "principal", "duplex", "queue", "ended", "send")

    def __init__(self, stream_id: str, principal: Any) -> None:
        self.id = stream_id
        self.principal = principal
        self.duplex: DuplexServer | None = None
        self.send: Callable[[dict[str, Any]], Awaitable[None]] | None = None  # onto the queue
        self.queue: asyncio.Queue[bytes] = asyncio.Queue(QUEUE_EVENTS)
        self.ended = asyncio.get_running_loop().create_future()  # set: end the stream now

    def end(self) -> None:
        if not self.ended.done():
            self.ended.set_result(None)


class LegacySse:
    """The HTTP+SSE endpoints of one ``HttpApp``: ``stream`` serves ``GET /sse``,
    ``message`` serves ``POST /messages``. The app checks Host, Origin and the
    principal before either (and relays a POST of another worker's stream there)."""

    def __init__(
        self,
        server: ServerApp,
        *,
        max_sessions: int,
        per_principal: int | None,
        max_requests: int,
        slow_reader_seconds: float,
        siblings: Siblings | None = None,
        store: RedisSessionStore | None = None,
    ) -> None:
        self.server = server
        self.max_sessions = max_sessions
        self.per_principal = per_principal
        self.max_requests = max_requests
        self.slow_reader_seconds = slow_reader_seconds
        self._siblings = siblings
        self._store = store
        self._streams: dict[str, _Stream] = {}
        self._owned: dict[str | None, int] = {}  # open streams per principal key
        self._refusals: set[asyncio.Future[None]] = set()  # sending, held till sent

    def __len__(self) -> int:
        return len(self._streams)

    @staticmethod
    def serves(path: str) -> bool:
        return path in (SSE_PATH, MESSAGES_PATH)

    def holder(self, scope: Scope) -> int | None:
        """The other worker whose stream a POST names (None: this one's, or none)."""
        if self._siblings is None or scope["method"] != "POST":
            return None
        session_id = _session_id(scope)
        return self._siblings.holder(session_id) if isinstance(session_id, str) else None

    async def serve(
        self, scope: Scope, receive: Receive, send: ASGISend, principal: Any, read_body: ReadBody,
        headers: dict[str, str],
    ) -> None:
        path = app_path(scope)
        method = scope["method"]
        if path == SSE_PATH and method == "GET":
            await self.stream(scope, receive, send, principal)
        elif path == MESSAGES_PATH and method == "POST":
            await self.message(scope, headers, send, principal, read_body)
        else:
            allow = b"GET" if path == SSE_PATH else b"POST"
            error = InvalidRequest(f"Method Not Allowed: {path} answers {allow.decode()} only (HTTP+SSE transport)")
            await send_json(send, 405, error_response(None, error), [(b"allow", allow)])

    # -- GET /sse ----------------------------------------------------------------------
    async def stream(self, scope: Scope, receive: Receive, send: ASGISend, principal: Any) -> None:
        """The event stream of a new session, until the client or the server ends it."""
        refused = self._admit(principal)
        if refused is not None:
            status, error = refused
            await send_json(send, status, error_response(None, error), [(b"retry-after", b"1")])
            return
        stream_id = secrets.token_hex(16)
        if self._siblings is not None and self._siblings.slot is not None:
            stream_id = self._siblings.name(stream_id)  # names this worker, for the others
        stream = _Stream(stream_id, principal)
        key = principal_key(principal)
        # Counted before anything is awaited, so GETs side by side cannot pass the caps.
        self._streams[stream_id] = stream
        self._owned[key] = self._owned.get(key, 0) + 1
        renewing: asyncio.Task[None] | None = None
        complete = False
        try:
            if self._store is not None:  # so other replicas find it (their POSTs come here)
                await self._store.hold_sse(stream_id, principal, _RECORD_SECONDS)
                renewing = asyncio.ensure_future(_renew(self._store, stream_id, principal))
            stream.send = self._sender(stream)
            stream.duplex = DuplexServer(self.server, stream.send, principal)
            # Relative to the server, as the official SDK names it (under the app's root_path).
            endpoint = f"{quote(scope.get('root_path', '').rstrip('/') + MESSAGES_PATH)}/?session_id={stream_id}"
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await send({
                "type": "http.response.body", "body": sse_event(endpoint.encode(), b"endpoint"), "more_body": True,
            })  # fmt: skip
            complete = await self._pump(stream, receive, send)
        except SessionStoreUnavailable as down:
            await _refuse(send, 503, None, InternalError(str(down)), [(b"retry-after", b"1")])
        except OSError:
            pass  # the client went first
        finally:
            self._uncount(stream_id, key)
            stream.end()
            if stream.duplex is not None:
                await stream.duplex.shutdown(_SHUTDOWN_GRACE)
            if renewing is not None and self._store is not None:
                renewing.cancel()
                with contextlib.suppress(SessionStoreUnavailable):
                    await self._store.release_sse(stream_id)
        if complete:
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(self.slow_reader_seconds):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        # Else the response is left unfinished: the server closes the connection (a
        # reader too slow for its last event would not read the end either).

    def _uncount(self, stream_id: str, key: str | None) -> None:
        """A stream ended: it no longer counts against the caps ``_admit`` checks."""
        del self._streams[stream_id]
        left = self._owned[key] - 1
        if left:
            self._owned[key] = left
        else:
            del self._owned[key]

    def _admit(self, principal: Any) -> tuple[int, InternalError] | None:
        if self.per_principal is not None and self._owned.get(principal_key(principal), 0) >= self.per_principal:
            return 429, InternalError(
                f"Too many event streams: this principal already holds {self.per_principal} "
                "(HTTP+SSE sessions); close one, then GET again; or use Streamable HTTP"
            )
        if len(self._streams) >= self.max_sessions:
            return 503, InternalError(
                f"Server busy: all {self.max_sessions} HTTP+SSE sessions are open; GET again later"
            )
        return None

    def _sender(self, stream: _Stream) -> Callable[[dict[str, Any]], Awaitable[None]]:
        async def to_client(message: dict[str, Any]) -> None:
            if stream.ended.done():
                return  # the stream is over: nothing more goes to it
            event = sse_event(encode(message))
            try:
                stream.queue.put_nowait(event)
                return
            except asyncio.QueueFull:
                pass
            try:
                async with asyncio.timeout(self.slow_reader_seconds):
                    await stream.queue.put(event)
            except TimeoutError:
                log.warning(
                    "HTTP+SSE session %s: the client read nothing for %gs with %d events waiting; "
                    "its stream is ended", stream.id, self.slow_reader_seconds, QUEUE_EVENTS,
                )
                stream.end()

        return to_client

    async def _pump(self, stream: _Stream, receive: Receive, send: ASGISend) -> bool:
        """Write the stream's events as they come, a keep-alive comment after a quiet
        ``KEEPALIVE_SECONDS``, until the client leaves or the stream is ended. False
        when a write did not complete within ``slow_reader_seconds`` (the client reads
        too slowly, or not at all)."""
        gone = asyncio.ensure_future(wait_disconnect(receive))
        try:
            while True:
                getter = asyncio.ensure_future(stream.queue.get())
                done, _ = await asyncio.wait(
                    (getter, gone, stream.ended), timeout=KEEPALIVE_SECONDS, return_when=asyncio.FIRST_COMPLETED
                )
                if getter in done:
                    body = getter.result()
                else:
                    getter.cancel()
                    if done:
                        return True  # the client left, or the stream was ended
                    body = SSE_KEEPALIVE
                try:
                    async with asyncio.timeout(self.slow_reader_seconds):
                        await send({"type": "http.response.body", "body": body, "more_body": True})
                except TimeoutError:
                    log.warning(
                        "HTTP+SSE session %s: the client took no event for %gs; its stream is ended",
                        stream.id, self.slow_reader_seconds,
                    )
                    return False
        finally:
            gone.cancel()

    # -- POST /messages ----------------------------------------------------------------
    async def message(
        self, scope: Scope, headers: dict[str, str], send: ASGISend, principal: Any, read_body: ReadBody
    ) -> None:
        """Hand one message to its stream's session: 202, or a refusal with a JSON-RPC error."""
        session_id = _session_id(scope)
        if not isinstance(session_id, str):
            await _refuse(send, 400, None, session_id)
            return
        stream = self._streams.get(session_id)
        held = stream is not None and not stream.ended.done()
        if stream is not None and principal_key(stream.principal) != principal_key(principal):
            held = False  # another principal's: as good as unknown
        elif stream is None and self._store is not None:
            try:  # held by another replica?
                held = await self._store.sse_principal(session_id) == principal_digest(principal)
            except SessionStoreUnavailable as down:
                await _refuse(send, 503, None, InternalError(str(down)), [(b"retry-after", b"1")])
                return
        if not held:
            await _refuse(
                send, 404, None,
                InvalidRequest("Session not found: it ended with its event stream; GET /sse again for a new one"),
            )
            return
        body = await read_body()
        if body is None:
            return  # refused (413, 408)
        content_type = headers.get("content-type")
        if content_type is not None and not is_json_type(content_type):
            refusal = InvalidRequest(f"Content-Type must be application/json, not {content_type!r}")
            await _refuse(send, 415, None, refusal)
            return
        duplex = stream.duplex if stream is not None else None
        try:
            message = _decoded(body, duplex)
        except ProtocolError as exc:
            await _refuse(send, 400, exc.request_id, exc)
            return
        if duplex is None:
            await self._forward(send, session_id, body, message)
        elif type(message) is Request and duplex.busy(self.max_requests):
            await _refuse(send, 429, message.id, self._too_many(), [(b"retry-after", b"1")])
        else:
            duplex.receive_data(body)
            await send_empty(send, 202)

    async def _forward(self, send: ASGISend, session_id: str, body: bytes, message: Message | None) -> None:
        """Hand a POST for another replica's session to it, through the store: 202, or
        503 when the store is down."""
        assert self._store is not None
        try:
            await self._store.forward_sse(session_id, body)
        except SessionStoreUnavailable as down:
            await _refuse(send, 503, _id_of(message), InternalError(str(down)), [(b"retry-after", b"1")])
            return
        await send_empty(send, 202)

    def _too_many(self) -> InternalError:
        return InternalError(
            f"Too many requests in flight: this session already runs {self.max_requests}; "
            "wait for some to finish (or cancel them), then send this one again"
        )

    def forwarded(self, note: dict[str, Any]) -> None:
        """A POST another replica checked and forwarded (``RedisSessionStore.forward_sse``)
        for a stream held here; dropped when the stream has ended meanwhile."""
        stream = self._streams.get(note.get("session") or "")
        body = note.get("message")
        if stream is None or stream.ended.done() or stream.duplex is None or not isinstance(body, str):
            log.debug("HTTP+SSE session %s: a forwarded message for a stream not held here; dropped", note.get("session"))
            return
        data = body.encode()
        if stream.duplex.busy(self.max_requests) and stream.send is not None:
            with contextlib.suppress(ProtocolError):
                message = decode(data)
                if type(message) is Request:  # refused on the stream, as the 429 says at home
                    refusal = error_response(message.id, self._too_many())
                    sending = asyncio.ensure_future(stream.send(refusal))
                    self._refusals.add(sending)
                    sending.add_done_callback(self._refusals.discard)
                    return
        stream.duplex.receive_data(data)

    def close(self) -> None:
        """End every stream (the server stops); each GET then closes its session."""
        for stream in list(self._streams.values()):
            stream.end()


async def _renew(store: RedisSessionStore, stream_id: str, principal: Any) -> None:
    """Keep the record of a stream held here alive while it is open."""
    while True:
        await asyncio.sleep(_RECORD_SECONDS / 3)
        try:
            await store.hold_sse(stream_id, principal, _RECORD_SECONDS)
        except SessionStoreUnavailable as down:
            log.warning("HTTP+SSE session %s: its record was not renewed: %s", stream_id, down)


def _id_of(message: Message | None) -> str | int | None:
    return None if message is None or isinstance(message, Notification) else message.id


def _session_id(scope: Scope) -> str | InvalidRequest:
    """The ``session_id`` a POST names, in the shape ``stream`` issues; else why it is
    refused (400): none (or empty), sent more than once (even with one value: which of
    two would a relay, a replica and this worker each read?), or not of that shape,
    which no lookup (nor Redis key) is spent on."""
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_id")
    if not values:
        return InvalidRequest("session_id is required: POST to the URI the stream's endpoint event named")
    if len(values) > 1:
        return InvalidRequest(
            "session_id was sent more than once; send it once, as the URI the stream's endpoint event named"
        )
    session_id: str = values[0]
    if _SESSION_ID.fullmatch(session_id) is None:
        return InvalidRequest(
            "session_id is not a session id this server issues: POST to the URI the stream's endpoint event named"
        )
    return session_id


def _decoded(body: bytes, duplex: DuplexServer | None) -> Message | None:
    """The POSTed message; None for a batch, which a 2025-03-26 session takes: its
    connection reads them (and answers their faults on the stream). Another replica's
    session may be one. Raises the ``ProtocolError`` of a body that is neither."""
    try:
        return decode(body)
    except ProtocolError:
        if body.lstrip().startswith(b"[") and (duplex is None or _batches(duplex)):
            return None
        raise


def _batches(duplex: DuplexServer) -> bool:
    session = duplex.peer.session
    return session is not None and Feature.BATCH in features(session.version)


async def _refuse(
    send: ASGISend, status: int, request_id: str | int | None, error: ProtocolError,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    with contextlib.suppress(OSError):  # the client may be gone already
        await send_json(send, status, error_response(request_id, error), extra)
