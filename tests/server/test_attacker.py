"""The server facing a hostile client: a field of the wrong JSON type anywhere is a
JSON-RPC error with the code the spec names (never -32603, never a traceback), and a
peer cannot grow the server's memory without bound.

Real processes over real pipes (issue 6, review R2).
"""

from __future__ import annotations

import json
import socket
import subprocess
import textwrap
import threading
import time

import pytest

from tests.support.wire import DEADLINE, MODERN, modern_meta, request, serve_command

INVALID_PARAMS = -32602
UNSUPPORTED_PROTOCOL_VERSION = -32022
MAX_SUBSCRIPTIONS = 1000  # server/_methods.py


def _echo(request_id: int, text: str) -> dict:
    return request(request_id, "tools/call", {"name": "echo", "arguments": {"text": text}})


@pytest.mark.parametrize("version", [[MODERN], {"v": MODERN}, 20260728, True])
def test_a_protocol_version_that_is_no_string_is_unsupported_not_an_internal_error(stdio_server, version):
    meta = modern_meta(**{"io.modelcontextprotocol/protocolVersion": version})
    reply = stdio_server.call({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
    assert reply["error"]["code"] == UNSUPPORTED_PROTOCOL_VERSION
    assert reply["error"]["data"]["supported"][0] == MODERN
    assert stdio_server.call(_echo(2, "after"))["result"]["content"][0]["text"] == "after"
    assert "Traceback" not in stdio_server.stderr


def _handshake(server) -> None:
    reply = server.call(
        {
            "jsonrpc": "2.0",
            "id": "init",
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        }
    )
    assert reply["result"]["protocolVersion"] == "2025-11-25"
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


def _subscribe(request_id: int, uri: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "resources/subscribe", "params": {"uri": uri}}


def test_a_session_cannot_subscribe_to_endless_distinct_uris(stdio_server):
    _handshake(stdio_server)
    lines = b"\n".join(json.dumps(_subscribe(i, f"sample://items/{i}")).encode() for i in range(MAX_SUBSCRIPTIONS))
    stdio_server.send_raw(lines)
    replies = stdio_server.recv_until(MAX_SUBSCRIPTIONS - 1)
    assert all(reply.get("result") == {} for reply in replies)
    refused = stdio_server.call(_subscribe(MAX_SUBSCRIPTIONS, "sample://items/one-more"))
    assert refused["error"]["code"] == INVALID_PARAMS
    assert "unsubscribe" in refused["error"]["message"]
    # Subscribing again to a URI already held costs nothing and is still accepted.
    assert stdio_server.call(_subscribe(MAX_SUBSCRIPTIONS + 1, "sample://items/7"))["result"] == {}


def test_a_session_cannot_subscribe_to_an_endlessly_long_uri(stdio_server):
    _handshake(stdio_server)
    refused = stdio_server.call(_subscribe(1, "sample://items/" + "x" * 1_000_000))
    assert refused["error"]["code"] == INVALID_PARAMS
    assert stdio_server.call(_subscribe(2, "sample://items/short"))["result"] == {}


def _head_of_endless_header(port: int, megabytes: int) -> bytes:
    """Send a request whose one header never ends; what the server answered."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nx-endless: ")
        try:
            for _ in range(megabytes):
                sock.sendall(b"a" * (1 << 20))
        except OSError:
            pass  # the server closed the connection, as it should
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except OSError:
            pass
    return answer


def test_http_a_request_head_past_the_bound_is_refused_with_431_and_the_server_goes_on(http_server, http):
    answer = _head_of_endless_header(http_server.port, 64)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b"Request headers too large" in answer
    reply = http.call(_echo(1, "after"))
    assert reply["result"]["content"][0]["text"] == "after"


def _whole_answer_to(port: int, head: bytes) -> bytes:
    """Send ``head`` whole and read the answer to its end; an error on either (a reset)
    fails the test."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
        sock.sendall(head)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize(
    "headers",
    [b"authorization: Bearer " + b"a" * (5 * 1024 * 1024) + b"\r\n",
     b"".join(b"x-many-%d: %s\r\n" % (n, b"v" * 100) for n in range(60_000))],
    ids=["one-5-MB-authorization-header", "60000-headers"],
)  # fmt: skip
def test_http_a_huge_request_head_sent_whole_gets_its_431_and_no_reset(http_server, http, headers):
    # Before: the server closed with the rest of the head unread, so the kernel reset
    # the connection, and the client saw "connection reset" instead of the 431.
    for _ in range(3):
        head = b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n" + headers + b"content-length: 2\r\n\r\n{}"
        answer = _whole_answer_to(http_server.port, head)
        status, _, rest = answer.partition(b"\r\n")
        assert status == b"HTTP/1.1 431 Request Header Fields Too Large", answer[:200]
        assert b"connection: close" in rest
        assert json.loads(rest.partition(b"\r\n\r\n")[2])["error"]["message"].startswith("Request headers too large")
    assert http.call(_echo(1, "after"))["result"]["content"][0]["text"] == "after"


def test_http_headers_of_64_kib_are_still_served(http):
    # The bound is generous: a long (but finite) header is no attack.
    response = http.post(_echo(2, "padded"), headers={"x-padding": "a" * 65536})
    assert response.status_code == 200
    assert response.json()["result"]["content"][0]["text"] == "padded"


# Templates a backtracking regex reads slowly: values that may hold the literal between
# them ("." is allowed in a value) cost it O(n^3) steps to reject a URI of n characters,
# two runs of two unmarked values around an optional query O(n^4).
DOTTED_SERVER = textwrap.dedent(
    """
    from modelctx import Server

    server = Server("dotted")

    @server.resource("logs://{service}.{day}.{level}/entries", mime_type="text/plain")
    def entries(service: str, day: str, level: str) -> str:
        return f"{service} {day} {level}"

    @server.resource("pairs://{a}{b}{?q}{c}{d}", mime_type="text/plain")
    def pairs(a: str, b: str, c: str, d: str, q: str = "") -> str:
        return f"{a} {b} {q} {c} {d}"

    server.run()
    """
)


def test_a_100_kb_uri_against_an_ambiguous_template_is_answered_and_the_server_goes_on(start_stdio_server, tmp_path):
    script = tmp_path / "dotted.py"
    script.write_text(DOTTED_SERVER)
    server = start_stdio_server(script)
    hostile = "logs://" + "." * 100_000 + "/entrie"
    refused = server.call(request(1, "resources/read", {"uri": hostile}))
    assert refused["error"]["code"] == INVALID_PARAMS  # Resource not found
    found = server.call(request(2, "resources/read", {"uri": "logs://api.2026-12-01.warn/entries"}))
    assert found["result"]["contents"][0]["text"] == "api 2026-12-01 warn"
    # 200 characters of this one took the regex 9 s; 100 KB are answered at once.
    hostile = "pairs://" + "a" * 33_000 + "?" + "a" * 33_000 + "/" + "a" * 33_000 + "/!"
    refused = server.call(request(3, "resources/read", {"uri": hostile}))
    assert refused["error"]["code"] == INVALID_PARAMS  # Resource not found
    found = server.call(request(4, "resources/read", {"uri": "pairs://xy?q=1/zw"}))
    assert found["result"]["contents"][0]["text"] == "x y 1/ z w"


def _resident_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))


class _Flood:
    """A server process fed ``lines`` by a thread as fast as it takes them."""

    def __init__(self, lines: list[bytes]) -> None:
        self.process = subprocess.Popen(serve_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.lines = lines
        self.written = 0
        self.writer = threading.Thread(target=self._write, daemon=True)
        self.writer.start()

    def _write(self) -> None:
        assert self.process.stdin is not None
        try:
            for line in self.lines:
                self.process.stdin.write(line + b"\n")
                self.written += 1
            self.process.stdin.close()
        except OSError:
            pass

    def resident_once_it_stops_reading(self) -> int:
        """The server's resident MB once the writer stalls (or has written all)."""
        deadline, last = time.monotonic() + DEADLINE, -1
        while self.writer.is_alive() and self.written != last and time.monotonic() < deadline:
            last = self.written
            time.sleep(1.0)
        return _resident_mb(self.process.pid)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(DEADLINE)


def test_a_peer_that_sends_without_reading_the_answers_cannot_grow_the_server():
    # 1,000 echo requests of 100 KB (100 MB); the answers are not read until the end.
    count, text = 1000, "x" * 100_000
    flood = _Flood([json.dumps(_echo(i, text)).encode() for i in range(count)])
    try:
        resident = flood.resident_once_it_stops_reading()
        assert flood.process.stdout is not None
        answers = flood.process.stdout.read().count(b"\n")  # now read: every answer arrives
    finally:
        flood.stop()
    assert answers == count
    assert resident < 100, f"the server held {resident} MB for a peer that did not read"


def test_a_flood_of_slow_requests_is_read_no_faster_than_it_is_served():
    # 20,000 requests that each sleep a minute, with 10 KB of _meta each (200 MB).
    padding = "p" * 10_000
    lines = [
        json.dumps(request(i, "tools/call", {"name": "sleepy", "arguments": {"seconds": 60}}, padding=padding)).encode()
        for i in range(20_000)
    ]
    flood = _Flood(lines)
    try:
        resident = flood.resident_once_it_stops_reading()
    finally:
        flood.stop()
    assert flood.written < len(lines)  # the server stopped reading
    assert resident < 100, f"the server held {resident} MB of requests it was not yet serving"
