"""The limits of the served HTTP, each reached on purpose (issue 7, SECURITY.md).

* Sessions per principal (``max_sessions_per_principal``, with ``authenticate``): at
  its quota a principal's ``initialize`` evicts its own least recently used idle
  session; with all of them in use it is refused with 429. Another principal's flood
  never evicts or refuses a principal's sessions while the table has room.
* Requests in flight per handshake session (``max_requests_per_session``): past it,
  429 and a JSON-RPC error; the request never runs.
* ``subscriptions/listen`` streams open at once, per principal and in total
  (``ServerConfig.max_listens_per_principal``, ``max_listens``): past either, a
  JSON-RPC error naming the limit; a stream that ends gives its place back.
* A client that never reads an SSE reply holds the handler, not the server's memory
  (uvicorn's send waits while the socket's buffers are full).
* The request head has a deadline (``serve_http(header_timeout=)``): a head sent a byte
  at a time, or a connection that sends nothing, gets 408 and is closed.

Every server is a real subprocess (``tests/fixtures/servers/limits_http_server.py``) with small
limits, so each is reached with a handful of requests.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.paths import SERVERS
from tests.support.sessions import bearer, call, in_session, initialize, open_session
from tests.support.wire import DEADLINE, McpHttp, free_port, request, stop_process, wait_until

LIMITS_SERVER = SERVERS / "limits_http_server.py"


class LimitsServer:
    def __init__(self, log_path: Path, options: dict[str, Any]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, str(LIMITS_SERVER), str(self.port), json.dumps(options)],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_until(self._ready, "the HTTP server with limits")

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            pytest.fail(f"the server exited:\n{self.log_path.read_text(errors='replace')}")
        return b"ready" in self.log_path.read_bytes()

    def stop(self) -> None:
        stop_process(self.process)
        self._log.close()


@pytest.fixture
def start(tmp_path) -> Iterator[Callable[..., LimitsServer]]:
    started: list[LimitsServer] = []

    def starter(**options: Any) -> LimitsServer:
        server = LimitsServer(tmp_path / f"server{len(started)}.log", options)
        started.append(server)
        return server

    yield starter
    for server in started:
        server.stop()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=DEADLINE) as http:
        yield http


def alive(client: httpx.Client, server: LimitsServer, session_id: str, who: str | None) -> bool:
    return call(client, server, session_id, who, 99, "echo", text="here").status_code == 200


class Held:
    """A ``sleepy`` call in flight on a session, from a thread of its own; ended when
    the server stops."""

    def __init__(self, server: LimitsServer, session_id: str, who: str | None, marker: Path) -> None:
        self._thread = threading.Thread(target=self._run, args=(server, session_id, who, marker), daemon=True)
        self._thread.start()
        wait_until(lambda: Path(str(marker) + ".started").exists(), "the held call to start")

    def _run(self, server: LimitsServer, session_id: str, who: str | None, marker: Path) -> None:
        with httpx.Client(timeout=DEADLINE * 4) as http, contextlib.suppress(httpx.HTTPError):
            call(http, server, session_id, who, marker.name, "sleepy", marker=str(marker))


# -- the session table's cap -------------------------------------------------------------------
def test_at_the_session_cap_initialize_evicts_the_least_recently_used_idle_session(start, client):
    # Three principals, one session each, so no quota is involved: only the table's cap.
    server = start(max_sessions=3)
    first, second, third = (open_session(client, server, who) for who in ("ann", "bea", "cy"))
    assert alive(client, server, first, "ann")  # used: now the second is the least recent

    fourth = initialize(client, server, "dee")

    assert fourth.status_code == 200
    assert not alive(client, server, second, "bea")
    assert alive(client, server, first, "ann") and alive(client, server, third, "cy")


# -- sessions per principal -------------------------------------------------------------------
def test_a_principal_at_its_quota_evicts_its_own_least_recently_used_idle_session(start, client):
    server = start(max_sessions=50, max_sessions_per_principal=3)
    first, second, third = (open_session(client, server, "bob") for _ in range(3))
    assert alive(client, server, first, "bob")  # used: now the second is the least recent

    fourth = initialize(client, server, "bob")

    assert fourth.status_code == 200
    assert not alive(client, server, second, "bob")
    assert alive(client, server, first, "bob") and alive(client, server, third, "bob")


def test_a_flood_from_one_principal_never_evicts_another_principals_sessions(start, client, tmp_path):
    # The table (8) holds Alice's 2 and Bob's quota (3); Bob sends 5x his quota. With no
    # quota, Bob's sessions would fill the table and evict Alice's idle one (the least
    # recently used of all).
    server = start(max_sessions=8, max_sessions_per_principal=3)
    busy = open_session(client, server, "alice")
    Held(server, busy, "alice", tmp_path / "alice")
    idle = open_session(client, server, "alice")

    statuses = {initialize(client, server, "bob").status_code for _ in range(5 * 3)}

    assert statuses == {200}  # Bob made room among his own idle sessions
    assert alive(client, server, busy, "alice")
    assert alive(client, server, idle, "alice")


def test_a_principal_whose_sessions_are_all_in_use_is_refused_with_429(start, client, tmp_path):
    server = start(max_sessions=50, max_sessions_per_principal=2)
    for n in range(2):
        Held(server, open_session(client, server, "bob"), "bob", tmp_path / f"bob{n}")

    refused = initialize(client, server, "bob")

    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    error = refused.json()["error"]
    assert error["code"] == -32603
    assert error["message"].startswith("Too many sessions: all 2 sessions of this principal are in use")
    assert initialize(client, server, "alice").status_code == 200  # only Bob is over his share


# -- requests in flight per session -----------------------------------------------------------
def test_a_request_past_the_sessions_in_flight_cap_is_refused_with_429_and_not_run(start, client, tmp_path):
    server = start(max_requests_per_session=2)
    session = open_session(client, server, None)
    for n in range(2):
        Held(server, session, None, tmp_path / f"held{n}")

    refused = call(client, server, session, None, 3, "echo", text="one too many")

    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    body = refused.json()
    assert body["id"] == 3 and "result" not in body
    assert body["error"]["message"].startswith("Too many requests in flight: this session already runs 2")
    other = open_session(client, server, None)  # the cap is the session's, not the server's
    assert alive(client, server, other, None)


def test_a_second_get_stream_of_a_session_is_refused_with_409(start, client):
    server = start()
    session = open_session(client, server, None)
    stream_headers = {**in_session(session, None), "accept": "text/event-stream"}
    with client.stream("GET", server.url, headers=stream_headers) as first:
        assert first.status_code == 200

        second = client.get(server.url, headers=stream_headers)

    assert second.status_code == 409
    assert second.json()["error"]["message"].startswith("Conflict: this session's GET stream is already open")


# -- listen streams ---------------------------------------------------------------------------
class Listening:
    """An open ``subscriptions/listen`` stream (2026-07-28), acknowledged."""

    def __init__(self, server: LimitsServer, who: str | None, id: int) -> None:
        message = request(id, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
        headers = {**McpHttp.headers_for(McpHttp, message), **bearer(who)}
        self._client = httpx.Client(timeout=DEADLINE)
        self._response = self._client.send(
            self._client.build_request("POST", server.url, json=message, headers=headers), stream=True
        )
        self.status = self._response.status_code
        self.kind = self._response.headers.get("content-type", "")
        if self.kind.startswith("text/event-stream"):
            # Kept: a line iterator dropped half-read closes the response (the stream).
            self._lines = self._response.iter_lines()
            data = next(line for line in self._lines if line.startswith("data:"))
            assert "subscriptions/acknowledged" in data, data
            self.body: dict[str, Any] | None = None
        else:
            self.body = json.loads(self._response.read())
            self.close()

    def close(self) -> None:
        self._response.close()
        self._client.close()


@pytest.fixture
def listening() -> Iterator[Callable[..., Listening]]:
    opened: list[Listening] = []

    def opener(server: LimitsServer, who: str | None, id: int) -> Listening:
        stream = Listening(server, who, id)
        opened.append(stream)
        return stream

    yield opener
    for stream in opened:
        stream.close()


def test_listen_streams_past_the_principals_limit_are_refused_until_one_ends(start, listening):
    server = start(max_listens_per_principal=2, max_listens=100)
    first, _ = listening(server, "bob", 1), listening(server, "bob", 2)

    refused = listening(server, "bob", 3)
    alice = listening(server, "alice", 4)

    assert refused.body is not None and refused.body["id"] == 3
    assert refused.body["error"]["message"] == (
        "Too many listen streams: this principal has 2 listen streams open, its limit; "
        "close one (cancel its subscriptions/listen request) before opening another"
    )
    assert alice.body is None  # another principal's streams are its own
    first.close()
    wait_until(lambda: listening(server, "bob", 5).body is None, "Bob's closed stream to give its place back")


def test_listen_streams_past_the_servers_limit_are_refused(start, listening):
    server = start(max_listens_per_principal=100, max_listens=2)
    listening(server, None, 1)
    listening(server, "alice", 2)

    refused = listening(server, "bob", 3)

    assert refused.body is not None
    assert "the server has 2 listen streams open, its limit" in refused.body["error"]["message"]


# -- a client that never reads ----------------------------------------------------------------
def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_an_sse_reply_the_client_never_reads_holds_the_handler_not_memory(start, client, tmp_path):
    server = start()
    session = open_session(client, server, None)
    before = rss_mb(server.process.pid)
    marker = tmp_path / "chatty"
    count, size = 8192, 16384  # 128 MiB of log messages
    message = {
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "chatty", "arguments": {"count": count, "size": size, "marker": str(marker)}},
    }
    body = json.dumps(message).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in in_session(session, None).items())
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(
            f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n{head}"
            f"content-length: {len(body)}\r\n\r\n".encode() + body
        )
        wait_until(lambda: marker.exists(), "the tool to start talking")
        # Unbuffered, the 128 MiB would be out in well under a second; the handler
        # waits instead while nobody reads. (A slow machine can only make this pass.)
        with pytest.raises(pytest.fail.Exception):
            wait_until(lambda: marker.read_text().startswith("done"), "the tool to finish", timeout=3)
        held = rss_mb(server.process.pid) - before
    # The client leaving ends the wait: in the handshake era a disconnect is not a
    # cancellation (2025-11-25), so the handler runs on into its bounded kept stream
    # (1 MiB, for a resumption) or is cancelled after RESUME_GRACE; either way it ends
    # and the server holds no more than that bound.
    wait_until(lambda: marker.read_text().startswith(("cancelled", "done")), "the handler to end")

    assert held < 32, f"the server grew {held:.0f} MB for a client that reads nothing"
    assert rss_mb(server.process.pid) - before < 32, "the kept stream of a reply nobody reads is unbounded"


def test_a_get_stream_the_client_never_reads_keeps_its_newest_notifications_not_all(start, client):
    # The session's GET stream queue holds 1,024 messages, the oldest dropped: 20,000
    # notifications of 8 KB each (160 MB) to a client that reads nothing stay a bound.
    server = start()
    session = open_session(client, server, None)
    uri = "limits://changes/" + "x" * 8000
    subscribe = {"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": uri}}
    assert client.post(server.url, json=subscribe, headers=in_session(session, None)).json()["result"] == {}
    before = rss_mb(server.process.pid)
    head = "".join(f"{k}: {v}\r\n" for k, v in in_session(session, None).items() if k != "accept")
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(f"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n{head}\r\n".encode())
        sock.settimeout(DEADLINE)
        assert sock.recv(12) == b"HTTP/1.1 200"  # the stream is open; nothing more is read

        announced = call(client, server, session, None, 2, "updates", uri=uri, count=20_000)

        held = rss_mb(server.process.pid) - before
    assert announced.status_code == 200 and "announced" in announced.text
    assert held < 48, f"the server grew {held:.0f} MB for a GET stream nobody reads"


# -- the request head's deadline --------------------------------------------------------------
def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_request_head_sent_a_byte_at_a_time_is_cut_at_the_deadline_with_408(start):
    server = start(header_timeout=1)
    head = b"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: " + b"a" * 200
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(DEADLINE)
        stop = threading.Event()

        def dribble() -> None:  # a byte every 0.1 s: 20 s for the head, past any deadline
            for byte in head:
                if stop.wait(0.1):
                    return
                try:
                    sock.send(bytes([byte]))
                except OSError:
                    return

        sender = threading.Thread(target=dribble, daemon=True)
        sender.start()
        try:
            reply = read_all(sock)  # ends when the server closes the connection
        finally:
            stop.set()
            sender.join(DEADLINE)

    status, _, rest = reply.partition(b"\r\n")
    assert status == b"HTTP/1.1 408 Request Timeout"
    error = json.loads(rest.partition(b"\r\n\r\n")[2])["error"]
    assert error["message"] == "The request headers did not arrive within 1 seconds"


def test_a_connection_that_sends_nothing_is_closed_at_the_header_deadline(start):
    server = start(header_timeout=1)
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(DEADLINE)

        reply = read_all(sock)

    assert reply.startswith(b"HTTP/1.1 408 Request Timeout\r\n")


def read_response(sock: socket.socket) -> bytes:
    """One response with a Content-Length, read from ``sock``: its status line."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += sock.recv(65536)
    return head.split(b"\r\n")[0]


def test_the_header_deadline_is_per_request_not_per_connection(start):
    # One keep-alive connection, quick heads, for longer than the deadline: each head
    # gets its own, so none is cut.
    server = start(header_timeout=1)
    get = b"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n\r\n"
    statuses = []
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(DEADLINE)
        for _ in range(6):
            # Each head in two writes: a deadline counted from the connection's start
            # (not the head's) is past by the later heads and would cut them.
            sock.sendall(get[:20])
            time.sleep(0.1)
            sock.sendall(get[20:])
            statuses.append(read_response(sock))
            time.sleep(0.4)

    assert statuses == [b"HTTP/1.1 405 Method Not Allowed"] * 6  # no session: answered, never 408
