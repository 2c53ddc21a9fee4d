"""Memory under load (issue 13): after 100,000 stateless requests a server process holds
no more memory than after 1,000, within noise; idle handshake-era sessions expire, and
however many a client opens, the table's cap bounds what they hold.

The server is a real `server.run("http")` subprocess; its resident set size is read from
/proc. The load is HTTP/1.1 keep-alive connections with many requests pipelined on each
(uvicorn answers them in order), so 100,000 requests take seconds, not minutes.
"""

from __future__ import annotations

import json
import socket
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.scale_processes import PROTOCOL, Processes, free_port, post_json, tools_call
from tests.support.wire import DEADLINE

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc (Linux)")

SERVER = textwrap.dedent('''
    import sys

    from modelctx import Server

    server = Server("memory-demo", "1.0")


    @server.tool
    async def echo(text: str) -> str:
        """Echo the text back."""
        return text


    if __name__ == "__main__":
        port, idle, cap = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
        server.run("http", port=port, session_idle_seconds=idle, max_sessions=cap, ready_message="ready")
''')

#: What "within noise" allows: the allocator keeps freed arenas, and a few MiB come and go
#: with garbage collection; a leak of even 100 bytes a request would be 10 MiB here.
NOISE = 4 * 1024 * 1024


def rss(pid: int) -> int:
    """The resident set size of ``pid`` in bytes (VmRSS in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def _request(port: int) -> bytes:
    body = json.dumps(tools_call("echo", {"text": "hi"})).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {PROTOCOL}\r\n"
        f"Mcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _read_answers(sock: socket.socket, count: int, buffer: bytearray) -> None:
    """Read ``count`` whole responses (status 200, Content-Length bodies) off ``sock``."""
    while count:
        end = buffer.find(b"\r\n\r\n")
        if end < 0 or len(buffer) < end + 4 + _length(buffer[:end]):
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise AssertionError(f"the server closed the connection with {count} answers owed")
            buffer += chunk
            continue
        head = bytes(buffer[:end])
        if not head.startswith(b"HTTP/1.1 200"):
            raise AssertionError(f"expected 200, got {head[:200]!r}")
        del buffer[: end + 4 + _length(head)]
        count -= 1


def _length(head: bytes | bytearray) -> int:
    for line in bytes(head).split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    raise AssertionError(f"no Content-Length in {bytes(head)[:200]!r}")


def pipelined_load(port: int, total: int, connections: int = 4, window: int = 100) -> None:
    """Send ``total`` stateless tools/call over ``connections`` keep-alive connections,
    ``window`` requests written at once on each; every answer must be a 200."""
    request = _request(port)
    failures: list[BaseException] = []

    def connection(share: int) -> None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
                buffer = bytearray()
                while share:
                    batch = min(window, share)
                    sock.sendall(request * batch)
                    _read_answers(sock, batch, buffer)
                    share -= batch
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            failures.append(exc)

    shares = [total // connections + (1 if i < total % connections else 0) for i in range(connections)]
    threads = [threading.Thread(target=connection, args=(share,)) for share in shares]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "the load did not finish within 120 s"
    assert not failures, failures[0]


@pytest.fixture
def serve(tmp_path: Path) -> Any:
    script = tmp_path / "memory_server.py"
    script.write_text(SERVER)
    with Processes(tmp_path / "procs") as procs:

        def start(idle: float = 900.0, cap: int = 10_000) -> Any:
            port = free_port()
            argv = [sys.executable, str(script), str(port), str(idle), str(cap)]
            return procs.start("memory-server", argv, port, ready_text="ready")

        yield start


def test_after_100_000_stateless_requests_the_server_holds_no_more_than_after_1_000(serve):
    server = serve()
    pipelined_load(server.port, 1_000)
    after_1k = rss(server.pid)
    pipelined_load(server.port, 99_000)
    after_100k = rss(server.pid)
    assert post_json(server.port, tools_call("echo", {"text": "still"}))["result"]["content"][0]["text"] == "still"
    grown = after_100k - after_1k
    print(f"RSS after 1,000: {after_1k / 2**20:.1f} MiB; after 100,000: {after_100k / 2**20:.1f} MiB")
    assert grown <= NOISE, f"grew {grown / 2**20:.1f} MiB from 1,000 to 100,000 requests"


def _initialize(client: httpx.Client, url: str) -> str:
    reply = client.post(url, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }, headers={"accept": "application/json, text/event-stream"})  # fmt: skip
    assert reply.status_code == 200, reply.text
    return reply.headers["mcp-session-id"]


def _ping(client: httpx.Client, url: str, session: str) -> int:
    reply = client.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers={
        "accept": "application/json, text/event-stream", "mcp-session-id": session,
        "mcp-protocol-version": "2025-11-25",
    })  # fmt: skip
    return reply.status_code


def test_an_idle_handshake_session_expires(serve):
    server = serve(idle=1.0)
    with httpx.Client(timeout=DEADLINE) as client:
        session = _initialize(client, server.url)
        assert _ping(client, server.url, session) == 200
        time.sleep(1.5)  # past the idle timeout given to server.run(session_idle_seconds=1.0)
        assert _ping(client, server.url, session) == 404  # expired: the client must initialize again


def test_sessions_past_the_cap_hold_no_more_memory_than_the_cap_does(serve):
    server = serve(cap=200)
    with httpx.Client(timeout=DEADLINE) as client:
        for _ in range(400):
            _initialize(client, server.url)
        at_cap = rss(server.pid)
        for _ in range(2_000):  # each initialize past the cap evicts the least recently used idle session
            _initialize(client, server.url)
        after = rss(server.pid)
    print(f"RSS with the table full: {at_cap / 2**20:.1f} MiB; after 2,000 more sessions: {after / 2**20:.1f} MiB")
    assert after - at_cap <= NOISE
