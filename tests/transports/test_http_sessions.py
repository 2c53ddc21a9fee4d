"""Handshake-era sessions on Streamable HTTP: bound to their principal, evicted only idle.

* A session id is a handle bound to the user who opened it (security best practices,
  session hijacking: servers SHOULD bind session ids to user information). Another
  principal gets 404 for it, as if it did not exist: on POST, GET and DELETE.
* ``requestState`` is sealed for the principal it was issued to (mrtr.mdx); another
  principal's retry with it is refused.
* At the session cap, ``initialize`` evicts the least recently used idle session, never
  one in use (a request running, a GET stream open); with every session in use the
  new one is refused with 503 and a JSON-RPC error. A request whose session ends under
  it still gets a JSON-RPC answer.

The server is a real subprocess (``tests/fixtures/servers/auth_http_server.py``: the sample
server with a bearer-token ``authenticate`` hook and a cap of ``CAP`` sessions).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.paths import BENCH, SERVERS
from tests.support.sessions import bearer, call, in_session, initialize, open_session
from tests.support.wire import DEADLINE, McpHttp, free_port, request, stop_process, wait_until

AUTH_SERVER = SERVERS / "auth_http_server.py"
CAP = 4


class AuthServer:
    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._log = open(log_path, "wb")
        self.log_path = log_path
        self.process = subprocess.Popen(
            [sys.executable, str(AUTH_SERVER), str(self.port), str(CAP)],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_until(lambda: b"ready" in log_path.read_bytes(), "the HTTP server with authenticate")

    def stop(self) -> None:
        stop_process(self.process)
        self._log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[AuthServer]:
    running = AuthServer(tmp_path_factory.mktemp("auth-http") / "server.log")
    yield running
    running.stop()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=DEADLINE) as http:
        yield http


# -- bound to the principal -----------------------------------------------------------------
def test_another_principal_cannot_call_tools_on_a_session(server, client):
    alice = open_session(client, server, "alice")

    stolen = call(client, server, alice, "mallory", 1, "echo", text="hi")
    own = call(client, server, alice, "alice", 2, "echo", text="hi")

    assert stolen.status_code == 404
    assert stolen.json()["error"]["message"].startswith("Session not found")
    assert own.status_code == 200 and own.json()["result"]["content"][0]["text"] == "hi"


def test_an_anonymous_caller_cannot_use_an_authenticated_session(server, client):
    alice = open_session(client, server, "alice")

    assert call(client, server, alice, None, 1, "echo", text="hi").status_code == 404


def test_another_principal_cannot_delete_a_session(server, client):
    alice = open_session(client, server, "alice")

    refused = client.delete(server.url, headers=in_session(alice, "mallory"))

    assert refused.status_code == 404
    assert call(client, server, alice, "alice", 1, "echo", text="still here").status_code == 200
    assert client.delete(server.url, headers=in_session(alice, "alice")).status_code == 200
    assert call(client, server, alice, "alice", 2, "echo", text="gone").status_code == 404


def test_another_principal_cannot_open_the_listen_stream(server, client):
    alice = open_session(client, server, "alice")

    refused = client.get(server.url, headers={**in_session(alice, "mallory"), "accept": "text/event-stream"})

    assert refused.status_code == 404


def test_a_request_state_sealed_for_one_principal_is_refused_for_another(server):
    raw = McpHttp(server)  # the 2026-07-28 headers, filled in from the body
    try:
        eliciting = {"elicitation": {"form": {}}}
        ask = request(1, "tools/call", {"name": "register", "arguments": {}}, capabilities=eliciting)
        first = raw.post(ask, headers=bearer("alice")).json()["result"]
        assert first["resultType"] == "input_required"
        retry = request(
            2,
            "tools/call",
            {
                "name": "register",
                "arguments": {},
                "requestState": first["requestState"],
                "inputResponses": {key: {"action": "accept", "content": {"name": "Eve"}} for key in first["inputRequests"]},
            },
            capabilities=eliciting,
        )

        replayed = raw.post(retry, headers=bearer("mallory")).json()
        own = raw.post(retry, headers=bearer("alice")).json()
    finally:
        raw.close()

    assert replayed["error"]["code"] == -32602
    assert "different principal" in replayed["error"]["message"]
    assert own["result"]["resultType"] == "input_required"  # the second question


# -- the cap: only idle sessions are evicted ----------------------------------------------------
class Running:
    """A ``sleepy`` tool call in flight on a session, from a thread of its own."""

    def __init__(self, server: AuthServer, session_id: str, marker: Path) -> None:
        self.response: httpx.Response | None = None
        self._thread = threading.Thread(target=self._run, args=(server, session_id, marker), daemon=True)
        self._thread.start()
        wait_until(lambda: Path(str(marker) + ".started").exists(), "the tool call to start")

    def _run(self, server: AuthServer, session_id: str, marker: Path) -> None:
        with httpx.Client(timeout=DEADLINE) as http:
            self.response = call(http, server, session_id, None, 7, "sleepy", seconds=60, marker=str(marker))

    def answer(self) -> httpx.Response:
        self._thread.join(DEADLINE)
        assert self.response is not None, "the tool call got no answer"
        return self.response


def test_an_initialize_flood_never_evicts_a_session_in_use(server, client, tmp_path):
    busy = open_session(client, server, None)
    running = Running(server, busy, tmp_path / "marker")

    statuses = {initialize(client, server, None).status_code for _ in range(10 * CAP)}

    assert statuses == {200}  # idle sessions made room, least recently used first
    assert call(client, server, busy, None, 1, "echo", text="alive").status_code == 200
    assert client.delete(server.url, headers=in_session(busy, None)).status_code == 200
    ended = running.answer()
    assert ended.status_code == 404  # a JSON-RPC answer, never a bare 202
    assert ended.json()["id"] == 7 and ended.json()["error"]["message"].startswith("Session ended")


def test_with_every_session_in_use_initialize_is_refused_with_503(server, client, tmp_path):
    sessions = [open_session(client, server, None) for _ in range(CAP)]
    running = [Running(server, sid, tmp_path / f"marker{n}") for n, sid in enumerate(sessions)]

    refused = initialize(client, server, None)

    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["message"].startswith("Server busy")
    for sid in sessions:
        client.delete(server.url, headers=in_session(sid, None))
    assert {r.answer().json()["error"]["message"][:13] for r in running} == {"Session ended"}
    assert initialize(client, server, None).status_code == 200


def test_the_flood_bench_keeps_its_rules():
    """``bench/initialize_flood.py``, bounded: no 5xx over a flood past the cap, the
    session in use survives it, its running call is answered when the session ends."""
    bench = BENCH / "initialize_flood.py"
    result = subprocess.run(
        [sys.executable, str(bench), "--cap", "50", "--total", "1000", "--connections", "4"],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "statuses: {200: 1000}" in result.stdout
