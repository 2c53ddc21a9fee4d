"""The HTTP+SSE transport of 2024-11-05, client side: one session of a server that offers only it.

2024-11-05 basic/transports.mdx ("HTTP with SSE"), and the backwards-compatibility
section of the 2025-03-26 and later transports pages, which ``HttpClientTransport``
follows to find out when to use this (its ``transport`` option says when not to ask).

Theory of operation. A GET to the server's URL opens an event stream; its first event
is ``endpoint``, whose data is the URI every client message is POSTed to (relative to
the GET URL). That URI must be of the stream's own origin (scheme, host, port): one
that names another origin is refused, since whoever can put an event on the stream (the
server, or a proxy in between) would otherwise have every later message, and the
``Authorization`` header that goes with it, delivered where they choose (the official
SDK refuses it too). Each message is one POST, answered 202 (or 200) with a body nobody
reads; every response, notification and server request comes back on the stream as an
``event: message``. The stream is the session: 2024-11-05 has no resumption, so when it
ends (the server closed it, the network failed, it was silent past ``sse_read_timeout``)
the session is gone with every request in flight, and the owner reports the connection
closed, which fails them all at once.

What this module does not do itself, it is handed by its owner (``LegacyWire``): HTTP
exchanges with the owner's headers and auth (a 401 or 403 is answered by the same
``HttpAuth`` as every Streamable HTTP request, on the GET and on each POST), and the
delivery of a stream's messages to the session (the one SSE parser, the one decoder).
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from ..errors import ConnectionClosed, HttpStatusError, MalformedResponse, MCPError, UrlRefused
from ..protocol.framing import EventTooLarge, SSEParser
from ._http11 import HttpError, Response

__all__ = ["LegacySseSession", "LegacyWire", "endpoint_url"]

log = logging.getLogger("modelctx.client.http")

_SSE = "text/event-stream"
_EXCERPT = 800  # bytes of a refusing body read for the error message
_DEFAULT_PORTS = {"http": 80, "https": 443}


class LegacyWire(Protocol):
    """What a session needs from its owner (``HttpClientTransport``)."""

    #: How errors name the server, e.g. "HTTP server http://127.0.0.1:8000/sse".
    name: str
    #: The URL the GET goes to (the one the person gave).
    url: str
    #: The bound on one SSE event, in bytes.
    max_message: int

    def authorized(
        self, method: str, url: str, headers: dict[str, str], body: bytes, *, quick: bool
    ) -> AbstractAsyncContextManager[Response]:
        """One HTTP exchange with the owner's headers and auth (``quick``: bounded by
        the connect timeout as a whole, else each silence by the read timeout)."""
        ...

    def pump(self, response: Response, stream: SSEParser) -> Awaitable[object]:
        """Deliver the ``message`` events of ``response`` to the session until it ends."""
        ...

    def deliver(self, events: list[tuple[str, bytes]]) -> None:
        """Deliver events already parsed (those that came with the endpoint event)."""
        ...


class LegacySseSession:
    """One HTTP+SSE session: the GET stream of ``wire``, and the endpoint its first
    event named. ``open`` it; ``post`` each message; ``close`` it. ``on_end`` is called
    with the reason when the stream ends by itself (never after ``close``)."""

    def __init__(self, wire: LegacyWire, on_end: Callable[[LegacySseSession, ConnectionClosed], None]) -> None:
        self._wire = wire
        self._on_end = on_end
        self.endpoint: str | None = None
        #: Nothing has been sent on it yet (an ``initialize`` makes it a session in use).
        self.fresh = True
        #: Why ``open`` returned False: what the GET was answered with instead.
        self.refusal: MCPError | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    async def open(self, timeout: float) -> bool:
        """GET the stream and wait for its ``endpoint`` event, within ``timeout`` seconds.

        True once the endpoint is known (the stream's messages are being delivered from
        then on). False when the GET did not open an HTTP+SSE stream (another status,
        another content type, a first event that is not ``endpoint``, no event in time,
        the network failed): ``refusal`` says what came instead. Raises
        ``HttpStatusError`` for a 401 or 403 the auth object could not answer,
        ``AuthorizationError`` when it could not authorize, ``UrlRefused`` for an
        endpoint of another origin, ``MalformedResponse`` for one that is not a URI.
        """
        loop = asyncio.get_running_loop()
        started: asyncio.Future[bool] = loop.create_future()
        self._task = loop.create_task(self._run(started))
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(started)
        except TimeoutError:
            self.refusal = ConnectionClosed(
                f"{self._wire.name}: GET opened no HTTP+SSE stream: no 'endpoint' event within {timeout:g}s"
            )
        except BaseException:
            await self.close()
            raise
        await self.close()
        return False

    async def post(self, body: bytes, what: str) -> MCPError | None:
        """POST one encoded message to the endpoint: None once the server accepted it
        (any 2xx; the body is not read beyond a short excerpt), else the error to report."""
        assert self.endpoint is not None, "open the session first"
        headers = {"content-type": "application/json"}
        try:
            async with self._wire.authorized("POST", self.endpoint, headers, body, quick=True) as response:
                excerpt = await response.read_at_most(_EXCERPT)  # read, so the connection is kept
                if response.is_success:
                    return None
                return HttpStatusError(self._wire.name, what, response.status_code, _clip(excerpt), response.headers)
        except HttpError as exc:
            return ConnectionClosed(f"{self._wire.name}: sending {what} to the HTTP+SSE endpoint failed: {_cause(exc)}")
        except MCPError as exc:  # the auth object could not authorize: it says why
            return exc

    async def close(self) -> None:
        """End the stream (and with it the server's session); ``on_end`` is not called."""
        self._closing = True
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=2.0)

    def abandon(self) -> None:
        """``close`` for a caller that cannot wait: the stream ends on the loop's next turn."""
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            self._task = None

    # -- the stream --------------------------------------------------------------------
    async def _run(self, started: asyncio.Future[bool]) -> None:
        wire = self._wire
        try:
            async with wire.authorized("GET", wire.url, {"accept": _SSE}, b"", quick=False) as response:
                parser = await self._opened(response, started)
                if parser is None:
                    return
                why = "the server ended it"
                try:
                    await wire.pump(response, parser)
                except MCPError as exc:  # an event past the bound: the stream is dropped
                    why = str(exc)
        except asyncio.CancelledError:
            if not started.done():
                started.cancel()
            raise
        except HttpError as exc:
            why = _cause(exc)
            if self._refused(started, ConnectionClosed(f"{wire.name}: GET (to open the HTTP+SSE stream) failed: {why}")):
                return
        except MCPError as exc:  # the auth object could not authorize: it says why
            if not started.done():
                started.set_exception(exc)
                return
            why = str(exc)
        except Exception as exc:  # our bug or the auth hook's: end the session, say why
            log.exception("%s: the HTTP+SSE stream failed unexpectedly", wire.name)
            why = _cause(exc)
            if not started.done():
                started.set_exception(ConnectionClosed(f"{wire.name}: opening the HTTP+SSE stream failed ({why})"))
                return
        if not self._closing:
            self._on_end(
                self,
                ConnectionClosed(
                    f"{wire.name}: the HTTP+SSE stream closed ({why}); the server's session ended with it, "
                    "so no request in flight can be answered; connect again"
                ),
            )

    def _refused(self, started: asyncio.Future[bool], why: MCPError) -> bool:
        """Before the endpoint came: ``open`` returns False with ``why``. True if it did."""
        if started.done():
            return False
        self.refusal = why
        started.set_result(False)
        return True

    async def _opened(self, response: Response, started: asyncio.Future[bool]) -> SSEParser | None:
        """Read up to the first event: the stream's parser once that named the endpoint
        (``started`` is then True); None when ``open`` has its answer otherwise."""
        wire = self._wire
        status = response.status_code
        if status in (401, 403):  # the auth object has had its turn (``authorized``)
            excerpt = _clip(await response.read_at_most(_EXCERPT))
            what = "GET (to open the HTTP+SSE stream)"
            started.set_exception(HttpStatusError(wire.name, what, status, excerpt, response.headers))
            return None
        content_type = response.headers.get("content-type", "")
        if not (response.is_success and content_type.startswith(_SSE)):
            excerpt = _clip(await response.read_at_most(_EXCERPT)) or content_type
            what = "GET (to open an HTTP+SSE stream)"
            self._refused(started, HttpStatusError(wire.name, what, status, excerpt, response.headers))
            return None
        parser = SSEParser(wire.max_message)
        try:
            first, rest = await _first_event(response, parser)
        except EventTooLarge as exc:
            self._refused(started, MalformedResponse(f"{wire.name}: the first event of the GET stream: {exc}"))
            return None
        if first is None or first[0] != "endpoint":
            seen = "none" if first is None else repr(first[0])
            self._refused(
                started,
                MalformedResponse(
                    f"{wire.name}: GET opened an event stream whose first event is {seen}, not 'endpoint': "
                    "not an HTTP+SSE server"
                ),
            )
            return None
        try:
            self.endpoint = endpoint_url(wire.url, first[1], wire.name)
        except MCPError as exc:
            started.set_exception(exc)
            return None
        started.set_result(True)
        wire.deliver(rest)
        return parser


async def _first_event(response: Response, parser: SSEParser) -> tuple[tuple[str, bytes] | None, list[tuple[str, bytes]]]:
    """The stream's first event and those that came in the same chunk; (None, []) if
    it ended first. ``EventTooLarge`` past the parser's bound."""
    async for chunk in response.aiter_bytes():
        events = parser.feed(chunk)
        if events:
            return events[0], events[1:]
    return None, []


def endpoint_url(stream_url: str, data: bytes, server: str) -> str:
    """The URL an ``endpoint`` event's ``data`` names, resolved against the stream's URL.

    Raises ``UrlRefused`` when it is of another origin (scheme, host or port), and
    ``MalformedResponse`` when it is not a URI (spaces, control characters, nothing, a
    port that is not a number)."""
    text = data.decode("utf-8", "replace").strip()
    origin: tuple[str, str, int] | None = None
    if text and not any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        try:
            url = urllib.parse.urljoin(stream_url, text)
            origin = _origin(url)
        except ValueError:  # "http://[::1", "http://host:8000:9/"
            origin = None
    if origin is None:
        raise MalformedResponse(f"{server}: the HTTP+SSE 'endpoint' event does not name a URI: {text[:200]!r}")
    if origin != _origin(stream_url):
        scheme, host, port = origin
        raise UrlRefused(
            f"{server}: the HTTP+SSE stream named an endpoint on another origin ({scheme}://{host}:{port}); "
            "refused, since messages (and their Authorization header) go only to the origin of the URL given"
        )
    return url


def _origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of ``url``; None without a host. ValueError for a bad port."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), parts.port or _DEFAULT_PORTS.get(scheme, 0)


def _cause(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _clip(body: bytes) -> str:
    text = " ".join(body.decode("utf-8", "replace").split())
    return text if len(text) <= 200 else text[:199] + "…"
