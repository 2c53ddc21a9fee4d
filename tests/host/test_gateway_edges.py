"""The stdio gateway's edges, spoken as raw lines on its stdin: a plain ``tools/call``
(the fast lane's case, ``Gateway.serve_fast``) answered with the gateway's envelope,
malformed calls, ids in use, cancellation, an upstream that dies, huge arguments,
string ids. What a client reads must be what the common way gives.

Real processes: the gateway (``modelctx gateway``) and its upstream (tests'
``METERED_UPSTREAM``) as subprocesses.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tests.host.test_gateway_fast import _config
from tests.support.wire import async_test, until

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
}


def _call(request_id: Any, tool: str, arguments: Any = None, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": tool, "_meta": MODERN_META, **params}
    if arguments is not None:
        body["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}


class RawGateway:
    """The gateway as a subprocess, spoken to in lines."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def send(self, message: dict[str, Any] | bytes) -> None:
        assert self.process.stdin is not None
        line = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.process.stdin.write(line + b"\n")
        await self.process.stdin.drain()

    async def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), 30)
        assert line, "the gateway closed its stdout"
        message: dict[str, Any] = json.loads(line)
        return message

    async def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        await self.send(message)
        return await self.read()


async def _start(tmp_path: Path) -> RawGateway:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "modelctx",
        "gateway",
        "--config",
        str(_config(tmp_path)),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=1 << 24,
    )
    gateway = RawGateway(process)
    listed = await gateway.ask(
        {"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": {"_meta": MODERN_META}}
    )
    assert "metered_echo" in [tool["name"] for tool in listed["result"]["tools"]]
    return gateway


async def _stop(gateway: RawGateway) -> None:
    assert gateway.process.stdin is not None
    gateway.process.stdin.close()
    try:
        await asyncio.wait_for(gateway.process.wait(), 20)
    except TimeoutError:
        gateway.process.kill()
        await gateway.process.wait()


def _text(response: dict[str, Any]) -> str:
    return "".join(block["text"] for block in response["result"]["content"])


@async_test(90)
async def test_a_plain_call_is_answered_with_the_gateway_s_envelope_for_integer_and_string_ids(tmp_path):
    gateway = await _start(tmp_path)
    try:
        by_number = await gateway.ask(_call(7, "metered_echo", {"text": "seven"}))
        by_string = await gateway.ask(_call('call-\u00e9"8', "metered_echo", {"text": "eight"}))
        no_arguments = await gateway.ask(_call(9, "metered_metas"))
    finally:
        await _stop(gateway)

    assert by_number == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {
            "content": [{"type": "text", "text": "seven"}],
            "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modelctx-gateway", "version": "0.1.0"}},
        },
    }
    assert by_string["id"] == 'call-\u00e9"8' and _text(by_string) == "eight"
    # The upstream saw its own tool name, the arguments, and the gateway's envelope (no log level).
    metas = json.loads(_text(no_arguments))
    assert metas[-1]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert "io.modelcontextprotocol/logLevel" not in metas[-1]


@async_test(90)
async def test_malformed_calls_are_answered_as_the_common_way_answers_them_and_the_gateway_goes_on(tmp_path):
    gateway = await _start(tmp_path)
    try:
        not_an_object = await gateway.ask(_call(1, "metered_echo", 5))
        await gateway.send(b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"metered_echo"')
        cut_off = await gateway.read()
        bool_id = await gateway.ask(_call(True, "metered_echo", {"text": "x"}))
        unknown = await gateway.ask(_call(3, "metered_nothing", {}))
        after = await gateway.ask(_call(4, "metered_echo", {"text": "after"}))
    finally:
        await _stop(gateway)

    assert not_an_object["id"] == 1 and not_an_object["result"]["isError"] is True
    assert "Invalid arguments" in _text(not_an_object)
    assert cut_off["error"]["code"] == -32700
    assert bool_id["error"]["code"] == -32600
    assert unknown["id"] == 3 and unknown["error"]["code"] == -32602
    assert after["id"] == 4 and _text(after) == "after"


@async_test(90)
async def test_an_id_in_flight_is_refused_and_a_cancelled_call_is_cancelled_upstream_and_never_answered(tmp_path):
    marker = tmp_path / "sleepy"
    gateway = await _start(tmp_path)
    try:
        await gateway.send(_call(5, "metered_sleepy", {"seconds": 60, "marker": str(marker)}))
        await until(Path(str(marker) + ".started").exists, "the upstream to start the call", 20)
        again = await gateway.ask(_call(5, "metered_echo", {"text": "same id"}))
        await gateway.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 5, "reason": "changed mind"},
            }
        )
        await until(marker.exists, "the upstream to see the cancellation", 20)
        # The id is free again, and the next line read is this call's answer: none for the cancelled one.
        reused = await gateway.ask(_call(5, "metered_echo", {"text": "reused"}))
    finally:
        await _stop(gateway)

    assert "id" not in again and again["error"]["code"] == -32600 and "already in use" in again["error"]["message"]
    assert marker.read_text() == "cancelled"
    assert reused["id"] == 5 and _text(reused) == "reused"


@async_test(90)
async def test_an_upstream_that_dies_mid_call_answers_every_call_in_flight_with_an_error_result(tmp_path):
    marker = tmp_path / "sleepy"
    gateway = await _start(tmp_path)
    try:
        await gateway.send(_call(10, "metered_sleepy", {"seconds": 60, "marker": str(marker)}))
        await gateway.send(_call(11, "metered_crash", {}))
        answers = {}
        for _ in range(2):
            answer = await gateway.read()
            answers[answer["id"]] = answer
    finally:
        await _stop(gateway)

    for request_id in (10, 11):
        assert answers[request_id]["result"]["isError"] is True
    assert "could not run 'crash'" in _text(answers[11])
    assert "could not run 'sleepy'" in _text(answers[10])


@async_test(90)
async def test_huge_arguments_and_a_tool_error_are_relayed_whole(tmp_path):
    text = "x" * 2_000_000 + '\u00e9\n"end'
    gateway = await _start(tmp_path)
    try:
        echoed = await gateway.ask(_call(12, "metered_echo", {"text": text}))
        missing = await gateway.ask(_call(13, "metered_echo", {}))
    finally:
        await _stop(gateway)

    assert _text(echoed) == text
    assert missing["id"] == 13 and missing["result"]["isError"] is True and missing["result"]["content"]
