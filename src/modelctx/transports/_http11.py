"""A lean HTTP/1.1 client, the wire part: connections, their pool, a response.

Most of what an MCP client sends is one POST with a small JSON body, answered by one
JSON body with ``Content-Length`` (or by an SSE stream, for progress or long calls).
A general client (httpx with httpcore, h11 and anyio) costs several times more CPU per
exchange than the MCP work around it, even with a lean transport beneath it (measured
here: 2.3x this client's CPU per call), and httpcore's pool gets slower with every
request in flight. This module does the exchange and no more: a LIFO pool of
keep-alive connections per origin (``asyncio.Protocol``, no streams), a request written
with one ``write()``, the response parsed by ``httptools`` (llhttp: chunked,
close-delimited and 1xx responses as the standard says), gzip and deflate bodies
decoded. ``_http_requests.Http11Client`` builds on it (URLs, redirects, proxies, TLS).

Failures raise an ``HttpError`` subclass named after what went wrong, with the names
httpx uses (``ConnectError``, ``ReadTimeout``, ``RemoteProtocolError``...).
"""

from __future__ import annotations

import asyncio
import select
import ssl
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httptools

__all__ = [
    "ConnectError",
    "ConnectTimeout",
    "DecodingError",
    "Http11Pool",
    "HttpError",
    "LocalProtocolError",
    "ReadError",
    "ReadTimeout",
    "RemoteProtocolError",
    "Response",
    "TooManyRedirects",
    "WriteTimeout",
]

_HIGH_WATER = 1 << 20  # buffered body bytes at which reading pauses until the consumer catches up
_TIMED_OUT = object()
# The bytes a response may take before its headers end (a 1xx before it included).
# httptools buffers a header line whole, so without a bound a server that sends one
# endless header holds all of it in memory.
_MAX_HEAD = 256 * 1024
# The most a compressed body may inflate to in one step: a gzip bomb (1 MB that
# inflates to 1 GB) reaches the reader in pieces it can count and refuse.
_INFLATE_PIECE = 1 << 16
_STALE_CHECK = 1.0  # an idle connection older than this is polled before reuse (see _acquire)


class HttpError(Exception):
    """An HTTP exchange could not be completed; the subclass names what failed."""


class ConnectError(HttpError):
    """No connection to the server (refused, unknown host, TLS failure, proxy refused)."""


class ConnectTimeout(HttpError):
    """Connecting took longer than the connect timeout."""


class ReadTimeout(HttpError):
    """The server sent nothing for longer than the read timeout."""


class WriteTimeout(HttpError):
    """The server read nothing of the request for longer than the write timeout."""


class ReadError(HttpError):
    """The connection failed while reading."""


class RemoteProtocolError(HttpError):
    """The server broke HTTP/1.1 (a malformed response, a body cut short, no response)."""


class LocalProtocolError(HttpError):
    """This side was asked to send what HTTP/1.1 cannot carry (e.g. CR or LF in a header)."""


class DecodingError(HttpError):
    """A body in a content coding that is unknown or does not decode."""


class TooManyRedirects(HttpError):
    """More than 20 redirects in a row."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one exchange at a time (no pipelining)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[Any] | None = None
        self._drain: asyncio.Future[Any] | None = None
        self.closed = False
        self.idle_since = 0.0
        self._busy = False  # an exchange is under way (a request sent, its response not released)
        self._write_paused = False
        self._read_paused = False
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.headers: dict[str, str] = {}
        self.headers_done = False
        self.complete = False
        self.chunks: list[bytes] = []
        self.buffered = 0
        self.keep_alive = False
        self.until_close = False  # the body ends when the server closes the connection
        self._informational = False
        self.error: tuple[type[Exception], str] | None = None
        self.head_bytes = 0  # bytes received before the headers ended

    # -- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self._busy or self.complete or self.error is not None:
            # Bytes nobody asked for (e.g. a 408 on an idle connection): never reuse it.
            self.keep_alive = False
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(RemoteProtocolError, "the server switched protocols")
        except httptools.HttpParserError as exc:
            self._fail(RemoteProtocolError, f"malformed HTTP response: {exc}")
            return
        if not self.headers_done:
            self.head_bytes += len(data)
            if self.head_bytes > _MAX_HEAD:
                self._fail(RemoteProtocolError, f"the response headers exceeded {_MAX_HEAD} bytes")

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._busy and not self.complete and self.error is None:
            if self.headers_done and self.until_close:
                self.complete = True
            elif not self.headers_done and exc is None:
                self.error = (RemoteProtocolError, "Server disconnected without sending a response.")
            elif exc is None:
                self.error = (RemoteProtocolError, "peer closed connection without sending complete message body")
            else:
                self.error = (ReadError, str(exc))
        self._wake()
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    # -- httptools callbacks ---------------------------------------------------------------
    def on_message_begin(self) -> None:
        if self.complete:  # a second response to one request: the connection is confused
            self._fail(RemoteProtocolError, "the server sent more than one response")

    def on_header(self, name: bytes, value: bytes) -> None:
        self.raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:  # 1xx informational (101 raises HttpParserUpgrade instead): skip it
            self._informational = True
            self.raw_headers = []
            return
        # Lower-case names, repeated fields joined with ", ", read once for all.
        headers: dict[str, str] = {}
        for raw_name, raw_value in self.raw_headers:
            name = raw_name.decode("latin-1").lower()
            value = raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        self.headers = headers
        # Framed by Content-Length or chunked coding; else the body ends at close.
        framed = "content-length" in headers or "chunked" in headers.get("transfer-encoding", "").lower()
        self.until_close = status not in (204, 304) and not framed
        self.status = status
        self.headers_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        if self._informational:
            return
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered >= _HIGH_WATER and not self._read_paused and self._transport is not None:
            self._read_paused = True
            self._transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            return
        self.complete = True
        self.keep_alive = self._parser.should_keep_alive()
        self._wake()

    # -- the exchange ----------------------------------------------------------------------
    def usable(self) -> bool:
        """Open, and nothing of ours left unsent (a server may answer before reading
        all of a request; the rest would then pass for the next one)."""
        transport = self._transport
        return (
            not self.closed
            and transport is not None
            and not transport.is_closing()
            and not transport.get_write_buffer_size()
        )

    def readable(self) -> bool:
        """Whether the socket has something to read right now: on an idle connection
        that is an EOF (or junk) the event loop has not handled yet, so: do not reuse."""
        try:
            sock = self._transport.get_extra_info("socket") if self._transport is not None else None
            if sock is None:
                return False
            if hasattr(select, "poll"):  # no FD_SETSIZE limit
                poller = select.poll()
                poller.register(sock.fileno(), select.POLLIN)
                return bool(poller.poll(0))
            return bool(select.select([sock.fileno()], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    def send(self, data: bytes) -> None:
        self._reset()
        self._busy = True
        assert self._transport is not None
        self._transport.write(data)

    async def drain(self, timeout: float | None) -> None:
        if not self._write_paused or self.closed:
            return
        drain = self._drain = self._loop.create_future()
        if await _wait(self._loop, drain, timeout) is _TIMED_OUT:
            raise WriteTimeout("")

    async def wait(self, timeout: float | None) -> None:
        """Wait until something arrives, the connection ends, or ``timeout`` seconds pass."""
        waiter = self._waiter = self._loop.create_future()
        try:
            if await _wait(self._loop, waiter, timeout) is _TIMED_OUT:
                raise ReadTimeout("")
        finally:
            self._waiter = None

    def take(self) -> bytes:
        """Everything buffered so far, resuming reading if it had paused."""
        chunks = self.chunks
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self.chunks = []
        self.buffered = 0
        if self._read_paused and self._transport is not None and not self.closed:
            self._read_paused = False
            self._transport.resume_reading()
        return data

    def raise_error(self) -> None:
        if self.error is not None:
            kind, text = self.error
            raise kind(text)

    def finished(self) -> None:
        self._busy = False

    def close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()

    def _fail(self, kind: type[Exception], text: str) -> None:
        if self.error is None:
            self.error = (kind, text)
        self.close()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


async def _wait(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], timeout: float | None) -> Any:
    """``await future``, or ``_TIMED_OUT`` after ``timeout`` seconds (one timer, no task)."""
    if timeout is None:
        return await future
    handle = loop.call_later(timeout, _time_out, future)
    try:
        return await future
    finally:
        handle.cancel()


def _time_out(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_result(_TIMED_OUT)


class Response:
    """A response whose headers are in; its body is read with ``aiter_bytes``.

    ``headers`` has lower-case names (repeated fields joined with ``", "``).
    ``release()`` must be called when done (``http_client`` does it in ``async with``).
    """

    __slots__ = ("_conn", "_decoder", "_pool", "_released", "_timeout", "headers", "status_code")

    def __init__(self, pool: Http11Pool, conn: _Connection, timeout: float | None) -> None:
        self._pool = pool
        self._conn = conn
        self._timeout = timeout
        self._released = False
        self.status_code = conn.status
        self.headers = conn.headers
        self._decoder = _decoder(conn.headers.get("content-encoding"))

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    def complete_body(self, limit: int) -> bytes | None:
        """The whole body if it has all arrived already (the usual JSON reply) and is
        shorter than ``limit``; else None, and ``aiter_bytes`` reads it."""
        conn = self._conn
        if not conn.complete or self._decoder is not None or conn.buffered >= limit:
            return None
        return conn.take() if conn.chunks else b""

    async def read_at_most(self, limit: int) -> bytes:
        """The body, or its first ``limit`` bytes or a little more (a huge body is never
        buffered whole)."""
        body = self.complete_body(limit)  # usually the whole body is in already
        if body is not None:
            return body
        chunks: list[bytes] = []
        size = 0
        async for chunk in self.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
        return b"".join(chunks)

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        conn = self._conn
        decoder = self._decoder
        while True:
            if conn.chunks:
                data = conn.take()
                if decoder is None:
                    yield data
                else:
                    for piece in _inflate(decoder, data):
                        yield piece
                continue
            if conn.complete:
                if decoder is not None and (tail := _flush(decoder)):
                    yield tail
                return
            conn.raise_error()
            if conn.closed:
                raise ReadError("the connection closed")
            await conn.wait(self._timeout)

    def release(self) -> None:
        """Done with the response: keep its connection if it can carry another exchange."""
        if self._released:
            return
        self._released = True
        conn = self._conn
        conn.finished()
        if conn.complete and conn.keep_alive and conn.error is None and not conn.chunks and conn.usable():
            self._pool.keep(conn)
        else:
            conn.close()


def _decoder(encoding: str | None) -> Any:
    if not encoding:
        return None
    encoding = encoding.strip().lower()
    if encoding == "identity":
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(zlib.MAX_WBITS | 16)
    if encoding == "deflate":
        return _Deflate()
    raise DecodingError(f"unsupported Content-Encoding {encoding!r}")


class _Deflate:
    """``deflate`` as httpx reads it: zlib-wrapped, or raw when that fails at once."""

    def __init__(self) -> None:
        self.first = True
        self.obj = zlib.decompressobj()

    def decompress(self, data: bytes, max_length: int = 0) -> bytes:
        if self.first:
            self.first = False
            try:
                return self.obj.decompress(data, max_length)
            except zlib.error:
                self.obj = zlib.decompressobj(-zlib.MAX_WBITS)
        return self.obj.decompress(data, max_length)

    @property
    def unconsumed_tail(self) -> bytes:
        return self.obj.unconsumed_tail

    def flush(self) -> bytes:
        return self.obj.flush()


def _inflate(decoder: Any, data: bytes) -> Iterator[bytes]:
    """``data`` decompressed, in pieces of at most ``_INFLATE_PIECE`` bytes: the
    caller counts them and stops (closing this generator) past its own bound."""
    try:
        while True:
            piece = bytes(decoder.decompress(data, _INFLATE_PIECE))
            data = decoder.unconsumed_tail
            if piece:
                yield piece
            if not data and len(piece) < _INFLATE_PIECE:
                return
    except zlib.error as exc:
        raise DecodingError(str(exc)) from exc


def _flush(decoder: Any) -> bytes:
    try:
        return bytes(decoder.flush())
    except zlib.error as exc:
        raise DecodingError(str(exc)) from exc


class Http11Pool:
    """Keep-alive HTTP/1.1 connections to one ``host:port``, most recently used first.

    There is no cap on connections in use: every request gets one at once (a slow
    tool call or an open stream never makes another request wait); at most
    ``max_idle`` are kept between exchanges. ``proxy``: the connections go to an HTTP
    proxy (requests name whole URLs); ``extra`` is header lines for every request
    (``Proxy-Authorization``, when the proxy URL had credentials). ``addresses``: the
    IP addresses to connect to, tried in turn, instead of looking ``host`` up again
    (the SSRF guard checked these; TLS still names ``host``). ``unix``: the path of a
    Unix socket to connect to instead (worker processes relaying to each other).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        tls: ssl.SSLContext | None,
        max_idle: int = 32,
        proxy: bool = False,
        proxy_auth: str | None = None,
        addresses: tuple[str, ...] = (),
        unix: str | None = None,
    ) -> None:
        self.host = host
        self.unix = unix
        self.port = port
        self.addresses = addresses
        self.tls = tls
        self.max_idle = max_idle
        self.proxy = proxy
        # Extra header lines on every request through this pool (Proxy-Authorization).
        self.extra = f"proxy-authorization: {proxy_auth}\r\n" if proxy_auth else ""
        self._idle: list[_Connection] = []
        self._closed = False

    async def request(
        self,
        data: bytes,
        *,
        connect_timeout: float | None,
        read_timeout: float | None,
        write_timeout: float | None,
    ) -> Response:
        """Send ``data`` (a whole request); the response, once its headers are in."""
        conn = await self._acquire(connect_timeout)
        try:
            conn.send(data)
            await conn.drain(write_timeout)
            while not conn.headers_done:
                conn.raise_error()
                if conn.closed:
                    raise RemoteProtocolError("Server disconnected without sending a response.")
                await conn.wait(read_timeout)
            return Response(self, conn, read_timeout)
        except BaseException:
            conn.finished()
            conn.close()
            raise

    async def _acquire(self, timeout: float | None) -> _Connection:
        idle = self._idle
        loop = asyncio.get_running_loop()
        while idle:
            conn = idle.pop()
            # As httpcore does: a server that closed a connection kept idle for a while
            # (uvicorn: after 5 s) may have said so since the event loop last looked.
            if conn.usable() and (loop.time() - conn.idle_since < _STALE_CHECK or not conn.readable()):
                return conn
            conn.close()
        if self._closed:
            raise ConnectError("the connection pool is closed")
        try:
            _, conn = await asyncio.wait_for(self._connect(loop), timeout)
        except TimeoutError:
            raise ConnectTimeout(f"no connection to {self.host}:{self.port} within {timeout:g}s") from None
        except ssl.SSLError as exc:
            raise ConnectError(f"TLS with {self.host}:{self.port} failed: {exc}") from exc
        except OSError as exc:
            raise ConnectError(f"All connection attempts to {self.host}:{self.port} failed: {exc}") from exc
        return conn

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> tuple[asyncio.BaseTransport, _Connection]:
        """A connection to ``host``, or to the first of ``addresses`` that answers."""
        if self.unix is not None:
            return await loop.create_unix_connection(lambda: _Connection(loop), self.unix)
        server_hostname = self.host if self.tls is not None else None
        for address in self.addresses[:-1]:
            try:
                return await loop.create_connection(
                    lambda: _Connection(loop), address, self.port, ssl=self.tls, server_hostname=server_hostname
                )
            except OSError:  # the next address may answer; the last one's error is raised
                continue
        last = self.addresses[-1] if self.addresses else self.host
        return await loop.create_connection(
            lambda: _Connection(loop), last, self.port, ssl=self.tls, server_hostname=server_hostname
        )

    def keep(self, conn: _Connection) -> None:
        if self._closed or len(self._idle) >= self.max_idle:
            conn.close()
        else:
            conn.idle_since = conn._loop.time()
            self._idle.append(conn)

    def close(self) -> None:
        """Close the idle connections; those in use close when they are released."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

