"""Server middleware (issue 13): it wraps every request that reaches a method, and the
built-ins (``RequestLog``, ``Timing``, ``RateLimit``) do what their docstrings say.

A real server, a real client, through the in-process transport (JSON both ways)."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import pytest

from modelctx import Server, ToolError
from modelctx.errors import InvalidParams, ProtocolError
from modelctx.server import ServerConfig
from modelctx.server.middleware import RATE_LIMITED, Outcome, RateLimit, RequestLog, Timing
from modelctx.testing import connected, served_http
from tests.support.paths import SERVERS
from tests.support.wire import async_test

SECRET = "sk-live-0123456789abcdef"


def notes_server(*middleware: Any) -> Server:
    server = Server("notes", config=ServerConfig(middleware=list(middleware)))

    @server.tool
    def login(user: str, password: str) -> str:
        """Log in."""
        return f"hello {user}"

    @server.tool
    def broken() -> str:
        """Always fails, on purpose."""
        raise ToolError("the backend is down")

    @server.prompt
    def greet(name: str) -> str:
        if name == "bad":
            raise ValueError("no such name")
        return f"Hello {name}"

    return server


# -- RequestLog --------------------------------------------------------------------------------
@async_test()
async def test_request_log_writes_one_line_per_request_without_argument_values(caplog):
    caplog.set_level(logging.INFO, "modelctx.requests")
    async with connected(notes_server(RequestLog()), mode="2026-07-28") as client:
        await client.call_tool("login", {"user": "ann", "password": SECRET})
    lines = [r for r in caplog.records if r.name == "modelctx.requests" and r.mcp_method == "tools/call"]
    assert len(lines) == 1
    line = lines[0]
    assert "tools/call login" in line.getMessage() and "-> ok in" in line.getMessage()
    assert (line.mcp_target, line.mcp_status, line.mcp_code) == ("login", "ok", None)
    assert line.duration_ms >= 0
    assert SECRET not in caplog.text and "ann" not in caplog.text


@async_test()
async def test_request_log_leaves_a_resource_templates_query_out(caplog):
    caplog.set_level(logging.INFO, "modelctx.requests")
    server = notes_server(RequestLog())

    @server.resource("search://notes{?q}")
    def search(q: str) -> str:
        return "nothing found"

    async with connected(server, mode="2026-07-28") as client:
        await client.read_resource(f"search://notes?q={SECRET}")
    (line,) = [r for r in caplog.records if r.name == "modelctx.requests" and r.mcp_method == "resources/read"]
    assert line.mcp_target == "search://notes?..."
    assert SECRET not in caplog.text


@async_test()
async def test_request_log_shows_argument_values_only_when_asked(caplog):
    caplog.set_level(logging.INFO, "modelctx.requests")
    async with connected(notes_server(RequestLog(arguments=True)), mode="2026-07-28") as client:
        await client.call_tool("login", {"user": "ann", "password": SECRET})
    assert SECRET in caplog.text


@async_test()
async def test_request_log_names_tool_errors_and_json_rpc_errors(caplog):
    caplog.set_level(logging.INFO, "modelctx.requests")
    async with connected(notes_server(RequestLog()), mode="2026-07-28") as client:
        assert (await client.call_tool("broken")).is_error
        with pytest.raises(InvalidParams):
            await client.call_tool("missing")
    by_target = {r.mcp_target: r for r in caplog.records if r.name == "modelctx.requests"}
    assert by_target["broken"].mcp_status == "tool_error"
    assert (by_target["missing"].mcp_status, by_target["missing"].mcp_code) == ("error", -32602)
    assert by_target["missing"].levelno == logging.WARNING
    assert "-> error -32602" in by_target["missing"].getMessage()


# -- Timing, and what middleware wraps ----------------------------------------------------------
@async_test()
async def test_timing_reports_every_request_with_its_method_target_and_outcome():
    seen: list[Outcome] = []
    async with connected(notes_server(Timing(seen.append)), mode="2026-07-28") as client:
        await client.call_tool("login", {"user": "ann", "password": "x"})
        await client.get_prompt("greet", {"name": "bob"})
    calls = [(o.method, o.target, o.status) for o in seen]
    assert ("tools/call", "login", "ok") in calls
    assert ("prompts/get", "greet", "ok") in calls
    assert all(o.seconds >= 0 for o in seen)


@async_test()
async def test_middleware_wraps_initialize_of_a_handshake_era_client():
    seen: list[Outcome] = []
    async with connected(notes_server(Timing(seen.append)), mode="handshake") as client:
        await client.call_tool("login", {"user": "ann", "password": "x"})
    methods = [o.method for o in seen]
    assert methods[0] == "initialize"
    assert "tools/call" in methods


@async_test()
async def test_middleware_reads_the_caller_and_sees_the_session_in_the_handshake_era():
    seen: list[tuple[Any, ...]] = []

    async def record(call: Any, call_next: Any) -> Any:
        seen.append((call.method, call.id, call.version, (call.client_info or {}).get("name"), call.session))
        return await call_next(call)

    async with connected(notes_server(record), mode="handshake") as client:
        await client.call_tool("login", {"user": "ann", "password": "x"})
    method, request_id, version, client_name, session = seen[-1]
    assert (method, client_name) == ("tools/call", "modelctx")
    assert request_id is not None and version and session is not None and session.id


@async_test()
async def test_middleware_sees_a_handlers_exception_and_may_translate_it():
    async def translate(call: Any, call_next: Any) -> Any:
        try:
            return await call_next(call)
        except ValueError as exc:
            raise InvalidParams(f"Invalid params: {exc}") from None

    async with connected(notes_server(translate), mode="2026-07-28") as client:
        with pytest.raises(InvalidParams, match="no such name"):
            await client.get_prompt("greet", {"name": "bad"})


# -- RateLimit -------------------------------------------------------------------------------------
@async_test()
async def test_rate_limit_refuses_past_the_burst_with_a_retry_hint_and_recovers():
    limit = RateLimit(rate=20, burst=2, methods={"tools/call"})
    async with connected(notes_server(limit), mode="2026-07-28") as client:
        for _ in range(2):
            await client.call_tool("login", {"user": "ann", "password": "x"})
        with pytest.raises(ProtocolError) as refused:
            await client.call_tool("login", {"user": "ann", "password": "x"})
        error = refused.value
        assert error.code == RATE_LIMITED
        assert "Rate limit exceeded" in error.message and "retry after" in error.message
        retry_ms = error.data["retryAfterMs"]
        assert 0 < retry_ms <= 50  # one token at 20/s
        await client.tools()  # not a counted method
        await asyncio.sleep(retry_ms / 1000)
        await client.call_tool("login", {"user": "ann", "password": "x"})


def test_rate_limit_keeps_a_bucket_per_key_and_refills_at_the_rate():
    limit = RateLimit(rate=2, burst=1)
    assert limit.take("ann", now=0.0) is None
    assert limit.take("ann", now=0.0) == pytest.approx(0.5)
    assert limit.take("bob", now=0.0) is None  # another principal, another bucket
    assert limit.take("ann", now=0.5) is None


def test_rate_limit_holds_at_most_max_keys_buckets():
    limit = RateLimit(rate=1, burst=1, max_keys=2)
    assert limit.take("ann", now=0.0) is None
    assert limit.take("ann", now=0.0) is not None
    for name in ("bob", "cat"):  # pushes ann's bucket, the least recently used, out
        limit.take(name, now=0.0)
    assert limit.take("ann", now=0.0) is None  # a fresh (full) bucket


def test_rate_limit_refuses_nonsense_settings_at_once():
    with pytest.raises(ValueError, match="rate must be a positive"):
        RateLimit(rate=0)
    with pytest.raises(ValueError, match="burst must be at least 1"):
        RateLimit(rate=1, burst=0)


LIMITED_SERVER = """
import os
import time

from modelctx import Server, ServerConfig
from modelctx.server.middleware import RateLimit

# Five calls per bucket, then (almost) none: one more every 100 s.
limit = RateLimit(rate=0.01, burst=5, key=lambda call: call.params["arguments"]["bucket"])
server = Server("limited", config=ServerConfig(middleware=[limit]))


@server.tool
def pid(bucket: str, hold: float = 0.0) -> str:
    \"\"\"This worker's pid, after holding its event loop for `hold` seconds.\"\"\"
    time.sleep(hold)
    return str(os.getpid())
"""


def test_rate_limit_with_redis_allows_the_rate_across_all_workers_not_per_worker(tmp_path, redis_url):
    from concurrent.futures import ThreadPoolExecutor

    from tests.support.scale_processes import Processes, post_json, tools_call

    app = tmp_path / "limited_server.py"
    app.write_text(LIMITED_SERVER)
    with Processes(tmp_path / "procs") as procs, ThreadPoolExecutor(16) as pool:
        replica = procs.start_replica(app, workers=2, options=("--redis", redis_url), env={"MODELCTX_REDIS_URL": None})

        def call(bucket: str, hold: float) -> dict[str, Any]:
            return post_json(replica.port, tools_call("pid", {"bucket": bucket, "hold": hold}))

        # Both workers serve: calls holding one worker's loop reach the other.
        spread = list(pool.map(call, [f"spread-{n}" for n in range(6)], [0.5] * 6))
        assert len({answer["result"]["content"][0]["text"] for answer in spread}) == 2, spread
        answers = list(pool.map(call, ["one"] * 16, [0.2] * 16))
    admitted = [answer for answer in answers if "result" in answer]
    refused = [answer for answer in answers if "error" in answer]
    assert len(admitted) == 5, answers  # the burst, once for every worker together
    assert all(answer["error"]["code"] == RATE_LIMITED for answer in refused)


@async_test(deadline=60)
async def test_rate_limit_with_redis_unreachable_counts_in_each_process_and_waits_no_longer_than_its_timeout():
    from modelctx.server import LocalBus

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # a "Redis" that accepts and never answers

    mute = await asyncio.start_server(silent, "127.0.0.1", 0)
    url = f"redis://127.0.0.1:{mute.sockets[0].getsockname()[1]}/0"
    limit = RateLimit(rate=0.01, burst=2, methods={"tools/call"}, timeout=0.2)
    config = ServerConfig(middleware=[limit], redis_url=url, request_state_secret="s" * 32)
    server = Server("notes", config=config, bus=LocalBus())

    @server.tool
    def ping() -> str:
        """Answer ok."""
        return "ok"

    async with mute, connected(server, mode="2026-07-28") as client:
        loop = asyncio.get_running_loop()
        started = loop.time()
        for _ in range(2):
            await client.call_tool("ping", {})
        with pytest.raises(ProtocolError) as refused:
            await client.call_tool("ping", {})
        took = loop.time() - started
    assert refused.value.code == RATE_LIMITED  # the limit held, in this process
    assert took < 20  # bounded by the timeout (and not asked again for a second), never hanging


# -- the gateway: its own routing is the innermost middleware -------------------------------------
@async_test(deadline=60)
async def test_a_gateways_routing_runs_inside_the_middleware_it_was_given():
    from modelctx.host import Gateway, Host, HostConfig

    counting = SERVERS / "counting_server.py"
    config = HostConfig.from_dict(
        {"mcpServers": {"counting": {"command": sys.executable, "args": ["-m", "modelctx", "serve", str(counting)]}}}
    )
    seen: list[Outcome] = []
    gateway = Gateway(Host(config), config=ServerConfig(middleware=[Timing(seen.append)]))
    async with connected(gateway, mode="2026-07-28", timeout=30) as client:
        await client.call_tool("counting_echo", {"text": "hi"})  # denied: no one to approve it
    assert ("tools/call", "counting_echo") in [(o.method, o.target) for o in seen]


@async_test()
async def test_a_listen_stream_goes_through_the_middleware_for_its_whole_life():
    seen: list[Outcome] = []
    server = notes_server(Timing(seen.append))
    async with connected(server, mode="2026-07-28") as client:
        opened = asyncio.Event()
        events = client.listen(tools=True, reconnect=False, on_open=opened.set)
        first = asyncio.ensure_future(events.__anext__())
        await asyncio.wait_for(opened.wait(), 10)
        assert "subscriptions/listen" not in [o.method for o in seen]  # still open
        server.add_tool(lambda: "x", name="late")
        await asyncio.wait_for(first, 10)
        await events.aclose()
        server.close_subscriptions()
        for _ in range(100):
            if "subscriptions/listen" in [o.method for o in seen]:
                break
            await asyncio.sleep(0.01)
    assert "subscriptions/listen" in [o.method for o in seen]


@async_test(deadline=60)
async def test_rate_limit_refusal_reaches_a_client_over_streamable_http():
    limit = RateLimit(rate=0.001, burst=1, methods={"tools/call"})
    async with served_http(notes_server(limit), mode="2026-07-28") as client:
        await client.call_tool("login", {"user": "ann", "password": "x"})
        with pytest.raises(ProtocolError) as refused:
            await client.call_tool("login", {"user": "ann", "password": "x"})
    assert refused.value.code == RATE_LIMITED
    assert refused.value.data["retryAfterMs"] > 0
