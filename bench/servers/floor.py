"""The floor: the least a server can do to answer the benchmark's requests.

It parses each request (msgspec, as modelctx does), takes the text to echo, and writes
the answer, with nothing else: no validation, no dispatch, no tool. No real server can
be faster on the same loop, so "ours/floor" says how much of the time is our own work.

    python floor.py              # stdio: plain asyncio, as ``modelctx serve`` uses
    python floor.py http PORT    # a bare ASGI app on 127.0.0.1:PORT, on the same uvicorn,
                                 # httptools and uvloop as ``modelctx serve --http``
"""

from __future__ import annotations

import asyncio
import sys

import msgspec

_decode = msgspec.json.decode
_encode = msgspec.json.encode


def answer(body: bytes) -> bytes:
    request = _decode(body)
    text = request["params"]["arguments"]["text"]
    return _encode({
        "jsonrpc": "2.0",
        "id": request["id"],
        "result": {"content": [{"type": "text", "text": text}], "resultType": "complete"},
    })  # fmt: skip


# -- HTTP: a bare ASGI app -----------------------------------------------------------

_HEADERS = [(b"content-type", b"application/json")]


async def app(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    data = answer(body)
    await send({"type": "http.response.start", "status": 200,
                "headers": [*_HEADERS, (b"content-length", str(len(data)).encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": data})


def serve_http(port: int) -> None:
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                http="httptools", loop="uvloop", lifespan="on")  # fmt: skip


# -- stdio: one line in, one line out ------------------------------------------------


async def serve_stdio() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 16)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    transport, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout.buffer)
    pending = b""
    while chunk := await reader.read(1 << 16):
        *lines, pending = (pending + chunk).split(b"\n")
        if lines:
            transport.write(b"".join([answer(line) + b"\n" for line in lines if line.strip()]))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        serve_http(int(sys.argv[2]))
    else:
        asyncio.run(serve_stdio())
