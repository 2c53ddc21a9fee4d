"""The tasks extension, server side (io.modelcontextprotocol/tasks, SEP-2663).

A tool registered with ``task=...`` answers a client that declares the extension with a
task (``resultType: "task"``); the task lives in the server's task store (SQLite by
default), is read with ``tasks/get``, answered with ``tasks/update``, cancelled with
``tasks/cancel`` and followed on ``subscriptions/listen``. The conformance suite's
``tasks-*`` scenarios (tests/conformance) check the wire shapes; these tests check what
it cannot: restarts, cancellation reaching the handler, expiry, many tasks at once, and
the handshake era.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from modelctx import Client, ClientOptions, Server, ServerConfig
from modelctx.errors import InvalidParams, MissingRequiredClientCapability, RateLimited, RegistrationError
from modelctx.server import TaskStore
from tests.support.paths import SERVERS
from tests.support.wire import StdioServer, async_test, request, serve_command

TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS = {"extensions": {TASKS: {}}}
CAPABILITIES = {"elicitation": {}, **WITH_TASKS}
TASKS_SERVER = SERVERS / "tasks_server.py"
TERMINAL = ("completed", "failed", "cancelled")


class TaskClient:
    """Raw JSON-RPC on a real stdio server process, as a client declaring the extension."""

    def __init__(self, env: dict[str, str]) -> None:
        self.server = StdioServer(serve_command(TASKS_SERVER), env)
        self.ids = 0

    def call(self, method: str, params: dict[str, Any], capabilities: Any = CAPABILITIES) -> dict[str, Any]:
        self.ids += 1
        return self.server.call(request(self.ids, method, params, capabilities=capabilities))

    def result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        response = self.call(method, params)
        assert "result" in response, response
        return dict(response["result"])

    def start(self, tool: str, arguments: dict[str, Any]) -> str:
        created = self.result("tools/call", {"name": tool, "arguments": arguments})
        assert created["resultType"] == "task", created
        return str(created["taskId"])

    def until(self, task_id: str, *statuses: str, deadline: float = 20.0) -> dict[str, Any]:
        end = time.monotonic() + deadline
        while True:
            task = self.result("tasks/get", {"taskId": task_id})
            if task["status"] in statuses:
                return task
            assert task["status"] not in TERMINAL, f"task ended before {statuses}: {task}"
            assert time.monotonic() < end, f"task never reached {statuses}: {task}"
            time.sleep(0.05)


@pytest.fixture
def task_clients(tmp_path: Path):
    started: list[TaskClient] = []

    def start(**env: str) -> TaskClient:
        client = TaskClient({"TASK_DB": str(tmp_path / "tasks.db"), "MARKER_DIR": str(tmp_path), **env})
        started.append(client)
        return client

    yield start
    for client in started:
        client.server.stop()


def test_a_task_and_its_result_survive_a_server_restart(task_clients, tmp_path: Path) -> None:
    first = task_clients()
    done = first.start("quick", {"text": "kept"})
    first.until(done, "completed")
    running = first.start("sleepy", {"seconds": 600})
    assert first.result("tasks/get", {"taskId": running})["status"] == "working"
    first.server.process.kill()  # no shutdown: the process dies as in a crash
    first.server.process.wait(timeout=10)

    second = task_clients()
    kept = second.result("tasks/get", {"taskId": done})
    assert kept["status"] == "completed"
    assert kept["result"]["content"] == [{"type": "text", "text": "quick: kept"}]
    # A task whose process died cannot finish: it is failed, saying why.
    lost = second.result("tasks/get", {"taskId": running})
    assert lost["status"] == "failed"
    assert lost["error"]["code"] == -32603
    assert "stopped while this task was running" in lost["statusMessage"]


def test_cancel_reaches_the_handler_and_the_task_stays_cancelled(task_clients, tmp_path: Path) -> None:
    client = task_clients()
    task_id = client.start("watched_sleep", {"seconds": 600})
    state = tmp_path / "state"
    end = time.monotonic() + 20
    while not (state.exists() and state.read_text() == "started"):
        assert time.monotonic() < end, "the handler never started"
        time.sleep(0.05)
    ack = client.result("tasks/cancel", {"taskId": task_id})
    assert ack == {"resultType": "complete", "_meta": ack["_meta"]}
    assert client.result("tasks/get", {"taskId": task_id})["status"] == "cancelled"
    while state.read_text() != "cancelled":  # the handler's asyncio task was cancelled
        assert time.monotonic() < end, f"the handler was not cancelled: {state.read_text()}"
        time.sleep(0.05)


def test_an_expired_task_and_its_result_are_removed(task_clients, tmp_path: Path) -> None:
    client = task_clients(TASK_TTL_MS="500")
    task_id = client.start("quick", {"text": "short-lived"})
    created = client.result("tasks/get", {"taskId": task_id})
    assert created["ttlMs"] == 500
    end = time.monotonic() + 20
    while True:
        response = client.call("tasks/get", {"taskId": task_id})
        if "error" in response:
            break
        assert time.monotonic() < end, "the task never expired"
        time.sleep(0.1)
    assert response["error"]["code"] == -32602
    assert "expired" in response["error"]["message"]
    with sqlite3.connect(tmp_path / "tasks.db") as db:  # the row is gone, result and all
        assert db.execute("SELECT count(*) FROM tasks").fetchone() == (0,)


def test_task_notifications_reach_a_listen_stream_that_asked_for_them(task_clients) -> None:
    client = task_clients()
    task_id = client.start("ask_name", {})
    client.until(task_id, "input_required")
    client.server.send(
        request("listen", "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}, capabilities=CAPABILITIES)
    )
    ack = client.server.recv()
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {"taskIds": [task_id]}
    asked = client.result("tasks/get", {"taskId": task_id})
    [key] = asked["inputRequests"]
    assert asked["inputRequests"][key]["method"] == "elicitation/create"
    update = request(
        1000,
        "tasks/update",
        {"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}}},
        capabilities=CAPABILITIES,
    )
    client.server.send(update)
    seen: list[dict[str, Any]] = []
    while not seen or seen[-1]["params"]["status"] not in TERMINAL:
        message = client.server.recv()
        if message.get("method") == "notifications/tasks":
            seen.append(message)
    final = seen[-1]["params"]
    assert final["taskId"] == task_id and final["status"] == "completed"
    assert final["result"]["content"][0]["text"] == "Hello, Ada!"
    assert final["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen"


def test_listening_for_tasks_without_declaring_the_extension_is_refused(task_clients) -> None:
    client = task_clients()
    response = client.call("subscriptions/listen", {"notifications": {"taskIds": ["x"]}}, capabilities={})
    assert response["error"]["code"] == -32021
    assert response["error"]["data"] == {"requiredCapabilities": WITH_TASKS}


# -- in this process -----------------------------------------------------------------------
def tasks_server(ttl_ms: int | None = 3_600_000) -> Server:
    server = Server("tasks", config=ServerConfig(task_ttl_ms=ttl_ms, task_poll_interval_ms=50))

    @server.tool(task="optional")
    async def echo(n: int) -> str:
        await asyncio.sleep(0)
        return f"echo {n}"

    @server.tool
    def plain() -> str:
        return "plain"

    return server


def held_tasks_server(store: TaskStore | None = None, **config: Any) -> Server:
    server = Server("owned", config=ServerConfig(task_poll_interval_ms=50, **config), task_store=store)
    release = asyncio.Event()
    server.release = release  # type: ignore[attr-defined]

    @server.tool(task="required")
    async def hold() -> str:
        """Runs until the test sets ``server.release``."""
        await release.wait()
        return "released"

    @server.tool(task="optional")
    async def echo(text: str) -> str:
        return f"echo {text}"

    return server


@async_test(deadline=240)
async def test_thousands_of_concurrent_tasks_leave_nothing_behind() -> None:
    server = tasks_server(ttl_ms=15_000)
    options = ClientOptions(extensions={TASKS: {}})
    async with Client(server, options=options) as client:
        count = 5_000
        created = await asyncio.gather(
            *(client.session.request("tools/call", {"name": "echo", "arguments": {"n": n}}) for n in range(count))
        )
        assert {c["resultType"] for c in created} == {"task"}
        assert len({c["taskId"] for c in created}) == count
        manager = server.tasks
        assert manager is not None
        end = time.monotonic() + 120
        while manager.held:  # every handler ended and its outcome was written
            assert time.monotonic() < end, f"{manager.held} per-task objects still held"
            await asyncio.sleep(0.05)
        last = await client.session.request("tasks/get", {"taskId": created[-1]["taskId"]})
        assert last["status"] == "completed"
        while True:  # after the TTL every task is gone: rows, results and all
            try:
                await client.session.request("tasks/get", {"taskId": created[-1]["taskId"]})
            except InvalidParams:
                break
            assert time.monotonic() < end, "the tasks never expired"
            await asyncio.sleep(0.2)
        end = time.monotonic() + 20
        while await manager.store.count():  # purged when the task methods are next used
            assert time.monotonic() < end, "expired tasks were not purged"
            with pytest.raises(InvalidParams):
                await client.session.request("tasks/get", {"taskId": created[0]["taskId"]})
            await asyncio.sleep(0.2)
        assert manager.held == 0


@async_test()
async def test_past_max_running_tasks_an_optional_tool_answers_in_place_and_a_required_one_is_refused() -> None:
    # 20,000 running tasks held 154 MB: without a cap a client could start handlers without bound.
    server = held_tasks_server(max_running_tasks=2)

    async with Client(server, options=ClientOptions(extensions={TASKS: {}})) as client:
        first, second = [await client.session.request("tools/call", {"name": "hold"}) for _ in range(2)]
        assert first["resultType"] == second["resultType"] == "task"
        with pytest.raises(RateLimited, match=r"at its limit of running tasks \(2, ") as refused:
            await client.session.request("tools/call", {"name": "hold"})
        assert refused.value.code == -31429 and refused.value.data == {"retryAfterMs": 50}
        in_place = await client.session.request("tools/call", {"name": "echo", "arguments": {"text": "1"}})
        assert in_place["resultType"] == "complete" and in_place["content"][0]["text"] == "echo 1"

        await client.session.request("tasks/cancel", {"taskId": first["taskId"]})
        end = time.monotonic() + 20
        while (third := await client.session.request("tools/call", {"name": "echo", "arguments": {"text": "2"}}))[
            "resultType"
        ] != "task":  # room again once the cancelled handler has ended
            assert time.monotonic() < end, "a cancelled task still counted against the cap"
            await asyncio.sleep(0.05)
        assert "taskId" in third
        server.release.set()  # type: ignore[attr-defined]


@async_test()
async def test_the_handshake_era_takes_tasks_only_when_initialize_declared_the_extension() -> None:
    # No per-request capabilities in this era: initialize's capabilities.extensions decide.
    server = tasks_server()
    with_tasks = ClientOptions(extensions={TASKS: {}})
    async with Client(server, mode="handshake", options=with_tasks) as client:
        created = await client.session.request("tools/call", {"name": "echo", "arguments": {"n": 1}})
        assert created["resultType"] == "task"
        end = time.monotonic() + 20
        while (task := await client.session.request("tasks/get", {"taskId": created["taskId"]}))[
            "status"
        ] != "completed":
            assert time.monotonic() < end
            await asyncio.sleep(0.05)
        assert task["result"]["content"][0]["text"] == "echo 1"
    async with Client(server, mode="handshake") as client:
        plain = await client.session.request("tools/call", {"name": "echo", "arguments": {"n": 2}})
        assert plain["content"][0]["text"] == "echo 2" and "taskId" not in plain
        with pytest.raises(MissingRequiredClientCapability):
            await client.session.request("tasks/get", {"taskId": created["taskId"]})


@async_test()
async def test_a_task_is_read_only_by_the_client_that_declared_it_and_never_by_others() -> None:
    server = tasks_server()
    async with Client(server, options=ClientOptions(extensions={TASKS: {}})) as client:
        with pytest.raises(InvalidParams, match="no task"):
            await client.session.request("tasks/get", {"taskId": "not-a-task"})
    async with Client(server) as client:  # no extension declared: a plain result
        result = await client.call_tool("echo", {"n": 3})
        assert result.content[0].text == "echo 3"


def test_the_extension_is_offered_only_with_task_tools_or_a_store() -> None:
    server = Server("no-tasks")

    @server.tool
    def plain() -> str:
        return "plain"

    assert "extensions" not in server.capabilities()
    assert not server.serves("tasks/get")
    assert tasks_server().capabilities()["extensions"] == {TASKS: {}}
    assert tasks_server().serves("tasks/get")


def test_task_options_are_checked_at_registration() -> None:
    server = Server("bad")
    with pytest.raises(RegistrationError, match="forbidden"):
        server.tool(lambda: "x", name="maybe", task="maybe")
    with pytest.raises(RegistrationError, match="async"):
        server.tool(lambda: "x", name="sync_handler_start", task="optional", task_start="handler")
