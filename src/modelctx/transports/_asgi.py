"""Small ASGI helpers shared by the Streamable HTTP server modules."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ..protocol._framing import SSE_KEEPALIVE
from ..protocol._jsonrpc import encode

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


async def read_body(receive: Receive, limit: int) -> bytes | None:
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
