"""The tasks extension from the client (io.modelcontextprotocol/tasks, SEP-2663).

``ClientOptions(tasks=True)`` declares the extension; ``client.call_tool_as_task`` gives a
``TaskHandle`` as soon as the server created the task, and ``handle.result()`` polls
``tasks/get`` (at the server's ``pollIntervalMs``, backing off) until the task ends,
answering its input requests with the client's handlers. All against
tests/fixtures/servers/tasks_server.py, a real process over stdio and over HTTP.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from modelctx import Client, ClientOptions
from modelctx.client import ClientHandlers, Elicitation, TaskCancelled, TaskHandle
from modelctx.errors import ProtocolError, RequestTimeout
from modelctx.protocol.types.v2026_07_28 import CallToolResult, TextContent
from modelctx.transports.stdio_client import StdioClientTransport
from tests.support.paths import SERVERS
from tests.support.wire import HttpServer, async_test, serve_command, wait_until

TASKS_SERVER = SERVERS / "tasks_server.py"
WITH_TASKS = ClientOptions(tasks=True)
POLL_SECONDS = 0.1  # the fixture server's task_poll_interval_ms


@pytest.fixture(scope="module")
def tasks_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    with HttpServer(TASKS_SERVER, tmp_path_factory.mktemp("tasks-http") / "server.log") as server:
        yield server


MakeClient = Callable[..., Client]


def text_of(result: CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, TextContent), result
    return first.text


@pytest.fixture
def stdio_clients(tmp_path: Path) -> MakeClient:
    """Clients of a tasks server process on stdio; all of them share one SQLite file."""

    def make(**kwargs: Any) -> Client:
        env = {"TASK_DB": str(tmp_path / "tasks.db"), "MARKER_DIR": str(tmp_path)}
        transport = StdioClientTransport(serve_command(TASKS_SERVER), env=env)
        return Client(transport, **{"options": WITH_TASKS, **kwargs})

    return make


@pytest.fixture(params=["stdio", "http"])
def clients(request: pytest.FixtureRequest, stdio_clients: MakeClient) -> MakeClient:
    if request.param == "stdio":
        return stdio_clients
    url = request.getfixturevalue("tasks_http").url
    return lambda **kwargs: Client(url, **{"options": WITH_TASKS, **kwargs})


@async_test()
async def test_a_long_task_is_a_handle_at_once_and_its_result_later(clients: MakeClient) -> None:
    async with clients() as client:
        handle = await client.call_tool_as_task("sleepy", {"seconds": 0.5})
        assert handle.task_id
        assert handle.status == "working"
        result = await handle.result(timeout=10)
        assert text_of(result) == "slept 0.5s"
        assert handle.status == "completed"


@async_test()
async def test_input_required_is_answered_by_the_clients_elicitation_handler(clients: MakeClient) -> None:
    asked: list[str] = []

    async def elicitation(question: Elicitation) -> dict[str, Any]:
        asked.append(question.message)
        return {"action": "accept", "content": {"name": "Ada"}}

    async with clients(handlers=ClientHandlers(elicitation=elicitation)) as client:
        handle = await client.call_tool_as_task("ask_name", {})
        result = await handle.result(timeout=10)
    assert text_of(result) == "Hello, Ada!"
    assert asked == ["Your name?"]  # asked once, though the task was polled more often


@async_test()
async def test_call_tool_waits_for_a_task_when_the_client_takes_tasks(clients: MakeClient) -> None:
    async with clients() as client:
        result = await client.call_tool("sleepy", {"seconds": 0.2}, timeout=10)
    assert text_of(result) == "slept 0.2s"


@async_test()
async def test_call_tool_without_a_timeout_waits_for_a_running_task_past_the_request_deadline(
    clients: MakeClient,
) -> None:
    # The request deadline (1 s) bounds each request; a task that polling finds running
    # is waited for up to max_timeout, as progress keeps a plain call alive.
    async with clients(timeout=1, options=ClientOptions(tasks=True, max_timeout=20)) as client:
        result = await client.call_tool("sleepy", {"seconds": 2.5})
        with pytest.raises(RequestTimeout, match="still working after 1s"):
            await client.call_tool("sleepy", {"seconds": 3600}, timeout=1)  # the caller's own: kept
    assert text_of(result) == "slept 2.5s"


@async_test()
async def test_cancel_stops_the_work_and_the_result_says_cancelled(stdio_clients: MakeClient, tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with stdio_clients() as client:
        handle = await client.call_tool_as_task("watched_sleep", {"seconds": 60})
        wait_until(lambda: state.exists() and state.read_text() == "started", "the task to start")
        await handle.cancel()
        assert handle.status == "cancelled"
        wait_until(lambda: state.read_text() == "cancelled", "the handler to be cancelled")
        with pytest.raises(TaskCancelled, match="cancelled"):
            await handle.result(timeout=10)


@async_test()
async def test_a_failed_task_raises_its_error_with_its_code(stdio_clients: MakeClient) -> None:
    # A task running when its server stops is failed by the next server process (-32603).
    async with stdio_clients() as client:
        handle = await client.call_tool_as_task("sleepy", {"seconds": 60})
    async with stdio_clients() as client:
        resumed = await client.task(handle.task_id)
        with pytest.raises(ProtocolError, match="server stopped") as raised:
            await resumed.result(timeout=10)
    assert raised.value.code == -32603


@async_test()
async def test_a_task_is_resumed_by_id_from_a_new_client(tasks_http: HttpServer) -> None:
    async with Client(tasks_http.url, options=WITH_TASKS) as first:
        started = await first.call_tool_as_task("sleepy", {"seconds": 1.5})
    async with Client(tasks_http.url, options=WITH_TASKS) as second:
        handle = await second.task(started.task_id)
        assert isinstance(handle, TaskHandle)
        assert handle.status == "working"
        result = await handle.result(timeout=10)
    assert text_of(result) == "slept 1.5s"


@async_test()
async def test_a_finished_task_is_resumed_after_a_server_restart(stdio_clients: MakeClient) -> None:
    async with stdio_clients() as client:
        handle = await client.call_tool_as_task("quick", {"text": "kept"})
        await handle.result(timeout=10)
    async with stdio_clients() as client:
        result = await (await client.task(handle.task_id)).result(timeout=10)
    assert text_of(result) == "quick: kept"


def count_task_gets(client: Client) -> Callable[[], int]:
    """Count the tasks/get requests the client sends (they still go to the server)."""
    gets = 0
    send = client.session.request

    async def counting(method: str, *args: Any, **kwargs: Any) -> Any:
        nonlocal gets
        gets += method == "tasks/get"
        return await send(method, *args, **kwargs)

    client.session.request = counting  # type: ignore[method-assign]
    return lambda: gets


@async_test()
async def test_polling_is_never_faster_than_poll_interval_ms(clients: MakeClient) -> None:
    async with clients() as client:
        gets = count_task_gets(client)
        handle = await client.call_tool_as_task("sleepy", {"seconds": 1})
        began = time.monotonic()
        await handle.result(timeout=10)
        waited = time.monotonic() - began
    assert handle.task["pollIntervalMs"] == POLL_SECONDS * 1000
    # Every tasks/get follows a pause of at least pollIntervalMs.
    assert 1 <= gets() <= waited / POLL_SECONDS + 1


@async_test()
async def test_follow_hears_the_task_end_on_a_listen_stream_instead_of_polling(clients: MakeClient) -> None:
    async with clients() as client:
        gets = count_task_gets(client)
        handle = await client.call_tool_as_task("sleepy", {"seconds": 1.5})
        result = await handle.result(timeout=10, follow=True)
    assert text_of(result) == "slept 1.5s"
    # One tasks/get once the stream is acknowledged (for a change before it); polling
    # at pollIntervalMs would have sent about fifteen.
    assert gets() == 1


@async_test()
async def test_follow_answers_input_requests_heard_on_the_stream(clients: MakeClient) -> None:
    async def elicitation(question: Elicitation) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Grace"}}

    async with clients(handlers=ClientHandlers(elicitation=elicitation)) as client:
        handle = await client.call_tool_as_task("ask_name", {})
        result = await handle.result(timeout=10, follow=True)
    assert text_of(result) == "Hello, Grace!"


@async_test()
async def test_a_task_that_never_finishes_meets_the_deadline(clients: MakeClient) -> None:
    async with clients() as client:
        handle = await client.call_tool_as_task("sleepy", {"seconds": 3600})
        with pytest.raises(RequestTimeout, match="still working after 0.5s"):
            await handle.result(timeout=0.5)
        await handle.cancel()  # the task ran on after the deadline; stop it
        assert handle.status == "cancelled"


@async_test()
async def test_task_methods_need_the_extension_declared(stdio_clients: MakeClient) -> None:
    async with stdio_clients(options=ClientOptions()) as client:
        with pytest.raises(ValueError, match="ClientOptions\\(tasks=True\\)"):
            await client.call_tool_as_task("sleepy", {"seconds": 1})
