"""Handshake-era sessions shared through Redis: a 2025-11-25 session opened on one replica
is served by another (issue 13; transports/_redis_sessions.py).

Two real server processes (``modelctx serve FILE --http`` with ``MODELCTX_REDIS_URL``,
started by tests/support/scale_processes.py) on two ports and a real ``redis-server`` (the ``redis_url`` fixture). Requests are steered
to a chosen replica with raw HTTP, as a load balancer without sticky sessions may
send them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelctx.transports._sse_resume import RESUME_GRACE
from tests.support.cutting_proxy import CuttingProxy
from tests.support.paths import SERVERS
from tests.support.scale_processes import Proc, Processes
from tests.support.wire import DEADLINE, async_test, free_port, sse_messages, wait_until

SERVER = SERVERS / "session_replica.py"
LEGACY = "2025-11-25"
JSON_AND_SSE = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def start_pair(procs: Processes, redis_url: str, *args: str) -> tuple[Proc, Proc]:
    """Replicas A and B of the server file (``REPLICA`` names each), their sessions in the
    Redis at ``redis_url``, started at once so that their startups overlap: ``modelctx
    serve``, or with ``args`` the file run itself (``--idle``, ``--auth``)."""
    started = []
    for name in "AB":
        env = {"REPLICA": name}
        if args:
            started.append(procs.start_script(SERVER, *args, redis_url=redis_url, env=env, wait=False))
        else:
            started.append(procs.start_replica(SERVER, redis_url=redis_url, env=env, wait=False))
    return started[0].wait_ready(), started[1].wait_ready()


@pytest.fixture(scope="module")
def replicas(redis_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Proc, Proc]]:
    """Replicas A and B (``modelctx serve``), shared by this module's tests: each test
    opens sessions of its own, and FLUSHALL between tests only ends older ones."""
    with Processes(tmp_path_factory.mktemp("replicas"), graceful=False) as procs:
        yield start_pair(procs, redis_server.url)


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    with Processes(tmp_path / "procs", graceful=False) as started:
        yield started


class Session:
    """A 2025-11-25 client speaking raw HTTP, choosing the replica of each request."""

    def __init__(self, user: str | None = None) -> None:
        self.client = httpx.Client(timeout=DEADLINE)
        self.id: str | None = None
        self.user = user
        self._ids = iter(range(1, 1_000_000))

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {**JSON_AND_SSE, "mcp-protocol-version": LEGACY, **extra}
        if self.id is not None:
            headers["mcp-session-id"] = self.id
        if self.user is not None:
            headers["x-user"] = self.user
        return headers

    def open(self, replica: Proc, capabilities: dict[str, Any] | None = None) -> None:
        params = {"protocolVersion": LEGACY, "capabilities": capabilities or {}, "clientInfo": {"name": "t", "version": "1"}}
        reply = self.client.post(replica.url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params},
                                 headers=self.headers())
        assert reply.status_code == 200, reply.text
        assert reply.json()["result"]["protocolVersion"] == LEGACY
        self.id = reply.headers["mcp-session-id"]
        assert self.notify(replica, "notifications/initialized").status_code == 202

    def notify(self, replica: Proc, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return self.client.post(replica.url, json=message, headers=self.headers())

    def post(self, replica: Proc, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
        message = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params or {}}
        return self.client.post(replica.url, json=message, headers=self.headers())

    def messages(self, replica: Proc, method: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Every message of the reply (SSE or JSON); the response is last."""
        reply = self.post(replica, method, params)
        assert reply.status_code == 200, reply.text
        if reply.headers["content-type"].startswith("text/event-stream"):
            return sse_messages(reply.text)
        return [reply.json()]

    def result(self, replica: Proc, method: str, params: dict[str, Any] | None = None) -> Any:
        response = self.messages(replica, method, params)[-1]
        assert "result" in response, response
        return response["result"]

    def call(self, replica: Proc, tool: str) -> str:
        result = self.result(replica, "tools/call", {"name": tool, "arguments": {}})
        text: str = result["content"][0]["text"]
        return text

    def close(self) -> None:
        self.client.close()


@pytest.fixture
def session() -> Iterator[Session]:
    client = Session()
    yield client
    client.close()


def test_a_session_opened_on_one_replica_is_served_by_the_other(replicas, session):
    a, b = replicas
    session.open(a)
    assert session.call(b, "whereami") == "B"
    # logging/setLevel on B reaches A, which holds the session already (write-through).
    assert session.result(b, "logging/setLevel", {"level": "warning"}) == {}
    logged = [m["params"]["level"] for m in session.messages(a, "tools/call", {"name": "chatty", "arguments": {}})
              if m.get("method") == "notifications/message"]
    assert logged == ["warning"]
    assert session.call(a, "whereami") == "A"


def _first_event_then_cut(session: Session, replica: Proc, tool: str, arguments: dict[str, Any]) -> dict[str, str]:
    """POST a call of ``tool`` on a connection of its own, read the first SSE event of its
    reply, then drop the connection (a network cut). Returns that event's fields."""
    message = {"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    fields: dict[str, str] = {}
    with httpx.Client(timeout=DEADLINE) as once, once.stream(
        "POST", replica.url, json=message, headers=session.headers()
    ) as reply:
        assert reply.headers["content-type"].startswith("text/event-stream")
        for line in reply.iter_lines():
            if not line and fields:
                break
            name, _, value = line.partition(":")
            fields[name] = value.strip()
    return fields


def test_a_reply_cut_on_one_replica_is_resumed_through_the_other(replicas, session):
    """The events of a handshake-era SSE reply are kept in Redis as they are written, so
    the client's GET with Last-Event-ID may reach any replica (issue 20). The call runs
    on past RESUME_GRACE on A, since B tells it through Redis that a client follows."""
    a, b = replicas
    session.open(a)
    first = _first_event_then_cut(session, a, "work", {"seconds": RESUME_GRACE + 2})
    assert "id" in first, f"the first event has no id: {first}"

    resumed = session.client.get(b.url, headers={**session.headers(), "accept": "text/event-stream",
                                                 "last-event-id": first["id"]})  # fmt: skip

    assert resumed.status_code == 200 and resumed.headers["content-type"].startswith("text/event-stream")
    rest = sse_messages(resumed.text)
    assert rest[-1] == {"jsonrpc": "2.0", "id": 77, "result": {"content": [{"type": "text", "text": "worked on A"}]}}


def test_a_reply_delivered_whole_leaves_only_its_result_in_redis(replicas, session):
    """What Redis keeps of a stream whose result went out whole is that result alone."""
    a, b = replicas
    session.open(a)
    reply = session.post(a, "tools/call", {"name": "work", "arguments": {"seconds": 0}})
    first_id = next(line for line in reply.text.splitlines() if line.startswith("id:"))[3:].strip()
    stream_id = first_id.rsplit(":", 1)[0]

    def kept_on_b() -> list[dict[str, Any]]:
        resumed = session.client.get(b.url, headers={**session.headers(), "accept": "text/event-stream",
                                                     "last-event-id": f"{stream_id}:0"})  # fmt: skip
        return sse_messages(resumed.text)

    wait_until(lambda: len(kept_on_b()) == 1, "Redis to keep the result alone")
    assert kept_on_b()[0]["result"]["content"] == [{"type": "text", "text": "worked on A"}]


def test_with_redis_frozen_a_cut_reply_is_still_resumed_on_its_own_replica(procs, redis_server):
    """Keeping events in Redis is best effort: a Redis that accepts and never answers
    (SIGSTOP) neither holds the reply back nor stops the replica running it from
    resuming it. (redis_server: skipped, a failure under CI, without redis-server.)"""
    redis = procs.start_redis()
    a = procs.start_replica(SERVER, redis_url=redis.extra["url"], env={"REPLICA": "A"})
    session = Session()
    try:
        session.open(a)
        os.kill(redis.pid, signal.SIGSTOP)
        whole = session.messages(a, "tools/call", {"name": "work", "arguments": {"seconds": 0.1}})
        assert whole[-1]["result"]["content"] == [{"type": "text", "text": "worked on A"}]
        first = _first_event_then_cut(session, a, "work", {"seconds": 1.0})

        resumed = session.client.get(a.url, headers={**session.headers(), "accept": "text/event-stream",
                                                     "last-event-id": first["id"]})  # fmt: skip

        assert resumed.status_code == 200
        assert sse_messages(resumed.text)[-1]["result"]["content"] == [{"type": "text", "text": "worked on A"}]
    finally:
        session.close()
        os.kill(redis.pid, signal.SIGCONT)  # a stopped process ignores SIGTERM until it continues


def test_a_replica_serves_the_subscriptions_of_a_session_opened_elsewhere(replicas, session):
    a, b = replicas
    session.open(a)
    assert session.result(b, "resources/subscribe", {"uri": "memo://note"}) == {}
    # B built the session from Redis: its GET stream gets the subscribed resource's update.
    with session.client.stream("GET", b.url, headers=session.headers(accept="text/event-stream")) as stream:
        assert stream.status_code == 200
        assert session.call(b, "touch_memo") == "touched"
        event = _next_message(stream)
    assert event == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "memo://note"}}


def _next_message(stream: httpx.Response) -> dict[str, Any]:
    data = []
    for line in stream.iter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            message: dict[str, Any] = json.loads("".join(data))
            return message
    pytest.fail("the GET stream ended before a message")


def test_a_session_deleted_on_one_replica_is_gone_on_the_other(replicas, session):
    a, b = replicas
    session.open(a)
    assert session.call(a, "whereami") == "A"
    deleted = session.client.delete(b.url, headers=session.headers())
    assert deleted.status_code == 200
    gone = session.post(a, "tools/call", {"name": "whereami", "arguments": {}})
    assert gone.status_code == 404
    assert "initialize again" in gone.json()["error"]["message"]
    assert session.post(b, "tools/call", {"name": "whereami", "arguments": {}}).status_code == 404
    session.id = ""  # an empty Mcp-Session-Id names no session either
    assert session.post(b, "tools/call", {"name": "whereami", "arguments": {}}).status_code == 404


@async_test(deadline=40)
async def test_an_elicitation_sent_by_one_replica_is_answered_through_the_other(replicas):
    await _elicit_across(*replicas)


async def _elicit_across(a: Proc, b: Proc) -> None:
    session = Session()
    await asyncio.to_thread(session.open, a, {"elicitation": {"form": {}}})
    headers = session.headers()
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "ask_name", "arguments": {}}}
    async with httpx.AsyncClient(timeout=DEADLINE) as client, client.stream("POST", a.url, json=call, headers=headers) as reply:
        assert reply.headers["content-type"].startswith("text/event-stream")
        events = _sse(reply)
        question = await anext(events)
        assert question["method"] == "elicitation/create"
        answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
        forwarded = await client.post(b.url, json=answer, headers=headers)
        assert forwarded.status_code == 202
        response = await anext(events)
    assert response["id"] == 7
    assert response["result"]["content"][0]["text"] == "hello Ada from A"
    session.close()


@async_test(deadline=40)
async def test_questions_asked_at_once_by_two_replicas_get_their_own_answers(replicas):
    # Each replica numbers its server-to-client requests; were both to count from 1, the
    # answer to A's question, posted to B, would settle B's question instead.
    a, b = replicas
    session = Session()
    try:
        await asyncio.to_thread(session.open, a, {"elicitation": {"form": {}}})
        headers = session.headers()
        async with httpx.AsyncClient(timeout=DEADLINE) as client:

            async def ask(replica: Proc, request_id: int) -> tuple[dict[str, Any], Any]:
                call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                        "params": {"name": "ask_name", "arguments": {}}}
                stream = client.stream("POST", replica.url, json=call, headers=headers)
                reply = await stream.__aenter__()
                events = _sse(reply)
                return await anext(events), (stream, events)

            (question_a, (stream_a, events_a)), (question_b, (stream_b, events_b)) = await asyncio.gather(
                ask(a, 1), ask(b, 2)
            )
            assert question_a["id"] != question_b["id"]
            for question, name, other in ((question_a, "Ada", b), (question_b, "Bob", a)):
                answer = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"name": name}}}
                assert (await client.post(other.url, json=answer, headers=headers)).status_code == 202
            result_a, result_b = await anext(events_a), await anext(events_b)
            await stream_a.__aexit__(None, None, None)
            await stream_b.__aexit__(None, None, None)
        assert result_a["result"]["content"][0]["text"] == "hello Ada from A"
        assert result_b["result"]["content"][0]["text"] == "hello Bob from B"
    finally:
        session.close()


async def _sse(reply: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    data: list[str] = []
    async for line in reply.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            text = "".join(data)
            data = []
            if text:
                yield json.loads(text)


@async_test(deadline=40)
async def test_a_request_running_on_one_replica_is_cancelled_through_the_other(replicas):
    a, b = replicas
    session = Session()
    try:
        await asyncio.to_thread(session.open, a)
        headers = session.headers()
        call = {"jsonrpc": "2.0", "id": "long", "method": "tools/call", "params": {"name": "wait_forever", "arguments": {}}}
        async with httpx.AsyncClient(timeout=DEADLINE) as client:
            running = asyncio.ensure_future(client.post(a.url, json=call, headers=headers))
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "long"}}
            # Until A runs the call, B forwards a cancellation A drops: send it until A acts.
            while not running.done():
                assert (await client.post(b.url, json=cancel, headers=headers)).status_code == 202
                await asyncio.wait({running}, timeout=0.2)
            # Cancelled: never answered (cancellation.mdx), so the POST ends with 202.
            assert running.result().status_code == 202
    finally:
        session.close()


def test_another_principal_cannot_use_a_session_on_any_replica(redis_url, procs):
    a, b = start_pair(procs, redis_url, "--auth")
    alice, mallory = Session("alice"), Session("mallory")
    try:
        alice.open(a)
        mallory.id = alice.id
        for replica in (a, b):
            refused = mallory.post(replica, "tools/call", {"name": "whereami", "arguments": {}})
            assert refused.status_code == 404
        assert mallory.client.delete(b.url, headers=mallory.headers()).status_code == 404
        assert alice.call(b, "whereami") == "B"
    finally:
        alice.close()
        mallory.close()


# -- the caps hold in Redis, for every process (transports/_redis_sessions.py) -----------------
def _records(redis_url: str) -> list[bytes]:
    import redis

    store = redis.Redis.from_url(redis_url)
    try:
        return list(store.scan_iter(match="modelctx:replica-server:session:*", count=1000))
    finally:
        store.close()


def _initialize(replica: Proc, user: str | None = None) -> httpx.Response:
    params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    headers = {**JSON_AND_SSE, "mcp-protocol-version": LEGACY, **({"x-user": user} if user else {})}
    with httpx.Client(timeout=DEADLINE) as fresh:  # a new connection: any worker may take it
        return fresh.post(replica.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
                          headers=headers)  # fmt: skip


def test_a_flood_of_initialize_through_workers_and_replicas_leaves_at_most_the_cap_of_sessions(redis_url, procs):
    # Before: each process counted only its own sessions, and Redis kept every one
    # (30,000 initialize through two workers left 30,001 records).
    cap = 20
    two_workers = procs.start_replica(SERVER, redis_url=redis_url, workers=2, options=("--max-sessions", str(cap)),
                                      env={"REPLICA": "A"}, wait=False)  # fmt: skip
    other = procs.start_replica(SERVER, redis_url=redis_url, options=("--max-sessions", str(cap)),
                                env={"REPLICA": "B"}, wait=False)  # fmt: skip
    two_workers.wait_ready(), other.wait_ready()
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(lambda n: _initialize((two_workers, other)[n % 2]), range(10 * cap)))
    opened = [reply for reply in replies if reply.status_code == 200]
    refused = [reply for reply in replies if reply.status_code != 200]
    # Sessions used in the last 15 s count as in use: the flood is refused, except where a
    # slow machine let the first ones age past that and they were evicted for new ones.
    assert len(opened) >= cap
    assert refused and {reply.status_code for reply in refused} == {503}
    assert all(reply.headers["retry-after"] == "1" for reply in refused)
    assert "sessions are in use" in refused[0].json()["error"]["message"]
    assert len(_records(redis_url)) == cap  # never past the cap, whichever process opened them


def test_at_the_shared_cap_initialize_evicts_the_least_recently_used_idle_session_never_one_in_use(redis_url, procs):
    # --idle 12: sessions are renewed every 3 s, and count as in use for 9 s after their
    # last use; a session with a request running is renewed all along.
    a, b = start_pair(procs, redis_url, "--idle", "12", "--max-sessions", "2")
    busy, idle = Session(), Session()
    try:
        busy.open(a)
        idle.open(b)
        headers = busy.headers()
        call = {"jsonrpc": "2.0", "id": "long", "method": "tools/call", "params": {"name": "wait_forever", "arguments": {}}}
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(lambda: httpx.post(a.url, json=call, headers=headers, timeout=60))
            assert _initialize(b).status_code == 503  # both used just now: either may be in use
            give_up = time.monotonic() + 2 * DEADLINE
            while (reply := _initialize(a)).status_code == 503 and time.monotonic() < give_up:
                time.sleep(0.3)  # until the idle one has not been used for 9 s
            assert reply.status_code == 200, reply.text
            assert len(_records(redis_url)) == 2
            for replica in (a, b):  # the idle one was evicted, on every replica
                assert idle.post(replica, "tools/call", {"name": "whereami", "arguments": {}}).status_code == 404
            assert busy.call(b, "whereami") == "B"  # the one in use was kept
            assert not running.done()
            busy.client.delete(a.url, headers=headers)  # ends the call
    finally:
        busy.close()
        idle.close()


def test_a_principals_quota_holds_across_replicas(redis_url, procs):
    # Before: each replica counted the principal's sessions it held, so two replicas let
    # it hold twice its quota.
    a, b = start_pair(procs, redis_url, "--auth", "--per-principal", "2")
    assert _initialize(a, "alice").status_code == 200
    assert _initialize(b, "alice").status_code == 200
    for replica in (a, b):
        over = _initialize(replica, "alice")
        assert over.status_code == 429, over.text
        assert over.headers["retry-after"] == "1"
        assert "all 2 sessions of this principal are in use" in over.json()["error"]["message"]
    assert _initialize(b, "bob").status_code == 200  # another principal has its own quota
    assert len(_records(redis_url)) == 3


def test_an_idle_session_expires_on_every_replica(redis_url, procs):
    import redis

    a, b = start_pair(procs, redis_url, "--idle", "1")
    session = Session()
    store = redis.Redis.from_url(redis_url)
    try:
        session.open(a)
        assert session.call(b, "whereami") == "B"
        key = f"modelctx:replica-server:session:{session.id}"  # Server.redis_prefix, then session:<id>
        assert 0 < store.pttl(key) <= 1000  # the record carries the idle TTL
        wait_until(lambda: not store.exists(key), "the idle session's record to expire in Redis")
        for replica in (a, b):
            assert session.post(replica, "tools/call", {"name": "whereami", "arguments": {}}).status_code == 404
    finally:
        store.close()
        session.close()


@pytest.mark.parametrize("failure", ["stopped", "frozen"])
def test_an_unreachable_session_store_is_a_clear_503(procs, redis_server, failure):
    # Stopped: connections refused at once. Frozen (SIGSTOP): connections accepted and
    # never answered, which only the store's deadline (2 s) turns into a 503.
    # (redis_server: skipped, a failure under CI, where redis-server is not installed.)
    redis = procs.start_redis()
    a = procs.start_replica(SERVER, redis_url=redis.extra["url"], env={"REPLICA": "A"})
    session = Session()
    try:
        session.open(a)
        if failure == "stopped":
            redis.stop()
        else:
            os.kill(redis.pid, signal.SIGSTOP)
        # A new session needs the store, and so does a session this replica does not hold.
        fresh = Session()
        refused = fresh.client.post(
            a.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
            headers=fresh.headers(),
        )
        fresh.close()
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert "session store (Redis) is unreachable" in refused.json()["error"]["message"]
        unknown = Session()
        unknown.id = "0" * 32
        lookup = unknown.post(a, "tools/call", {"name": "whereami", "arguments": {}})
        unknown.close()
        assert lookup.status_code == 503
        assert "session store (Redis) is unreachable" in lookup.json()["error"]["message"]
        # A session this replica holds is still served (only its TTL renewal waits).
        assert session.call(a, "whereami") == "A"
        # A modern (2026-07-28) request never needs the store.
        modern = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "whereami", "arguments": {},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}}
        served = httpx.post(a.url, json=modern, timeout=DEADLINE, headers={
            **JSON_AND_SSE, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "whereami"})
        assert served.status_code == 200
        assert served.json()["result"]["content"][0]["text"] == "A"
    finally:
        session.close()
        if failure == "frozen":  # a stopped process ignores SIGTERM until it continues
            os.kill(redis.pid, signal.SIGCONT)


# -- the GET stream of a session built on another replica, with a shared bus -----------------
@asynccontextmanager
async def _served(app: Any) -> AsyncIterator[str]:
    """``app`` on uvicorn in this event loop, on a free port; yields its endpoint URL."""
    import uvicorn

    port = free_port()
    # A stream still open at the end (a GET stream through the balancer) is cut after 1 s.
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    give_up = time.monotonic() + DEADLINE
    while not server.started:
        if task.done() or time.monotonic() > give_up:
            pytest.fail("uvicorn did not start")
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        await asyncio.wait({task}, timeout=DEADLINE)


@async_test(deadline=40)
async def test_the_get_stream_of_another_replica_hears_list_changed(redis_url):
    # Two apps (two "replicas") over one Server: one bus, as the Redis bus makes it for
    # separate processes. The session is opened on A; its GET stream is opened on B.
    from modelctx import Server, ServerConfig

    server = Server("shared-bus", config=ServerConfig(redis_url=redis_url))

    @server.tool
    def first() -> str:
        return "one"

    async with _served(server.http_app()) as url_a, _served(server.http_app()) as url_b, httpx.AsyncClient(
        timeout=DEADLINE
    ) as client:
        params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        opened = await client.post(url_a, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
                                   headers={**JSON_AND_SSE, "mcp-protocol-version": LEGACY})
        headers = {**JSON_AND_SSE, "mcp-protocol-version": LEGACY, "mcp-session-id": opened.headers["mcp-session-id"]}
        initialized = await client.post(url_a, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        assert initialized.status_code == 202
        async with client.stream("GET", url_b, headers={**headers, "accept": "text/event-stream"}) as stream:
            assert stream.status_code == 200

            @server.tool
            def second() -> str:
                return "two"

            event = await anext(_sse(stream))
    assert event == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


# -- the official SDK's client (mcp 2.3.0, legacy mode) behind a round-robin balancer --------
class RoundRobin:
    """A tiny HTTP load balancer (ASGI): each request goes to the next replica in turn,
    with no stickiness; the reply, SSE included, is streamed back as it comes. ``log``
    records which replica got each request that named a session."""

    def __init__(self, replicas: list[Proc]) -> None:
        self.replicas = replicas
        self.turn = 0
        self.log: list[tuple[str, str]] = []
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(DEADLINE, read=None))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await self.client.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            part = await receive()
            body += part.get("body", b"")
            if not part.get("more_body"):
                break
        replica = self.replicas[self.turn % len(self.replicas)]
        self.turn += 1
        headers = [(k, v) for k, v in scope["headers"] if k not in (b"host", b"content-length")]
        if any(k == b"mcp-session-id" for k, _ in headers):
            self.log.append((str(replica.env["REPLICA"]), scope["method"]))
        request = self.client.build_request(scope["method"], replica.url, headers=headers, content=body)
        response = await self.client.send(request, stream=True)
        try:
            passed = [(k.encode(), v.encode()) for k, v in response.headers.items()
                      if k not in ("content-length", "transfer-encoding", "connection")]
            await send({"type": "http.response.start", "status": response.status_code, "headers": passed})
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client left
        finally:
            await response.aclose()


@async_test(deadline=60)
async def test_the_official_client_keeps_its_session_across_replicas(replicas):
    import mcp_types as types
    from mcp import Client

    balancer = RoundRobin(list(replicas))

    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    async with _served(balancer) as url:
        client = Client(url, mode="legacy", elicitation_callback=user, read_timeout_seconds=DEADLINE)
        async with client as connected:
            assert connected.protocol_version == LEGACY
            served_by = set()
            for _ in range(4):
                result = await connected.call_tool("whereami", {})
                served_by.add(result.content[0].text)
            assert served_by == {"A", "B"}
            greeting = await connected.call_tool("ask_name", {})
            assert greeting.content[0].text.startswith("hello Grace from ")
            assert (await connected.list_tools()).tools
    # Both replicas served requests of the one session, and its DELETE went to one of them.
    assert {name for name, _ in balancer.log} == {"A", "B"}
    assert any(method == "DELETE" for _, method in balancer.log)


@async_test(deadline=60)
async def test_clients_resume_a_reply_cut_mid_stream_through_a_balancer_of_replicas(replicas):
    """Ours and the official client, behind a balancer without stickiness: the call's
    stream is cut after its first event, the client's GET with Last-Event-ID goes to
    whichever replica is next, and the call returns its result (issue 20)."""
    from mcp import Client as OfficialClient

    from modelctx.client import Client

    balancer = RoundRobin(list(replicas))
    async with _served(balancer) as url:
        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        async with CuttingProxy(port) as proxy:
            async with Client(proxy.url, mode="handshake", timeout=DEADLINE) as ours:
                result = await ours.call_tool("work", {"seconds": 1.0})
            assert proxy.cuts == 1
            assert result.content[0].text.startswith("worked on ")
        async with CuttingProxy(port) as proxy:
            async with OfficialClient(proxy.url, mode="legacy", read_timeout_seconds=DEADLINE) as official:
                theirs = await official.call_tool("work", {"seconds": 1.0})
            assert proxy.cuts == 1
            assert theirs.content[0].text.startswith("worked on ")


def test_without_a_redis_sessions_stay_in_the_process_and_redis_is_never_imported():
    # No redis_url (and no MODELCTX_REDIS_URL): the app keeps its in-process sessions only.
    script = (
        "import sys\n"
        "from modelctx import Server\n"
        "app = Server('solo').http_app()\n"
        "assert app.session_store is None, app.session_store\n"
        "assert 'redis' not in sys.modules, 'redis was imported'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MODELCTX_REDIS_URL"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=DEADLINE)
    assert done.returncode == 0, done.stderr
