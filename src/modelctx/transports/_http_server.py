"""Serving an ``HttpApp`` on a socket: uvicorn with a bounded request head, graceful
shutdown of listen streams, worker processes (``serve_http``) and the listening socket.

``modelctx.transports.http.serve_http`` is this module's ``serve_http``.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import InvalidRequest
from ..protocol.jsonrpc import encode, error_response
from ._siblings import Siblings

if TYPE_CHECKING:
    from .http import HttpApp

__all__ = ["HEADER_TIMEOUT", "LINGER_SECONDS", "MAX_REQUEST_HEAD", "serve_http"]


def _graceful_uvicorn() -> type[Any]:
    import uvicorn

    class Graceful(uvicorn.Server):
        """uvicorn that ends listen streams with their final response before it waits
        for open connections to finish (else they would be cut when its grace runs out)."""

        def __init__(self, config: uvicorn.Config, app: HttpApp, ready: Callable[[], None] | None = None) -> None:
            super().__init__(config)
            self._app = app
            self._ready = ready

        async def startup(self, sockets: list[Any] | None = None) -> None:
            # uvicorn calls this after the ASGI lifespan started: only now is the server
            # ready, so only now is its URL announced (a failed lifespan never gets here).
            await super().startup(sockets)
            if self._ready is not None and not self.should_exit:
                self._ready()

        async def shutdown(self, sockets: list[Any] | None = None) -> None:
            self._app.server.close_subscriptions()
            self._app.end_legacy_streams()
            await super().shutdown(sockets)

    return Graceful


# The bytes a request may take before its headers end. uvicorn's h11 path stops at
# 16 KiB; its httptools path buffers a header line whole with no bound, so a client
# that sends one endless header would grow the server's memory until it dies.
MAX_REQUEST_HEAD = 1024 * 1024
# Seconds a request head may take to arrive whole, from its first byte (the first
# request of a connection: from the connection). uvicorn has no such deadline: its
# keep-alive timeout (5 s) runs only between a response and the next request's first
# byte, and not at all on a new connection, so a peer sending a header byte a second,
# or nothing, would hold a connection for ever.
HEADER_TIMEOUT = 10.0
# Seconds a connection refused before its head ended (431, 408) is still read, its bytes
# dropped, before it closes. Closed at once, with the rest of a 5 MB header unread,
# the kernel answered the peer's next bytes with a reset, which often reached the peer
# before the 431 did: it saw "connection reset" instead of the status.
LINGER_SECONDS = 5.0


def _refusal(status: bytes, message: str) -> bytes:
    """A whole HTTP/1.1 response refusing a request before the app saw it: ``status``
    (the status line's code and reason), a JSON-RPC -32600 error, ``connection: close``."""
    body = encode(error_response(None, InvalidRequest(message)))
    return (
        b"HTTP/1.1 %s\r\ncontent-type: application/json\r\nconnection: close\r\n"
        b"content-length: %d\r\n\r\n%s" % (status, len(body), body)
    )


# The mixin's super() is uvicorn's HttpToolsProtocol, known only once uvicorn is imported.
_Protocol: Any = object


class _BoundedHead(_Protocol):  # type: ignore[misc]
    """Mixed into uvicorn's httptools protocol (``_bounded_httptools``): answers 431 to a request head past
    ``MAX_REQUEST_HEAD`` bytes (counted after each feed, so a body that shares a
    read with its headers is never counted), and 408 to one not whole within
    ``header_timeout`` seconds; either closes the connection.

    The deadline costs a clock read per request: one timer per connection, armed
    when a head begins and no timer is, re-armed for the head open when it fires.
    """

    head_bytes = 0
    refused = False  # answered 431 or 408: what else arrives is dropped until it closes
    in_head = True
    head_open = True  # a head has begun (or the connection opened) and is not whole
    head_started = 0.0
    head_timer: asyncio.TimerHandle | None = None
    header_timeout = HEADER_TIMEOUT  # set by _bounded_httptools

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.head_started = self.loop.time()  # a peer that never sends a byte
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return  # the peer is still sending what was refused: read and drop it
        super().data_received(data)
        if not self.in_head:
            return
        self.head_bytes += len(data)
        if self.head_bytes > MAX_REQUEST_HEAD and not self.transport.is_closing():
            limit = f"Request headers too large: the limit is {MAX_REQUEST_HEAD} bytes"
            self._refuse(b"431 Request Header Fields Too Large", limit)

    def _refuse(self, status: bytes, message: str) -> None:
        """Answer ``status`` and end the connection without a reset: the response,
        then our end of the stream closed (FIN); the peer's bytes are read and
        dropped until it closes too, or for ``LINGER_SECONDS`` at most."""
        self.refused = True
        self.transport.write(_refusal(status, message))
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()

    def on_message_begin(self) -> None:
        if not self.head_open:  # the first head keeps the connection's start
            self.head_open = True
            self.head_started = self.loop.time()
        if self.head_timer is None:
            self._arm()
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self.in_head = self.head_open = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self.in_head, self.head_bytes = True, 0

    def _arm(self) -> None:
        self.head_timer = self.loop.call_at(self.head_started + self.header_timeout, self._head_due)

    def _head_due(self) -> None:
        self.head_timer = None
        if not self.head_open or self.transport.is_closing():
            return
        if self.loop.time() < self.head_started + self.header_timeout:
            self._arm()  # a later head than the one this timer was armed for
            return
        late = f"The request headers did not arrive within {self.header_timeout:g} seconds"
        self._refuse(b"408 Request Timeout", late)


def _bounded_httptools(header_timeout: float = HEADER_TIMEOUT) -> type[Any]:
    """uvicorn's httptools protocol with ``_BoundedHead``'s bounds, ``header_timeout`` its deadline."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class BoundedHead(_BoundedHead, HttpToolsProtocol):
        pass

    BoundedHead.header_timeout = header_timeout
    return BoundedHead


def serve_http(
    server: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    log_level: str = "warning",
    ready_message: str | None = None,
    workers: int = 1,
    **options: Any,
) -> None:
    """Serve ``server`` on Streamable HTTP with uvicorn (httptools, uvloop when present).

    ``header_timeout``: seconds a request head may take to arrive whole (default
    ``HEADER_TIMEOUT``, 10; past it 408 and the connection closed); other ``options``
    go to ``HttpApp``. Without httptools (uvicorn's h11 path) the head is bounded at
    16 KiB by h11 but has no deadline.

    ``workers``: processes serving the one socket (``_workers.serve_workers``: forked
    after the socket is bound, each with its own event loop, ``HttpApp`` and run of the
    server's lifespan; restarted when one dies; a crash loop or a failed lifespan ends
    the server with status 1). Without Redis (``ServerConfig.redis_url``) a handshake
    session belongs to the worker that opened it, and a request for it that reaches
    another worker is relayed to it over a Unix socket (``_siblings``); listen streams
    belong to one worker and hear only its changes: a warning line says so.

    The socket is bound first: an address in use ends the process with one line saying
    so and what to do (``SystemExit``, status 1); ``ready_message``, if given, goes to
    stderr once the server is ready (its lifespan started, its socket listening; with
    workers, once every worker is, followed by "(N workers)").
    """
    import uvicorn

    from ._workers import check_workers, serve_workers
    from .http import HttpApp

    check_workers(workers)  # before the port is bound or anything printed
    header_timeout = float(options.pop("header_timeout", HEADER_TIMEOUT))
    listening = _listen(host, port)

    options.setdefault("tune_gc", True)  # we own this process: tune its collector
    config = _uvicorn_config(host, port, log_level, header_timeout)
    # Built before any fork, so a wrong option fails once, here; it holds nothing of an
    # event loop yet (timers and sessions come with requests), so each worker's copy starts clean.
    shared = getattr(getattr(server, "config", None), "redis_url", None) is not None
    # Without Redis the workers reach each other's sessions through Unix sockets the
    # parent binds now, before it forks (_siblings).
    siblings = Siblings(workers) if workers > 1 and not shared else None
    try:
        app = HttpApp(server, siblings=siblings, **options)

        def serve(ready: Callable[[], None] | None, slot: int | None = None) -> None:
            sockets = [listening]
            if siblings is not None and slot is not None:
                sockets.append(siblings.enter(slot))
            _graceful_uvicorn()(uvicorn.Config(app, **config), app, ready).run(sockets=sockets)

        if workers == 1:
            serve(None if ready_message is None else lambda: print(ready_message, file=sys.stderr, flush=True))
            return
        _before_workers(server, app, workers, shared)
        status = serve_workers(workers, serve, ready_message=ready_message)
    finally:
        if siblings is not None:
            siblings.close()
        listening.close()
    if status:
        raise SystemExit(status)


def _before_workers(server: Any, app: HttpApp, workers: int, shared: bool) -> None:
    """Check what the auth keeps can be shared by ``workers`` processes (DPoP replays:
    ``SystemExit`` saying what to do), and warn of what each worker keeps alone."""
    check = getattr(app.auth, "check_processes", None)
    if check is not None:  # what the auth keeps must be shared by the workers (DPoP replays)
        try:
            check(workers)
        except ValueError as exc:
            raise SystemExit(f"modelctx: {exc}") from None
    tasks = getattr(server, "tasks", None)
    own_tasks = tasks is not None and getattr(tasks.store, "per_process", False)
    if not shared:
        print(
            f"modelctx: warning: {workers} workers without Redis: each handshake-era session lives in "
            "one worker, and requests for it that reach another are relayed to it; subscriptions/listen "
            "streams and changes made in one worker are not heard in the others; give --redis URL "
            "(or MODELCTX_REDIS_URL) to share them"
            + (_OWN_TASKS if own_tasks else ""),
            file=sys.stderr,
            flush=True,
        )
    elif own_tasks:  # a memory store given with Redis configured: nothing relays to it
        print(
            f"modelctx: warning: {workers} workers and a task store in memory: each worker sees only "
            "the tasks it created, so tasks/get reaching another worker finds no task; give a task "
            "file (ServerConfig(task_db=...)) or leave the task store to Redis",
            file=sys.stderr,
            flush=True,
        )


# The warning's sentence for tasks kept in each worker's memory (no Redis, no task file).
_OWN_TASKS = (
    "; tasks are kept in memory by the worker that created them (requests for one are relayed "
    "to it, and it is lost if that worker dies): give --redis URL or a task file "
    "(ServerConfig(task_db=...)) to keep them"
)


def _uvicorn_config(host: str, port: int, log_level: str, header_timeout: float) -> dict[str, Any]:
    config: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": log_level,
        "lifespan": "on",
        "timeout_graceful_shutdown": 3,
        "access_log": False,
        # X-Forwarded-* are trusted only where a deployment says so (uvicorn's
        # forwarded_allow_ips); nothing here reads the client address, so skip the work.
        "proxy_headers": False,
    }
    try:
        import httptools  # noqa: F401

        config["http"] = _bounded_httptools(header_timeout)
    except ImportError:
        pass
    try:
        import uvloop  # noqa: F401

        config["loop"] = "uvloop"
    except ImportError:
        pass
    return config


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            problem = "the address is in use; stop the process listening there or choose another port"
        else:
            problem = f"{exc}; check the host and port"
        raise SystemExit(f"modelctx: cannot listen on {host}:{port}: {problem}") from None
