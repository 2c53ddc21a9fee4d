"""Progress keeps a request alive: every request the client sends carries a progress
token, each report restarts its deadline, and a maximum total time still ends it
(basic/patterns/cancellation.mdx, Timeouts; basic/patterns/progress.mdx).

The tools run in a real server process (``tests/fixtures/servers/progress_server.py``) over stdio
and Streamable HTTP, in both eras: ``reporting`` works 3 s and reports every 0.3 s,
``silent`` works 3 s and reports nothing, ``endless`` reports forever. The deadline is
1 s throughout, so only progress can carry a call past it; no caller passes a progress
callback. The same holds through a ``Host`` and through a ``Gateway`` (whose own
deadline on its upstream is 1 s), for callers that send a progress token and for
those that do not.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from modelctx import Client
from modelctx.client import ClientOptions, RequestTimeout
from modelctx.host import Host
from tests.support.paths import SERVERS
from tests.support.wire import HttpServer, async_test, serve_command

PROGRESS_SERVER = SERVERS / "progress_server.py"
TRANSPORTS = ["stdio", "http"]
MODES = ["auto", "handshake"]  # 2026-07-28 (stateless), and the initialize handshake
DEADLINE = 1.0  # the request deadline every test sets: shorter than the 3 s tools

run = async_test(60)


@pytest.fixture(scope="module")
def progress_http(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with HttpServer(PROGRESS_SERVER, tmp_path_factory.mktemp("progress") / "server.log") as server:
        yield server


@pytest.fixture
def target(request: pytest.FixtureRequest) -> Any:
    """The progress server over the transport the test is parametrized with."""
    if request.param == "stdio":
        return serve_command(PROGRESS_SERVER)
    return request.getfixturevalue("progress_http").url


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content)


# -- the client --------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", TRANSPORTS, indirect=True)
@pytest.mark.parametrize("mode", MODES)
@run
async def test_a_tool_that_keeps_reporting_progress_outlives_a_shorter_deadline_without_a_callback(target, mode):
    async with Client(target, mode=mode, timeout=DEADLINE) as client:
        result = await client.call_tool("reporting", {"seconds": 3, "every": 0.3})

    assert not result.is_error
    assert _text(result) == "done after 10 reports"


@pytest.mark.parametrize("target", TRANSPORTS, indirect=True)
@pytest.mark.parametrize("mode", MODES)
@run
async def test_a_tool_that_reports_no_progress_still_times_out_at_the_deadline(target, mode):
    async with Client(target, mode=mode, timeout=DEADLINE) as client:
        with pytest.raises(RequestTimeout, match="no answer to tools/call"):
            await client.call_tool("silent", {"seconds": 3})
        # The connection goes on: the next call is answered.
        assert _text(await client.call_tool("silent", {"seconds": 0})) == "slept 0.0"


@pytest.mark.parametrize("target", TRANSPORTS, indirect=True)
@pytest.mark.parametrize("mode", MODES)
@run
async def test_the_maximum_total_time_stops_a_tool_that_reports_progress_forever(target, mode):
    async with Client(target, mode=mode, timeout=DEADLINE, options=ClientOptions(max_timeout=2.5)) as client:
        with pytest.raises(RequestTimeout, match="no answer to tools/call"):
            await client.call_tool("endless", {"every": 0.3})


@pytest.mark.parametrize("target", TRANSPORTS, indirect=True)
@run
async def test_a_request_s_own_timeout_longer_than_the_maximum_is_its_own_maximum(target):
    # max_timeout bounds what progress may add; a caller who asks for more time gets it.
    async with Client(target, timeout=DEADLINE, options=ClientOptions(max_timeout=0.5)) as client:
        result = await client.call_tool("silent", {"seconds": 1.5}, timeout=20)

    assert _text(result) == "slept 1.5"


# -- a host ------------------------------------------------------------------------------------------
def _host_config(tmp_path: Path, transport: str, request: pytest.FixtureRequest) -> Path:
    if transport == "stdio":
        upstream: dict[str, Any] = {
            "command": sys.executable,
            "args": ["-m", "modelctx", "serve", str(PROGRESS_SERVER)],
            "approval": "allow",
        }
    else:
        upstream = {"url": request.getfixturevalue("progress_http").url, "approval": "allow"}
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"work": upstream}}))
    return path


@pytest.mark.parametrize("transport", TRANSPORTS)
@run
async def test_host_call_tool_outlives_a_shorter_deadline_while_the_tool_reports_progress(
    tmp_path, transport, request
):
    async with Host.from_file(_host_config(tmp_path, transport, request), request_timeout=DEADLINE) as host:
        result = await host.call_tool("work_reporting", {"seconds": 3, "every": 0.3}, timeout=DEADLINE)
        with pytest.raises(RequestTimeout):
            await host.call_tool("work_silent", {"seconds": 3}, timeout=DEADLINE)

    assert not result.is_error
    assert _text(result) == "done after 10 reports"


@run
async def test_host_call_tool_hands_progress_to_its_callback(tmp_path, request):
    updates: list[tuple[Any, ...]] = []
    async with Host.from_file(_host_config(tmp_path, "stdio", request), request_timeout=DEADLINE) as host:
        result = await host.call_tool(
            "work_reporting", {"seconds": 0.6, "every": 0.3}, progress=lambda *update: updates.append(update)
        )

    assert _text(result) == "done after 2 reports"
    assert updates == [(1, 2, "step 1 of 2"), (2, 2, "step 2 of 2")]


# -- a gateway ---------------------------------------------------------------------------------------
GATEWAY = textwrap.dedent(
    """
    import sys

    from modelctx.host import Gateway, Host

    # The gateway's own deadline on its upstream: 1 s, shorter than the tool.
    Gateway(Host.from_file(sys.argv[1], request_timeout=1.0)).run()
    """
)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", MODES)
@run
async def test_a_gateway_relays_a_long_call_whose_upstream_keeps_reporting_progress(tmp_path, transport, mode, request):
    # The gateway's deadline on its upstream (1 s) and the caller's on the gateway (1 s)
    # are both pushed back by the upstream's progress, relayed.
    script = tmp_path / "gateway.py"
    script.write_text(GATEWAY)
    command = [sys.executable, str(script), str(_host_config(tmp_path, transport, request))]
    async with Client(command, mode=mode, timeout=DEADLINE) as gateway:
        await gateway.tools()
        result = await gateway.call_tool("work_reporting", {"seconds": 3, "every": 0.3})

    assert not result.is_error, _text(result)
    assert _text(result) == "done after 10 reports"


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
}


async def _raw_call(tmp_path: Path, transport: str, request: pytest.FixtureRequest, token: Any) -> list[dict[str, Any]]:
    """A plain ``tools/call`` sent as a line to a stdio gateway (with or without a
    progress token): every message it answers with, up to the response."""
    script = tmp_path / "gateway.py"
    script.write_text(GATEWAY)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        str(_host_config(tmp_path, transport, request)),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    meta = dict(MODERN_META) if token is None else {**MODERN_META, "progressToken": token}
    lines = [
        {"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": {"_meta": MODERN_META}},
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "work_reporting", "arguments": {"seconds": 3, "every": 0.3}, "_meta": meta},
        },
    ]
    seen: list[dict[str, Any]] = []
    try:
        for line in lines:
            process.stdin.write(json.dumps(line).encode() + b"\n")
            await process.stdin.drain()
            while True:
                message = json.loads(await asyncio.wait_for(process.stdout.readline(), 30))
                seen.append(message)
                if message.get("id") == line["id"]:
                    break
    finally:
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 20)
        except TimeoutError:
            process.kill()
            await process.wait()
    return seen[1:]


@pytest.mark.parametrize("transport", TRANSPORTS)
@run
async def test_a_gateway_s_deadline_on_its_upstream_is_pushed_back_by_progress_for_a_caller_that_asked_none(
    tmp_path, transport, request
):
    # No progress token: the fast lane relays this call (stdio upstream); the gateway
    # still asks its upstream for progress, to keep its own deadline alive.
    seen = await _raw_call(tmp_path, transport, request, token=None)

    response = seen[-1]
    assert not response["result"].get("isError"), response
    assert response["result"]["content"][0]["text"] == "done after 10 reports"
    assert [m for m in seen if m.get("method") == "notifications/progress"] == []  # none asked for


@pytest.mark.parametrize("transport", TRANSPORTS)
@run
async def test_a_gateway_relays_upstream_progress_under_the_callers_token_and_before_the_result(
    tmp_path, transport, request
):
    seen = await _raw_call(tmp_path, transport, request, token="caller-token")

    progress = [m["params"] for m in seen if m.get("method") == "notifications/progress"]
    assert [p["progressToken"] for p in progress] == ["caller-token"] * 10
    assert [p["progress"] for p in progress] == list(range(1, 11))
    assert seen[-1]["result"]["content"][0]["text"] == "done after 10 reports"
