"""Streamable HTTP, client side: one ``ClientTransport`` over ``httpx.AsyncClient``.

basic/transports/streamable-http.mdx (2026-07-28) and, for handshake-era sessions,
the 2025-11-25 transport page (DIGEST §2.6, §9.3).

Theory of operation. Every message is its own POST. A request's POST runs in its
own task, so ``send`` returns at once; whatever comes back (one JSON body, or an SSE
stream of notifications ending with the response) goes to ``events.message``. When
no response to the request arrives, the task reports ``events.request_failed`` with
a local error that says why: ``HttpStatusError`` (a status and no JSON-RPC body),
``SessionExpired`` (404 on a handshake-era session), or ``ConnectionClosed`` (the
network failed, or the stream ended early). Cancelling a request cancels its task,
which closes its response stream: that is the cancellation of 2026-07-28.

The handshake era adds what 2026-07-28 removed, and only for messages the session
marks ``legacy``: the ``Mcp-Session-Id`` the ``initialize`` response assigns (sent
back on every later message, and ended with DELETE on ``close``); the standalone GET
stream for server messages, opened after ``notifications/initialized``; SSE
resumption (a stream that ends early is resumed with GET and ``Last-Event-ID`` after
the server's ``retry`` delay); and ``notifications/cancelled`` on cancel.

Two ways to carry a POST, one set of semantics. Over plain ``http://``, with the
transport's own httpx client (no ``http_client``, no ``auth`` hook, no proxy for the
URL), POSTs go through ``_http11``: a lean HTTP/1.1 client on a pool of keep-alive
asyncio connections, several times cheaper per request than httpx and with no
per-request cost that grows with the number in flight. Everything else (HTTPS, a
user's client, the GET streams, DELETE, a header value it cannot send verbatim, a
redirect) goes through httpx. Both hand the same code a response with the same
face, and fail with the same httpx exceptions, so what a request delivers or how
it fails does not depend on the path it took.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from ._base import ClientTransport, Outgoing, TransportEvents
from ..errors import ConnectionClosed, HttpStatusError, MCPError, ProtocolError, SessionExpired
from ..protocol._framing import SSEParser
from ..protocol._jsonrpc import Message, Response, decode, encode, from_object

if TYPE_CHECKING:
    import httpx

__all__ = ["HttpClientTransport", "HttpStatusError", "SessionExpired"]

log = logging.getLogger("modelctx.client.http")

_ACCEPT_BOTH = "application/json, text/event-stream"
_SSE = "text/event-stream"
_MAX_BODY = 16 * 1024 * 1024  # a JSON reply larger than this is refused, not buffered
_EXCERPT = 200  # characters of an error body quoted in messages
_DEFAULT_RETRY_MS = 1000  # SSE reconnection time when the server names none
_RESUME_MISSES = 3  # resumption attempts in a row that bring nothing, before giving up
_LISTEN_BACKOFF_MAX = 30.0
_CLOSE_WAIT = 2.0  # seconds close() and cancel() wait for tasks and for DELETE
_LISTEN_OPEN_WAIT = 1.0  # seconds send(notifications/initialized) waits for the GET stream to open
_KEEP_ALIVE = 32  # idle keep-alive connections kept (either path)
_HTTPX_SLOTS = 4  # POSTs in flight through httpx at once (streams aside); see _Slot
_SLOT_HOLD = 0.005  # seconds a POST holds its slot at most: a slow call must not block others
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # what h11 would refuse in a header value


class _Exchange:
    """One request in flight: its POST task and what its errors need to say."""

    __slots__ = ("id", "method", "legacy", "session_id", "task")

    def __init__(
        self, request_id: str | int, method: str, legacy: bool, session_id: str | None
    ) -> None:
        self.id = request_id
        self.method = method
        self.legacy = legacy
        self.session_id = session_id
        self.task: asyncio.Task | None = None

    @property
    def what(self) -> str:
        return f"{self.method} (request id {self.id!r})"


class HttpClientTransport(ClientTransport):
    """The client side of Streamable HTTP to the MCP endpoint ``url``.

    ``headers`` go on every HTTP request; ``auth`` is an async hook returning more
    (e.g. ``Authorization``), called before each one. ``http_client`` is used as given
    and left open on ``close``; without it the transport makes (and closes) its own.
    ``connect_timeout`` bounds connecting, and whole exchanges that expect no body
    (notifications, DELETE); ``sse_read_timeout`` bounds silence while waiting for
    a reply or reading a stream (our servers send keep-alives every 15 s).
    """

    kind = "http"

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        auth: Callable[[], Awaitable[dict[str, str]]] | None = None,
        http_client: httpx.AsyncClient | None = None,
        connect_timeout: float = 10.0,
        sse_read_timeout: float = 300.0,
    ) -> None:
        self.url = url
        self.name = f"HTTP server {url}"
        # Lower-case names, so ours (and the session's) replace a user's, never duplicate.
        self._headers = {k.lower(): v for k, v in (headers or {}).items()}
        self._auth = auth
        self._client = http_client
        self._own_client = http_client is None
        self._connect_timeout = connect_timeout
        self._read_timeout = sse_read_timeout
        self._events: TransportEvents | None = None
        self._closed = False
        self._session_id: str | None = None
        self._legacy_version: str | None = None  # MCP-Protocol-Version of the session
        self._authorization: str | None = self._headers.get("authorization")
        self._exchanges: dict[str | int, _Exchange] = {}
        self._listener: asyncio.Task | None = None
        self._stream_timeout: Any = None
        self._quick_timeout: Any = None
        self._fast: Any = None  # the _http11 pool, when POSTs can take the lean path
        self._fast_head = b""  # its request line and the headers no request changes
        self._fast_defaults: dict[str, str] = {}
        self._fast_names: set[str] = set()  # header names already checked to be tokens
        self._httpx_slots: asyncio.Semaphore | None = None

    # -- ClientTransport -----------------------------------------------------------------
    async def connect(self, events: TransportEvents) -> None:
        """Prepare the HTTP client; no request is made (a dead server shows on the first send)."""
        if self._closed:
            raise ConnectionClosed(f"{self.name}: the transport is closed; make a new one")
        import httpx

        self._events = events
        self._stream_timeout = httpx.Timeout(
            connect=self._connect_timeout, read=self._read_timeout, write=self._read_timeout, pool=None
        )
        self._quick_timeout = httpx.Timeout(self._connect_timeout)
        if self._client is None:
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=_KEEP_ALIVE)
            self._client = httpx.AsyncClient(follow_redirects=True, limits=limits)
        if self._own_client and self._auth is None and self._fast is None:
            self._fast_path_setup()

    async def send(self, outgoing: Outgoing) -> None:
        if self._closed or self._events is None or self._client is None:
            state = "closed" if self._closed else "not connected (call connect first)"
            raise ConnectionClosed(f"{self.name}: the transport is {state}")
        message = outgoing.message
        if outgoing.legacy and "mcp-protocol-version" in outgoing.headers:
            self._legacy_version = outgoing.headers["mcp-protocol-version"]
        request_id = outgoing.request_id if outgoing.request_id is not None else message.get("id")
        method = message.get("method")
        if method is None or request_id is None:
            # A notification, or a response to a handshake-era server request.
            ok = await self._post_quiet(outgoing)
            if ok and outgoing.legacy and method == "notifications/initialized":
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
        exchange = _Exchange(request_id, method, outgoing.legacy, self._session_for(outgoing))
        previous = self._exchanges.get(request_id)
        if previous is not None and previous.task is not None:
            previous.task.cancel()
        self._exchanges[request_id] = exchange
        exchange.task = asyncio.get_running_loop().create_task(self._exchange(exchange, outgoing))

    async def cancel(self, request_id: str | int, reason: str | None = None) -> None:
        """Close the request's stream; on a handshake-era session also send
        ``notifications/cancelled`` (2025-11-25 cancellation; never for initialize)."""
        exchange = self._exchanges.pop(request_id, None)
        if exchange is not None and exchange.task is not None:
            exchange.task.cancel()
            await asyncio.wait({exchange.task}, timeout=_CLOSE_WAIT)
        legacy = exchange.legacy if exchange is not None else self._session_id is not None
        if self._closed or not legacy or (exchange is not None and exchange.method == "initialize"):
            return
        params: dict[str, Any] = {"requestId": request_id}
        if reason:
            params["reason"] = reason
        headers = {"mcp-protocol-version": self._legacy_version} if self._legacy_version else {}
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        await self._post_quiet(Outgoing(note, headers, legacy=True))

    async def close(self) -> None:
        """Cancel everything in flight, end the handshake session with DELETE, close."""
        if self._closed:
            return
        self._closed = True
        tasks = [e.task for e in self._exchanges.values() if e.task is not None]
        if self._events is not None:
            for exchange in self._exchanges.values():
                gone = ConnectionClosed(f"{self.name}: the transport was closed during {exchange.what}")
                self._events.request_failed(exchange.id, gone)
        self._exchanges.clear()
        if self._listener is not None:
            tasks.append(self._listener)
            self._listener = None
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_CLOSE_WAIT)
        fast, self._fast = self._fast, None
        if fast is not None:
            fast.close()
        client, session_id = self._client, self._session_id
        self._session_id = None
        if client is not None and session_id is not None:
            await self._delete_session(client, session_id)
        if client is not None and self._own_client:
            try:
                await asyncio.wait_for(client.aclose(), _CLOSE_WAIT)
            except (OSError, asyncio.TimeoutError):
                pass
        self._client = None

    def end_handshake_session(self) -> None:
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
    def session_id(self) -> str | None:
        """The handshake-era ``Mcp-Session-Id``, if the server assigned one."""
        return self._session_id

    # -- headers ---------------------------------------------------------------------------
    async def _base_headers(self) -> dict[str, str]:
        headers = dict(self._headers)
        if self._auth is not None:
            headers.update((k.lower(), v) for k, v in (await self._auth()).items())
            self._authorization = headers.get("authorization")
        return headers

    def _session_for(self, outgoing: Outgoing) -> str | None:
        # initialize starts a new session, so it never carries an old one.
        if not outgoing.legacy or outgoing.message.get("method") == "initialize":
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
        assert self._client is not None
        headers = await self._get_headers(session_id, last_id)
        return self._client.stream("GET", self.url, headers=headers, timeout=self._stream_timeout)

    async def _get_headers(self, session_id: str | None, last_id: str | None) -> dict[str, str]:
        headers = await self._base_headers()
        headers["accept"] = _SSE
        if session_id is not None:
            headers["mcp-session-id"] = session_id
        if self._legacy_version is not None:
            headers["mcp-protocol-version"] = self._legacy_version
        if last_id is not None:
            headers["last-event-id"] = last_id
        return headers

    # -- the two ways a POST goes -----------------------------------------------------------
    def _fast_path_setup(self) -> None:
        """Use ``_http11`` for POSTs if this URL and configuration allow it (see the module doc)."""
        import httpx

        try:
            from . import _http11
        except ImportError:  # no httptools: httpx carries everything
            return
        client = self._client
        assert client is not None
        try:
            url = httpx.URL(self.url)
            if url.scheme != "http" or url.userinfo or not url.raw_host:
                return
            if client._transport_for_url(url) is not client._transport:  # a proxy (HTTP_PROXY etc.)
                return
        except Exception:  # noqa: BLE001 - an unusual URL or httpx internals: stay on httpx
            return
        if "accept-encoding" in self._headers or "transfer-encoding" in self._headers:
            return  # a coding _http11 may not decode, or framing it does not do
        defaults = {k.lower(): v for k, v in client.headers.items()}
        defaults["accept-encoding"] = "gzip, deflate"  # exactly what _http11 can decode
        defaults = {"host": url.netloc.decode("ascii"), **defaults}
        if not all(_TOKEN.fullmatch(name) for name in {**defaults, **self._headers}):
            return
        self._fast_defaults = defaults
        self._fast_names = set(defaults)
        self._fast_head = b"POST " + url.raw_path + b" HTTP/1.1\r\n"
        host = url.raw_host.decode("ascii")
        self._fast = _http11.Http11Pool(host, url.port or 80, max_idle=_KEEP_ALIVE)

    def _fast_request(self, body: bytes, headers: dict[str, str]) -> bytes | None:
        """The whole request for ``_http11``, or None if httpx should send it (it would
        refuse or re-encode something: then it fails or sends as it always did)."""
        merged = {**self._fast_defaults, **headers}
        if "transfer-encoding" in merged:
            return None
        merged["content-length"] = str(len(body))
        names = self._fast_names
        for name in merged:
            if name not in names:
                if not _TOKEN.fullmatch(name):
                    return None
                names.add(name)
        values = "\t".join(merged.values())
        if not values.isascii() or _BAD_VALUE.search(values):
            return None
        lines = "".join([f"{name}: {value}\r\n" for name, value in merged.items()])
        return b"".join((self._fast_head, lines.encode("ascii"), b"\r\n", body))

    def _post(self, body: bytes, headers: dict[str, str], *, quick: bool, stream: bool = False) -> Any:
        """An unopened POST (``async with`` it, for the response), by whichever path fits.

        ``stream``: the reply is a long-lived stream (``subscriptions/listen``), which
        must neither wait for nor hold one of the httpx path's slots."""
        assert self._client is not None
        if self._fast is not None:
            request = self._fast_request(body, headers)
            if request is not None:
                return _FastPost(self, request, body, headers, quick)
        timeout = self._quick_timeout if quick else self._stream_timeout
        opened = self._client.stream("POST", self.url, content=body, headers=headers, timeout=timeout)
        return opened if stream else _Slot(self._slots(), opened)

    def _slots(self) -> asyncio.Semaphore:
        # Through httpx, the CPU cost of each request grows with the number in flight
        # (httpcore's pool scans every queued request and connection on each change), so
        # a few at a time finish sooner than all at once; see _Slot for slow ones.
        if self._httpx_slots is None:
            self._httpx_slots = asyncio.Semaphore(_HTTPX_SLOTS)
        return self._httpx_slots

    # -- one request -------------------------------------------------------------------------
    async def _exchange(self, exchange: _Exchange, outgoing: Outgoing) -> None:
        import httpx

        try:
            failure = await self._post_request(exchange, outgoing)
        except httpx.HTTPError as exc:
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

    async def _post_request(self, exchange: _Exchange, outgoing: Outgoing) -> BaseException | None:
        """POST one request and deliver its reply; the error to report, or None if answered."""
        import httpx

        assert self._client is not None
        headers = await self._post_headers(outgoing, exchange.session_id)
        stream = SSEParser()
        broken = ""
        body = encode(outgoing.message)
        listen = exchange.method == "subscriptions/listen"
        async with self._post(body, headers, quick=False, stream=listen) as response:
            if exchange.method == "initialize" and outgoing.legacy and response.is_success:
                self._adopt_session(response.headers.get("mcp-session-id"))
            if response.status_code == 404 and exchange.session_id is not None:
                return self._expired(exchange.session_id, await _excerpt(response))
            if not _is_sse(response):
                reply = await _read(response, _MAX_BODY)
                is_json = "json" in response.headers.get("content-type", "")
                if is_json and self._deliver_body(reply, exchange.id):
                    return None
                status = response.status_code
                return HttpStatusError(self.name, exchange.what, status, _clip(reply), response.headers)
            try:
                if await self._pump(response, stream, exchange.id):
                    return None
            except httpx.HTTPError as exc:  # broken mid-stream: like an early end
                broken = f" ({_cause(exc)})"
        if exchange.legacy and stream.last_id is not None:
            return await self._resume(exchange, stream)
        # 2026-07-28 has no resumption: a broken stream is a lost request (changelog).
        return ConnectionClosed(
            f"{self.name}: the SSE stream of {exchange.what} closed before the response{broken}"
        )

    async def _resume(self, exchange: _Exchange, stream: SSEParser) -> BaseException | None:
        """Resume a handshake-era stream with GET and ``Last-Event-ID`` (2025-11-25,
        Resumability and Redelivery), waiting the server's ``retry`` first each time."""
        import httpx

        assert self._client is not None
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
                    if not _is_sse(response):
                        what, excerpt = f"resuming {exchange.what}", await _excerpt(response)
                        return HttpStatusError(self.name, what, response.status_code, excerpt, response.headers)
                    if await self._pump(response, stream, exchange.id):
                        return None
            except httpx.HTTPError as exc:
                cause = _cause(exc)
            misses = 0 if stream.dispatched > seen else misses + 1
        return ConnectionClosed(
            f"{self.name}: the SSE stream of {exchange.what} closed before the response, and "
            f"{_RESUME_MISSES} attempts to resume it failed ({cause})"
        )

    async def _pump(
        self, response: httpx.Response, stream: SSEParser, request_id: str | int | None
    ) -> bool:
        """Deliver a stream's messages; True once the response to ``request_id`` came."""
        async for chunk in response.aiter_bytes():
            for event, data in stream.feed(chunk):
                if event != "message" or not data.strip():
                    continue
                try:
                    message = decode(data)
                except ProtocolError as exc:
                    log.warning("%s: skipped an SSE event that is not JSON-RPC: %s", self.name, exc)
                    continue
                if self._deliver(message, request_id):
                    return True
        return False

    def _deliver_body(self, body: bytes, request_id: str | int) -> bool:
        """Deliver the messages of a JSON body; True if one answers ``request_id``."""
        try:
            obj = msgspec.json.decode(body)
        except msgspec.DecodeError:
            return False
        answered = False
        for item in obj if isinstance(obj, list) else [obj]:  # a list: a 2025-03-26 batch
            try:
                message = from_object(item)
            except ProtocolError as exc:
                log.warning("%s: skipped a reply that is not JSON-RPC: %s", self.name, exc)
                continue
            answered = self._deliver(message, request_id) or answered
        return answered

    def _deliver(self, message: Message, request_id: str | int | None) -> bool:
        """Hand ``message`` to the session; True if it is the response to ``request_id``."""
        assert self._events is not None
        try:
            self._events.message(message)
        except Exception:
            log.exception("%s: the session failed to take %r", self.name, message)
        if type(message) is not Response or message.id is None:
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
        import httpx

        assert self._client is not None
        message = outgoing.message
        what = message.get("method") or f"the response to request {message.get('id')!r}"
        session_id = self._session_for(outgoing)
        try:
            headers = await self._post_headers(outgoing, session_id)
            async with self._post(encode(outgoing.message), headers, quick=True) as response:
                status, success = response.status_code, response.is_success
                content = await _read(response, _EXCERPT * 4)
        except httpx.HTTPError as exc:
            log.warning("%s: sending %s failed: %s", self.name, what, _cause(exc))
            return False
        if status == 404 and session_id is not None:
            self._expired(session_id, _clip(content))
        if not success:
            log.warning("%s: %s got HTTP %d: %s", self.name, what, status, _clip(content))
            return False
        return True

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
        import httpx

        assert self._client is not None
        stream = SSEParser()
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
            except httpx.HTTPError as exc:
                log.info("%s: the GET stream broke: %s", self.name, _cause(exc))
            except Exception as exc:  # the auth hook's: keep the loop, say why
                log.warning("%s: the GET stream could not be opened: %s", self.name, _cause(exc))
            opened.set()
            retry = stream.retry_ms / 1000 if stream.retry_ms is not None else None
            if stream.dispatched > seen:  # it worked for a while: reconnect as the server asks
                backoff = 1.0
                await asyncio.sleep(retry if retry is not None else backoff)
            else:
                await asyncio.sleep(max(retry or 0.0, backoff))
                backoff = min(backoff * 2, _LISTEN_BACKOFF_MAX)

    async def _delete_session(self, client: httpx.AsyncClient, session_id: str) -> None:
        """End the session (2025-11-25: DELETE; the server may answer 405). Best effort."""
        try:
            headers = await asyncio.wait_for(self._get_headers(session_id, None), _CLOSE_WAIT)
            headers.pop("accept", None)
            await client.delete(self.url, headers=headers, timeout=_CLOSE_WAIT)
        except Exception as exc:  # noqa: BLE001 - closing must not fail
            log.debug("%s: DELETE of session %s failed: %s", self.name, session_id, _cause(exc))


class _FastPost:
    """``async with``: one POST through ``_http11``, giving the response its block reads.

    A redirect is left to httpx (which follows it, as the transport's client is made
    to), and from then on the transport sends every POST through httpx."""

    __slots__ = ("body", "fallback", "headers", "quick", "request", "response", "transport")

    def __init__(
        self, transport: HttpClientTransport, request: bytes, body: bytes, headers: dict[str, str], quick: bool
    ) -> None:
        self.transport = transport
        self.request = request
        self.body = body
        self.headers = headers
        self.quick = quick
        self.response: Any = None
        self.fallback: Any = None

    async def __aenter__(self) -> Any:
        transport = self.transport
        pool = transport._fast
        if pool is None:  # the transport switched to httpx (a redirect) or closed meanwhile
            return await self._via_httpx(None)
        wait = transport._connect_timeout if self.quick else transport._read_timeout
        response = await pool.request(
            self.request, connect_timeout=transport._connect_timeout, read_timeout=wait, write_timeout=wait
        )
        if response.status_code in _REDIRECTS and "location" in response.headers:
            response.release()
            log.debug("%s: the endpoint redirects; POSTs go through httpx from now on", transport.name)
            transport._fast = None
            pool.close()
            return await self._via_httpx(response)
        self.response = response
        return response

    async def _via_httpx(self, redirect: Any) -> Any:
        import httpx

        transport = self.transport
        client = transport._client
        if client is None:
            raise httpx.ConnectError("the transport is closed")
        timeout = transport._quick_timeout if self.quick else transport._stream_timeout
        request = client.build_request("POST", transport.url, content=self.body, headers=self.headers, timeout=timeout)
        if redirect is not None:
            # What httpx would have sent next (e.g. 303: a GET); it follows any further hops.
            seen = httpx.Response(redirect.status_code, headers=list(redirect.headers.items()), request=request)
            try:
                request = client._build_redirect_request(request, seen)
            except AttributeError:  # a future httpx: repeat the POST and let httpx follow
                pass
        self.fallback = await client.send(request, stream=True)
        return self.fallback

    async def __aexit__(self, *exc_info: object) -> None:
        if self.fallback is not None:
            await self.fallback.aclose()
        elif self.response is not None:
            self.response.release()


_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class _Slot:
    """``async with``: an httpx POST that first takes one of a few slots.

    The slot goes back when the exchange ends or after ``_SLOT_HOLD`` seconds,
    whichever comes first: quick exchanges (nearly all) queue here, cheaply, instead
    of inside httpcore, while a slow tool call or a long stream delays the others by
    at most that long and then runs outside the bound."""

    __slots__ = ("opened", "slots", "timer")

    def __init__(self, slots: asyncio.Semaphore, opened: Any) -> None:
        self.slots = slots
        self.opened = opened
        self.timer: asyncio.TimerHandle | None = None

    async def __aenter__(self) -> Any:
        await self.slots.acquire()
        self.timer = asyncio.get_running_loop().call_later(_SLOT_HOLD, self._give_back)
        try:
            return await self.opened.__aenter__()
        except BaseException:
            self._give_back()
            raise

    async def __aexit__(self, *exc_info: object) -> Any:
        try:
            return await self.opened.__aexit__(*exc_info)
        finally:
            self._give_back()

    def _give_back(self) -> None:
        timer, self.timer = self.timer, None
        if timer is not None:
            timer.cancel()
            self.slots.release()


def _is_sse(response: httpx.Response) -> bool:
    return response.is_success and response.headers.get("content-type", "").startswith(_SSE)


def _cause(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _clip(body: bytes) -> str:
    text = " ".join(body[: _EXCERPT * 4].decode("utf-8", "replace").split())
    return text if len(text) <= _EXCERPT else text[: _EXCERPT - 1] + "…"


async def _read(response: httpx.Response, limit: int) -> bytes:
    """The body, or its first ``limit`` bytes (a huge body is not buffered whole)."""
    whole = getattr(response, "complete_body", None)  # _http11: the body is usually in already
    if whole is not None and (body := whole(limit)) is not None:
        return body
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(chunks)


async def _excerpt(response: httpx.Response) -> str:
    return _clip(await _read(response, _EXCERPT * 4))
