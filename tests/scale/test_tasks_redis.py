"""Tasks in Redis, shared by several replicas (``RedisTaskStore``), on a real Redis.

The store contract runs against both stores (SQLite and Redis). Then two real server
processes (``modelctx serve tests/fixtures/servers/tasks_server.py --http``, started by
tests/support/scale_processes.py) share one Redis
through ``MODELCTX_REDIS_URL``: a task started on one is read, answered and cancelled
on the other, a replica killed mid-task has its task failed with the reason, expiry
removes results, and thousands of tasks leave neither Redis nor the process bigger.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from modelctx import Client, ClientHandlers, ClientOptions, Server
from modelctx.errors import InvalidParams, ProtocolError
from modelctx.server import Event, LocalBus, SqliteTaskStore, TaskRecord
from modelctx.server._redis_tasks import RedisTaskStore
from tests.support.paths import SERVERS
from tests.support.redis_server import RedisServer
from tests.support.scale_processes import Proc, Processes
from tests.support.wire import async_test

TASKS = "io.modelcontextprotocol/tasks"
TASKS_SERVER = SERVERS / "tasks_server.py"
TERMINAL = ("completed", "failed", "cancelled")
PREFIX = "modelctx:tasks-test:tasks:"  # the default prefix of the server named "tasks-test"


# -- the store contract, on both stores ------------------------------------------------------
@contextlib.asynccontextmanager
async def opened(kind: str, where: Any, **options: Any) -> AsyncIterator[Any]:
    store = (
        SqliteTaskStore(where / "tasks.db") if kind == "sqlite" else RedisTaskStore(where, prefix="test:", **options)
    )
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture(params=["sqlite", "redis"])
def store_at(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Any]:
    if request.param == "sqlite":
        return "sqlite", tmp_path
    return "redis", request.getfixturevalue("redis_url")


def new_record(task_id: str = "t1", ttl_ms: int | None = 60_000, owner: str | None = "alice") -> TaskRecord:
    now = time.time()
    return TaskRecord(task_id, "working", now, now, ttl_ms, 100, owner=owner)


@async_test()
async def test_a_created_task_reads_back_whole(store_at: tuple[str, Any]) -> None:
    async with opened(*store_at) as store:
        await store.create(new_record())
        record = await store.get("t1")
        assert record is not None
        assert (record.task_id, record.status, record.ttl_ms, record.poll_interval_ms, record.owner) == (
            "t1",
            "working",
            60_000,
            100,
            "alice",
        )
        assert record.result is None and record.error is None and record.input_requests == {}
        assert await store.get("nothing") is None
        assert await store.count() == 1


@async_test()
async def test_a_terminal_task_never_changes_again(store_at: tuple[str, Any]) -> None:
    result = {"content": [], "structuredContent": {"n": 1.5, "deep": [[]], "big": 2**60}}
    async with opened(*store_at) as store:
        await store.create(new_record())
        done = await store.set_status("t1", "completed", result=result)
        assert done is not None and done.status == "completed"
        assert done.result == result  # JSON kept exactly: empty arrays, floats, big integers
        assert await store.set_status("t1", "failed", error={"code": 1, "message": "x"}) is None
        assert await store.set_status("t1", "working") is None
        assert await store.ask("t1", {"k": {"method": "elicitation/create"}}) is None
        after = await store.answer("t1", {"k": {"action": "accept"}})
        assert after is not None and after.status == "completed" and after.result == result
        assert await store.set_status("missing", "completed") is None


@async_test()
async def test_of_concurrent_final_writes_exactly_one_wins(store_at: tuple[str, Any]) -> None:
    async with opened(*store_at) as store:
        await store.create(new_record())
        outcomes = await asyncio.gather(
            *(store.set_status("t1", status, message=str(n)) for n, status in enumerate(TERMINAL * 10))
        )
        winners = [o for o in outcomes if o is not None]
        assert len(winners) == 1
        final = await store.get("t1")
        assert final is not None
        assert (final.status, final.status_message) == (winners[0].status, winners[0].status_message)


@async_test()
async def test_questions_answers_and_their_order(store_at: tuple[str, Any]) -> None:
    async with opened(*store_at) as store:
        await store.create(new_record())
        asked = await store.ask(
            "t1", {"a": {"method": "elicitation/create"}, "b": {"method": "sampling/createMessage"}}
        )
        assert asked is not None and asked.status == "input_required" and set(asked.input_requests) == {"a", "b"}
        ignored = await store.answer("t1", {"zzz": {"action": "accept"}})  # no such question
        assert ignored is not None and set(ignored.input_requests) == {"a", "b"} and ignored.responses == {}
        half = await store.answer("t1", {"a": {"action": "accept", "content": {"name": "Ada"}}})
        assert half is not None and half.status == "input_required" and set(half.input_requests) == {"b"}
        assert await store.take_answers("t1", ["a", "b"]) == {"a": {"action": "accept", "content": {"name": "Ada"}}}
        assert await store.take_answers("t1", ["a"]) == {}  # taken once
        again = await store.answer("t1", {"a": {"action": "decline"}})  # closed: ignored
        assert again is not None and again.responses == {}
        whole = await store.answer("t1", {"b": {"role": "assistant"}})
        assert whole is not None and whole.status == "working" and whole.input_requests == {}
        failed = await store.set_status("t1", "failed", error={"code": -32603, "message": "m"}, message="m")
        assert failed is not None and failed.input_requests == {} and failed.responses == {}


@async_test()
async def test_an_expired_task_is_gone_with_its_result(store_at: tuple[str, Any]) -> None:
    async with opened(*store_at) as store:
        await store.create(new_record("short", ttl_ms=300))
        await store.ask("short", {"q": {"method": "elicitation/create"}})
        await store.answer("short", {"q": {"action": "accept"}})
        await store.set_status("short", "completed", result={"content": [{"type": "text", "text": "r"}]})
        await store.create(new_record("kept", ttl_ms=None))
        end = time.monotonic() + 20
        while await store.get("short") is not None:
            assert time.monotonic() < end, "the task outlived its TTL"
            await asyncio.sleep(0.05)
        await store.purge_expired()
        while await store.count() != 1:  # Redis expires keys on its own schedule
            assert time.monotonic() < end, "the expired task is still stored"
            await asyncio.sleep(0.05)
        assert await store.get("kept") is not None
        if store_at[0] == "redis":  # nothing of it is left: no side hash, no running entry
            keys = [
                key for key in redis_keys(store_at[1], "test:*") if "short" in key or key.startswith("test:running")
            ]
            assert keys == [f"test:running:{store.replica_id}"]
            assert raw(store_at[1]).smembers(keys[0]) == {"kept"}


# -- Redis only: replicas and their leases -----------------------------------------------------
def raw(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True, socket_timeout=10)


def redis_keys(url: str, pattern: str) -> list[str]:
    client = raw(url)
    try:
        return sorted(str(key) for key in client.scan_iter(match=pattern, count=1000))
    finally:
        client.close()


@async_test()
async def test_a_live_replica_keeps_its_tasks_and_a_silent_one_loses_them(redis_url: str) -> None:
    # The first replica renews its lease rarely, so the lease deleted below stays gone.
    async with opened("redis", redis_url, lease_seconds=300) as first, opened("redis", redis_url) as second:
        ended: list[tuple[str, str | None]] = []
        second.watch(lambda task_id, record: ended.append((task_id, record and record.status)))
        await first.create(new_record("a"))
        await first.create(new_record("b"))
        assert await second.fail_unfinished({"code": -32603, "message": "restart"}, "restart") == 0
        record = await second.get("a")
        assert record is not None and record.status == "working" and record.runner == first.replica_id
        raw(redis_url).delete(f"test:lease:{first.replica_id}")  # as if its process had died
        lost = await second.get("a")  # a read finds it
        assert lost is not None and lost.status == "failed"
        assert lost.error is not None and lost.error["code"] == -32603
        assert "server process running this task stopped" in (lost.status_message or "")
        assert await second.fail_unfinished({}, "") == 1  # the sweep finds the other
        swept = await second.get("b")
        assert swept is not None and swept.status == "failed"
        assert sorted(ended) == [("a", "failed"), ("b", "failed")]  # announced once each
        assert redis_keys(redis_url, f"test:running:{first.replica_id}") == []


@async_test()
async def test_a_periodic_sweep_fails_and_announces_a_silent_replicas_tasks_unread(redis_url: str) -> None:
    # The second replica sweeps every lease_seconds / 2; nobody reads the task.
    async with (
        opened("redis", redis_url, lease_seconds=300) as first,
        opened("redis", redis_url, lease_seconds=1, check_interval=0.1) as second,
    ):
        told: asyncio.Future[TaskRecord | None] = asyncio.get_running_loop().create_future()

        def ended(task_id: str, record: TaskRecord | None) -> None:
            if task_id == "orphan" and not told.done():
                told.set_result(record)

        second.watch(ended)
        await first.create(new_record("orphan"))
        await second.get("nothing")  # the second replica is up, its upkeep running
        raw(redis_url).delete(f"test:lease:{first.replica_id}")
        record = await asyncio.wait_for(told, 20)
        assert record is not None and record.status == "failed"
        assert "server process running this task stopped" in (record.status_message or "")


@async_test()
async def test_a_task_cancelled_on_another_replica_is_reported_to_its_runner(redis_url: str) -> None:
    async with opened("redis", redis_url) as runner, opened("redis", redis_url) as other:
        told: asyncio.Future[tuple[str, TaskRecord | None]] = asyncio.get_running_loop().create_future()

        def ended(task_id: str, record: TaskRecord | None) -> None:
            if not told.done():
                told.set_result((task_id, record))

        runner.watch(ended)
        await runner.create(new_record("c"))
        assert await other.set_status("c", "cancelled", message="Cancelled") is not None
        assert await asyncio.wait_for(told, 10) == ("c", None)


@async_test()
async def test_an_owners_tasks_count_across_replicas_until_they_end_or_vanish(redis_url: str) -> None:
    async with opened("redis", redis_url) as first, opened("redis", redis_url) as second:
        owner = '{"client_id":null,"iss":"https://issuer","sub":"a"}'
        assert await first.create_within(new_record("a1", owner=owner), 2)
        assert await second.create_within(new_record("a2", owner=owner), 2)
        assert not await second.create_within(new_record("a3", owner=owner), 2)  # at the limit: nothing stored
        assert await second.get("a3") is None
        assert await first.create_within(new_record("b1", owner=owner.replace('"a"', '"b"')), 2)  # another owner
        await first.set_status("a1", "completed", result={})  # an ended task leaves the count
        assert await second.create_within(new_record("a3", owner=owner), 2)
        # A task gone without ending (its runner died and it expired before a sweep read it)
        # is dropped from the count when the owner is at its limit.
        raw(redis_url).delete("test:task:{a2}")
        assert await first.create_within(new_record("a4", owner=owner), 2)
        assert not await first.create_within(new_record("a5", owner=owner), 2)


def test_a_store_connects_only_when_used(redis_url: str) -> None:
    before = int(raw(redis_url).info("clients")["connected_clients"])
    RedisTaskStore("redis://127.0.0.1:1/0")  # nothing listens there: construction must not care
    RedisTaskStore(redis_url)
    assert int(raw(redis_url).info("clients")["connected_clients"]) == before


class JsonBus(LocalBus):
    """A subscription bus that sends every event as JSON text, as one between processes does."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[dict[str, Any]] = []

    def publish(self, event: Event) -> None:
        wire = json.loads(json.dumps({"kind": event.kind, "uri": event.uri, "data": event.data}))
        self.sent.append(wire)
        super().publish(Event(wire["kind"], wire["uri"], wire["data"]))


@async_test()
async def test_task_changes_are_published_as_plain_json_for_a_bus_between_processes(redis_url: str) -> None:
    bus, store = JsonBus(), RedisTaskStore(redis_url, prefix="test:")
    server = Server("json-bus", bus=bus, task_store=store)

    @server.tool(task="required")
    async def double(n: int) -> int:
        return 2 * n

    async with Client(server, options=ClientOptions(extensions={TASKS: {}})) as on:
        task_id = await start_task(on, "double", {"n": 21})
        done = await until(on, task_id, "completed")
    await store.close()
    [event] = [e for e in bus.sent if e["kind"] == "task"]
    assert event["uri"] == task_id
    assert event["data"]["owner"] is None
    assert event["data"]["task"] == {k: v for k, v in done.items() if k not in ("resultType", "_meta")}
    assert event["data"]["task"]["result"]["structuredContent"] == {"result": 42}


@async_test()
async def test_redis_out_of_reach_is_an_error_that_says_so_and_keeps_the_password(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gone = RedisServer(tmp_path)
    gone.stop()  # a port where Redis was: nothing answers now
    store = RedisTaskStore(f"redis://:hunter2@127.0.0.1:{gone.port}/0", timeout=2)
    server = Server("no-redis", task_store=store)

    @server.tool(task="required")
    async def never() -> str:
        return "never"

    async with Client(server, options=ClientOptions(extensions={TASKS: {}})) as on:
        with pytest.raises(ProtocolError, match="task store is unreachable") as raised:
            await on.session.request("tools/call", {"name": "never", "arguments": {}})
    assert raised.value.code == -32603
    assert f"127.0.0.1:{gone.port}" in caplog.text and "hunter2" not in caplog.text


# -- two server processes sharing one Redis ---------------------------------------------------
@pytest.fixture
def replicas(redis_url: str, tmp_path: Path) -> Iterator[Any]:
    """``replicas(count, **env)``: that many ``modelctx serve tests/fixtures/servers/tasks_server.py
    --http`` processes on the test's Redis, started at once; stopped with SIGTERM after
    the test."""
    with Processes(tmp_path / "procs") as procs:

        def start(count: int = 1, **env: str) -> list[Proc]:
            environment: dict[str, str | None] = {"MARKER_DIR": str(tmp_path), "TASK_DB": None, **env}
            started = [procs.start_replica(TASKS_SERVER, redis_url=redis_url, env=environment, wait=False)
                       for _ in range(count)]  # fmt: skip
            return [replica.wait_ready() for replica in started]

        yield start


async def never_asked(question: Any) -> dict[str, Any]:
    raise AssertionError(f"the test answers with tasks/update, never here: {question}")


def client(replica: Proc) -> Client:
    """A client declaring the tasks extension and elicitation (the answers go by hand)."""
    handlers = ClientHandlers(elicitation=never_asked)
    return Client(replica.url, handlers=handlers, options=ClientOptions(extensions={TASKS: {}}), timeout=60)


async def start_task(on: Client, tool: str, arguments: dict[str, Any]) -> str:
    created = await on.session.request("tools/call", {"name": tool, "arguments": arguments})
    assert created["resultType"] == "task", created
    return str(created["taskId"])


async def until(on: Client, task_id: str, *statuses: str, deadline: float = 30.0) -> dict[str, Any]:
    end = time.monotonic() + deadline
    while True:
        task: dict[str, Any] = await on.session.request("tasks/get", {"taskId": task_id})
        if task["status"] in statuses:
            return task
        assert task["status"] not in TERMINAL, f"task ended before {statuses}: {task}"
        assert time.monotonic() < end, f"task never reached {statuses}: {task}"
        await asyncio.sleep(0.05)


async def until_file(path: Path, text: str, deadline: float = 30.0) -> None:
    end = time.monotonic() + deadline
    while not (path.exists() and path.read_text() == text):
        assert time.monotonic() < end, f"{path.name} never read {text!r}: {path.exists() and path.read_text()!r}"
        await asyncio.sleep(0.05)


@async_test(deadline=120)
async def test_a_task_started_on_one_replica_is_read_answered_and_cancelled_on_another(
    replicas: Any, tmp_path: Path
) -> None:
    a, b = replicas(2)
    async with client(a) as on_a, client(b) as on_b:
        quick = await start_task(on_a, "quick", {"text": "shared"})
        done = await until(on_b, quick, "completed")
        assert done["result"]["content"] == [{"type": "text", "text": "quick: shared"}]

        # Input supplied on B reaches the handler waiting on A.
        asking = await start_task(on_a, "ask_name", {})
        asked = await until(on_b, asking, "input_required")
        [key] = asked["inputRequests"]
        answer = {key: {"action": "accept", "content": {"name": "Ada"}}}
        await on_b.session.request("tasks/update", {"taskId": asking, "inputResponses": answer})
        greeted = await until(on_b, asking, "completed")
        assert greeted["result"]["content"][0]["text"] == "Hello, Ada!"

        # Cancel on B stops the handler on A: it sees its cancellation (the marker file).
        sleeping = await start_task(on_a, "watched_sleep", {"seconds": 600})
        await until_file(tmp_path / "state", "started")
        await on_b.session.request("tasks/cancel", {"taskId": sleeping})
        await until_file(tmp_path / "state", "cancelled")
        assert (await on_a.session.request("tasks/get", {"taskId": sleeping}))["status"] == "cancelled"
    assert a.alive() and b.alive()


@async_test(deadline=120)
async def test_the_task_of_a_killed_replica_fails_with_the_reason_on_another(replicas: Any) -> None:
    a, b = replicas(2)
    async with client(a) as on_a:
        running = await start_task(on_a, "sleepy", {"seconds": 600})
    async with client(b) as on_b:
        assert (await on_b.session.request("tasks/get", {"taskId": running}))["status"] == "working"
        a.kill()  # no shutdown: its lease in Redis runs out
        lost = await until(on_b, running, "failed")
        assert lost["error"]["code"] == -32603
        assert "server process running this task stopped" in lost["statusMessage"]


@async_test(deadline=120)
async def test_a_replica_stopped_gracefully_fails_its_tasks_at_once_not_when_its_lease_runs_out(
    replicas: Any,
) -> None:
    a, b = replicas(2)
    async with client(a) as on_a:
        running = await start_task(on_a, "sleepy", {"seconds": 600})
    async with client(b) as on_b:
        a.stop()  # SIGTERM: the server stops and gives its lease back
        # The lease is 10 s; a graceful stop does not wait for it to run out.
        lost = await until(on_b, running, "failed", deadline=5.0)
        assert "server process running this task stopped" in lost["statusMessage"]


@async_test(deadline=120)
async def test_expiry_removes_a_task_and_its_result_from_redis(replicas: Any, redis_url: str) -> None:
    a, b = replicas(2, TASK_TTL_MS="500")
    async with client(a) as on_a, client(b) as on_b:
        task_id = await start_task(on_a, "quick", {"text": "short-lived"})
        assert redis_keys(redis_url, f"{PREFIX}task:{{{task_id}}}*")
        end = time.monotonic() + 20
        while True:
            try:
                await on_b.session.request("tasks/get", {"taskId": task_id})
            except InvalidParams as exc:
                assert "expired" in str(exc)
                break
            assert time.monotonic() < end, "the task never expired"
            await asyncio.sleep(0.1)
    assert redis_keys(redis_url, f"{PREFIX}task:*") == []


async def one_round(replica: Proc, redis_url: str, count: int) -> None:
    """``count`` tasks at once on ``replica``; every one completes. (Their TTL is short,
    so the check reads the newest ones through ``tasks/get`` and all that are still
    kept straight from Redis.)"""
    async with client(replica) as on:
        answered: list[str] = []
        # Calls queued behind thousands in one client answer seconds late, past the short
        # TTL; 50 at a time keep each answer fast (measured: 3,000 in about 7 s here).
        in_flight = asyncio.Semaphore(50)

        async def one(n: int) -> None:
            async with in_flight:
                answered.append(await start_task(on, "quick", {"text": str(n)}))

        await asyncio.gather(*(one(n) for n in range(count)))
        assert len(set(answered)) == count
        for task_id in answered[-20:]:
            task = await until(on, task_id, "completed")
            assert task["result"]["content"][0]["text"].startswith("quick: ")
    client_redis = raw(redis_url)
    kept = [key for key in redis_keys(redis_url, f"{PREFIX}task:*") if key.endswith("}")]
    statuses = {client_redis.hget(key, "status") for key in kept} - {None}
    assert statuses <= {"completed"}, statuses


async def until_no_tasks(url: str, deadline: float = 30.0) -> None:
    end = time.monotonic() + deadline
    while redis_keys(url, f"{PREFIX}task:*"):
        assert time.monotonic() < end, "tasks were left in Redis after their TTL"
        await asyncio.sleep(0.2)


@async_test(deadline=180)
async def test_thousands_of_tasks_leave_neither_redis_nor_the_process_bigger(replicas: Any, redis_url: str) -> None:
    # Measured here: a round of 3,000 tasks takes about 7 s; after the second round the
    # process's RSS was 36 KiB above the first's (48 MB), and Redis held 0.5 MB above its
    # empty baseline (connection buffers, the lease): every task key had expired. A leak
    # of one small record per task (about 1.4 KB) would cross the 4 MiB bound.
    [replica] = replicas(TASK_TTL_MS="3000")
    count = 3_000
    memory = raw(redis_url)
    baseline = int(memory.info("memory")["used_memory"])
    await one_round(replica, redis_url, count)
    await until_no_tasks(redis_url)
    after_first = replica.rss_kib()
    await one_round(replica, redis_url, count)
    await until_no_tasks(redis_url)
    after_second = replica.rss_kib()
    used = int(memory.info("memory")["used_memory"])
    sys.stdout.write(
        f"\nRSS after round 1: {after_first} KiB, after round 2: {after_second} KiB; "
        f"Redis used_memory {baseline} -> {used} bytes\n"
    )
    assert after_second - after_first < 4 * 1024, f"RSS grew {after_second - after_first} KiB in a second round"
    assert used - baseline < 2 * 1024 * 1024, f"Redis kept {used - baseline} bytes after every task expired"
    left = [key for key in redis_keys(redis_url, f"{PREFIX}*") if ":lease:" not in key and not key.endswith("replicas")]
    assert left == [] or all(not memory.scard(key) for key in left), left


# -- worker processes (--workers) sharing one Redis --------------------------------------------------
def rpc(port: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One 2026-07-28 request declaring the tasks extension, on a new connection (so that
    requests sent together reach different workers); its JSON-RPC response."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}  # fmt: skip
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
               "mcp-method": method, "mcp-name": str(params.get("name", params.get("taskId")))}  # fmt: skip
    response = httpx.post(f"http://127.0.0.1:{port}/mcp", json=message, headers=headers, timeout=30)
    answer: dict[str, Any] = response.json()
    return answer


@pytest.mark.timeout(240)
@async_test(deadline=230)
async def test_the_tasks_of_a_killed_worker_fail_within_the_lease_and_none_stays_working(
    redis_url: str, tmp_path: Path
) -> None:
    # Forked workers shared one lease id: the survivor renewed the dead worker's lease, and
    # 8 of 20 tasks were still "working" 50 s after the kill (until their 1 h TTL).
    with Processes(tmp_path / "procs") as procs:
        env: dict[str, str | None] = {"MARKER_DIR": str(tmp_path), "TASK_DB": None}
        server = procs.start_replica(TASKS_SERVER, redis_url=redis_url, workers=2, env=env)
        count = 20

        def start(n: int) -> str:
            answer = rpc(server.port, "tools/call", {"name": "pid_sleep", "arguments": {"tag": f"t{n}", "seconds": 600}})
            assert answer.get("result", {}).get("resultType") == "task", answer
            return str(answer["result"]["taskId"])

        with ThreadPoolExecutor(count) as pool:
            task_ids = list(pool.map(start, range(count)))
        await until_file_count(tmp_path, count)
        runner = {task_id: int((tmp_path / f"t{n}.pid").read_text()) for n, task_id in enumerate(task_ids)}
        by_pid = collections.Counter(runner.values())
        victim, _ = by_pid.most_common(1)[0]
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()

        def status(task_id: str) -> dict[str, Any]:
            answer = rpc(server.port, "tasks/get", {"taskId": task_id})
            assert "result" in answer, answer
            result: dict[str, Any] = answer["result"]
            return result

        theirs = [task_id for task_id, pid in runner.items() if pid == victim]
        end = killed_at + 90  # the lease is 10 s; generous for a loaded machine
        while working := [task_id for task_id in theirs if status(task_id)["status"] == "working"]:
            assert time.monotonic() < end, f"{len(working)} of {len(theirs)} tasks of the killed worker still working"
            await asyncio.sleep(0.5)
        sys.stdout.write(
            f"\n{len(theirs)} of {count} tasks on the killed worker (by worker: {dict(by_pid)}); every one failed "
            f"{time.monotonic() - killed_at:.1f} s after the kill; still working: 0\n"
        )
        for task_id in theirs:
            lost = status(task_id)
            assert lost["status"] == "failed" and "server process running this task stopped" in lost["statusMessage"]
        for task_id in set(task_ids) - set(theirs):  # the other worker's tasks run on
            assert status(task_id)["status"] == "working"


async def until_file_count(directory: Path, count: int, deadline: float = 60.0) -> None:
    end = time.monotonic() + deadline
    while len(list(directory.glob("t*.pid"))) < count:
        assert time.monotonic() < end, f"only {len(list(directory.glob('t*.pid')))} of {count} tasks started"
        await asyncio.sleep(0.05)
