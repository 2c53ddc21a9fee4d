"""Small ASGI helpers shared by the Streamable HTTP server modules."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ..protocol import encode
from ..protocol.framing import SSE_KEEPALIVE

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
ASGISend = Callable[[dict[str, Any]], Awaitable[None]]

JSON_HEADERS = [(b"content-type", b"application/json")]
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
KEEPALIVE_SECONDS = 15.0


# Headers the spec defines once (streamable-http.mdx; RFC 9110 for Host and Content-Type):
# a second copy is refused, since a proxy that reads the first and a server that reads the
# last would act on different values (header smuggling). ``mcp-param-*`` counts as well.
SINGLE_HEADERS = frozenset(
    {
        "mcp-method",
        "mcp-name",
        "mcp-protocol-version",
        "mcp-session-id",
        "content-type",
        "host",
        "last-event-id",
    }
)
# Of those, the request metadata headers: a duplicate is a malformed metadata header,
# which the transport page answers with HeaderMismatch (-32020, "required headers are
# missing/malformed"); a duplicate of the others is a plain Invalid Request (-32600).
METADATA_HEADERS = frozenset({"mcp-method", "mcp-name", "mcp-protocol-version"})


def app_path(scope: Scope) -> str:
    """The request's path inside this app, without a trailing slash ("/" at least).

    ASGI's ``path`` holds the whole path, ``root_path`` included (the spec; Starlette's
    ``Mount`` since 0.35, uvicorn's ``--root-path``), but older mounts strip the prefix
    from ``path``: a ``root_path`` is taken off only when ``path`` starts with it as whole
    segments. The URL the client sent is ``root_path`` followed by this.
    """
    path: str = scope["path"]
    root: str = scope.get("root_path", "").rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root):]
    return path.rstrip("/") or "/"


def sent_path(scope: Scope) -> str:
    """The path the client sent this request to: the app's ``root_path`` and ``app_path``."""
    root: str = scope.get("root_path", "")
    return root.rstrip("/") + app_path(scope)


def fold_headers(raw: list[tuple[bytes, bytes]]) -> tuple[dict[str, str], str | None]:
    """The request's headers as a dict (names lower case, values stripped), and the
    name of a header the spec defines once that came more than once (else None).

    The dict is built first; only when it holds fewer entries than the request sent
    lines (some name repeated, rare) are the repeats examined, so the common request
    pays nothing more. Repeats of other headers are joined with ", " (RFC 9110 5.3).
    """
    headers = {k.decode("latin-1"): v.decode("latin-1").strip(" \t") for k, v in raw}
    if len(headers) == len(raw):
        return headers, None
    seen: dict[str, list[str]] = {}
    for key, value in raw:
        seen.setdefault(key.decode("latin-1"), []).append(value.decode("latin-1").strip(" \t"))
    for name, values in seen.items():
        if len(values) > 1:
            if name in SINGLE_HEADERS or name.startswith("mcp-param-"):
                return headers, name
            headers[name] = ", ".join(values)
    return headers, None


def split_host(value: str) -> tuple[str, str] | None:
    """``(name, port)`` of a Host value (RFC 9110 7.2: uri-host [":" port]), the name
    lower case, the port "" when absent; None when malformed. A bracketed IPv6 literal
    keeps its brackets; nothing may follow the port (``[::1]evil.com`` is malformed)."""
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[: end + 1], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:]
    else:
        name, _, port = value.partition(":")
        if not name or not _NOT_IN_HOST.isdisjoint(name):
            return None
    if port and not (port.isascii() and port.isdigit()):
        return None
    return name.lower(), port


_NOT_IN_HOST = frozenset(":/?#[]@ \t\\")


def media_type(value: str) -> tuple[str, dict[str, str]]:
    """``(type/subtype, parameters)`` of one media type (RFC 9110 8.3.1), names lower case."""
    main, *params = value.split(";")
    parameters: dict[str, str] = {}
    for param in params:
        key, _, val = param.partition("=")
        parameters[key.strip().lower()] = val.strip().strip('"')
    return main.strip().lower(), parameters


def is_json_type(content_type: str) -> bool:
    """True when a Content-Type is ``application/json`` (any case, charset UTF-8 if given)."""
    if content_type == "application/json":
        return True  # the common case, without parsing
    kind, params = media_type(content_type)
    return kind == "application/json" and params.get("charset", "utf-8").lower() == "utf-8"


def accepts(accept: str, wanted: str) -> bool:
    """True when an Accept value (RFC 9110 12.5.1) admits the media type ``wanted``:
    listed as itself, ``type/*`` or ``*/*``, with a q-value above zero."""
    kind = wanted.split("/", 1)[0]
    for item in accept.split(","):
        main, params = media_type(item)
        if main in (wanted, f"{kind}/*", "*/*"):
            try:
                if float(params.get("q", "1")) > 0:
                    return True
            except ValueError:
                continue
    return False


class BodyTimeout(Exception):
    """The request body did not arrive whole within its deadline."""


class BodyDeadlines:
    """A whole-body deadline of ``timeout`` seconds for every body read through ``read``.

    One timer sweeps all reads in progress (every ``timeout / 4`` seconds, at most 1 s)
    and cancels the overdue ones, so a read costs a dict entry instead of a timer of its
    own (measured: ``asyncio.timeout`` adds 4.7 us a request, this 1.1 us). A deadline is met
    within one sweep period.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._period = min(1.0, timeout / 4)
        self._reads: dict[asyncio.Task[Any], float] = {}
        self._overdue: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def read(self, receive: Receive, limit: int) -> bytes | None:
        """``read_body`` within the deadline; past it, ``BodyTimeout``."""
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        self._reads[task] = loop.time() + self.timeout
        if self._timer is None or self._loop is not loop:
            self._loop, self._timer = loop, loop.call_later(self._period, self._sweep)
        try:
            return await read_body(receive, limit)
        except asyncio.CancelledError:
            # Ours (the sweep cancelled it) and no one else's: the deadline passed.
            if task in self._overdue and task.uncancel() == 0:
                raise BodyTimeout from None
            raise
        finally:
            self._reads.pop(task, None)
            self._overdue.discard(task)

    def _sweep(self) -> None:
        assert self._loop is not None
        now = self._loop.time()
        overdue = [task for task, deadline in self._reads.items() if deadline <= now]
        for task in overdue:
            del self._reads[task]
            self._overdue.add(task)
            task.cancel()
        self._timer = self._loop.call_later(self._period, self._sweep) if self._reads else None


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body; None when it exceeds ``limit`` bytes; b"" when the client left."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def wait_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def send_json(
    send: ASGISend, status: int, message: dict[str, Any], extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    """One JSON response of ``status``."""
    body = encode(message)
    headers = JSON_HEADERS + [(b"content-length", str(len(body)).encode())]
    if extra:
        headers += extra
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_plain(
    send: ASGISend, status: int, text: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(text)).encode())]
    if extra:
        headers += extra
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": text})


async def send_empty(send: ASGISend, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})




async def wait_or_keepalive(
    waiter: asyncio.Future[Any], watcher: asyncio.Future[Any], send: ASGISend, on_idle: Callable[[], None]
) -> bool:
    """Wait for ``waiter`` or for ``watcher`` (the client leaving); after a quiet
    ``KEEPALIVE_SECONDS`` send an SSE keep-alive comment. True when ``waiter`` finished."""
    done, _ = await asyncio.wait(
        (waiter, watcher), timeout=KEEPALIVE_SECONDS, return_when=asyncio.FIRST_COMPLETED
    )
    if waiter in done:
        return True
    waiter.cancel()
    if not done:
        on_idle()
        await send({"type": "http.response.body", "body": SSE_KEEPALIVE, "more_body": True})
    return False
