"""The subscription bus and the ``requestState`` key shared by replicas through Redis.

A change of tools, prompts or resources on any replica, or a ``resources/updated`` raised
by any replica, reaches every ``subscriptions/listen`` stream and every handshake-era
session's stream on every replica, within 100 ms (the issue's bound); a ``requestState``
minted by one replica is accepted by another with no secret configured. Redis away at
startup is a clear error; Redis away while serving holds nobody up, and events flow again
when it is back.

Two kinds of tests: real replicas (``modelctx serve tests/fixtures/servers/replica_server.py --http
--redis URL``, twice, started by tests/support/scale_processes.py) spoken to over raw HTTP, and ``RedisBus`` objects in this process
(two buses on one Redis stand for two processes). Every Redis is real (``redis_url``).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelctx import Server, ServerConfig
from modelctx.server import LocalBus, StartupError
from modelctx.server._bus import Event
from modelctx.server._redis_bus import RedisBus
from tests.support.cli_run import modelctx, one_line_error
from tests.support.paths import SERVERS
from tests.support.redis_server import RedisServer
from tests.support.scale_processes import EventStream, ListenStream, Proc, Processes, ScaleError
from tests.support.wire import DEADLINE, async_test, free_port, request, serve_command, sse_messages

REPLICA = SERVERS / "replica_server.py"
MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
#: The issue's bound: a change on replica A reaches listeners on replica B within this.
BOUND_SECONDS = 0.100


# -- real replicas ----------------------------------------------------------------------------
@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    with Processes(tmp_path / "procs", graceful=False) as started:
        yield started


def start_pair(procs: Processes, redis_url: str) -> tuple[Proc, Proc]:
    """Replicas A and B (``modelctx serve replica_server.py --http --redis URL``), started
    at once so that their startups overlap."""
    first, second = (procs.start_replica(REPLICA, options=("--redis", redis_url), wait=False) for _ in range(2))
    return first.wait_ready(), second.wait_ready()


def modern_headers(message: dict[str, Any]) -> dict[str, str]:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": message["method"],
    }
    if message["method"] == "tools/call":
        headers["mcp-name"] = message["params"]["name"]
    return headers


def reply(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC response in a POST's answer, JSON or SSE."""
    assert response.status_code == 200, (response.status_code, response.text)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        message: dict[str, Any] = sse_messages(response.text)[-1]
        return message
    body: dict[str, Any] = response.json()
    return body


def call_tool(id: int, name: str, **arguments: Any) -> dict[str, Any]:
    return request(id, "tools/call", {"name": name, "arguments": arguments})


def post(client: httpx.Client, replica: Proc, message: dict[str, Any]) -> dict[str, Any]:
    """``message`` POSTed to ``replica`` with the 2026-07-28 headers; its JSON-RPC response."""
    return reply(client.post(replica.url, headers=modern_headers(message), content=json.dumps(message)))


def listen_on(replica: Proc) -> ListenStream:
    """A 2026-07-28 ``subscriptions/listen`` stream on ``replica`` for every kind of change."""
    notifications = {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourcesListChanged": True,
        "resourceSubscriptions": ["notes://a"],
    }
    stream = ListenStream(replica.port, notifications, timeout=DEADLINE)
    stream.next("notifications/subscriptions/acknowledged")
    return stream


def handshake_stream_on(client: httpx.Client, replica: Proc) -> EventStream:
    """A 2025-11-25 session on ``replica``, subscribed to notes://a, and its GET stream."""
    base = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "tests", "version": "0"}}}
    answer = client.post(replica.url, headers=base, content=json.dumps(init))
    assert "result" in reply(answer)
    session = {**base, "mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": HANDSHAKE}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert client.post(replica.url, headers=session, content=json.dumps(initialized)).status_code == 202
    subscribe = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": "notes://a"}}
    assert "result" in reply(client.post(replica.url, headers=session, content=json.dumps(subscribe)))
    get_headers = {key: value for key, value in session.items() if key != "content-type"}
    get_headers["accept"] = "text/event-stream"
    return EventStream(replica.port, "GET", get_headers, timeout=DEADLINE)


def until_live(client: httpx.Client, a: Proc, streams: list[EventStream]) -> None:
    """Touch notes://a on A until every stream has heard it: the path from A to each is up
    (a GET stream is attached a moment after its headers are sent)."""
    for attempt in range(100):
        client.post(a.url, headers=modern_headers(call_tool(0, "touch")),
                    content=json.dumps(call_tool(attempt, "touch", uri="notes://a")))
        try:
            for stream in streams:
                stream.next("notifications/resources/updated", 0.2, uri="notes://a")
        except ScaleError:
            continue
        for stream in streams:  # later touches may still be on their way: let them land, drop them
            time.sleep(0.2)
            stream.discard()
        return
    pytest.fail("no resources/updated raised on A reached the streams on B")


TRIGGERS = [
    ("change_tools", {}, "notifications/tools/list_changed", {}),
    ("change_prompts", {}, "notifications/prompts/list_changed", {}),
    ("change_resources", {}, "notifications/resources/list_changed", {}),
    ("touch", {"uri": "notes://a"}, "notifications/resources/updated", {"uri": "notes://a"}),
]


def test_every_change_on_replica_a_reaches_listen_and_handshake_streams_on_b_within_100_ms(redis_url, procs):
    a, b = start_pair(procs, redis_url)
    latencies: dict[str, list[float]] = {"listen": [], "handshake": []}

    with httpx.Client(timeout=DEADLINE) as client, listen_on(b) as listen, handshake_stream_on(client, b) as legacy:
        until_live(client, a, [listen, legacy])
        for round_number in range(5):
            for index, (tool, arguments, method, params) in enumerate(TRIGGERS):
                message = call_tool(100 + round_number * 10 + index, tool, **arguments)
                sent = time.perf_counter()
                assert "result" in post(client, a, message)
                latencies["listen"].append(listen.next(method, **params) - sent)
                latencies["handshake"].append(legacy.next(method, **params) - sent)

    medians = {name: statistics.median(values) for name, values in latencies.items()}
    # Measured from before the trigger's POST to A (so the bound includes that request) to
    # the notification's arrival on B (each stream's reader thread notes the moment).
    # Here: medians of a few ms on loopback.
    print(f"A to B over Redis, 20 events each: median {medians}, max "
          f"{ {name: max(values) for name, values in latencies.items()} } (seconds)")
    assert medians["listen"] < BOUND_SECONDS, latencies
    assert medians["handshake"] < BOUND_SECONDS, latencies


def test_a_request_state_minted_on_one_replica_is_accepted_by_another_with_no_secret_configured(redis_url, procs):
    a, b = start_pair(procs, redis_url)
    with httpx.Client(timeout=DEADLINE) as client:
        minted = post(client, a, call_tool(1, "slow_job", steps=1))["result"]
        assert minted["resultType"] == "input_required"
        retry = call_tool(2, "slow_job", steps=1)
        retry["params"]["requestState"] = minted["requestState"]
        final = post(client, b, retry)

    assert final["result"]["content"][0]["text"] == "finished 1 steps", final


def test_a_replica_started_while_redis_is_down_exits_saying_which_url_and_what_to_do(tmp_path):
    nobody = f"redis://127.0.0.1:{free_port()}/0"
    result = subprocess.run(
        serve_command(REPLICA, "--http", "--port", str(free_port()), "--redis", nobody),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=DEADLINE * 2, check=False,
    )

    assert result.returncode != 0
    assert f"cannot reach Redis at {nobody}" in result.stderr, result.stderr
    assert "start Redis there or correct the URL" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_refuses_a_redis_option_that_is_not_a_redis_url_before_running_user_code():
    one_line_error(modelctx("serve", str(REPLICA), "--redis", "http://127.0.0.1:6379"), 2,
                   "--redis", "is not a Redis URL")
    one_line_error(modelctx("serve", str(REPLICA), "--redis", "redis://127.0.0.1:port/0"), 2,
                   "--redis", "is not a Redis URL")


def test_redis_killed_mid_run_holds_no_request_up_and_events_flow_again_once_it_is_back(procs, redis_server):
    # redis_server: skipped (a failure under CI) where redis-server is not installed
    redis = procs.start_redis()
    a, b = start_pair(procs, redis.extra["url"])

    with httpx.Client(timeout=DEADLINE) as client, listen_on(b) as listen:
        until_live(client, a, [listen])
        redis.kill()
        # Redis away: requests on either replica are answered, none waits for it.
        for replica, tool in ((a, "change_tools"), (b, "change_prompts"), (a, "touch")):
            message = call_tool(7, tool, **({"uri": "notes://a"} if tool == "touch" else {}))
            assert "result" in post(client, replica, message)
        assert "result" in post(client, b, request(8, "tools/list"))
        redis = procs.restart(redis)
        until_live(client, a, [listen])  # what A raises reaches B again
        message = call_tool(9, "change_tools")
        client.post(a.url, headers=modern_headers(message), content=json.dumps(message))
        listen.next("notifications/tools/list_changed")

    for replica in (a, b):  # one line when it went, one when it came back; no line per retry
        assert replica.log().count("lost the Redis bus") == 1, replica.log()
        assert replica.log().count("is back after") == 1, replica.log()


# -- RedisBus in this process: two buses on one Redis stand for two processes ----------------
async def next_event(subscription: Any, timeout: float = DEADLINE) -> Event:
    event: Event = await asyncio.wait_for(subscription.__anext__(), timeout)
    return event


@async_test()
async def test_an_event_published_on_one_bus_reaches_another_and_its_own_subscribers_once(redis_url):
    a, b = RedisBus(redis_url), RedisBus(redis_url)
    await a.start()
    await b.start()
    try:
        on_a, on_b = a.subscribe(), b.subscribe()
        a.publish(Event("tools"))
        assert await next_event(on_b) == Event("tools")
        b.publish(Event("resource", "notes://b"))  # after A's own echo, had it been delivered
        assert await next_event(on_a) == Event("tools")
        assert await next_event(on_a) == Event("resource", "notes://b")
        assert await next_event(on_b) == Event("resource", "notes://b")
        assert (a.sent, a.received, b.received) == (1, 1, 1)
    finally:
        await a.stop()
        await b.stop()


FORKED_BUS = """
import asyncio, os, sys
from modelctx.server._bus import Event
from modelctx.server._redis_bus import RedisBus

shared = RedisBus(sys.argv[1])  # built before the fork, as user code at import is
ready_r, ready_w = os.pipe()
child = os.fork()

async def parent():
    await shared.start()
    events = shared.subscribe()
    os.write(ready_w, b"x")  # subscribed: the child may publish
    event = await asyncio.wait_for(events.__anext__(), 10)
    await shared.stop()
    print(event.uri, flush=True)

async def in_child():
    os.read(ready_r, 1)
    await shared.start()
    shared.publish(Event("resource", "notes://from-the-fork"))
    await shared.stop()

if child == 0:
    asyncio.run(in_child())
    os._exit(0)
asyncio.run(parent())
_, status = os.waitpid(child, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_one_bus_made_before_a_fork_still_carries_events_between_the_processes(redis_url):
    # A bus built by user code at import (Server(bus=RedisBus(...))) is copied into every
    # worker by --workers, and each starts its copy: each must still take the others' events
    # for its own subscribers, not drop them as its own echo (one origin id for all). Forked
    # in a process of its own: a fork of the test process would copy its threads' state.
    done = subprocess.run(
        [sys.executable, "-c", FORKED_BUS, redis_url], capture_output=True, text=True, timeout=DEADLINE * 3
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "notes://from-the-fork"


@async_test()
async def test_task_changes_cross_processes_and_closing_stays_in_its_own(redis_url):
    a, b = RedisBus(redis_url), RedisBus(redis_url)
    await a.start()
    await b.start()
    try:
        on_a, on_b = a.subscribe(), b.subscribe()
        task = {"owner": "alice", "task": {"taskId": "t1", "status": "working"}}
        a.publish(Event("closing"))
        a.publish(Event("task", "t1", task))
        assert await next_event(on_b) == Event("task", "t1", task)  # no "closing" before it
        assert await next_event(on_a) == Event("closing")
        assert await next_event(on_a) == Event("task", "t1", task)
    finally:
        await a.stop()
        await b.stop()


@async_test()
async def test_the_last_events_of_a_process_that_stops_still_reach_the_others(redis_url):
    a, b = RedisBus(redis_url), RedisBus(redis_url)
    await a.start()
    await b.start()
    try:
        on_b = b.subscribe()
        a.publish(Event("resource", "notes://last-words"))
        await a.stop()
        assert await next_event(on_b) == Event("resource", "notes://last-words")
    finally:
        await b.stop()


@async_test()
async def test_buses_on_different_channels_of_one_redis_do_not_hear_each_other(redis_url):
    ours, theirs, ours_too = (RedisBus(redis_url, channel="app-one:bus"), RedisBus(redis_url, channel="app-two:bus"),
                              RedisBus(redis_url, channel="app-one:bus"))
    for bus in (ours, theirs, ours_too):
        await bus.start()
    try:
        on_theirs, on_ours_too = theirs.subscribe(), ours_too.subscribe()
        ours.publish(Event("prompts"))
        theirs.publish(Event("tools"))
        assert await next_event(on_ours_too) == Event("prompts")
        assert await next_event(on_theirs) == Event("tools")  # its own, delivered at once
        ours.publish(Event("resources"))
        assert await next_event(on_ours_too) == Event("resources")
        assert on_theirs.queue.empty()
    finally:
        for bus in (ours, theirs, ours_too):
            await bus.stop()


@async_test()
async def test_publishing_while_redis_is_away_never_waits_and_keeps_a_bounded_queue(tmp_path, redis_server):
    redis = RedisServer(tmp_path)
    bus = RedisBus(redis.url, outbox_size=100)
    await bus.start()
    try:
        local = bus.subscribe()
        redis.stop()
        for _ in range(1000):  # publish is synchronous: it cannot wait for Redis
            bus.publish(Event("resource", "notes://a"))
        assert bus.pending <= 100
        assert bus.dropped >= 900
        assert local.queue.qsize() == 256  # the local subscriber's own bound (LocalBus)
    finally:
        await bus.stop()
        redis.stop()


@async_test()
async def test_after_an_outage_local_listeners_are_told_every_list_may_have_changed_and_events_cross_again(
    procs, redis_server
):
    redis = procs.start_redis()
    a, b = RedisBus(redis.extra["url"]), RedisBus(redis.extra["url"])
    await a.start()
    await b.start()
    try:
        on_b = b.subscribe()
        redis.kill()
        while b.connected:  # the reader sees the connection close
            await asyncio.sleep(0.02)
        redis = procs.restart(redis)
        heard = {(await next_event(on_b)).kind for _ in range(3)}  # pub/sub kept nothing meanwhile
        assert heard == {"tools", "prompts", "resources"}
        while not (a.connected and b.connected):
            await asyncio.sleep(0.05)
        a.publish(Event("resource", "notes://after"))
        assert await next_event(on_b) == Event("resource", "notes://after")
    finally:
        await a.stop()
        await b.stop()


@async_test()
async def test_starting_without_redis_raises_startup_error_naming_the_url_and_never_the_password():
    url = f"redis://:sekrit-password@127.0.0.1:{free_port()}/0"
    with pytest.raises(StartupError) as raised:
        await RedisBus(url).start()

    assert f"127.0.0.1:{url.rsplit(':', 1)[1]}" in str(raised.value)
    assert "sekrit" not in str(raised.value) and ":***@" in str(raised.value)


# -- the server's wiring ------------------------------------------------------------------------
def replica(redis_url: str, **config: Any) -> Server:
    server = Server("wired", config=ServerConfig(redis_url=redis_url, **config))

    @server.tool
    def hello() -> str:
        return "hello"

    return server


@async_test()
async def test_a_server_with_redis_url_uses_a_redis_bus_while_running_and_no_connection_before(redis_url):
    a, b = replica(redis_url), replica(redis_url)
    assert isinstance(a.bus, LocalBus)  # nothing connects at construction
    async with a.running(), b.running():
        assert isinstance(a.bus, RedisBus) and a.bus.channel == "modelctx:wired:bus"
        heard = b.bus.subscribe()
        a.add_tool(lambda: "more", name="more")
        assert await next_event(heard) == Event("tools")
    assert isinstance(a.bus, LocalBus)


@async_test()
async def test_replicas_share_the_request_state_key_kept_in_redis_and_a_configured_secret_wins(redis_url):
    a, b = replica(redis_url), replica(redis_url)
    own = replica(redis_url, request_state_secret="a-secret-of-our-own-choosing")
    async with a.running(), b.running(), own.running():
        state = a.sealer.seal("tools/call", {"name": "hello"}, {})
        assert b.sealer.open_round(state, "tools/call", {"name": "hello"}).answers == {}
        with pytest.raises(Exception, match="integrity check failed"):
            own.sealer.open_round(state, "tools/call", {"name": "hello"})


def test_the_request_state_secret_defaults_to_its_environment_variable(monkeypatch):
    monkeypatch.setenv("MODELCTX_REQUEST_STATE_SECRET", "from-the-environment-0123456789")
    assert ServerConfig().request_state_secret == "from-the-environment-0123456789"
    assert ServerConfig(request_state_secret="given").request_state_secret == "given"


@async_test()
async def test_a_redis_bus_given_to_the_server_is_started_and_stopped_by_its_running_lifespan(redis_url):
    given = RedisBus(redis_url, channel="custom:bus")
    server = Server("given", bus=given)
    assert not given.connected
    async with server.running():
        assert server.bus is given and given.connected
    assert not given.connected


@async_test()
async def test_a_server_whose_redis_is_down_fails_to_start_with_the_url(tmp_path):
    url = f"redis://127.0.0.1:{free_port()}/0"
    server = replica(url)
    with pytest.raises(StartupError, match=f"cannot reach Redis at {url}"):
        async with server.running():
            pass
    assert isinstance(server.bus, LocalBus)
