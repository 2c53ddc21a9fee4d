"""The deprecated HTTP+SSE transport (2024-11-05), server side: ``GET /sse`` and ``POST /messages``.

2024-11-05 basic/transports "HTTP with SSE", as the official python SDK's
``mcp/server/sse.py`` serves it: the stream's first event is ``endpoint``, naming the
URI to POST to; each POST is accepted with 202 and answered on the stream as an event
``message``. Served beside ``/mcp`` by default, behind the same guards (Host and Origin,
authentication on every request, the body limit), and off with ``legacy_sse=False``.

Real server subprocesses (tests/fixtures/servers/legacy_sse_server.py) on loopback, read with
httpx; the slow-reader bound is driven through the ASGI app in-process, where a reader
that never reads is a ``send`` that never returns. The old official clients over this
transport are in tests/interop/test_old_clients.py.
"""

from __future__ import annotations

import asyncio
import gc
import json
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelctx import Context, Server, ServerConfig
from modelctx.errors import RATE_LIMITED
from modelctx.server.middleware import RateLimit
from modelctx.transports._legacy_sse import QUEUE_EVENTS
from modelctx.transports.http import HttpApp
from tests.support.paths import SERVERS
from tests.support.scale_processes import Processes
from tests.support.wire import DEADLINE, async_test, free_port, stop_process, until, wait_until

SERVER = SERVERS / "legacy_sse_server.py"
OLD = "2024-11-05"
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": OLD, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class Served:
    """A legacy_sse_server.py process on a free loopback port."""

    def __init__(self, log_path: Path, *options: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self._log = open(log_path, "wb")
        self.log_path = log_path
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), str(self.port), *options],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_until(self._ready, f"legacy_sse_server.py {' '.join(options)}")

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            pytest.fail(f"the server exited with {self.process.returncode}:\n{self.log_path.read_text()}")
        return b"ready" in self.log_path.read_bytes()

    def stop(self) -> None:
        stop_process(self.process)
        self._log.close()


class Stream:
    """One ``GET /sse``, read on a thread: its events, in order, in a queue."""

    def __init__(self, base: str, headers: dict[str, str] | None = None) -> None:
        self.base = base
        self.headers = headers or {}
        self._client = httpx.Client(timeout=httpx.Timeout(DEADLINE, read=None))
        self._opened = self._client.stream("GET", base + "/sse", headers=self.headers)
        self.response = self._opened.__enter__()
        self.events: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self.endpoint = ""
        self.ended_whole = False
        if self.response.status_code == 200:
            threading.Thread(target=self._read, daemon=True).start()
            kind, self.endpoint = self.event()
            assert kind == "endpoint", (kind, self.endpoint)

    def _read(self) -> None:
        kind, data = "message", []
        try:
            for line in self.response.iter_lines():
                if not line:
                    if data:
                        self.events.put((kind, "\n".join(data)))
                    kind, data = "message", []
                elif line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
            self.ended_whole = True  # the server ended the response (not a cut connection)
        except Exception:  # noqa: BLE001 - closed under the reader: the stream is over
            pass
        self.events.put(None)

    def event(self) -> tuple[str, str]:
        got = self.events.get(timeout=DEADLINE)
        assert got is not None, "the stream ended"
        return got

    def message(self) -> dict[str, Any]:
        kind, data = self.event()
        assert kind == "message", (kind, data)
        return json.loads(data)

    def post(
        self, message: Any = None, *, content: bytes | None = None, via: str | None = None,
        endpoint: str | None = None, **headers: str,
    ) -> httpx.Response:
        """POST to the endpoint (or ``endpoint``), on a new connection, at ``via`` (another
        replica) if given."""
        body = content if content is not None else json.dumps(message).encode()
        merged = {"content-type": "application/json", **self.headers, **headers}
        with httpx.Client(timeout=DEADLINE) as fresh:
            return fresh.post((via or self.base) + (endpoint or self.endpoint), content=body, headers=merged)

    def call(self, message: dict[str, Any], via: str | None = None) -> dict[str, Any]:
        """POST a request and read its answer on the stream (notifications before it skipped)."""
        posted = self.post(message, via=via)
        assert posted.status_code == 202, posted.text
        while True:
            got = self.message()
            if got.get("id") == message["id"] and "method" not in got:
                return got

    def open_session(self) -> dict[str, Any]:
        result = self.call(INIT)
        assert self.post(INITIALIZED).status_code == 202
        return result

    def close(self) -> None:
        self.response.close()
        self._opened.__exit__(None, None, None)
        self._client.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    server = Served(tmp_path_factory.mktemp("sse") / "server.log", "--max-body", "4096")
    yield server
    server.stop()


@pytest.fixture
def stream(served) -> Iterator[Stream]:
    opened = Stream(served.base)
    yield opened
    opened.close()


def tool_call(id: int, name: str, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


# -- the exchange ------------------------------------------------------------------------------
def test_the_first_event_names_the_uri_to_post_to_relative_to_the_server(stream):
    assert stream.response.headers["content-type"].startswith("text/event-stream")
    assert re.fullmatch(r"/messages/\?session_id=[0-9a-f]{32}", stream.endpoint), stream.endpoint


def test_initialize_is_accepted_with_202_and_answered_on_the_stream_in_the_clients_revision(stream):
    accepted = stream.post(INIT)
    assert accepted.status_code == 202
    answer = stream.message()
    assert answer["id"] == 0 and answer["result"]["protocolVersion"] == OLD
    assert answer["result"]["serverInfo"]["name"] == "legacy-server"


def test_a_tool_call_is_answered_on_the_stream_its_progress_first(stream):
    stream.open_session()
    call = tool_call(1, "progress", steps=2)
    call["params"]["_meta"] = {"progressToken": "t"}
    assert stream.post(call).status_code == 202
    first, second, answer = stream.message(), stream.message(), stream.message()
    assert [first["method"], second["method"]] == ["notifications/progress"] * 2
    assert [first["params"]["progress"], second["params"]["progress"]] == [1, 2]
    assert "message" not in first["params"]  # 2024-11-05 progress has no message
    assert answer["id"] == 1 and answer["result"]["content"] == [{"type": "text", "text": "done after 2 steps"}]


def test_resources_and_prompts_are_served_on_the_stream(stream):
    stream.open_session()
    read = stream.call({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "legacy://greeting"}})
    assert read["result"]["contents"][0]["text"] == "Hello, old client"
    got = stream.call(
        {"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"name": "review", "arguments": {"code": "y"}}}
    )
    assert got["result"]["messages"][0]["content"]["text"] == "Please review:\ny"


def test_notifications_cancelled_stops_the_running_call_and_it_is_never_answered(stream, tmp_path):
    stream.open_session()
    marker = tmp_path / "cancelled"
    assert stream.post(tool_call(5, "sleepy", marker=str(marker))).status_code == 202
    wait_until(lambda: Path(str(marker) + ".started").exists(), "the sleepy tool to start")
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
    assert stream.post(cancel).status_code == 202
    wait_until(lambda: marker.exists(), "the cancelled handler to stop")
    ping = stream.call({"jsonrpc": "2.0", "id": 6, "method": "ping"})
    assert ping == {"jsonrpc": "2.0", "id": 6, "result": {}}  # the next message: call 5 got no answer


def test_a_server_request_goes_out_on_the_stream_and_its_answer_comes_back_by_post(stream):
    # A newer client may use this transport too: on 2025-06-18 a handler can elicit.
    init = {**INIT, "params": {**INIT["params"], "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}}}
    assert stream.call(init)["result"]["protocolVersion"] == "2025-06-18"
    assert stream.post(INITIALIZED).status_code == 202
    assert stream.post(tool_call(1, "ask")).status_code == 202
    asked = stream.message()
    assert asked["method"] == "elicitation/create" and asked["params"]["message"] == "Your name?"
    answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": "Ann"}}}
    assert stream.post(answer).status_code == 202
    result = stream.message()
    assert result["id"] == 1 and result["result"]["content"][0]["text"] == "answer: accept"


def test_a_second_initialize_on_the_stream_is_refused_32600_and_the_session_keeps_what_it_declared(stream):
    # Opened on 2025-06-18 with elicitation; a repeat declaring neither changes nothing.
    init = {**INIT, "params": {**INIT["params"], "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}}}
    assert stream.call(init)["result"]["protocolVersion"] == "2025-06-18"
    assert stream.post(INITIALIZED).status_code == 202
    again = stream.call({**INIT, "id": 1})
    assert again["error"]["code"] == -32600 and "already initialized" in again["error"]["message"]
    assert stream.post(tool_call(2, "ask")).status_code == 202
    asked = stream.message()
    assert asked["method"] == "elicitation/create"  # the session still has elicitation
    answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}}
    assert stream.post(answer).status_code == 202
    assert stream.message()["id"] == 2


# -- bad input ---------------------------------------------------------------------------------
def test_malformed_json_is_refused_400_with_a_parse_error_and_nothing_on_the_stream(stream):
    stream.open_session()
    refused = stream.post(content=b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == -32700
    assert stream.call({"jsonrpc": "2.0", "id": 7, "method": "ping"})["id"] == 7  # nothing came before it


def test_json_that_is_no_jsonrpc_message_is_refused_400_invalid_request(stream):
    refused = stream.post({"hello": "world"})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == -32600


def test_a_post_without_a_session_id_is_refused_400(served):
    refused = httpx.post(served.base + "/messages/", json=INIT, timeout=DEADLINE)
    assert refused.status_code == 400
    assert "session_id is required" in refused.json()["error"]["message"]


def test_a_post_naming_an_unknown_session_is_refused_404(served):
    refused = httpx.post(served.base + "/messages/?session_id=" + "ab" * 16, json=INIT, timeout=DEADLINE)
    assert refused.status_code == 404
    assert "GET /sse again" in refused.json()["error"]["message"]


def test_a_session_id_sent_twice_is_refused_400_and_nothing_reaches_the_stream(stream):
    stream.open_session()
    mine = stream.endpoint.partition("session_id=")[2]
    for repeated in (mine, "ab" * 16):  # the same value again, or another one
        refused = stream.post(
            {"jsonrpc": "2.0", "id": 9, "method": "ping"}, via=stream.base, endpoint=stream.endpoint + "&session_id=" + repeated
        )
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == -32600
        assert "session_id was sent more than once" in refused.json()["error"]["message"]
    assert stream.call({"jsonrpc": "2.0", "id": 10, "method": "ping"})["id"] == 10  # ping 9 never ran


@pytest.mark.parametrize(
    ("query", "status", "says"),
    [
        ("session_id=", 400, "session_id is required"),
        ("session_id", 400, "session_id is required"),
        ("session_id=not-hex-at-all", 400, "is not a session id this server issues"),
        ("session_id=" + "AB" * 16, 400, "is not a session id this server issues"),
        ("session_id=" + "ab" * 20_000, 400, "is not a session id this server issues"),
        ("session_id=%ff%00%zz%", 400, "is not a session id this server issues"),
        ("session_id=%C3%A9" + "a" * 31, 400, "is not a session id this server issues"),
        ("session_id=w1-" + "ab" * 16, 404, "Session not found"),
        ("session_id=" + "ab" * 16 + "&other=1", 404, "Session not found"),
    ],
)
def test_a_malformed_or_unknown_session_id_is_refused_with_a_message_never_a_500(served, query, status, says):
    refused = httpx.post(served.base + "/messages/?" + query, json=INIT, timeout=DEADLINE)
    assert refused.status_code == status, refused.text
    assert says in refused.json()["error"]["message"]


def test_a_body_over_max_body_is_refused_413(stream):
    refused = stream.post(tool_call(1, "add", a=1, b=2, pad="x" * 5000))
    assert refused.status_code == 413 and "limit is 4096 bytes" in refused.json()["error"]["message"]


def test_a_foreign_origin_is_refused_403_on_get_and_on_post(served, stream):
    evil = {"origin": "https://evil.example"}
    opened = Stream(served.base, evil)
    try:
        assert opened.response.status_code == 403
    finally:
        opened.close()
    assert stream.post(INIT, **evil).status_code == 403


def test_a_foreign_host_is_refused_421(served):
    refused = httpx.get(served.base + "/sse", headers={"host": "attacker.example"}, timeout=DEADLINE)
    assert refused.status_code == 421


def test_a_closed_stream_ends_its_session_and_cancels_what_it_ran(served, tmp_path):
    opened = Stream(served.base)
    opened.open_session()
    marker = tmp_path / "cancelled"
    assert opened.post(tool_call(1, "sleepy", marker=str(marker))).status_code == 202
    wait_until(lambda: Path(str(marker) + ".started").exists(), "the sleepy tool to start")
    endpoint = served.base + opened.endpoint
    opened.close()
    wait_until(lambda: marker.exists(), "the closed stream's running call to be cancelled")
    wait_until(
        lambda: httpx.post(endpoint, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}).status_code == 404,
        "the closed stream's session to be gone",
    )


# -- turned off --------------------------------------------------------------------------------
def test_turned_off_sse_and_messages_are_404_and_mcp_still_serves(tmp_path):
    server = Served(tmp_path / "server.log", "--no-sse")
    try:
        assert httpx.get(server.base + "/sse", timeout=DEADLINE).status_code == 404
        assert httpx.post(server.base + "/messages/?session_id=x", json=INIT, timeout=DEADLINE).status_code == 404
        answer = httpx.post(
            server.base + "/mcp", json=INIT, headers={"accept": "application/json, text/event-stream"}, timeout=DEADLINE
        )
        assert answer.status_code == 200 and answer.json()["result"]["protocolVersion"] == OLD
    finally:
        server.stop()


def test_the_cli_flag_no_sse_turns_it_off(tmp_path):
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "modelctx", "serve", str(SERVERS / "legacy_server.py"),
             "--http", "--port", str(port), "--no-sse"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            wait_until(lambda: b"serving" in log.read_bytes(), "modelctx serve --no-sse")
            assert httpx.get(f"http://127.0.0.1:{port}/sse", timeout=DEADLINE).status_code == 404
        finally:
            stop_process(process)


# -- authentication ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> Iterator[Served]:
    server = Served(tmp_path_factory.mktemp("sse-auth") / "server.log", "--auth")
    yield server
    server.stop()


def test_a_refused_bearer_is_401_on_get_and_on_post(guarded):
    opened = Stream(guarded.base, {"authorization": "Bearer wrong"})
    try:
        assert opened.response.status_code == 401
    finally:
        opened.close()
    alice = Stream(guarded.base, {"authorization": "Bearer alice"})
    try:
        alice.open_session()
        assert alice.post(INIT, authorization="Bearer wrong").status_code == 401
    finally:
        alice.close()


def test_a_post_into_another_principals_session_is_refused_404_and_never_reaches_it(guarded):
    alice = Stream(guarded.base, {"authorization": "Bearer alice"})
    try:
        alice.open_session()
        for intruder in ({"authorization": "Bearer mallory"}, {"authorization": ""}):
            refused = alice.post(tool_call(9, "add", a=1, b=1), **intruder)
            assert refused.status_code in (401, 404), refused.text
        refused = httpx.post(
            guarded.base + alice.endpoint, json=tool_call(9, "add", a=1, b=1), timeout=DEADLINE
        )  # anonymous
        assert refused.status_code == 404
        # Alice's own call is the next thing on her stream: none of the others ran there.
        answer = alice.call(tool_call(10, "add", a=2, b=2))
        assert answer["result"]["content"][0]["text"] == '{"sum":4}'
    finally:
        alice.close()


# -- limits --------------------------------------------------------------------------------
def test_past_max_sessions_a_new_stream_is_refused_503_until_one_closes(tmp_path):
    server = Served(tmp_path / "server.log", "--max-sessions", "2")
    opened = [Stream(server.base), Stream(server.base)]
    try:
        extra = Stream(server.base)
        assert extra.response.status_code == 503 and extra.response.headers["retry-after"] == "1"
        extra.response.read()
        assert "HTTP+SSE sessions are open" in extra.response.json()["error"]["message"]
        extra.close()
        opened.pop().close()
        # Room again once the closed stream's GET has ended (the server sees the close).
        wait_until(lambda: _opens(server.base), "a stream to open after one closed")
    finally:
        for stream in opened:
            stream.close()
        server.stop()


def _opens(base: str) -> bool:
    stream = Stream(base)
    try:
        return stream.response.status_code == 200
    finally:
        stream.close()


def test_a_principal_at_its_quota_is_refused_429_and_others_still_open_streams(tmp_path):
    server = Served(tmp_path / "server.log", "--auth", "--per-principal", "1")
    alice = Stream(server.base, {"authorization": "Bearer alice"})
    try:
        again = Stream(server.base, {"authorization": "Bearer alice"})
        assert again.response.status_code == 429
        again.close()
        bob = Stream(server.base, {"authorization": "Bearer bob"})
        assert bob.response.status_code == 200
        bob.close()
    finally:
        alice.close()
        server.stop()


def test_stopping_the_server_ends_its_streams_at_once(tmp_path):
    server = Served(tmp_path / "server.log")
    stream = Stream(server.base)
    try:
        stream.open_session()
        server.process.send_signal(signal.SIGTERM)
        # The server ends the stream's response whole (the reader sees its end, not a cut
        # connection), then exits (uvicorn raises the SIGTERM again once it has stopped).
        while (got := stream.events.get(timeout=DEADLINE)) is not None:
            assert got[0] == "message", got
        assert stream.ended_whole
        assert server.process.wait(timeout=DEADLINE) in (0, -signal.SIGTERM)
    finally:
        stream.close()
        server.stop()


def test_an_endpoint_served_at_sse_keeps_that_path(tmp_path):
    server = Served(tmp_path / "server.log", "--path", "/sse")
    try:
        answer = httpx.post(
            server.base + "/sse", json=INIT, headers={"accept": "application/json, text/event-stream"},
            timeout=DEADLINE,
        )  # fmt: skip
        assert answer.status_code == 200 and answer.json()["result"]["protocolVersion"] == OLD
        assert httpx.post(server.base + "/messages/?session_id=x", json=INIT, timeout=DEADLINE).status_code == 404
    finally:
        server.stop()


# -- worker processes --------------------------------------------------------------------------
def test_with_two_workers_a_post_reaching_the_other_worker_is_relayed_to_its_stream(tmp_path):
    server = Served(tmp_path / "server.log", "--workers", "2")
    streams: list[Stream] = []
    try:
        pids: set[int] = set()
        while len(pids) < 2:  # streams until both workers hold one
            assert len(streams) < 40, "every stream landed on one worker"
            opened = Stream(server.base)
            streams.append(opened)
            opened.open_session()
            answer = opened.call(tool_call(1, "pid"))
            pids.add(json.loads(answer["result"]["content"][0]["text"])["result"])
        for opened in streams:
            # Each POST on a new connection: the kernel hands some to the other worker.
            for n in range(2, 8):
                assert opened.call({"jsonrpc": "2.0", "id": n, "method": "ping"})["id"] == n
    finally:
        for opened in streams:
            opened.close()
        server.stop()


# -- replicas sharing a Redis -----------------------------------------------------------------
REPLICA = SERVERS / "session_replica.py"


@pytest.fixture
def replicas(redis_url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Replicas A and B of session_replica.py (principal: the X-User header), one Redis."""
    with Processes(tmp_path / "procs", graceful=False) as procs:
        started = [
            procs.start_script(REPLICA, "--auth", redis_url=redis_url, env={"REPLICA": name}, wait=False)
            for name in "AB"
        ]
        a, b = (proc.wait_ready() for proc in started)
        yield a.url.removesuffix("/mcp"), b.url.removesuffix("/mcp")


def test_a_post_reaching_another_replica_is_served_on_the_stream_it_names(replicas):
    a, b = replicas
    alice = Stream(a, {"x-user": "alice"})
    try:
        assert alice.call(INIT, via=b)["result"]["protocolVersion"] == OLD
        assert alice.post(INITIALIZED, via=b).status_code == 202
        answer = alice.call(tool_call(1, "whereami"), via=b)
        assert answer["result"]["content"] == [{"type": "text", "text": "A"}]  # run where the stream is
        # A cancellation through B stops the call running on A: the next answer is the ping's.
        assert alice.post(tool_call(2, "wait_forever"), via=b).status_code == 202
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
        assert alice.post(cancel, via=b).status_code == 202
        assert alice.call({"jsonrpc": "2.0", "id": 3, "method": "ping"}, via=b)["id"] == 3
    finally:
        alice.close()


def test_another_replica_refuses_a_post_of_another_principal_or_of_an_ended_stream(replicas):
    a, b = replicas
    alice = Stream(a, {"x-user": "alice"})
    try:
        alice.open_session()
        assert alice.post(tool_call(1, "whereami"), via=b, **{"x-user": "mallory"}).status_code == 404
        assert alice.call({"jsonrpc": "2.0", "id": 2, "method": "ping"}, via=b)["id"] == 2  # nothing ran before
        assert alice.post(content=b"{not json", via=b).status_code == 400
    finally:
        alice.close()
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    wait_until(lambda: alice.post(ping, via=b).status_code == 404, "the ended stream to be unknown on B")


# -- a reader that stops reading (in-process: its send never returns) ---------------------------
@async_test()
async def test_a_reader_that_stops_reading_has_its_stream_ended_and_its_session_closed():
    server = Server("flood")
    stopped = asyncio.Event()

    @server.tool
    async def flood(ctx: Context) -> str:
        sent = 0
        try:
            while True:  # until cancelled: far more than the stream's queue holds
                await ctx.log("info", f"line {sent}")
                sent += 1
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            assert sent >= QUEUE_EVENTS  # the queue filled before the reader was dropped
            stopped.set()
            raise

    app = HttpApp(server, body_timeout=0.5)
    endpoint: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    stuck = asyncio.Event()  # never set: the reader takes no more bytes

    async def reader_send(message: dict[str, Any]) -> None:
        body = message.get("body", b"")
        if body.startswith(b"event: endpoint"):
            endpoint.set_result(body.split(b"data: ")[1].strip().decode())
        elif message["type"] == "http.response.body" and message.get("more_body"):
            await stuck.wait()

    async def never_leaves() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    async with server.running():
        get = asyncio.ensure_future(app(scope("GET", "/sse"), never_leaves, reader_send))
        uri = await endpoint
        path, _, query = uri.partition("?")
        for message in (INIT, INITIALIZED, {**tool_call(1, "flood"), "params": {"name": "flood", "arguments": {}}}):
            status = await post(app, path, query, message)
            assert status == 202
        await asyncio.wait_for(get, DEADLINE)  # the stream ended: its GET returned
        await asyncio.wait_for(stopped.wait(), DEADLINE)  # and the flooding call was cancelled
        assert app.legacy_sse_count == 0
        assert await post(app, path, query, {"jsonrpc": "2.0", "id": 2, "method": "ping"}) == 404


def scope(method: str, path: str, query: str = "") -> dict[str, Any]:
    return {
        "type": "http", "method": method, "path": path, "query_string": query.encode(), "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
    }  # fmt: skip


async def post(app: HttpApp, path: str, query: str, message: dict[str, Any]) -> int:
    sent: list[dict[str, Any]] = []
    body = json.dumps(message).encode()
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        return {}

    async def send(event: dict[str, Any]) -> None:
        sent.append(event)

    await app(scope("POST", path, query), receive, send)
    return int(sent[0]["status"])


@async_test()
async def test_the_servers_rate_limit_counts_the_principals_calls_over_sse():
    server = Server("limited", config=ServerConfig(middleware=[RateLimit(rate=0.01, burst=1, methods={"tools/call"})]))

    @server.tool
    def hello() -> str:
        return "hello"

    async def alice(scope: dict[str, Any]) -> str:
        return "alice"

    app = HttpApp(server, authenticate=alice)
    events: asyncio.Queue[bytes] = asyncio.Queue()

    async def reader_send(message: dict[str, Any]) -> None:
        if message.get("body"):
            events.put_nowait(message["body"])

    async def never_leaves() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    async def answer() -> dict[str, Any]:
        while True:
            body = await asyncio.wait_for(events.get(), DEADLINE)
            if body.startswith(b"event: message"):
                return json.loads(body.split(b"data: ", 1)[1])

    async with server.running():
        get = asyncio.ensure_future(app(scope("GET", "/sse"), never_leaves, reader_send))
        endpoint = await asyncio.wait_for(events.get(), DEADLINE)
        path, _, query = endpoint.split(b"data: ")[1].strip().decode().partition("?")
        assert await post(app, path, query, INIT) == 202
        await answer()
        assert await post(app, path, query, INITIALIZED) == 202
        assert await post(app, path, query, tool_call(1, "hello")) == 202
        assert (await answer())["result"]["content"] == [{"type": "text", "text": "hello"}]
        assert await post(app, path, query, tool_call(2, "hello")) == 202
        refused = await answer()
        assert refused["id"] == 2 and refused["error"]["code"] == RATE_LIMITED
        app.end_legacy_streams()
        await asyncio.wait_for(get, DEADLINE)


# -- OAuth (a ProtectedResource): the bearer checked on the GET and on every POST --------------
@async_test(40.0)
async def test_an_oauth_protected_server_checks_the_token_on_the_stream_and_on_each_post():
    from tests.auth.test_resource import protected

    async with protected() as setup, httpx.AsyncClient(timeout=DEADLINE) as client:
        base = setup.url.removesuffix("/mcp")
        alice, mallory = setup.token(), setup.token(sub="mallory")
        refused = await client.get(base + "/sse")
        assert refused.status_code == 401 and "resource_metadata=" in refused.headers["www-authenticate"]
        expired = await client.get(base + "/sse", headers={"authorization": f"Bearer {setup.token(exp=1)}"})
        assert expired.status_code == 401
        async with client.stream("GET", base + "/sse", headers={"authorization": f"Bearer {alice}"}) as stream:
            assert stream.status_code == 200
            lines = stream.aiter_lines()
            assert await anext(lines) == "event: endpoint"
            endpoint = base + (await anext(lines)).removeprefix("data: ")

            async def post(message: dict[str, Any], token: str | None) -> httpx.Response:
                headers = {"authorization": f"Bearer {token}"} if token else {}
                return await client.post(endpoint, json=message, headers=headers)

            assert (await post(INIT, None)).status_code == 401
            assert (await post(INIT, mallory)).status_code == 404  # another principal's session
            assert (await post(INIT, alice)).status_code == 202
            async for line in lines:
                if line.startswith("data: "):
                    assert json.loads(line[6:])["result"]["protocolVersion"] == OLD
                    break
        assert setup.ran == []


@async_test()
async def test_closed_streams_leave_no_session_connection_or_task_behind():
    from modelctx.transports._duplex import DuplexServer
    from modelctx.transports.session import HandshakeSession

    server = Server("leaks")

    @server.tool
    async def wait() -> str:
        await asyncio.sleep(3600)
        return "never"

    app = HttpApp(server)

    def alive(kind: type) -> int:
        gc.collect()
        return sum(1 for thing in gc.get_objects() if isinstance(thing, kind))

    async with server.running():
        tasks, sessions, duplexes = len(asyncio.all_tasks()), alive(HandshakeSession), alive(DuplexServer)
        for _ in range(20):
            events: asyncio.Queue[bytes] = asyncio.Queue()
            leave = asyncio.Event()

            async def reader_send(message: dict[str, Any], events: asyncio.Queue[bytes] = events) -> None:
                if message.get("body"):
                    events.put_nowait(message["body"])

            async def until_left(leave: asyncio.Event = leave) -> dict[str, Any]:
                await leave.wait()
                return {"type": "http.disconnect"}

            get = asyncio.ensure_future(app(scope("GET", "/sse"), until_left, reader_send))
            endpoint = await asyncio.wait_for(events.get(), DEADLINE)
            path, _, query = endpoint.split(b"data: ")[1].strip().decode().partition("?")
            for message in (INIT, INITIALIZED, tool_call(1, "wait")):
                assert await post(app, path, query, message) == 202
            leave.set()  # the client goes, a call still running
            await asyncio.wait_for(get, DEADLINE)
        assert app.legacy_sse_count == 0
        await until(lambda: len(asyncio.all_tasks()) <= tasks, "the closed streams' tasks to end")
        assert alive(HandshakeSession) == sessions and alive(DuplexServer) == duplexes
