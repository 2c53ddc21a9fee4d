"""The request prelude of the served Streamable HTTP endpoint, tried as an attacker would
(basic/transports/streamable-http.mdx: Security & Endpoint, Sending Messages, Server
Validation; RFC 9110/9112 for Host, Content-Type and Accept).

Malformed requests go over raw sockets, since HTTP clients refuse to send them.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.wire import DEADLINE, HttpServer, free_port, request, wait_until

ECHO = request(1, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
BODY = json.dumps(ECHO).encode()
BASE = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "echo",
}


def exchange(port: int, head: bytes, body: bytes = b"", timeout: float = DEADLINE) -> tuple[int, bytes]:
    """Send one raw request; the status and body of the reply (the connection closed after)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head + body)
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = sock.recv(65536)
            if not chunk:
                raise AssertionError(f"the server closed the connection without a reply: {reply!r}")
            reply += chunk
        head_part, _, rest = reply.partition(b"\r\n\r\n")
        lines = head_part.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length = next(int(v) for k, _, v in (line.partition(":") for line in lines[1:]) if k.lower() == "content-length")
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        return status, rest[:length]


def post(
    port: int,
    headers: list[tuple[str, str]] | None = None,
    body: bytes = BODY,
    host: str | None = None,
    drop: tuple[str, ...] = (),
) -> tuple[int, Any]:
    """POST ``body`` to /mcp with BASE headers but ``drop`` (``headers`` replace them;
    ``host`` as Host: None for 127.0.0.1:port, "" for none). The status and the JSON reply."""
    lines = ["POST /mcp HTTP/1.1", f"content-length: {len(body)}", "connection: close"]
    if host != "":
        lines.append(f"host: {host if host is not None else f'127.0.0.1:{port}'}")
    replaced = {name.lower() for name, _ in headers or []} | set(drop)
    lines += [f"{k}: {v}" for k, v in BASE.items() if k not in replaced]
    lines += [f"{k}: {v}" for k, v in headers or []]
    status, reply = exchange(port, ("\r\n".join(lines) + "\r\n\r\n").encode(), body)
    return status, json.loads(reply) if reply else None


# -- header smuggling -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "first", "second", "code"),
    [
        # The request metadata headers: a repeat is a malformed header, HeaderMismatch.
        # The last copy matches the body: a proxy reading the first sees another call.
        ("mcp-name", "boom", "echo", -32020),
        ("Mcp-Method", "tools/list", "tools/call", -32020),
        ("MCP-Protocol-Version", "2025-11-25", "2026-07-28", -32020),
        ("mcp-param-text", "bye", "hi", -32020),
        # The others the spec or HTTP define once: Invalid Request.
        ("content-type", "application/json", "application/json", -32600),
        ("host", "127.0.0.1", "localhost", -32600),
        ("mcp-session-id", "a", "b", -32600),
        ("last-event-id", "1", "2", -32600),
    ],
)
def test_a_header_defined_once_sent_twice_is_refused_with_400(http_server: HttpServer, name, first, second, code):
    lines = [(name, first), (name, second)]
    status, reply = post(http_server.port, lines, host="" if name == "host" else None)
    assert status == 400
    assert reply["error"]["code"] == code
    assert name.lower() in reply["error"]["message"].lower()


def test_the_same_header_name_in_another_case_counts_as_a_repeat(http_server: HttpServer):
    status, reply = post(http_server.port, [("MCP-NAME", "boom"), ("mcp-name", "echo")])
    assert (status, reply["error"]["code"]) == (400, -32020)


def test_a_repeated_header_the_spec_does_not_limit_is_fine(http_server: HttpServer):
    status, reply = post(http_server.port, [("x-trace", "a"), ("x-trace", "b"), ("accept", "application/json"), ("accept", "text/event-stream")])
    assert status == 200
    assert reply["result"]["content"][0]["text"] == "hi"


# -- Host and Origin -------------------------------------------------------------------------


def test_a_request_without_host_is_refused_with_400(http_server: HttpServer):
    status, reply = post(http_server.port, host="")
    assert status == 400
    assert "host" in reply["error"]["message"].lower()
    assert reply["error"]["code"] == -32600


@pytest.mark.parametrize(
    "host", ["[::1]evil.com", "[::1]:80evil.com", "127.0.0.1:80x", "127.0.0.1:80:80", "::1", "[::1", "local host", "a@127.0.0.1"]
)
def test_a_malformed_host_is_refused_with_400(http_server: HttpServer, host):
    status, reply = post(http_server.port, host=host)
    assert status == 400
    assert "malformed" in reply["error"]["message"]


@pytest.mark.parametrize("host", ["evil.com", "evil.com:80", "127.0.0.1.evil.com"])
def test_a_foreign_host_is_refused_with_421(http_server: HttpServer, host):
    assert post(http_server.port, host=host)[0] == 421


@pytest.mark.parametrize("host", ["[::1]", "[::1]:8000", "LOCALHOST:1", "127.0.0.1"])
def test_a_well_formed_loopback_host_is_served(http_server: HttpServer, host):
    status, reply = post(http_server.port, host=host)
    assert status == 200, reply
    assert reply["result"]["content"][0]["text"] == "hi"


@pytest.mark.parametrize("origin", ["http://[::1]evil.com", "http://localhost@evil.com", "http://127.0.0.1:80/x", "localhost"])
def test_an_origin_whose_host_only_starts_like_loopback_is_refused(http_server: HttpServer, origin):
    assert post(http_server.port, [("origin", origin)])[0] == 403


# -- Content-Type and Accept ----------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["text/plain; charset=json", "application/jsonx", "text/json", "application/json; charset=latin-1"]
)
def test_a_post_that_is_not_application_json_is_refused_with_415(http_server: HttpServer, content_type):
    status, reply = post(http_server.port, [("content-type", content_type)])
    assert status == 415
    assert "application/json" in reply["error"]["message"]


@pytest.mark.parametrize("content_type", ["Application/JSON", "application/json; charset=UTF-8", "application/json ;charset=\"utf-8\""])
def test_application_json_with_any_case_or_a_utf8_charset_is_served(http_server: HttpServer, content_type):
    status, reply = post(http_server.port, [("content-type", content_type)])
    assert status == 200, reply
    assert reply["result"]["content"][0]["text"] == "hi"


@pytest.mark.parametrize("accept", ["text/html", "image/*", "application/json;q=0, text/event-stream;q=0"])
def test_an_accept_that_admits_neither_reply_type_is_refused_with_406(http_server: HttpServer, accept):
    status, reply = post(http_server.port, [("accept", accept)])
    assert status == 406
    assert "text/event-stream" in reply["error"]["message"]


@pytest.mark.parametrize("accept", ["*/*", "application/*", "application/json", "text/event-stream, application/json;q=0.5"])
def test_an_accept_that_admits_a_reply_type_is_served(http_server: HttpServer, accept):
    status, _ = post(http_server.port, [("accept", accept)])
    assert status == 200


def test_a_post_without_accept_is_served_as_if_it_accepted_any(http_server: HttpServer):
    # RFC 9110 12.5.1: no Accept means any media type; the MUST binds the client.
    assert post(http_server.port, drop=("accept",))[0] == 200


# -- slow peers --------------------------------------------------------------------------


SLOW_SERVER = """
import sys
from modelctx import Server
from modelctx.transports.http import serve_http

server = Server("slow-body")


@server.tool
def echo(text: str) -> str:
    return text


serve_http(server, "127.0.0.1", int(sys.argv[1]), body_timeout=0.5)
"""


@pytest.fixture(scope="module")
def slow_port(tmp_path_factory) -> Iterator[int]:
    """A server whose ``body_timeout`` is half a second."""
    root: Path = tmp_path_factory.mktemp("slow")
    (root / "server.py").write_text(SLOW_SERVER)
    port = free_port()
    with open(root / "server.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, str(root / "server.py"), str(port)], stdout=log, stderr=subprocess.STDOUT
        )
        try:

            def answers() -> bool:
                assert process.poll() is None, (root / "server.log").read_text()
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                except OSError:
                    return False
                return True

            wait_until(answers, "the slow-body server")
            yield port
        finally:
            process.terminate()
            try:
                process.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_a_body_that_does_not_arrive_in_time_is_answered_408_and_the_connection_closed(slow_port):
    head = (
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"content-length: {len(BODY)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", slow_port), timeout=DEADLINE) as sock:
        sock.sendall(head + BODY[:-1])  # one byte short, and then nothing
        reply = b""
        while chunk := sock.recv(65536):  # the server closes after its answer
            reply += chunk
    head_part, _, body = reply.partition(b"\r\n\r\n")
    assert head_part.split()[1] == b"408"
    error = json.loads(body)["error"]
    assert error["code"] == -32600
    assert "did not arrive within 0.5 seconds" in error["message"]


def test_a_body_that_arrives_in_time_is_served_by_the_same_server(slow_port):
    status, reply = post(slow_port)
    assert status == 200, reply
    assert reply["result"]["content"][0]["text"] == "hi"
