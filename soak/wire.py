"""Raw traffic for the soak run: HTTP/1.1 over a socket and JSON lines over a pipe.

The faults need what a ``Client`` never does on purpose: a connection dropped after the
first bytes of a reply, a body that is not JSON, a ``Content-Length`` past the limit, a
session id nobody issued, a stream cut mid-way. So these helpers speak the bytes
themselves. Every read has a deadline (``IO_TIMEOUT``): a server that stops answering
costs seconds and an unexpected error, never a stuck run.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
IO_TIMEOUT = 20.0
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def request(
    request_id: int | str, method: str, params: dict[str, Any] | None = None, *, modern: bool = True
) -> dict[str, Any]:
    """A JSON-RPC request; a modern one carries the 2026-07-28 envelope in ``_meta``."""
    params = dict(params or {})
    if modern:
        params["_meta"] = {**META, **params.get("_meta", {})}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def initialize(request_id: int = 1) -> dict[str, Any]:
    """A 2025-11-25 ``initialize`` request."""
    return request(
        request_id,
        "initialize",
        {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "soak-raw", "version": "0"}},
        modern=False,
    )


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    """The headers of a 2026-07-28 POST (streamable-http.mdx: the mirrored method and name)."""
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


@dataclass
class Reply:
    """What an HTTP exchange got back: the status, the headers (lower-case) and the body."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body)

    def sse_messages(self) -> list[Any]:
        """The JSON-RPC messages in an SSE body (one per ``data:`` event)."""
        return [json.loads(line[5:]) for line in self.body.decode().splitlines() if line.startswith("data:")]


class Http:
    """One-shot HTTP/1.1 exchanges with the MCP endpoint at ``host:port`` + ``path``."""

    def __init__(self, port: int, path: str = "/mcp") -> None:
        self.port = port
        self.path = path

    def head(self, verb: str, headers: dict[str, str], length: int | None) -> bytes:
        lines = [f"{verb} {self.path} HTTP/1.1", f"Host: 127.0.0.1:{self.port}", "Connection: close"]
        base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        lines += [f"{k}: {v}" for k, v in {**base, **headers}.items()]
        if length is not None:
            lines.append(f"Content-Length: {length}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    async def open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.port), IO_TIMEOUT)

    async def exchange(self, verb: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> Reply:
        """Send one request and read the whole reply (the server closes after it)."""
        reader, writer = await self.open()
        try:
            writer.write(self.head(verb, headers or {}, None if body is None else len(body)) + (body or b""))
            await writer.drain()
            return parse(await asyncio.wait_for(reader.read(), IO_TIMEOUT))
        finally:
            await close(writer)

    async def post(self, message: Any, headers: dict[str, str] | None = None) -> Reply:
        return await self.exchange("POST", json.dumps(message).encode(), headers)


async def read_head(reader: asyncio.StreamReader) -> Reply:
    """Read a reply's status line and headers, not its body."""
    raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IO_TIMEOUT)
    return parse(raw)


async def close(writer: asyncio.StreamWriter) -> None:
    """Close a connection at once, whatever the peer does (a dropped client)."""
    writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), 5)
    except (OSError, TimeoutError):
        pass


def parse(raw: bytes) -> Reply:
    """Split a raw HTTP/1.1 reply; de-chunk a chunked body."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise ValueError(f"not an HTTP reply: {raw[:200]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = _dechunk(body)
    return Reply(int(parts[1]), headers, body)


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return bytes(out)


class Lines:
    """A raw stdio server: JSON lines to its stdin, lines from its stdout, each read bounded."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout

    async def send_raw(self, data: bytes) -> None:
        self.stdin.write(data)
        await asyncio.wait_for(self.stdin.drain(), IO_TIMEOUT)

    async def send(self, message: Any) -> None:
        await self.send_raw(json.dumps(message).encode() + b"\n")

    async def receive(self) -> Any:
        line = await asyncio.wait_for(self.stdout.readline(), IO_TIMEOUT)
        if not line:
            raise EOFError("the stdio server closed its stdout")
        return json.loads(line)

    async def answer(self, request_id: int | str | None) -> Any:
        """The response to ``request_id``; notifications before it are skipped."""
        while True:
            message = await self.receive()
            if "method" not in message and message.get("id") == request_id:
                return message
