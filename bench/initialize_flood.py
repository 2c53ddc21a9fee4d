"""The ``initialize`` flood of issue 7, measured against a real server process.

Starts ``tests/fixtures/servers/auth_http_server.py`` (the sample server through ``serve_http``,
so with the GC tuning of ``transports/_tuning.py``) with a session cap, opens one
session and leaves a ``sleepy`` tool call running on it, then sends ``--total``
anonymous ``initialize`` requests from ``--connections`` keep-alive loopback
connections (raw sockets, HTTP/1.1). It prints the rate of each 5,000, the server's
RSS after 10,000 and after 30,000 (when reached), and checks the rules: no 5xx, the
session in use survives the flood, and ending it answers the running call with a
JSON-RPC error. Exit status 1 if a rule is broken. Bounded: it stops after ``--total``.

With ``--principals N`` the flood is authenticated, spread over N principals in turn
(``Authorization: Bearer flood<k>``), each held to ``--per-principal`` sessions (the
server's ``max_sessions_per_principal``; by default the cap, so the anonymous flood
meets the table's cap alone); the session in use then belongs to another principal.

    .venv/bin/python bench/initialize_flood.py --cap 1000 --total 30000
    .venv/bin/python bench/initialize_flood.py --cap 1000 --total 30000 --principals 20 --per-principal 40
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "fixtures" / "servers" / "auth_http_server.py"
BLOCK = 5_000
LEGACY = "2025-11-25"
INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "flood", "version": "0"}},
    }
).encode()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Flood:
    def __init__(self, port: int, pid: int, total: int, principals: int = 0) -> None:
        self.principals = principals
        self.port = port
        self.pid = pid
        self.total = total
        self.sent = 0
        self.statuses: dict[int, int] = {}
        self.blocks: list[float] = []
        self.rss: dict[int, float] = {}
        self._block_start = time.perf_counter()

    def _done_one(self, status: int) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1
        done = sum(self.statuses.values())
        if done % BLOCK == 0:
            now = time.perf_counter()
            self.blocks.append(BLOCK / (now - self._block_start))
            self._block_start = now
        if done in (10_000, 30_000):
            self.rss[done] = rss_mb(self.pid)

    async def connection(self) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {len(INITIALIZE)}\r\n"
        ).encode()
        heads = [head + b"\r\n"]
        if self.principals:
            heads = [head + b"Authorization: Bearer flood%d\r\n\r\n" % k for k in range(self.principals)]
        try:
            while self.sent < self.total:
                self.sent += 1
                writer.write(heads[self.sent % len(heads)] + INITIALIZE)
                status_line = await asyncio.wait_for(reader.readline(), 15)
                length = 0
                while (line := await asyncio.wait_for(reader.readline(), 15)) not in (b"\r\n", b""):
                    name, _, value = line.partition(b":")
                    if name.lower() == b"content-length":
                        length = int(value)
                await asyncio.wait_for(reader.readexactly(length), 15)
                self._done_one(int(status_line.split()[1]))
        finally:
            writer.close()

    async def run(self, connections: int) -> None:
        self._block_start = time.perf_counter()
        await asyncio.gather(*(self.connection() for _ in range(connections)))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def session_headers(session_id: str) -> dict[str, str]:
    return {"accept": "application/json, text/event-stream", "mcp-session-id": session_id, "mcp-protocol-version": LEGACY}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cap", type=int, default=1_000, help="max_sessions of the server (default 1000)")
    parser.add_argument("--total", type=int, default=30_000, help="initialize requests to send (default 30000)")
    parser.add_argument("--connections", type=int, default=8, help="concurrent connections (default 8)")
    parser.add_argument("--principals", type=int, default=0, help="principals the flood comes from (default 0: anonymous)")
    parser.add_argument("--per-principal", type=int, default=None, help="max_sessions_per_principal (default: the cap)")
    args = parser.parse_args(argv)

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    log = tempfile.TemporaryFile()
    # This checkout's modelctx, whichever one the venv installed.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    per_principal = args.per_principal if args.per_principal is not None else args.cap
    command = [sys.executable, str(SERVER), str(port), str(args.cap), str(per_principal)]
    # The session in use: anonymous like an anonymous flood, else another principal's.
    owner = {"authorization": "Bearer alice"} if args.principals else {}
    server = subprocess.Popen(command, stdout=log, stderr=log, env=env)
    broken: list[str] = []
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start") from None
                time.sleep(0.1)
        http = httpx.Client(timeout=30)
        opened = http.post(url, content=INITIALIZE, headers={"content-type": "application/json", "accept": "application/json", **owner})
        busy = opened.headers["mcp-session-id"]
        running: dict[str, Any] = {}

        def sleepy() -> None:
            message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "sleepy", "arguments": {"seconds": 600}}}
            with httpx.Client(timeout=60) as own:
                running["response"] = own.post(url, json=message, headers={**session_headers(busy), **owner})

        thread = threading.Thread(target=sleepy, daemon=True)
        thread.start()
        time.sleep(0.5)  # let the call reach its handler (a bench, not a test)

        flood = Flood(port, server.pid, args.total, args.principals)
        asyncio.run(flood.run(args.connections))

        alive = http.post(
            url, json={"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}},
            headers={**session_headers(busy), **owner},
        )
        http.delete(url, headers={**session_headers(busy), **owner})
        thread.join(30)
        ended = running.get("response")
        who = f"{args.principals} principals of {per_principal} sessions each" if args.principals else "anonymous"
        print(f"cap {args.cap}, {args.total} initializes over {args.connections} connections, {who}")
        print("statuses:", dict(sorted(flood.statuses.items())))
        print("initialize/s per 5,000:", ", ".join(f"{rate:,.0f}" for rate in flood.blocks))
        for count, rss in flood.rss.items():
            print(f"RSS after {count:,}: {rss:.1f} MB")
        print("alive:", alive.status_code, "ended:", ended and (ended.status_code, ended.text[:200]))
        if any(status >= 500 for status in flood.statuses):
            broken.append("a 5xx was answered")
        if alive.status_code != 200:
            broken.append(f"the session in use was evicted ({alive.status_code})")
        if ended is None or not ended.content or "error" not in ended.json():
            broken.append(f"the running call got no JSON-RPC answer ({ended and ended.status_code})")
        http.close()
    finally:
        server.terminate()
        server.wait(10)
    for rule in broken:
        print("BROKEN:", rule)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
