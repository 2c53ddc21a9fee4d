"""``Server(name, lifespan=fn)``: startup and shutdown around every way of serving.

What the lifespan yields is ``ctx.lifespan_context``. It runs once per process however many
things serve the server (``server.running()`` counts its holders), around stdio serving,
HTTP serving (the ASGI lifespan) and the in-process client. A failing startup surfaces:
stdio exits 1 with the message on stderr, HTTP answers ``lifespan.startup.failed``, the
in-process client raises ``StartupError``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from modelctx import Context, Server
from modelctx.client import Client
from modelctx.server import StartupError
from tests.support.paths import SERVERS
from tests.support.wire import DEADLINE, HttpServer, McpHttp, free_port, request, serve_command

LIFESPAN_SERVER = SERVERS / "lifespan_server.py"


def tool_text(response: dict[str, Any]) -> str:
    assert "result" in response, response
    return str(response["result"]["content"][0]["text"])


def recording_server(events: list[str], fail: str | None = None) -> Server:
    @asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[dict[str, str]]:
        events.append("start")
        if fail:
            raise ValueError(fail)
        yield {"pool": "the-pool"}
        events.append("stop")

    server = Server("recording", lifespan=lifespan)

    @server.tool
    async def pool(ctx: Context) -> str:
        return str(ctx.lifespan_context["pool"])

    return server


# -- in process ------------------------------------------------------------------------------------
def test_handlers_read_what_the_lifespan_yielded_through_an_in_process_client():
    events: list[str] = []
    server = recording_server(events)

    async def main() -> str:
        async with Client(server) as client:
            assert events == ["start"]
            result = await client.call_tool("pool", {})
        return str(result.content[0].text)

    assert asyncio.run(main()) == "the-pool"
    assert events == ["start", "stop"]


def test_the_lifespan_runs_once_for_nested_holders_and_stops_after_the_last():
    events: list[str] = []
    server = recording_server(events)

    async def main() -> None:
        async with server.running() as context:
            assert context == {"pool": "the-pool"}
            async with Client(server) as client:
                await client.call_tool("pool", {})
            async with Client(server) as client:
                await client.call_tool("pool", {})
            assert events == ["start"]
        assert events == ["start", "stop"]

    asyncio.run(main())


def test_a_lifespan_with_a_task_group_ends_cleanly_when_another_holder_ends_it():
    """The first holder leaves before the second: the lifespan still exits in its own task."""
    ticks: list[str] = []

    @asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[None]:
        async with asyncio.TaskGroup() as group:
            stop = asyncio.Event()
            group.create_task(stop.wait())
            ticks.append("up")
            yield
            stop.set()
        ticks.append("down")

    server = Server("grouped", lifespan=lifespan)

    async def main() -> None:
        first, second = Client(server), Client(server)
        await first.__aenter__()
        await second.__aenter__()
        await first.__aexit__(None, None, None)
        assert ticks == ["up"]
        await second.__aexit__(None, None, None)

    asyncio.run(main())
    assert ticks == ["up", "down"]


def test_a_failing_startup_is_a_startup_error_naming_the_server_and_the_cause():
    events: list[str] = []
    server = recording_server(events, fail="no database at db.internal")

    async def main() -> None:
        async with Client(server):
            pass  # pragma: no cover - never reached

    with pytest.raises(StartupError, match="'recording' failed to start.*ValueError: no database") as info:
        asyncio.run(main())
    assert isinstance(info.value.__cause__, ValueError)

    # The failure released its hold: a later start runs the lifespan again.
    events.clear()

    async def again() -> None:
        with pytest.raises(StartupError):
            async with server.running():
                pass  # pragma: no cover - never reached

    asyncio.run(again())
    assert events == ["start"]


def test_a_lifespan_that_is_not_a_context_manager_is_named_in_the_error():
    async def not_decorated(server: Server) -> AsyncIterator[None]:
        yield

    server = Server("undecorated", lifespan=not_decorated)  # type: ignore[arg-type]

    async def main() -> None:
        async with server.running():
            pass  # pragma: no cover - never reached

    with pytest.raises(StartupError, match="asynccontextmanager"):
        asyncio.run(main())


def test_lifespan_context_outside_a_running_server_says_how_to_run_it():
    server = recording_server([])
    with pytest.raises(RuntimeError, match="server.running"):
        _ = server.lifespan_context


def test_a_server_without_a_lifespan_has_none_as_its_context():
    server = Server("plain")

    @server.tool
    async def context(ctx: Context) -> str:
        return repr(ctx.lifespan_context)

    async def main() -> str:
        async with Client(server) as client:
            return str((await client.call_tool("context", {})).content[0].text)

    assert asyncio.run(main()) == "None"


# -- stdio -----------------------------------------------------------------------------------------
def test_stdio_runs_the_lifespan_around_serving(start_stdio_server, tmp_path):
    log = tmp_path / "lifespan.log"
    server = start_stdio_server(LIFESPAN_SERVER, env={"LIFESPAN_LOG": str(log)})
    response = server.call(request(1, "tools/call", {"name": "pool", "arguments": {}}))
    assert tool_text(response) == "the-pool of lifespan-demo"
    response = server.call(request(2, "tools/call", {"name": "pool_from_a_thread", "arguments": {}}))
    assert tool_text(response) == "the-pool"
    response = server.call(request(3, "tools/call", {"name": "pool_through_an_inner_client", "arguments": {}}))
    assert tool_text(response) == "the-pool of lifespan-demo"
    assert log.read_text().split() == ["start"]
    server.close_stdin()
    assert server.wait() == 0, server.stderr
    assert log.read_text().split() == ["start", "stop"]


def test_stdio_exits_1_with_the_startup_failure_on_stderr(start_stdio_server, tmp_path):
    log = tmp_path / "lifespan.log"
    server = start_stdio_server(
        LIFESPAN_SERVER, env={"LIFESPAN_LOG": str(log), "LIFESPAN_FAIL": "no database at db.internal"}
    )
    assert server.wait() == 1
    stderr = server.stderr
    assert "modelctx: server 'lifespan-demo' failed to start" in stderr, stderr
    assert "RuntimeError: no database at db.internal" in stderr, stderr
    assert server.stdout_raw == []


# -- HTTP ------------------------------------------------------------------------------------------
def test_http_runs_the_lifespan_as_the_asgi_lifespan(tmp_path, monkeypatch):
    log = tmp_path / "lifespan.log"
    monkeypatch.setenv("LIFESPAN_LOG", str(log))
    served = HttpServer(LIFESPAN_SERVER, tmp_path / "server.log")
    http = McpHttp(served)
    try:
        assert tool_text(http.call(request(1, "tools/call", {"name": "pool", "arguments": {}}))) == (
            "the-pool of lifespan-demo"
        )
        inner = http.call(request(2, "tools/call", {"name": "pool_through_an_inner_client", "arguments": {}}))
        assert tool_text(inner) == "the-pool of lifespan-demo"
        assert log.read_text().split() == ["start"]
        served.process.send_signal(signal.SIGTERM)
        served.process.wait(timeout=DEADLINE)
        assert log.read_text().split() == ["start", "stop"], served.log
    finally:
        http.close()
        served.stop()


def test_http_answers_lifespan_startup_failed_and_exits(tmp_path):
    port = free_port()
    log = tmp_path / "lifespan.log"
    process = subprocess.run(
        serve_command(LIFESPAN_SERVER, "--http", "--port", str(port)),
        env={**os.environ, "LIFESPAN_LOG": str(log), "LIFESPAN_FAIL": "no database"},
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert process.returncode != 0
    output = process.stdout + process.stderr
    assert output.count("server 'lifespan-demo' failed to start: its lifespan raised RuntimeError: no database") == 1
    assert "Application startup failed" in output  # uvicorn received lifespan.startup.failed
    assert log.read_text().split() == ["start"]


def test_modern_requests_see_the_same_lifespan_context_as_handshake_ones(start_stdio_server, tmp_path):
    server = start_stdio_server(LIFESPAN_SERVER, env={"LIFESPAN_LOG": str(tmp_path / "log")})
    server.call(
        {
            "jsonrpc": "2.0",
            "id": "init",
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        }
    )
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    handshake = server.call({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "pool", "arguments": {}}})
    modern = server.call(request(2, "tools/call", {"name": "pool", "arguments": {}}))
    assert tool_text(handshake) == tool_text(modern) == "the-pool of lifespan-demo"


def test_holds_left_by_an_ended_event_loop_do_not_block_the_next_one():
    events: list[str] = []
    server = recording_server(events)

    async def leave_a_client_open() -> None:
        await Client(server).__aenter__()  # never closed; asyncio.run ends the loop

    asyncio.run(leave_a_client_open())

    async def use_it_again() -> str:
        async with Client(server) as client:
            return str((await client.call_tool("pool", {})).content[0].text)

    assert asyncio.run(use_it_again()) == "the-pool"
    assert events == ["start", "stop", "start", "stop"]  # the ended loop still ran the shutdown
