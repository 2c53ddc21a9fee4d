"""CPU per ``tools/call`` through ``HttpApp`` in this process, no sockets: a fake ASGI
receive/send, so the figure is the app's own work (guards, era, session, dispatch, reply).

    PYTHONPATH=src python bench/micro_http_app.py [N]

Prints microseconds of process CPU per request for a 2026-07-28 call and a handshake
session's call (``time.process_time`` over N requests each, best of 3 rounds).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import msgspec

from modelctx import Server
from modelctx.protocol.versions import HANDSHAKE_VERSIONS, LATEST
from modelctx.transports.http import HttpApp

server = Server("bench-echo", "1.0")


@server.tool
async def echo(text: str) -> str:
    """Echo the text back."""
    return text


def _scope(headers: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "http", "method": "POST", "path": "/mcp",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }


async def _post(app: HttpApp, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
    sent: list[dict[str, Any]] = []
    done = False

    async def receive() -> dict[str, Any]:
        nonlocal done
        if not done:
            done = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(_scope(headers), receive, send)
    # A server's loop runs between requests: the cancelled disconnect watcher ends here
    # (without this, a handler that never suspends leaves them queued and the loop slows).
    await asyncio.sleep(0)
    start = sent[0]
    head = {k.decode(): v.decode() for k, v in start.get("headers", [])}
    return start["status"], head, b"".join(m.get("body", b"") for m in sent[1:])


async def main(n: int) -> None:
    app = HttpApp(server)
    async with server.running():
        base = {"host": "127.0.0.1:8000", "content-type": "application/json",
                "accept": "application/json, text/event-stream"}
        meta = {"io.modelcontextprotocol/protocolVersion": LATEST,
                "io.modelcontextprotocol/clientCapabilities": {}}
        modern = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                      "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": meta}})
        modern_headers = {**base, "mcp-protocol-version": LATEST, "mcp-method": "tools/call", "mcp-name": "echo"}
        version = HANDSHAKE_VERSIONS[0]
        init = msgspec.json.encode({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}}})
        status, head, _ = await _post(app, base, init)
        assert status == 200, status
        session = {**base, "mcp-session-id": head["mcp-session-id"], "mcp-protocol-version": version}
        await _post(app, session, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        handshake = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                         "params": {"name": "echo", "arguments": {"text": "hi"}}})
        for name, headers, body in (("2026-07-28", modern_headers, modern), ("handshake", session, handshake)):
            status, _, reply = await _post(app, headers, body)
            assert status == 200 and b'"hi"' in reply, (status, reply)
            best = float("inf")
            for _ in range(3):
                c0 = time.process_time()
                for _ in range(n):
                    await _post(app, headers, body)
                best = min(best, (time.process_time() - c0) / n * 1e6)
            print(f"{name:>10}: {best:6.1f} us CPU per tools/call (best of 3 x {n})")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000))
