"""Streamable HTTP, client side: one ``ClientTransport`` over ``_http11``.

basic/transports/streamable-http.mdx (2026-07-28) and, for handshake-era sessions,
the 2025-11-25 transport page (DIGEST §2.6, §9.3).

Theory of operation. Every message is its own POST. A request's POST runs in its
own task, so ``send`` returns at once; whatever comes back (one JSON body, or an SSE
stream of notifications ending with the response) goes to ``events.message``. When
no response to the request arrives, the task reports ``events.request_failed`` with
a local error that says why: ``HttpStatusError`` (a status and no JSON-RPC body),
``SessionExpired`` (404 on a handshake-era session), ``ConnectionClosed`` (the
network failed, or the stream ended early), or ``ParseError`` (its reply could not be
read: nested too deeply, larger than ``max_message``; an SSE event past that bound
also drops its stream). An unreadable message that answers nothing is logged and
skipped, and the messages after it are delivered. Cancelling a request cancels its task,
which closes its response stream: that is the cancellation of 2026-07-28.

The handshake era adds what 2026-07-28 removed, and only for messages the session
marks ``handshake``: the ``Mcp-Session-Id`` the ``initialize`` response assigns (sent
back on every later message, and ended with DELETE on ``close``); the standalone GET
stream for server messages, opened after ``notifications/initialized``; SSE
resumption (a stream that ends early is resumed with GET and ``Last-Event-ID`` after
the server's ``retry`` delay); and ``notifications/cancelled`` on cancel.

A server that offers only the HTTP+SSE transport of 2024-11-05 (``GET /sse`` for an
event stream whose first event names the URI to POST to) is found as the 2025-03-26
and later transports pages say (Backwards Compatibility): the first POST is answered
400, 404 or 405 with no JSON-RPC response, so the URL is tried with GET; an event
stream whose first event is ``endpoint`` makes this an HTTP+SSE session, carried by
``_legacy_sse_client`` from then on (``transport="sse"`` skips the question, and
``"streamable"`` never asks it). The POST that found it was a ``server/discover`` (the
client's era probe) or an ``initialize``: discover fails with the status it got, which
sends the client to ``initialize``; an ``initialize`` is sent again over the session.
Such a session carries the handshake era only (``handshake_only``).

One way to carry every HTTP request: ``_http_requests.Http11Client``, a lean HTTP/1.1
client on pools of keep-alive asyncio connections, parsed by ``httptools``. POSTs,
the GET streams and DELETE all go through it, over ``http://`` or ``https://``,
following redirects as httpx and browsers do, through an ``http://`` proxy named in
the environment. (httpx, even on a lean transport of its own, cost 2.3x the CPU per
call; see the ``_http11`` module doc.)
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

import msgspec

from ..errors import (
    ConnectionClosed,
    HttpStatusError,
    LocalError,
    MCPError,
    ParseError,
    ProtocolError,
    RequestLost,
    SessionExpired,
)
from ..protocol.framing import EventTooLarge, SSEParser, response_id
from ..protocol.jsonrpc import Message, decode, encode, from_object
from ..protocol.jsonrpc import Response as JsonRpcResponse
from ._http11 import HttpError, Response
from ._http_requests import Http11Client, hide_password
from ._legacy_sse_client import LegacySseSession
from ._url_guard import UrlPolicy
from .auth_seam import AuthHook, HttpAuth
from .client_seam import ClientTransport, Outgoing, TransportEvents

__all__ = ["HttpAuth", "HttpClientTransport", "HttpStatusError", "SessionExpired"]

log = logging.getLogger("modelctx.client.http")

_ACCEPT_BOTH = "application/json, text/event-stream"
_SSE = "text/event-stream"
_MAX_MESSAGE = 16 * 1024 * 1024  # default bound of one JSON reply or one SSE event
_EXCERPT = 200  # characters of an error body quoted in messages
_DEFAULT_RETRY_MS = 1000  # SSE reconnection time when the server names none
_RESUME_MISSES = 3  # resumption attempts in a row that bring nothing, before giving up
_TRY_AGAIN = frozenset({502, 503, 504})  # a resumption GET answered so is tried again (a miss)
_LISTEN_BACKOFF_MAX = 30.0
_CLOSE_WAIT = 2.0  # seconds close() and cancel() wait for tasks and for DELETE
_LISTEN_OPEN_WAIT = 1.0  # seconds send(notifications/initialized) waits for the GET stream to open
_KEEP_ALIVE = 32  # idle keep-alive connections kept per host
_USER_AGENT = "modelctx"
# A first POST answered so, with no JSON-RPC response, may have reached an HTTP+SSE
# server's stream URL: GET it (2025-03-26 transports, Backwards Compatibility).
_LEGACY_HINTS = frozenset({400, 404, 405})
_TRANSPORTS = ("auto", "streamable", "sse")


class _Exchange:
    """One request in flight: its POST task and what its errors need to say."""

    __slots__ = ("id", "handshake", "method", "session_id", "task")

    def __init__(
        self, request_id: str | int, method: str, handshake: bool, session_id: str | None
    ) -> None:
        self.id = request_id
        self.method = method
        self.handshake = handshake
        self.session_id = session_id
        self.task: asyncio.Task[None] | None = None

    @property
    def what(self) -> str:
        return f"{self.method} (request id {self.id!r})"


class HttpClientTransport(ClientTransport):
    """The client side of Streamable HTTP to the MCP endpoint ``url``.

    ``headers`` go on every HTTP request. ``auth`` adds more before each one: an
    ``HttpAuth`` (e.g. ``modelctx.auth.OAuthClientProvider``), which also gets each 401
    or 403 and may have the request sent once more, or an async callable returning
    headers (e.g. ``Authorization``).
    ``connect_timeout`` bounds connecting, and whole exchanges that expect no body
    (notifications, DELETE); ``sse_read_timeout`` bounds silence while waiting for
    a reply or reading a stream (our servers send keep-alives every 15 s; an HTTP+SSE
    stream silent for longer ends its session).
    ``max_message`` bounds the bytes of one JSON reply or one SSE event: a larger one
    fails its request with ``ParseError`` and is never buffered whole.
    ``url_policy`` is the SSRF guard on redirects (``modelctx.client.UrlPolicy``): a
    redirect may lead back into the zones of ``url``'s own addresses (a loopback URL to
    loopback) and elsewhere only where the policy admits; a refused one fails its
    request before anything connects there. ``None`` follows every redirect.
    ``transport``: "auto" (Streamable HTTP, or the HTTP+SSE transport of 2024-11-05 when
    the first POST says the URL is not a Streamable HTTP endpoint: see the module doc),
    "streamable" (never ask) or "sse" (the HTTP+SSE transport only: ``url`` is the
    stream's, e.g. ``http://127.0.0.1:8000/sse``).
    """

    kind = "http"

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        auth: HttpAuth | AuthHook | None = None,
        connect_timeout: float = 10.0,
        sse_read_timeout: float = 300.0,
        max_message: int = _MAX_MESSAGE,
        url_policy: UrlPolicy | None = UrlPolicy(),  # noqa: B008 - frozen, shared safely
        transport: Literal["auto", "streamable", "sse"] = "auto",
    ) -> None:
        if transport not in _TRANSPORTS:
            raise ValueError(
                f"transport must be 'auto' (find out), 'streamable' (Streamable HTTP) or 'sse' "
                f"(the older HTTP+SSE transport, a GET stream and an endpoint to POST to), not {transport!r}"
            )
        self.url = url
        self._url_policy = url_policy
        self.name = f"HTTP server {hide_password(url)}"  # in every error and log line
        # Lower-case names, so ours (and the session's) replace a user's, never duplicate.
        self._headers = {k.lower(): v for k, v in (headers or {}).items()}
        # Decided once: isinstance on a runtime-checkable Protocol walks its members
        # (3-7 us), and _base_headers runs before every HTTP request.
        self._auth: HttpAuth | None = None
        self._auth_hook: AuthHook | None = None
        if isinstance(auth, HttpAuth):
            self._auth = auth
        elif auth is not None:
            self._auth_hook = auth
        self._http: Http11Client | None = None
        self._connect_timeout = connect_timeout
        self._read_timeout = sse_read_timeout
        self._max_message = max_message
        self._events: TransportEvents | None = None
        # "streamable", "sse", or None until the first POST's answer decides.
        self._wire: str | None = None if transport == "auto" else transport
        self._detection: asyncio.Task[bool] | None = None
        self._legacy: LegacySseSession | None = None
        self._legacy_initialize: str | int | None = None  # never cancelled on the wire
        self._closed = False
        self._session_id: str | None = None
        self._handshake_version: str | None = None  # MCP-Protocol-Version of the session
        self._authorization: str | None = self._headers.get("authorization")
        self._exchanges: dict[str | int, _Exchange] = {}
        self._listener: asyncio.Task[None] | None = None

    # -- ClientTransport -----------------------------------------------------------------
    async def connect(self, events: TransportEvents) -> None:
        """Prepare the HTTP client; no request is made (a dead server shows on the first send)."""
        if self._closed:
            raise ConnectionClosed(f"{self.name}: the transport is closed; make a new one")
        self._events = events
        if self._http is None:
            defaults = {"user-agent": _USER_AGENT, "accept-encoding": "gzip, deflate"}
            self._http = Http11Client(max_idle=_KEEP_ALIVE, default_headers=defaults, url_policy=self._url_policy)

    async def send(self, outgoing: Outgoing) -> None:
        if self._closed or self._events is None or self._http is None:
            state = "closed" if self._closed else "not connected (call connect first)"
            raise ConnectionClosed(f"{self.name}: the transport is {state}")
        if self._wire == "sse":
            await self._send_legacy(outgoing)
            return
        message = outgoing.message
        if outgoing.handshake and "mcp-protocol-version" in outgoing.headers:
            self._handshake_version = outgoing.headers["mcp-protocol-version"]
        request_id = outgoing.request_id if outgoing.request_id is not None else message.get("id")
        method = message.get("method")
        if method is None or request_id is None:
            # A notification, or a response to a handshake-era server request.
            ok = await self._post_quiet(outgoing)
            if ok and outgoing.handshake and method == "notifications/initialized":
                opened = self._start_listener()
                # Let the GET stream open before the session's next message, so what the
                # server sends from then on (even a reply it chooses to route there) has
                # somewhere to go; bounded, for a server slow to answer a GET.
                if opened is not None:
                    try:
                        await asyncio.wait_for(opened.wait(), _LISTEN_OPEN_WAIT)
                    except TimeoutError:
                        pass
            return
        body = encode(outgoing.message)  # here, so what JSON cannot carry fails the send itself
        exchange = _Exchange(request_id, method, outgoing.handshake, self._session_for(outgoing))
        previous = self._exchanges.get(request_id)
        if previous is not None and previous.task is not None:
            previous.task.cancel()
        self._exchanges[request_id] = exchange
        exchange.task = asyncio.get_running_loop().create_task(self._exchange(exchange, outgoing, body))

    async def cancel(self, request_id: str | int, reason: str | None = None) -> None:
        """Close the request's stream; on a handshake-era session also send
        ``notifications/cancelled`` (2025-11-25 cancellation; never for initialize)."""
        if self._wire == "sse":
            await self._cancel_legacy(request_id, reason)
            return
        exchange = self._exchanges.pop(request_id, None)
        if exchange is not None and exchange.task is not None:
            exchange.task.cancel()
            await asyncio.wait({exchange.task}, timeout=_CLOSE_WAIT)
        handshake = exchange.handshake if exchange is not None else self._session_id is not None
        if self._closed or not handshake or (exchange is not None and exchange.method == "initialize"):
            return
        params: dict[str, Any] = {"requestId": request_id}
        if reason:
            params["reason"] = reason
        headers = {"mcp-protocol-version": self._handshake_version} if self._handshake_version else {}
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        await self._post_quiet(Outgoing(note, headers, handshake=True))

    async def close(self) -> None:
        """Cancel everything in flight, end the handshake session with DELETE, close."""
        if self._closed:
            return
        self._closed = True
        tasks: list[asyncio.Task[Any]] = [e.task for e in self._exchanges.values() if e.task is not None]
        if self._events is not None:
            for exchange in self._exchanges.values():
                gone = ConnectionClosed(f"{self.name}: the transport was closed during {exchange.what}")
                self._events.request_failed(exchange.id, gone)
        self._exchanges.clear()
        if self._listener is not None:
            tasks.append(self._listener)
            self._listener = None
        if self._detection is not None:
            tasks.append(self._detection)
        legacy, self._legacy = self._legacy, None
        if legacy is not None:
            await legacy.close()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_CLOSE_WAIT)
        session_id = self._session_id
        self._session_id = None
        if self._http is not None and session_id is not None:
            await self._delete_session(session_id)
        if self._http is not None:
            self._http.close()
        self._http = None

    def end_handshake_session(self) -> None:
        legacy = self._legacy
        if legacy is not None and not legacy.fresh:
            # The stream is the session: the next initialize opens a new one.
            self._legacy = None
            legacy.abandon()
        self._session_id = None
        if self._listener is not None:
            self._listener.cancel()
            self._listener = None

    @property
    def credential_key(self) -> str | None:
        """A digest of the ``Authorization`` header in use (never the header itself)."""
        if not self._authorization:
            return None
        return hashlib.sha256(self._authorization.encode()).hexdigest()[:32]

    @property
    def handshake_only(self) -> bool:
        """True once this is an HTTP+SSE session (pinned, or found by the first POST)."""
        return self._wire == "sse"

    @property
    def session_id(self) -> str | None:
        """The handshake-era ``Mcp-Session-Id``, if the server assigned one."""
        return self._session_id

    # -- headers ---------------------------------------------------------------------------
    async def _base_headers(self, method: str = "POST") -> dict[str, str]:
        headers = dict(self._headers)
        if self._auth is not None:
            headers.update((k.lower(), v) for k, v in (await self._auth.headers(method, self.url)).items())
            self._authorization = headers.get("authorization")
        elif self._auth_hook is not None:
            headers.update((k.lower(), v) for k, v in (await self._auth_hook()).items())
            self._authorization = headers.get("authorization")
        return headers

    async def _challenged(self, response: Response, method: str) -> bool:
        """A 401 or 403 the auth object may answer: True to send the request once more."""
        if response.status_code not in (401, 403) or self._auth is None:
            return False
        return await self._auth.challenged(response.status_code, response.headers, method, self.url)

    def _session_for(self, outgoing: Outgoing) -> str | None:
        # initialize starts a new session, so it never carries an old one.
        if not outgoing.handshake or outgoing.message.get("method") == "initialize":
            return None
        return self._session_id

    async def _post_headers(self, outgoing: Outgoing, session_id: str | None) -> dict[str, str]:
        headers = await self._base_headers()
        headers.update(outgoing.headers)
        headers["content-type"] = "application/json"
        headers["accept"] = _ACCEPT_BOTH
        if session_id is not None:
            headers["mcp-session-id"] = session_id
        return headers

    async def _get(self, session_id: str | None, last_id: str | None) -> Any:
        """An unopened GET stream (``async with`` it) for a handshake session."""
        headers = await self._get_headers(session_id, last_id)
        return self._open("GET", headers, b"", quick=False)

    async def _get_headers(self, session_id: str | None, last_id: str | None) -> dict[str, str]:
        headers = await self._base_headers("GET")
        headers["accept"] = _SSE
        if session_id is not None:
            headers["mcp-session-id"] = session_id
        if self._handshake_version is not None:
            headers["mcp-protocol-version"] = self._handshake_version
        if last_id is not None:
            headers["last-event-id"] = last_id
        return headers

    # -- POST ------------------------------------------------------------------------------
    def _post(self, body: bytes, headers: dict[str, str], *, quick: bool) -> _Opened:
        """An unopened POST (``async with`` it, for the response)."""
        return self._open("POST", headers, body, quick=quick)

    def _open(
        self, method: str, headers: dict[str, str], body: bytes, *, quick: bool, url: str | None = None
    ) -> _Opened:
        # quick: an exchange that expects no body (202) is bounded as a whole by the
        # connect timeout; others wait up to the read timeout for each piece.
        if self._http is None:
            raise ConnectionClosed(f"{self.name}: the transport is closed")
        wait = self._connect_timeout if quick else self._read_timeout
        return _Opened(self._http, method, url or self.url, headers, body, self._connect_timeout, wait)

    @contextlib.asynccontextmanager
    async def _authorized(
        self, method: str, url: str, headers: dict[str, str], body: bytes, *, quick: bool
    ) -> AsyncIterator[Response]:
        """One exchange to ``url`` with our headers and ``headers``, sent once more after
        the auth object answered a 401 or 403 (``_may_retry``); the HTTP+SSE session's
        way to HTTP (``_Wire``)."""
        attempt = 1
        while True:
            sent = await self._base_headers(method)
            sent.update(headers)
            async with self._open(method, sent, body, quick=quick, url=url) as response:
                if _may_retry(attempt, response) and await self._challenged(response, method):
                    attempt += 1
                    continue
                yield response
                return

    # -- one request -------------------------------------------------------------------------
    async def _exchange(self, exchange: _Exchange, outgoing: Outgoing, body: bytes) -> None:
        try:
            failure = await self._post_request(exchange, outgoing, body)
        except HttpError as exc:
            failure = ConnectionClosed(f"{self.name}: {exchange.what} failed: {_cause(exc)}")
        except MCPError as exc:
            failure = exc
        except Exception as exc:  # our bug or the auth hook's: fail the request, not silently
            log.exception("%s: %s failed unexpectedly", self.name, exchange.what)
            failure = exc
        finally:
            if self._exchanges.get(exchange.id) is exchange:
                del self._exchanges[exchange.id]
        if failure is not None and self._events is not None:
            self._events.request_failed(exchange.id, failure)

    async def _post_request(self, exchange: _Exchange, outgoing: Outgoing, body: bytes) -> BaseException | None:
        """POST one request (``body``, its encoding) and deliver its reply; the error to
        report, or None if answered."""
        stream = SSEParser(self._max_message)
        for attempt in (1, 2, 3):
            headers = await self._post_headers(outgoing, exchange.session_id)
            async with self._post(body, headers, quick=False) as response:
                # One more try after the auth object acted on a 401/403 (and one for a
                # DPoP nonce, _may_retry): a server that keeps refusing is answered by its status.
                if _may_retry(attempt, response) and await self._challenged(response, "POST"):
                    continue
                outcome = await self._reply(exchange, outgoing, response, stream)
            break
        if self._wire is None:
            if isinstance(outcome, HttpStatusError) and outcome.status in _LEGACY_HINTS:
                if await self._detect() and exchange.handshake:
                    # An initialize, sent again where it belongs (discover fails with
                    # its status, which sends the client to initialize).
                    await self._send_legacy(outgoing)
                    return None
            elif not isinstance(outcome, HttpStatusError):
                self._wire = "streamable"  # answered over POST: a Streamable HTTP endpoint
        if not isinstance(outcome, str):
            return outcome
        stream.end_of_stream()
        if exchange.handshake and stream.last_id is not None:
            return await self._resume(exchange, stream)
        if not exchange.handshake:
            # 2026-07-28 has no resumption: a broken stream is a lost request, which the
            # client re-issues as a new request when that is safe (changelog 9; Client).
            return RequestLost(
                f"{self.name}: the SSE stream of {exchange.what} closed before the response{outcome}; "
                "2026-07-28 streams cannot be resumed, so the request is lost (the server may "
                "or may not have acted on it)"
            )
        return ConnectionClosed(
            f"{self.name}: the SSE stream of {exchange.what} closed before the response{outcome}"
        )

    async def _reply(
        self, exchange: _Exchange, outgoing: Outgoing, response: Response, stream: SSEParser
    ) -> BaseException | None | str:
        """Deliver what ``response`` carries for ``exchange``: None once answered, the
        error to report, or (a string: why, maybe empty) its SSE stream ended early."""
        if exchange.method == "initialize" and outgoing.handshake and response.is_success:
            self._adopt_session(response.headers.get("mcp-session-id"))
        if response.status_code == 404 and exchange.session_id is not None:
            return self._expired(exchange.session_id, await _excerpt(response))
        if not _is_sse(response):
            limit = self._max_message
            reply = await response.read_at_most(limit + 1)
            if "json" in response.headers.get("content-type", ""):
                if len(reply) > limit:
                    return ParseError(
                        f"{self.name}: the reply to {exchange.what} is larger than {limit} bytes; "
                        "it was not read"
                    )
                answered = self._deliver_body(reply, exchange.id)
                if answered is not False:
                    return None if answered is True else answered
            status = response.status_code
            return HttpStatusError(self.name, exchange.what, status, _clip(reply), response.headers)
        try:
            if await self._pump(response, stream, exchange.id):
                return None
        except HttpError as exc:  # broken mid-stream: like an early end
            return f" ({_cause(exc)})"
        return ""

    async def _resume(self, exchange: _Exchange, stream: SSEParser) -> BaseException | None:
        """Resume a handshake-era stream with GET and ``Last-Event-ID`` (2025-11-25,
        Resumability and Redelivery), waiting the server's ``retry`` first each time."""
        misses = 0
        cause = "the server sent nothing new"
        while misses < _RESUME_MISSES:
            retry_ms = stream.retry_ms if stream.retry_ms is not None else _DEFAULT_RETRY_MS
            await asyncio.sleep(retry_ms / 1000)
            seen = stream.dispatched
            get = await self._get(exchange.session_id, stream.last_id)
            try:
                async with get as response:
                    if response.status_code == 404 and exchange.session_id is not None:
                        return self._expired(exchange.session_id, await _excerpt(response))
                    if response.status_code in _TRY_AGAIN:
                        # A balancer's replica down, a session store away for a moment:
                        # the stream may still be there; another attempt after the retry.
                        cause = f"HTTP {response.status_code}: {await _excerpt(response)}"
                    elif not _is_sse(response):
                        what, excerpt = f"resuming {exchange.what}", await _excerpt(response)
                        return HttpStatusError(self.name, what, response.status_code, excerpt, response.headers)
                    elif await self._pump(response, stream, exchange.id):
                        return None
            except HttpError as exc:
                cause = _cause(exc)
            stream.end_of_stream()
            misses = 0 if stream.dispatched > seen else misses + 1
        return ConnectionClosed(
            f"{self.name}: the SSE stream of {exchange.what} closed before the response, and "
            f"{_RESUME_MISSES} attempts to resume it failed ({cause})"
        )

    async def _pump(
        self, response: Response, stream: SSEParser, request_id: str | int | None
    ) -> bool:
        """Deliver a stream's messages; True once the response to ``request_id`` came.

        Raises ``ParseError`` when that response cannot be read, or an event outgrows
        the parser's bound (the caller drops the stream). An unreadable event that
        answers another request fails that request; anything else unreadable is skipped.
        """
        async for chunk in response.aiter_bytes():
            try:
                events, too_large = stream.feed(chunk), None
            except EventTooLarge as exc:
                events, too_large = exc.events, exc
            if self._deliver_events(events, request_id):
                return True
            if too_large is not None:
                on = "the standalone GET stream" if request_id is None else f"the stream of request {request_id!r}"
                raise ParseError(f"{self.name}: {too_large} on {on}; the stream was dropped")
        return False

    def _deliver_events(self, events: list[tuple[str, bytes]], request_id: str | int | None) -> bool:
        """Deliver the ``message`` events; True if one is the response to ``request_id``.
        Raises ``ParseError`` when that response cannot be read."""
        for event, data in events:
            if event != "message" or not data.strip():
                continue
            try:
                message = decode(data)
            except Exception as exc:  # noqa: BLE001 - whatever a peer's frame provokes
                failure = self._unreadable(data, _why(exc), request_id)
                if failure is not None:
                    raise failure from None
                continue
            if self._deliver(message, request_id):
                return True
        return False

    def _unreadable(self, frame: bytes, why: str, request_id: str | int | None) -> ParseError | None:
        """A frame that could not be decoded. The error to end ``request_id`` with, if
        the frame answers it; if it answers another request, that one fails here."""
        answers = response_id(frame)
        if answers is None:
            log.warning("%s: skipped a reply that is not JSON-RPC: %s", self.name, why)
            return None
        failure = ParseError(f"{self.name} sent a response to request {answers!r} that could not be read ({why})")
        if answers == request_id:
            return failure
        other = self._exchanges.pop(answers, None)
        if other is not None and other.task is not None:
            other.task.cancel()
        if self._events is not None:
            self._events.request_failed(answers, failure)
        return None

    def _deliver_body(self, body: bytes, request_id: str | int) -> bool | ParseError:
        """Deliver the messages of a JSON body: True if one answers ``request_id``, the
        error to end it with if its answer cannot be read, False if it is not JSON."""
        try:
            obj = msgspec.json.decode(body)
        except msgspec.DecodeError:
            return False  # the caller quotes it in an HttpStatusError
        except Exception as exc:  # noqa: BLE001 - e.g. nested deeper than the decoder goes
            return self._unreadable(body, _why(exc), request_id) or ParseError(
                f"{self.name}: the reply to request {request_id!r} could not be read ({_why(exc)})"
            )
        answered = False
        for item in obj if isinstance(obj, list) else [obj]:  # a list: a 2025-03-26 batch
            try:
                message = from_object(item)
            except Exception as exc:  # noqa: BLE001 - a shape check must not end the exchange
                log.warning("%s: skipped a reply that is not JSON-RPC: %s", self.name, _why(exc))
                continue
            answered = self._deliver(message, request_id) or answered
        return answered

    def _deliver(self, message: Message, request_id: str | int | None) -> bool:
        """Hand ``message`` to the session; True if it is the response to ``request_id``."""
        assert self._events is not None
        try:
            if request_id is not None and type(message) is not JsonRpcResponse:
                # A server request or notification on a request's own stream: about that request.
                self._events.message(message, request_id)
            else:
                self._events.message(message)
        except Exception:
            log.exception("%s: the session failed to take %r", self.name, message)
        if type(message) is not JsonRpcResponse or message.id is None:
            return False
        if message.id == request_id:
            return True
        # A response that came another way (a resumed or standalone stream): the
        # request's own exchange has nothing left to wait for.
        other = self._exchanges.pop(message.id, None)
        if other is not None and other.task is not None:
            other.task.cancel()
        return False

    # -- notifications and responses ---------------------------------------------------------
    async def _post_quiet(self, outgoing: Outgoing) -> bool:
        """POST a message that expects 202 and no reply; failures are only logged."""
        message = outgoing.message
        what = message.get("method") or f"the response to request {message.get('id')!r}"
        session_id = self._session_for(outgoing)
        try:
            for attempt in (1, 2, 3):
                headers = await self._post_headers(outgoing, session_id)
                async with self._post(encode(outgoing.message), headers, quick=True) as response:
                    status, success = response.status_code, response.is_success
                    if _may_retry(attempt, response) and await self._challenged(response, "POST"):
                        continue
                    content = await response.read_at_most(_EXCERPT * 4)
                break
        except HttpError as exc:
            log.warning("%s: sending %s failed: %s", self.name, what, _cause(exc))
            return False
        except MCPError as exc:  # the auth object could not authorize: it says why
            log.warning("%s: sending %s failed: %s", self.name, what, exc)
            return False
        if status == 404 and session_id is not None:
            self._expired(session_id, _clip(content))
        if not success:
            log.warning("%s: %s got HTTP %d: %s", self.name, what, status, _clip(content))
            return False
        return True

    # -- the HTTP+SSE transport of 2024-11-05 (_legacy_sse_client) ----------------------------
    async def _detect(self) -> bool:
        """Is ``url`` an HTTP+SSE stream? Asked once (concurrent first POSTs share the
        answer); True leaves the session open in ``_legacy``."""
        if self._detection is None:
            self._detection = asyncio.get_running_loop().create_task(self._open_legacy())
        return await asyncio.shield(self._detection)

    async def _open_legacy(self) -> bool:
        session = LegacySseSession(_Wire(self), self._legacy_ended)
        opened = await session.open(self._connect_timeout)
        if self._closed:  # closed while the GET was under way
            await session.close()
            raise ConnectionClosed(f"{self.name}: the transport was closed while the HTTP+SSE stream opened")
        self._wire = "sse" if opened else (self._wire or "streamable")
        if opened:
            self._legacy = session
            # Without the query: it names the server's session (a bearer of its state).
            where = (session.endpoint or "").split("?", 1)[0]
            log.debug("%s: an HTTP+SSE server; messages go to %s", self.name, hide_password(where))
        elif self._wire == "sse":  # pinned, and the GET said otherwise
            assert session.refusal is not None
            raise session.refusal
        return opened

    def _legacy_ended(self, session: LegacySseSession, why: ConnectionClosed) -> None:
        if self._legacy is not session:
            return
        self._legacy = None
        if self._events is not None and not self._closed:
            self._events.closed(why)

    async def _send_legacy(self, outgoing: Outgoing) -> None:
        """Send one message over the HTTP+SSE session (opened by an ``initialize`` when
        there is none): a request that cannot be sent fails through ``request_failed``."""
        message = outgoing.message
        body = encode(message)  # here, so what JSON cannot carry fails the send itself
        method = message.get("method")
        request_id = outgoing.request_id if outgoing.request_id is not None else message.get("id")
        is_request = method is not None and request_id is not None
        what = f"{method} (request id {request_id!r})" if is_request else method or f"the response to {request_id!r}"
        failure: MCPError | None = None
        if not outgoing.handshake:
            failure = LocalError(
                f"{self.name} offers only the older HTTP+SSE transport, which carries "
                f"handshake-era sessions, and {method} was a stateless-era request; connect with "
                "mode='auto' or mode='handshake'"
            )
        else:
            try:
                failure = await self._post_legacy(body, what, method == "initialize", request_id)
            except MCPError as exc:  # opening the session failed: the GET says why
                failure = exc
        if failure is None:
            return
        if is_request and self._events is not None:
            assert request_id is not None
            self._events.request_failed(request_id, failure)
        else:
            log.warning("%s: %s", self.name, failure)

    async def _post_legacy(
        self, body: bytes, what: str, initialize: bool, request_id: str | int | None
    ) -> MCPError | None:
        session = self._legacy
        if session is None and initialize and await self._open_legacy():
            session = self._legacy
        if session is None:
            return ConnectionClosed(f"{self.name}: the HTTP+SSE stream is closed, so {what} cannot be sent; connect again")
        if initialize:
            session.fresh = False
            self._legacy_initialize = request_id
        return await session.post(body, what)

    async def _cancel_legacy(self, request_id: str | int, reason: str | None) -> None:
        if self._closed or self._legacy is None or request_id == self._legacy_initialize:
            return
        params: dict[str, Any] = {"requestId": request_id}
        if reason:
            params["reason"] = reason
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        failure = await self._legacy.post(encode(note), "notifications/cancelled")
        if failure is not None:
            log.warning("%s: %s", self.name, failure)

    # -- handshake-era sessions ---------------------------------------------------------------
    def _adopt_session(self, value: str | None) -> None:
        if value is None:
            return
        if value and all(0x21 <= ord(c) <= 0x7E for c in value):
            self._session_id = value
        else:
            log.warning("%s: ignored an Mcp-Session-Id that is not visible ASCII: %r", self.name, value)

    def _expired(self, session_id: str, excerpt: str) -> SessionExpired:
        if self._session_id == session_id:
            self.end_handshake_session()
        detail = f" ({excerpt})" if excerpt else ""
        return SessionExpired(
            f"{self.name}: the handshake-era session {session_id} has ended or expired "
            f"(HTTP 404{detail}); send initialize again"
        )

    def _start_listener(self) -> asyncio.Event | None:
        """Start the GET stream's task; the event it sets once its first GET is answered."""
        if self._listener is None or self._listener.done():
            opened = asyncio.Event()
            self._listener = asyncio.get_running_loop().create_task(self._listen(self._session_id, opened))
            self._listener.add_done_callback(lambda _: opened.set())
            return opened
        return None

    async def _listen(self, session_id: str | None, opened: asyncio.Event) -> None:
        """The standalone GET stream of a handshake session: server requests and
        notifications unrelated to any request. Reconnects with backoff while the
        session lasts; a 405 means the server offers none."""
        stream = SSEParser(self._max_message)
        backoff = 1.0
        while not self._closed and self._session_id == session_id:
            seen = stream.dispatched
            try:
                async with await self._get(session_id, stream.last_id) as response:
                    opened.set()
                    if response.status_code == 405:
                        log.debug("%s: no standalone GET stream (405)", self.name)
                        return
                    if response.status_code == 404 and session_id is not None:
                        log.info("%s: the GET stream got 404: the session has ended", self.name)
                        return
                    if not _is_sse(response):
                        log.warning("%s: the GET stream got HTTP %d", self.name, response.status_code)
                    else:
                        await self._pump(response, stream, None)
            except HttpError as exc:
                log.info("%s: the GET stream broke: %s", self.name, _cause(exc))
            except Exception as exc:  # noqa: BLE001 - the auth hook's: keep the loop, say why
                log.warning("%s: the GET stream failed: %s", self.name, _cause(exc))
            stream.end_of_stream()
            opened.set()
            retry = stream.retry_ms / 1000 if stream.retry_ms is not None else None
            if stream.dispatched > seen:  # it worked for a while: reconnect as the server asks
                backoff = 1.0
                await asyncio.sleep(retry if retry is not None else backoff)
            else:
                await asyncio.sleep(max(retry or 0.0, backoff))
                backoff = min(backoff * 2, _LISTEN_BACKOFF_MAX)

    async def _delete_session(self, session_id: str) -> None:
        """End the session (2025-11-25: DELETE; the server may answer 405). Best effort,
        within ``_CLOSE_WAIT`` as a whole: a server that accepts and never answers (a
        frozen process) held close() for the whole connect timeout."""
        try:
            async with asyncio.timeout(_CLOSE_WAIT):
                headers = await self._get_headers(session_id, None)
                headers.pop("accept", None)
                async with self._open("DELETE", headers, b"", quick=True):
                    pass
        except Exception as exc:  # noqa: BLE001 - closing must not fail
            log.debug("%s: DELETE of session %s failed: %s", self.name, session_id, _cause(exc))


class _Wire:
    """What an HTTP+SSE session needs of its transport (``_legacy_sse_client.LegacyWire``)."""

    __slots__ = ("_transport", "max_message", "name", "url")

    def __init__(self, transport: HttpClientTransport) -> None:
        self._transport = transport
        self.name = transport.name
        self.url = transport.url
        self.max_message = transport._max_message

    def authorized(
        self, method: str, url: str, headers: dict[str, str], body: bytes, *, quick: bool
    ) -> contextlib.AbstractAsyncContextManager[Response]:
        return self._transport._authorized(method, url, headers, body, quick=quick)

    async def pump(self, response: Response, stream: SSEParser) -> bool:
        """The stream's messages to the session (none of them ends the stream)."""
        return await self._transport._pump(response, stream, None)

    def deliver(self, events: list[tuple[str, bytes]]) -> None:
        self._transport._deliver_events(events, None)


class _Opened:
    """``async with``: one exchange through ``_http11``; the response released on exit.

    ``wait`` bounds each wait for the server: connecting aside, the time to write the
    request, then each silence while reading the response."""

    __slots__ = ("args", "response")

    def __init__(
        self, http: Http11Client, method: str, url: str, headers: dict[str, str], body: bytes,
        connect: float, wait: float,
    ) -> None:
        self.args = (http, method, url, headers, body, connect, wait)
        self.response: Response | None = None

    async def __aenter__(self) -> Response:
        http, method, url, headers, body, connect, wait = self.args
        self.response = await http.request(
            method, url, headers, body, connect_timeout=connect, read_timeout=wait, write_timeout=wait
        )
        return self.response

    async def __aexit__(self, *exc_info: object) -> None:
        if self.response is not None:
            self.response.release()


def _is_sse(response: Response) -> bool:
    return response.is_success and response.headers.get("content-type", "").startswith(_SSE)


def _why(exc: BaseException) -> str:
    """Why a peer's frame could not be decoded, in words."""
    if isinstance(exc, RecursionError):
        return "nested more deeply than the decoder allows"
    if isinstance(exc, ProtocolError):
        return exc.message
    return _cause(exc)


def _cause(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _clip(body: bytes) -> str:
    text = " ".join(body[: _EXCERPT * 4].decode("utf-8", "replace").split())
    return text if len(text) <= _EXCERPT else text[: _EXCERPT - 1] + "…"


async def _excerpt(response: Response) -> str:
    return _clip(await response.read_at_most(_EXCERPT * 4))


def _may_retry(attempt: int, response: Response) -> bool:
    """Whether the auth object may act on this response and have the request sent again:
    after the first answer; after the second only when it asks for a DPoP nonce (RFC
    9449 9: a server can ask for its nonce only once a bound token came with a proof,
    that is, after the first retry brought the token)."""
    return attempt == 1 or (attempt == 2 and response.status_code == 401 and "dpop-nonce" in response.headers)
