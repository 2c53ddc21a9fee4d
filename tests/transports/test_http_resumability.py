"""SSE polling and resumability on handshake-era Streamable HTTP sessions.

2025-11-25 basic/transports.mdx, Resumability and Redelivery and SEP-1699 (DIGEST §2.6):
a handler's ``ctx.close_sse_stream`` ends its POST reply with a priming event (an
``id``, empty ``data`` and ``retry``); the rest of the request is delivered when the
client reconnects with GET and ``Last-Event-ID``. 2026-07-28 has no event ids at all.

The servers are real ``modelctx serve --http`` subprocesses; the tests use raw httpx,
and one uses our own ``Client``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from modelctx import Context, Server
from modelctx.client import Client
from modelctx.errors import ConnectionClosed, RequestLost
from modelctx.transports._sse_resume import KEPT_BYTES as _KEPT_BYTES
from modelctx.transports._sse_resume import KEPT_EVENTS as _KEPT_EVENTS
from modelctx.transports._sse_resume import KEPT_STREAMS as _KEPT_STREAMS
from modelctx.transports._sse_resume import RESUME_GRACE as _RESUME_GRACE
from tests.support.cutting_proxy import CuttingProxy
from tests.support.paths import CONFORMANCE
from tests.support.wire import DEADLINE, HttpServer, McpHttp, request, wait_until

LEGACY = "2025-11-25"
FIXTURE = CONFORMANCE / "everything_server.py"

SERVER_FILE = '''
import asyncio

from modelctx import Context, Server

server = Server("resumability-tests", version="0")


@server.tool
async def poll(ctx: Context, notes: int = 0, pause_ms: int = 0, early: bool = False) -> str:
    """Close the SSE stream, send notes, pause, answer."""
    if early:
        await ctx.info("before the close")
    await ctx.close_sse_stream(retry_ms=250)
    for i in range(notes):
        await ctx.info(f"note {i}")
    await asyncio.sleep(pause_ms / 1000)
    return f"polled {notes}"


@server.resource("notes://board")
def board() -> str:
    return "the board"


@server.tool
def update(times: int = 1) -> str:
    """Announce the board changed ``times`` times (notifications of no request)."""
    for _ in range(times):
        server.resource_updated("notes://board")
    return "updated"
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[HttpServer]:
    with HttpServer.of_source(SERVER_FILE, tmp_path_factory.mktemp("resumability")) as process:
        yield process


@pytest.fixture
def http(server) -> Iterator[McpHttp]:
    with McpHttp(server) as client:
        yield client


# -- helpers ----------------------------------------------------------------------------------
class Session:
    """A handshake-era session on ``http``: initialize, then raw requests in it."""

    def __init__(self, http: McpHttp) -> None:
        self.http = http
        opened = http.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": LEGACY,
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            }
        )
        self.id = opened.headers["mcp-session-id"]
        self.headers = {"mcp-session-id": self.id, "mcp-protocol-version": LEGACY}
        assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202

    def post(self, message: dict[str, Any]) -> Any:
        return self.http.post(message, headers=self.headers)

    def poll(self, id: int, **arguments: Any) -> Any:
        return self.post(call(id, **arguments))

    def get(self, last_event_id: str | None = None) -> Any:
        headers = {**self.headers, "accept": "text/event-stream"}
        if last_event_id is not None:
            headers["last-event-id"] = last_event_id
        return self.http.client.get(self.http.url, headers=headers)

    def stream(self, last_event_id: str | None = None) -> Any:
        """A GET left open (``with`` it): for the standalone stream."""
        headers = {**self.headers, "accept": "text/event-stream"}
        if last_event_id is not None:
            headers["last-event-id"] = last_event_id
        return self.http.client.stream("GET", self.http.url, headers=headers)


def call(id: int, **arguments: Any) -> dict[str, Any]:
    """A handshake-era tools/call of ``poll``."""
    params = {"name": "poll", "arguments": arguments}
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}


def events(text: str) -> list[dict[str, Any]]:
    """The SSE events of a body as field dicts; ``data`` decoded when not empty."""
    parsed = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
        if fields:
            if fields.get("data"):
                fields["data"] = json.loads(fields["data"])
            parsed.append(fields)
    return parsed


def priming_of(response: Any) -> dict[str, Any]:
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    *_, last = events(response.text)
    assert "retry" in last
    return last


# -- the priming event ------------------------------------------------------------------------
def test_closing_the_stream_ends_the_reply_with_one_priming_event(http):
    session = Session(http)

    reply = session.poll(1, pause_ms=50)

    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/event-stream")
    [priming] = events(reply.text)
    stream_id, _, n = priming["id"].rpartition(":")
    assert stream_id and n == "0"
    assert priming["retry"] == "250"
    assert priming["data"] == ""  # an event with an id and empty data (SEP-1699)


def test_events_sent_before_the_close_come_first_and_the_priming_event_last(http):
    session = Session(http)

    reply = session.poll(1, early=True)

    before, priming = events(reply.text)
    assert before["data"]["params"]["data"] == "before the close"
    stream_id = before["id"].rsplit(":", 1)[0]
    assert before["id"] == f"{stream_id}:1"  # every event of a handshake-era SSE reply has an id
    assert priming["id"] == before["id"] and priming["data"] == ""  # resume after the last one sent


# -- resuming with GET and Last-Event-ID --------------------------------------------------------
def test_get_with_the_priming_id_delivers_the_rest_with_ids_and_ends_at_the_result(http):
    session = Session(http)
    priming = priming_of(session.poll(1, notes=2))
    stream_id = priming["id"].rsplit(":", 1)[0]

    resumed = session.get(priming["id"])

    assert resumed.status_code == 200
    assert resumed.headers["content-type"].startswith("text/event-stream")
    got = events(resumed.text)
    assert [e["id"] for e in got] == [f"{stream_id}:1", f"{stream_id}:2", f"{stream_id}:3"]
    assert [e["data"]["params"]["data"] for e in got[:2]] == ["note 0", "note 1"]
    assert got[2]["data"] == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": [{"type": "text", "text": "polled 2"}]},
    }


def test_a_later_last_event_id_replays_only_what_follows_it(http):
    session = Session(http)
    priming = priming_of(session.poll(1, notes=3))
    stream_id = priming["id"].rsplit(":", 1)[0]
    session.get(priming["id"])  # wait for the request to end

    resumed = session.get(f"{stream_id}:2")

    assert [e["id"] for e in events(resumed.text)] == [f"{stream_id}:3", f"{stream_id}:4"]


def test_a_client_that_resumes_before_the_result_waits_for_it(http):
    session = Session(http)
    priming = priming_of(session.poll(7, pause_ms=400))  # the POST is over; the handler runs on

    resumed = session.get(priming["id"])

    [result] = events(resumed.text)
    assert result["data"]["id"] == 7
    assert result["data"]["result"]["content"] == [{"type": "text", "text": "polled 0"}]


def test_a_client_that_drops_the_connection_after_the_priming_event_does_not_cancel(http):
    """Once the server closed the stream, the client leaving is polling, not cancellation."""
    session = Session(http)
    with httpx.Client(timeout=DEADLINE) as once:  # its own connection, closed at once
        reply = once.post(
            http.url,
            json=call(4, pause_ms=300),
            headers={**http.headers_for(None), **session.headers},
        )
    priming = priming_of(reply)

    resumed = session.get(priming["id"])

    assert events(resumed.text)[-1]["data"]["result"]["content"] == [{"type": "text", "text": "polled 0"}]


def test_notifications_cancelled_after_the_close_ends_the_kept_stream_without_a_result(http):
    session = Session(http)
    priming = priming_of(session.poll(3, pause_ms=10_000))

    cancelled = session.post(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}
    )
    resumed = session.get(priming["id"])

    assert cancelled.status_code == 202
    assert resumed.status_code == 200
    assert events(resumed.text) == []


def test_an_unknown_last_event_id_opens_the_standalone_stream(http):
    """The server may decline to replay; a 404 would mean the session has ended."""
    session = Session(http)

    with session.stream("no-such-stream:3") as standalone:
        assert standalone.status_code == 200
        assert standalone.headers["content-type"].startswith("text/event-stream")
        second = session.get("no-such-stream:3")

    assert second.status_code == 409  # the standalone stream is already open


def test_the_standalone_stream_without_last_event_id_still_works_beside_a_resumption(http):
    session = Session(http)
    priming = priming_of(session.poll(1, pause_ms=100))

    with session.stream() as standalone:
        resumed = session.get(priming["id"])
        assert standalone.status_code == 200

    assert events(resumed.text)[-1]["data"]["id"] == 1


def test_another_sessions_event_id_is_not_replayed(http):
    mine, theirs = Session(http), Session(http)
    priming = priming_of(theirs.poll(1))

    with mine.stream(priming["id"]) as standalone:
        assert standalone.status_code == 200  # the standalone stream, not their replay
        assert mine.get(priming["id"]).status_code == 409


def updates_on(session: Session, count: int, last_event_id: str | None = None) -> list[dict[str, Any]]:
    """Open the standalone stream (retrying while the server still holds the previous
    one: 409) and read ``count`` resource updates from it."""
    end = time.monotonic() + DEADLINE
    while True:
        with session.stream(last_event_id) as stream:
            if stream.status_code == 409 and time.monotonic() < end:
                continue
            assert stream.status_code == 200
            got: list[dict[str, Any]] = []
            buffer = ""
            for chunk in stream.iter_text():
                buffer += chunk
                got = [e for e in events(buffer.rpartition("\n\n")[0]) if "data" in e]
                if len(got) >= count:
                    return got[:count]
            raise AssertionError(f"the stream ended after {got}")


def test_the_standalone_stream_keeps_what_a_broken_get_missed_and_replays_it(http):
    # A notification of no request sent while the GET stream was away was lost: the
    # standalone stream had no event ids and no buffer. Now it is kept (bounded), and a
    # GET that comes back gets it, after its Last-Event-ID or after the last event sent.
    session = Session(http)
    subscribe = {"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": "notes://board"}}
    assert session.post(subscribe).status_code == 200
    update = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "update", "arguments": {}}}

    with session.stream() as first:  # the stream exists from its first GET
        assert first.status_code == 200
    assert session.post(update).status_code == 200
    (seen,) = updates_on(session, 1)
    assert seen["data"]["method"] == "notifications/resources/updated" and seen["id"].endswith(":1")

    update["id"], update["params"]["arguments"] = 3, {"times": 2}
    assert session.post(update).status_code == 200  # no GET attached: kept for the next one
    missed = updates_on(session, 2)
    assert [e["id"] for e in missed] == [seen["id"][:-1] + "2", seen["id"][:-1] + "3"]

    replayed = updates_on(session, 2, last_event_id=seen["id"])  # what came after the first one
    assert [e["id"] for e in replayed] == [e["id"] for e in missed]


# -- 2026-07-28 has no resumption ---------------------------------------------------------------
def test_modern_requests_never_carry_event_ids_or_priming_events(http):
    log_level = {"io.modelcontextprotocol/logLevel": "info"}
    message = request(5, "tools/call", {"name": "poll", "arguments": {"notes": 2}}, **log_level)

    reply = http.post(message)

    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/event-stream")
    got = events(reply.text)
    assert all("id" not in e and "retry" not in e for e in got)
    assert [e["data"]["params"]["data"] for e in got[:2]] == ["note 0", "note 1"]
    assert got[-1]["data"]["id"] == 5 and got[-1]["data"]["result"]["resultType"] == "complete"


def test_a_modern_request_without_notifications_stays_plain_json(http):
    reply = http.post(request(6, "tools/call", {"name": "poll", "arguments": {}}))

    assert reply.headers["content-type"] == "application/json"
    assert reply.json()["result"]["content"] == [{"type": "text", "text": "polled 0"}]


@pytest.mark.parametrize("mode", ["auto", "handshake"])
def test_without_handshake_era_http_closing_the_stream_does_nothing(mode):
    """In-process (and stdio) there is no SSE stream to close: the call just answers."""
    server = Server("in-process", version="0")

    @server.tool
    async def poll(ctx: Context) -> str:
        await ctx.close_sse_stream()
        return "polled"

    async def main() -> Any:
        async with Client(server, mode=mode, timeout=DEADLINE) as client:
            return await client.call_tool("poll", {})

    assert asyncio.run(main()).content[0].text == "polled"


# -- memory stays bounded -----------------------------------------------------------------------
def test_a_kept_stream_holds_only_its_latest_events_and_always_the_result(http):
    session = Session(http)
    notes = _KEPT_EVENTS + 10
    priming = priming_of(session.poll(1, notes=notes))
    stream_id = priming["id"].rsplit(":", 1)[0]

    got = events(session.get(priming["id"]).text)

    assert len(got) == _KEPT_EVENTS
    assert got[0]["id"] == f"{stream_id}:{notes + 1 - _KEPT_EVENTS + 1}"
    assert got[-1]["id"] == f"{stream_id}:{notes + 1}"
    assert got[-1]["data"]["result"]["content"] == [{"type": "text", "text": f"polled {notes}"}]


def test_a_session_keeps_a_few_streams_and_drops_the_oldest_finished_one(http):
    session = Session(http)
    primings = [priming_of(session.poll(i)) for i in range(1, _KEPT_STREAMS + 2)]
    newest = session.get(primings[-1]["id"])  # also waits for that request to end

    with session.stream() as standalone:
        assert standalone.status_code == 200
        dropped = session.get(primings[0]["id"])  # now an unknown id: the standalone stream
        kept = session.get(primings[1]["id"])

    assert dropped.status_code == 409
    assert events(kept.text)[-1]["data"]["id"] == 2
    assert events(newest.text)[-1]["data"]["id"] == _KEPT_STREAMS + 1


def test_when_every_kept_stream_is_running_the_reply_simply_stays_open(http):
    session = Session(http)
    for i in range(1, _KEPT_STREAMS + 1):
        priming_of(session.poll(i, pause_ms=3000))

    reply = session.poll(99, notes=1)

    got = events(reply.text)
    assert all("id" not in e and "retry" not in e for e in got)
    assert got[-1]["data"]["id"] == 99


# -- our own client ------------------------------------------------------------------------------
def test_our_handshake_era_client_gets_the_result_of_test_reconnection(tmp_path):
    fixture = HttpServer(FIXTURE, tmp_path / "fixture.log")

    async def main() -> Any:
        async with Client(fixture.url, mode="handshake", timeout=DEADLINE) as client:
            assert client.modern is False
            return await client.call_tool("test_reconnection", {})

    try:
        result = asyncio.run(main())
    finally:
        fixture.stop()
    assert result.content[0].text.startswith("Reconnection test completed")
    assert not result.is_error


# -- a reply stream cut by the network (issue 20) -------------------------------------------------
# A tool that reports progress, then works, then answers; the connection carrying its
# SSE reply breaks in between. Handshake era: the events had ids, so a GET with
# Last-Event-ID gets the rest, result included. 2026-07-28: no ids; our client re-issues
# the call when the tool says repeating it is harmless, else fails it with RequestLost.
SLOW_FILE = '''
import asyncio

from modelctx import Context, Server

server = Server("broken-stream-tests", version="0")


async def _work(ctx: Context, seconds: float, runs: str) -> str:
    if runs:
        with open(runs, "a") as file:
            file.write("run\\n")
    await ctx.info("working")
    await ctx.report_progress(1, 2)
    await asyncio.sleep(seconds)
    return f"worked {seconds}"


@server.tool
async def work(ctx: Context, seconds: float = 1.0, runs: str = "") -> str:
    """Log a line and report progress, work, answer; append a line to ``runs`` per run."""
    return await _work(ctx, seconds, runs)


@server.tool(annotations={"idempotentHint": True})
async def work_idempotently(ctx: Context, seconds: float = 1.0, runs: str = "") -> str:
    """``work``, marked safe to run twice."""
    return await _work(ctx, seconds, runs)


@server.tool
async def bulky(ctx: Context, count: int, size: int) -> str:
    """Close the SSE stream, then log ``count`` lines of ``size`` characters, answer."""
    await ctx.close_sse_stream(retry_ms=100)
    for i in range(count):
        await ctx.info(str(i) * size)
    return f"logged {count}"


@server.tool
async def work_until_cancelled(ctx: Context, marker: str) -> str:
    """Log a line, then run until cancelled; then write 'cancelled' to ``marker``."""
    await ctx.info("working")
    try:
        await asyncio.sleep(600)
    except asyncio.CancelledError:
        with open(marker, "w") as file:
            file.write("cancelled")
        raise
    return "never"
'''


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory) -> Iterator[HttpServer]:
    with HttpServer.of_source(SLOW_FILE, tmp_path_factory.mktemp("broken_streams")) as process:
        yield process


@pytest.fixture
def slow_http(slow_server) -> Iterator[McpHttp]:
    with McpHttp(slow_server) as client:
        yield client


def first_event_then_cut(http: McpHttp, message: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """POST ``message`` on a connection of its own, read the reply's first SSE event,
    then drop the connection (the client's side of a network cut). Returns that event."""
    block = ""
    with httpx.Client(timeout=DEADLINE) as once:
        with once.stream("POST", http.url, json=message, headers={**http.headers_for(message), **headers}) as reply:
            assert reply.headers["content-type"].startswith("text/event-stream")
            for line in reply.iter_lines():
                if not line and block:
                    break
                block += line + "\n"
    [first] = events(block)
    return first


def test_a_handshake_era_reply_cut_mid_stream_is_resumed_with_get_and_last_event_id(slow_http, tmp_path):
    session = Session(slow_http)
    runs = tmp_path / "runs"
    message = {"jsonrpc": "2.0", "id": 11, "method": "tools/call",
               "params": {"name": "work", "arguments": {"seconds": 1.0, "runs": str(runs)}}}  # fmt: skip

    first = first_event_then_cut(slow_http, message, session.headers)

    assert first["data"]["method"] == "notifications/message"
    assert "id" in first, "every event of a handshake-era SSE reply carries an id"
    resumed = session.get(first["id"])
    assert resumed.status_code == 200
    rest = events(resumed.text)
    assert rest[-1]["data"] == {"jsonrpc": "2.0", "id": 11, "result": {"content": [{"type": "text", "text": "worked 1.0"}]}}
    assert all("id" in event for event in rest)
    assert runs.read_text() == "run\n"  # the cut did not cancel the call, and nothing ran it twice


def test_our_handshake_era_client_gets_the_result_of_a_call_whose_stream_was_cut(slow_server, tmp_path):
    runs = tmp_path / "runs"

    async def main() -> Any:
        async with CuttingProxy(slow_server.port) as proxy:
            async with Client(proxy.url, mode="handshake", timeout=DEADLINE) as client:
                result = await client.call_tool("work", {"seconds": 1.0, "runs": str(runs)})
            return result, proxy.cuts

    result, cuts = asyncio.run(main())

    assert cuts == 1
    assert result.content[0].text == "worked 1.0" and not result.is_error
    assert runs.read_text() == "run\n"  # resumed, not sent again


def test_a_modern_call_whose_stream_broke_is_reissued_when_the_tool_is_idempotent(slow_server, tmp_path):
    runs = tmp_path / "runs"
    progress: list[Any] = []

    async def main() -> Any:
        async with CuttingProxy(slow_server.port) as proxy:
            async with Client(proxy.url, mode="2026-07-28", timeout=DEADLINE) as client:
                await client.tools()  # the annotations say whether a call may be repeated
                result = await client.call_tool(
                    "work_idempotently", {"seconds": 0.5, "runs": str(runs)},
                    progress=lambda *update: progress.append(update),
                )
            return result, proxy.cuts

    result, cuts = asyncio.run(main())

    assert cuts == 1
    assert result.content[0].text == "worked 0.5"
    assert runs.read_text() == "run\nrun\n"  # a new request: the tool ran again
    assert len(progress) == 2  # the lost request's progress, then the new one's


def test_a_modern_call_whose_stream_broke_fails_with_request_lost_when_repeating_may_harm(slow_server, tmp_path):
    runs = tmp_path / "runs"

    async def main() -> BaseException:
        async with CuttingProxy(slow_server.port) as proxy:
            async with Client(proxy.url, mode="2026-07-28", timeout=DEADLINE) as client:
                await client.tools()
                with pytest.raises(RequestLost) as lost:
                    await client.call_tool("work", {"seconds": 0.5, "runs": str(runs)}, progress=lambda *_: None)
            assert proxy.cuts == 1
            return lost.value

    error = asyncio.run(main())

    assert isinstance(error, ConnectionClosed)
    message = str(error)
    assert "tools/call" in message and "closed before the response" in message
    assert "neither readOnlyHint nor idempotentHint" in message and "send it again if that is safe" in message
    assert runs.read_text() == "run\n"  # sent once; the server saw the cut as cancellation


def test_a_handshake_era_request_whose_client_never_comes_back_is_cancelled_after_a_grace(slow_http, tmp_path):
    """A disconnect is not a cancellation while the client may resume; one that never
    resumes within RESUME_GRACE seconds is taken to have gone."""
    session = Session(slow_http)
    marker = tmp_path / "marker"
    message = {"jsonrpc": "2.0", "id": 12, "method": "tools/call",
               "params": {"name": "work_until_cancelled", "arguments": {"marker": str(marker)}}}  # fmt: skip

    first = first_event_then_cut(slow_http, message, session.headers)

    assert "id" in first
    wait_until(marker.exists, "the abandoned request to be cancelled", timeout=_RESUME_GRACE + DEADLINE)
    assert marker.read_text() == "cancelled"
    resumed = session.get(first["id"])  # late: the kept stream ended without a result
    assert resumed.status_code == 200 and events(resumed.text) == []


def test_a_reply_delivered_whole_keeps_only_its_result_for_a_late_resume(slow_http):
    session = Session(slow_http)
    message = {"jsonrpc": "2.0", "id": 13, "method": "tools/call",
               "params": {"name": "work", "arguments": {"seconds": 0}}}  # fmt: skip

    whole = events(session.post(message).text)
    resumed = session.get(whole[0]["id"])

    assert [e["data"].get("method") for e in whole] == ["notifications/message", None]  # the log line, the result
    assert [e["id"] for e in events(resumed.text)] == [whole[-1]["id"]]  # the result alone is kept
    assert events(resumed.text)[-1]["data"]["id"] == 13


def test_a_kept_stream_holds_at_most_kept_bytes_of_events_and_always_the_result(slow_http):
    session = Session(slow_http)
    size, count = 100_000, 30  # 3 MB of log lines
    message = {"jsonrpc": "2.0", "id": 14, "method": "tools/call",
               "params": {"name": "bulky", "arguments": {"count": count, "size": size}}}  # fmt: skip
    priming = priming_of(session.post(message))

    got = events(session.get(priming["id"]).text)

    assert got[-1]["data"]["result"]["content"] == [{"type": "text", "text": f"logged {count}"}]
    kept_lines = got[:-1]
    assert 0 < len(kept_lines) < count
    assert sum(len(json.dumps(e["data"])) for e in kept_lines) <= _KEPT_BYTES
    assert kept_lines[-1]["data"]["params"]["data"] == str(count - 1) * size  # the newest are the ones kept
