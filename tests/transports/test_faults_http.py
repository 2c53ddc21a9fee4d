"""Faults a client inflicts on a ``modelctx serve --http`` process (uvicorn on 127.0.0.1).

Raw sockets misbehave where an HTTP library would not: a request split at every byte
boundary, a body sent one byte at a time (by length or in 1-byte chunks), a client that
disconnects while its tool runs (in both eras: the tool sees its cancellation), a
client that never reads a long SSE reply, a flood of requests whose answers nobody
reads. Each test checks that the server goes on answering, that its open descriptors
(``/proc/PID/fd``) come back to where they were, and that its log has no unhandled error.
The server is this module's own, so no other test moves its descriptor count.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.leaks import fd_count, settle, unhandled
from tests.support.wire import SAMPLE_SERVER, HttpServer, McpHttp, request

DEADLINE = 15.0
MODERN = "2026-07-28"
LEGACY = "2025-11-25"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    with HttpServer(SAMPLE_SERVER, tmp_path_factory.mktemp("faults_http") / "server.log") as running:
        yield running


@pytest.fixture
def http(server: HttpServer) -> Iterator[McpHttp]:
    with McpHttp(server) as client:
        yield client
    assert unhandled(server.log) == [], server.log


@pytest.fixture
def steady_fds(server: HttpServer, http: McpHttp) -> Iterator[int]:
    """The server's descriptor count with no request in flight; after the test it must
    come back to it (connections closed, handlers gone)."""
    assert http.call(_echo(0, "warm"))["result"]["content"][0]["text"] == "warm"
    http.client.close()  # our own keep-alive connection would count
    http.client = httpx.Client(timeout=DEADLINE)
    before = fd_count(server.process.pid)
    yield before
    http.client.close()
    http.client = httpx.Client(timeout=DEADLINE)
    assert settle(lambda: fd_count(server.process.pid) <= before), (
        f"the server holds {fd_count(server.process.pid)} descriptors, {before} before the faults"
    )


def _echo(request_id: int, text: str) -> dict[str, Any]:
    return request(request_id, "tools/call", {"name": "echo", "arguments": {"text": text}})


def _raw_post(
    http: McpHttp, message: dict[str, Any], *, extra: Mapping[str, str | None] | None = None, chunked: bool = False
) -> bytes:
    """The bytes of a POST of ``message`` with the headers 2026-07-28 asks for."""
    body = json.dumps(message).encode()
    fields = {
        "host": f"127.0.0.1:{http.server.port}",
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "connection": "close",
        **http.headers_for(message),
        **{name: value for name, value in (extra or {}).items() if value is not None},
    }
    if chunked:
        fields["transfer-encoding"] = "chunked"
        body = b"".join(b"1\r\n" + bytes([byte]) + b"\r\n" for byte in body) + b"0\r\n\r\n"
    else:
        fields["content-length"] = str(len(body))
    head = "POST /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
    return head.encode() + body


def _connect(server: HttpServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _send_in_pieces(server: HttpServer, pieces: list[bytes], pause: float = 0.001) -> bytes:
    """Send the pieces apart, then read the whole reply (the server closes after it)."""
    with _connect(server) as sock:
        for piece in pieces:
            sock.sendall(piece)
            time.sleep(pause)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


def _json_reply(reply: bytes) -> dict[str, Any]:
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.split()[1] == b"200", reply[:300]
    return dict(json.loads(body))


# -- partial frames ----------------------------------------------------------------------------
def test_a_request_split_at_every_byte_boundary_is_served(server: HttpServer, http: McpHttp, steady_fds: int) -> None:
    wire = _raw_post(http, _echo(1, "split ✓"))
    for at in range(1, len(wire)):
        reply = _json_reply(_send_in_pieces(server, [wire[:at], wire[at:]], pause=0.002))
        assert reply["result"]["content"][0]["text"] == "split ✓", f"split at byte {at}"


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "1-byte-chunks"])
def test_a_body_sent_one_byte_at_a_time_is_served(
    server: HttpServer, http: McpHttp, steady_fds: int, chunked: bool
) -> None:
    wire = _raw_post(http, _echo(1, "byte by byte"), chunked=chunked)
    head, _, body = wire.partition(b"\r\n\r\n")
    reply = _json_reply(_send_in_pieces(server, [head + b"\r\n\r\n", *(bytes([b]) for b in body)]))
    assert reply["result"]["content"][0]["text"] == "byte by byte"


def test_requests_pipelined_in_one_write_are_each_answered_in_order(
    server: HttpServer, http: McpHttp, steady_fds: int
) -> None:
    # The opposite of a split: five requests in one segment, the last asking to close.
    posts = [_raw_post(http, _echo(n, f"pipelined {n}"), extra={"connection": "keep-alive"}) for n in range(4)]
    wire = b"".join(posts) + _raw_post(http, _echo(4, "pipelined 4"))
    reply = _send_in_pieces(server, [wire])
    assert reply.count(b"HTTP/1.1 200 OK") == 5, reply[:500]
    texts = [reply.index(f"pipelined {n}".encode()) for n in range(5)]
    assert texts == sorted(texts)


# -- a client that disconnects while a tool runs ----------------------------------------------------
def _initialize(http: McpHttp) -> str:
    opened = http.post(
        {
            "jsonrpc": "2.0",
            "id": "init",
            "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "faults", "version": "0"}},
        }
    )
    session_id = opened.headers["mcp-session-id"]
    http.post(
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers={"mcp-session-id": session_id, "mcp-protocol-version": LEGACY},
    )
    return session_id


def _sleepy(era: str, marker: Path) -> tuple[dict[str, Any], dict[str, str]]:
    arguments = {"seconds": 600, "marker": str(marker)}
    if era == MODERN:
        return request(1, "tools/call", {"name": "sleepy", "arguments": arguments}), {}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sleepy", "arguments": arguments}}
    return message, {"mcp-protocol-version": LEGACY}


@pytest.mark.parametrize("era", [MODERN, "handshake"])
def test_a_client_that_disconnects_while_a_tool_runs_cancels_the_tool_and_leaks_nothing(
    server: HttpServer, http: McpHttp, steady_fds: int, tmp_path: Path, era: str
) -> None:
    session = {"mcp-session-id": _initialize(http)} if era == "handshake" else {}
    for round in range(3):
        marker = tmp_path / f"sleepy{round}"
        message, extra = _sleepy(era, marker)
        with _connect(server) as sock:
            sock.sendall(_raw_post(http, message, extra={**extra, **session}))
            assert settle(Path(f"{marker}.started").exists, DEADLINE), "the tool never started"
        assert settle(marker.exists, DEADLINE), f"round {round}: the tool never saw its cancellation"
        assert marker.read_text() == "cancelled"
    if session:
        after = http.post(
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "after"}},
            },
            headers={**session, "mcp-protocol-version": LEGACY},
        )
        assert after.json()["result"]["content"][0]["text"] == "after"  # the session goes on
        http.client.delete(http.url, headers=session)


def test_many_clients_that_disconnect_at_once_while_their_tools_run_cancel_every_tool(
    server: HttpServer, http: McpHttp, steady_fds: int, tmp_path: Path
) -> None:
    markers = [tmp_path / f"sleepy{n}" for n in range(20)]
    sockets = [_connect(server) for _ in markers]
    try:
        for sock, marker in zip(sockets, markers, strict=True):
            sock.sendall(_raw_post(http, _sleepy(MODERN, marker)[0]))
        assert settle(lambda: all(Path(f"{m}.started").exists() for m in markers), DEADLINE)
    finally:
        for sock in sockets:
            sock.close()
    assert settle(lambda: all(m.exists() for m in markers), DEADLINE), "some tool never saw its cancellation"
    assert {m.read_text() for m in markers} == {"cancelled"}


def test_a_client_that_leaves_while_the_server_waits_for_its_elicitation_answer_leaks_nothing(
    server: HttpServer, http: McpHttp, steady_fds: int
) -> None:
    # Handshake era: the question is a server-to-client request on the POST's SSE stream.
    opened = http.post(
        {
            "jsonrpc": "2.0",
            "id": "init",
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {"elicitation": {"form": {}}},
                "clientInfo": {"name": "faults", "version": "0"},
            },
        }
    )
    session_id = opened.headers["mcp-session-id"]
    session: dict[str, str | None] = {"mcp-session-id": session_id, "mcp-protocol-version": LEGACY}
    http.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    for round in range(3):
        register = {"jsonrpc": "2.0", "id": round, "method": "tools/call", "params": {"name": "register"}}
        with _connect(server) as sock:
            sock.sendall(_raw_post(http, register, extra=session))
            asked = b""
            while b"elicitation/create" not in asked:
                chunk = sock.recv(65536)
                assert chunk, f"the server closed the stream before asking: {asked!r}"
                asked += chunk

    def answered_with_a_freed_id() -> bool:
        # The id of a request is in use until the request ends: the server let go of it.
        echo = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "on"}},
        }
        return "result" in http.post(echo, headers=session).json()

    assert settle(answered_with_a_freed_id, DEADLINE), "the abandoned request still holds its id"
    http.client.delete(http.url, headers={"mcp-session-id": session_id})


@pytest.mark.parametrize("cut", ["mid-head", "mid-body"])
def test_a_client_that_leaves_in_the_middle_of_its_request_leaks_nothing(
    server: HttpServer, http: McpHttp, steady_fds: int, cut: str
) -> None:
    wire = _raw_post(http, _echo(1, "never sent whole"))
    head_end = wire.index(b"\r\n\r\n")
    at = head_end // 2 if cut == "mid-head" else head_end + 4 + (len(wire) - head_end - 4) // 2
    for _ in range(10):
        with _connect(server) as sock:
            sock.sendall(wire[:at])
    assert http.call(_echo(2, "after"))["result"]["content"][0]["text"] == "after"


def test_a_listen_stream_whose_client_leaves_leaks_nothing(server: HttpServer, http: McpHttp, steady_fds: int) -> None:
    session = {"mcp-session-id": _initialize(http), "mcp-protocol-version": LEGACY}
    get = (
        f"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1:{server.port}\r\naccept: text/event-stream\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in session.items())
        + "\r\n"
    ).encode()

    def opened_and_left() -> bool:
        # A session has one GET stream: another opens only once the server let go of the last.
        with _connect(server) as sock:
            sock.sendall(get)
            return sock.recv(65536).startswith(b"HTTP/1.1 200 ")

    for round in range(3):
        assert settle(opened_and_left, DEADLINE), f"round {round}: the GET stream of a client that left is held"
    http.client.delete(http.url, headers={"mcp-session-id": session["mcp-session-id"]})


# -- peers that never read -----------------------------------------------------------------------------
def _resident_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))


def test_a_client_that_never_reads_a_long_sse_reply_holds_the_server_to_a_bound(
    server: HttpServer, http: McpHttp, steady_fds: int
) -> None:
    # 200,000 progress notifications (some 40 MB of SSE) to a client that reads none.
    message = request(1, "tools/call", {"name": "progress", "arguments": {"steps": 200_000}}, progressToken="p")
    with _connect(server) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(_raw_post(http, message))
        time.sleep(2.0)  # the handler runs as far as the unread stream lets it
        resident = _resident_mb(server.process.pid)
        assert http.call(_echo(2, "meanwhile"))["result"]["content"][0]["text"] == "meanwhile"
    assert resident < 150, f"the server held {resident} MB for a client that read nothing"


def test_a_flood_of_requests_whose_answers_nobody_reads_is_answered_and_forgotten(
    server: HttpServer, http: McpHttp, steady_fds: int
) -> None:
    text = "x" * 200_000  # each answer fills the socket buffers: the server must wait, not hold
    sockets = []
    try:
        for n in range(50):
            sock = _connect(server)
            sockets.append(sock)
            sock.sendall(_raw_post(http, _echo(n, text)))
        assert http.call(_echo(999, "meanwhile"))["result"]["content"][0]["text"] == "meanwhile"
    finally:
        for sock in sockets:
            sock.close()


def test_the_log_of_the_faulted_server_names_no_unhandled_error(server: HttpServer) -> None:
    assert unhandled(server.log) == [], server.log
