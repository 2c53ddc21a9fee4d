"""The gateway's fast lane: a ``tools/call`` of a tool the policy allows outright, to a
2026-07-28 upstream over stdio, relayed from the event loop's callbacks (no task per
call). What a client sees must be what the common way gives: results with their own
ids, cancellation and timeouts reaching the upstream, its errors, its questions.

The gateway's client lists the tools first, as clients do: the lane takes calls of the
tools the gateway has listed. Real processes: the gateway over stdio (or in-process
where the test needs a short request timeout) and the upstream as a subprocess.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from modelctx import Client
from modelctx.client import ClientHandlers, Elicitation
from modelctx.errors import ProtocolError
from modelctx.host import Gateway, Host
from modelctx.host._config import load_config
from tests.support.wire import StdioServer, async_test

MODES = ["auto", "handshake"]

METERED_UPSTREAM = textwrap.dedent(
    """
    import asyncio
    import json
    import os
    from pathlib import Path

    from modelctx import Context, Server
    from modelctx.errors import InvalidParams
    from modelctx.server import ResourceLink, ToolResult
    from modelctx.protocol.jsonrpc import error_response

    SEEN = []  # the _meta of each tools/call, in order


    class Metered(Server):
        async def handle(self, request, peer, send, stream=None):
            if request.method == "tools/call":
                SEEN.append(dict(request.params.get("_meta") or {}))
                if request.params.get("name") == "refused":
                    return error_response(request.id, InvalidParams("refused: this tool never runs"))
            return await super().handle(request, peer, send, stream)


    server = Metered("metered")


    @server.tool
    def echo(text: str) -> str:
        return text


    @server.tool
    def metas() -> str:
        \"\"\"The _meta of every tools/call before this one.\"\"\"
        return json.dumps(SEEN[:-1])


    @server.tool
    def refused() -> str:
        return "never"


    @server.tool
    def crash() -> str:
        os._exit(3)


    @server.tool
    async def sleepy(seconds: float, marker: str) -> str:
        Path(marker + ".started").write_text("started")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            Path(marker).write_text("cancelled")
            raise
        return "slept"


    @server.tool
    def linked() -> ToolResult:
        # Fields a 2025-03-26 client's schema lacks: structuredContent, a resource_link.
        return ToolResult([ResourceLink("file:///notes.txt", "notes")], structured={"count": 2})


    @server.tool
    async def ask_name(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"hello {answer.content['name']}"
    """
)


def _config(tmp_path: Path) -> Path:
    script = tmp_path / "metered.py"
    script.write_text(METERED_UPSTREAM)
    upstream = {"command": sys.executable, "args": ["-m", "modelctx", "serve", str(script)], "approval": "allow"}
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"metered": upstream}}))
    return path


def _gateway(config: Path, mode: str, handlers: ClientHandlers | None = None) -> Client:
    command = [sys.executable, "-m", "modelctx", "gateway", "--config", str(config)]
    return Client(command, mode=mode, handlers=handlers, timeout=30)


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content)


async def _until(condition: Any, seconds: float = 20.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the condition did not hold in time")


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_concurrent_relayed_calls_each_get_their_own_result(tmp_path, mode):
    async with _gateway(_config(tmp_path), mode) as gateway:
        await gateway.tools()
        texts = [f"call {number}" for number in range(40)]
        results = await asyncio.gather(*(gateway.call_tool("metered_echo", {"text": text}) for text in texts))

    assert [_text(result) for result in results] == texts
    assert not any(result.is_error for result in results)


@async_test(60)
async def test_a_relayed_call_asks_the_upstream_for_no_logs_its_client_did_not_ask_for(tmp_path):
    # A 2026-07-28 request without _meta logLevel wants no logs (a handshake session
    # wants every level until logging/setLevel: those calls take the common way).
    async with _gateway(_config(tmp_path), "auto") as gateway:
        await gateway.tools()
        assert _text(await gateway.call_tool("metered_echo", {"text": "quiet"})) == "quiet"
        metas = json.loads(_text(await gateway.call_tool("metered_metas", {})))

    assert metas, "the upstream saw the echo call"
    assert "io.modelcontextprotocol/logLevel" not in metas[-1]
    assert metas[-1]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_cancelling_a_relayed_call_cancels_it_upstream(tmp_path, mode):
    marker = tmp_path / "sleepy"
    async with _gateway(_config(tmp_path), mode) as gateway:
        await gateway.tools()
        call = asyncio.ensure_future(gateway.call_tool("metered_sleepy", {"seconds": 60, "marker": str(marker)}))
        await _until(Path(str(marker) + ".started").exists)
        call.cancel()
        await _until(marker.exists)  # the upstream handler was cancelled and said so
        # The gateway goes on serving.
        assert _text(await gateway.call_tool("metered_echo", {"text": "after"})) == "after"

    assert marker.read_text() == "cancelled"


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_an_upstream_json_rpc_error_reaches_the_client_as_the_upstream_sent_it(tmp_path, mode):
    async with _gateway(_config(tmp_path), mode) as gateway:
        await gateway.tools()
        with pytest.raises(ProtocolError) as raised:
            await gateway.call_tool("metered_refused", {})

    assert raised.value.code == -32602
    assert "refused: this tool never runs" in str(raised.value)


@pytest.mark.parametrize("mode", MODES)
@async_test(90)
async def test_an_upstream_that_dies_mid_call_is_an_error_result_and_is_served_again_after_restart(tmp_path, mode):
    async with _gateway(_config(tmp_path), mode) as gateway:
        await gateway.tools()
        died = await gateway.call_tool("metered_crash", {})
        assert died.is_error and "could not run 'crash'" in _text(died)
        answer = None
        for _ in range(100):  # the host restarts the upstream after a backoff
            answer = await gateway.call_tool("metered_echo", {"text": "back"})
            if not answer.is_error:
                break
            await asyncio.sleep(0.1)

    assert answer is not None and _text(answer) == "back"


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_an_upstream_question_during_a_relayed_call_is_asked_of_the_gateway_client(tmp_path, mode):
    asked: list[Elicitation] = []

    async def person(elicitation: Elicitation) -> dict[str, Any]:
        asked.append(elicitation)
        return {"action": "accept", "content": {"name": "Ada"}}

    async with _gateway(_config(tmp_path), mode, ClientHandlers(elicitation=person)) as gateway:
        await gateway.tools()
        result = await gateway.call_tool("metered_ask_name", {})

    assert _text(result) == "hello Ada"
    assert [question.message for question in asked] == ["Your name?"]


@async_test(60)
async def test_a_relayed_call_past_the_request_timeout_is_an_error_result_and_is_cancelled_upstream(tmp_path):
    # In-process (the same fast lane serves in-process clients): the host's request
    # timeout is an option of Host, not of the command line.
    marker = tmp_path / "sleepy"
    gateway = Gateway(Host(load_config(_config(tmp_path)), request_timeout=0.5))
    async with Client(gateway, timeout=30) as client:
        await client.tools()
        result = await client.call_tool("metered_sleepy", {"seconds": 60, "marker": str(marker)})
        await _until(marker.exists)

    assert result.is_error
    assert "could not run 'sleepy'" in _text(result) and "no answer to tools/call" in _text(result)
    assert marker.read_text() == "cancelled"


@async_test(60)
async def test_a_relayed_call_is_freed_when_it_ends_not_left_to_the_cyclic_collector(tmp_path):
    # In-process (the same fast lane). A relayed call and its callbacks form no reference
    # cycle once answered: a gateway relaying thousands of calls a second frees each at
    # once instead of leaving a few dozen objects a call to the garbage collector.
    from modelctx.transports._duplex import _FastCall

    gateway = Gateway(Host(load_config(_config(tmp_path))))
    async with Client(gateway, timeout=30) as client:
        await client.tools()
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            texts = [_text(await client.call_tool("metered_echo", {"text": str(n)})) for n in range(20)]
            gc.collect()
            left = [found for found in gc.garbage if isinstance(found, _FastCall)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()

    assert texts == [str(n) for n in range(20)]
    assert left == []


def test_a_2025_03_26_session_through_the_gateway_gets_only_the_fields_its_schema_knows(tmp_path):
    # Every gateway call ends with the dispatcher's own decoration (Dispatcher.decorate),
    # which shapes results for old sessions (server/_shape.py): the structuredContent the
    # upstream sent is left out, and its resource_link becomes a text block naming it.
    gateway = StdioServer([sys.executable, "-m", "modelctx", "gateway", "--config", str(_config(tmp_path))])
    try:
        init = {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}
        opened = gateway.call({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        assert opened["result"]["protocolVersion"] == "2025-03-26"
        gateway.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = gateway.call({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert "metered_linked" in {tool["name"] for tool in listed["result"]["tools"]}
        for request_id in (3, 4):  # the first call, and one with the routes known
            call = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "metered_linked"}}
            result = gateway.call(call)["result"]
            assert set(result) == {"content"}, result
            [block] = result["content"]
            assert block["type"] == "text" and "file:///notes.txt" in block["text"], result
    finally:
        gateway.stop()
