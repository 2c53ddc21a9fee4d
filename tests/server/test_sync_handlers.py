"""Plain (sync) handlers: where they run and what they can rely on there.

A sync tool may block, so by default it runs on a worker thread, never on the event
loop; ``@server.tool(inline=True)`` runs one on the loop, for handlers that return at
once. Either way the handler sees the same things as an async one: its ``Context``, the
``contextvars`` set around the call (by middleware, say), and its errors become the same
results. A sync handler still running when the server stops does not keep the process
alive.

Tests run an in-process ``Client`` against a ``Server`` object (both on the test's loop,
so the loop's thread is the test's), and one real stdio process for shutdown.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from modelctx import Context, Server, ServerConfig, ToolError
from modelctx.client import Client
from modelctx.server import _threads
from tests.support.wire import async_test, request, wait_until

DEADLINE = 10.0  # seconds any single wait may take
TEST_DEADLINE = 30.0  # seconds a whole test may take

user: contextvars.ContextVar[str] = contextvars.ContextVar("user", default="nobody")


run = async_test(TEST_DEADLINE)  # a fresh loop and a deadline for each test


async def as_user(call: Any, call_next: Any) -> Any:
    """Middleware that sets a context variable around the call, as an auth layer would."""
    token = user.set("ada")
    try:
        return await call_next(call)
    finally:
        user.reset(token)


def build_server() -> Server:
    server = Server("sync-handlers", config=ServerConfig(middleware=[as_user]))

    @server.tool
    def thread_of_sync() -> int:
        return threading.get_ident()

    @server.tool
    def add_sync(a: int, b: int) -> int:
        return a + b

    @server.tool(inline=True)
    def thread_of_inline() -> int:
        return threading.get_ident()

    @server.tool
    def who_sync() -> str:
        user.set("changed in the handler")  # must not leak out of the call
        return user.get()

    @server.tool
    def context_sync(ctx: Context) -> str:
        return f"{ctx.method} {ctx.request_id}"

    @server.tool
    def refuse_sync() -> str:
        raise ToolError("refused on purpose")

    @server.tool
    async def refuse_async() -> str:
        raise ToolError("refused on purpose")

    @server.tool
    def crash_sync() -> str:
        raise ValueError("a bug")

    @server.tool
    async def crash_async() -> str:
        raise ValueError("a bug")

    @server.tool
    def stop_iteration_sync() -> str:
        return next(iter([]))

    meeting = threading.Barrier(2, timeout=DEADLINE)

    @server.tool
    def meet() -> str:
        meeting.wait()  # blocks until a second call arrives: both must run at once
        return "met"

    return server


def text_of(result: Any) -> str:
    return str(result.content[0].text)


@run
async def test_a_sync_tool_runs_off_the_event_loop_thread_by_default() -> None:
    async with Client(build_server(), timeout=DEADLINE) as client:
        result = await client.call_tool("thread_of_sync")

    assert result.structured_content["result"] != threading.get_ident()


@run
async def test_sequential_sync_calls_reuse_long_lived_worker_threads() -> None:
    async with Client(build_server(), timeout=DEADLINE) as client:
        threads = {(await client.call_tool("thread_of_sync")).structured_content["result"] for _ in range(20)}

    # One call at a time needs one worker (a second may start in a race, never one per call).
    assert 1 <= len(threads) <= 2


@run
async def test_an_inline_sync_tool_runs_on_the_event_loop_thread() -> None:
    async with Client(build_server(), timeout=DEADLINE) as client:
        result = await client.call_tool("thread_of_inline")

    assert result.structured_content["result"] == threading.get_ident()


@run
async def test_a_sync_tool_sees_the_context_variables_set_around_the_call() -> None:
    async with Client(build_server(), timeout=DEADLINE) as client:
        first = await client.call_tool("who_sync")
        second = await client.call_tool("who_sync")

    assert text_of(first) == "changed in the handler"  # it saw "ada" and could set its own
    assert text_of(second) == "changed in the handler"
    assert user.get() == "nobody"  # nothing leaked into the caller's context


@run
async def test_a_sync_tool_can_use_its_context_in_the_thread() -> None:
    async with Client(build_server(), timeout=DEADLINE) as client:
        result = await client.call_tool("context_sync")

    method, request_id = text_of(result).split(" ")
    assert method == "tools/call" and request_id


@run
async def test_errors_from_sync_tools_become_the_same_results_as_from_async_tools() -> None:
    async with Client(build_server(), timeout=DEADLINE) as client:
        refused = [await client.call_tool(name) for name in ("refuse_sync", "refuse_async")]
        crashed = [await client.call_tool(name) for name in ("crash_sync", "crash_async")]

    assert [(r.is_error, text_of(r)) for r in refused] == [(True, "refused on purpose")] * 2
    assert [r.is_error for r in crashed] == [True, True]
    assert text_of(crashed[0]) == text_of(crashed[1]).replace("crash_async", "crash_sync")


@run
async def test_a_sync_tool_raising_stop_iteration_is_a_tool_error_not_a_hang() -> None:
    async with Client(build_server(), timeout=DEADLINE) as client:
        result = await client.call_tool("stop_iteration_sync")

    assert result.is_error is True
    assert "stop_iteration_sync" in text_of(result)


@run
async def test_blocking_sync_tools_run_side_by_side() -> None:
    async with Client(build_server(), timeout=DEADLINE) as client:
        results = await asyncio.gather(client.call_tool("meet"), client.call_tool("meet"))

    assert [text_of(r) for r in results] == ["met", "met"]


BLOCKING_SERVER = '''
import time
from pathlib import Path
from modelctx import Server

server = Server("blocking")


@server.tool
def block(marker: str) -> str:
    """Block far longer than any test runs; no way to interrupt a thread."""
    Path(marker).write_text("started")
    time.sleep(600)
    return "done"
'''


def test_a_cancelled_sync_tool_still_running_does_not_hold_up_shutdown(start_stdio_server, tmp_path: Path) -> None:
    source = tmp_path / "blocking_server.py"
    source.write_text(BLOCKING_SERVER)
    marker = tmp_path / "started"
    server = start_stdio_server(source)
    server.send(request(1, "tools/call", {"name": "block", "arguments": {"marker": str(marker)}}))
    wait_until(marker.exists, "the sync tool to start")

    server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    server.close_stdin()

    assert server.wait() == 0
    assert not any(json.loads(line).get("id") == 1 for line in server.stdout_raw)  # no answer


@pytest.mark.parametrize("inline", [False, True])
def test_a_sync_tool_answers_in_both_modes(inline: bool) -> None:
    server = Server("modes")

    @server.tool(inline=inline)
    def echo(text: str) -> str:
        return text

    async def main() -> str:
        async with Client(server, timeout=DEADLINE) as client:
            return text_of(await client.call_tool("echo", {"text": "hi"}))

    assert asyncio.run(main()) == "hi"


def test_sync_answers_reach_each_of_several_event_loops_one_after_another_and_at_once() -> None:
    """The workers are shared by the process and each loop has its own wake-up for the
    answers: loops that end, and loops running at once in two threads, each get theirs."""

    async def calls(tag: str) -> list[str]:
        async with Client(build_server(), timeout=DEADLINE) as client:
            results = await asyncio.gather(*[client.call_tool("add_sync", {"a": i, "b": 1}) for i in range(50)])
        return [f"{tag}:{r.structured_content['result']}" for r in results]

    for round_ in range(3):  # each asyncio.run is a new loop; the last one is gone
        assert asyncio.run(calls(str(round_))) == [f"{round_}:{i + 1}" for i in range(50)]

    got: dict[str, list[str]] = {}
    threads = [threading.Thread(target=lambda t=t: got.__setitem__(t, asyncio.run(calls(t)))) for t in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TEST_DEADLINE)
    assert got == {t: [f"{t}:{i + 1}" for i in range(50)] for t in ("a", "b")}


def test_sync_answers_keep_coming_when_the_loops_wake_up_is_closed_between_bursts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A loop's eventfd is closed once no sync call is in flight (here at once, not after
    a second) and opened again at the next call. A worker can raise the wake-up flag
    for an answer a running settle already took, just before the close: the flag must
    not outlive the eventfd, or every later answer waits for a wake-up that never
    comes. Bursts of calls with the close between each, GIL switches made frequent so
    the workers and the loop interleave finely: every burst is answered."""
    monkeypatch.setattr(_threads, "_IDLE_CLOSE", 0.0)

    def same(i: int) -> int:
        return i

    async def bursts() -> None:
        for n in range(3000):
            size = 2 + n % 7
            calls = [_threads.run_in_worker(same, {"i": i}) for i in range(size)]
            assert await asyncio.wait_for(asyncio.gather(*calls), DEADLINE) == list(range(size))

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        asyncio.run(bursts())
    finally:
        sys.setswitchinterval(switch)
