"""Our Client and Host against real old official servers over stdio: the installed base (issue 21).

mcp 1.2.0 answers initialize with 2024-11-05 and mcp 1.9.4 with 2025-03-26; each lives in
its own venv (scripts/test.sh makes them and exports MODELCTX_MCP_1_2_0_PYTHON and
MODELCTX_MCP_1_9_4_PYTHON) and runs tests/fixtures/peers/old_server.py on stdio, which appends every
line it reads to a log: the tests read there what our client sent (each message checked
against the old revision's schema, field by field) and whether the server was probed.

Both SDKs end on messages their revision's schema allows or that a modern client sends:
mcp 1.2.0 on any request it cannot validate (``server/discover`` among them) and on
``notifications/cancelled``; mcp 1.9.4 after a cancelled request (client/_era.py says
how). The tests show that our client keeps each of them alive and answering.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modelctx import Client, ClientHandlers, ClientOptions
from modelctx.errors import MethodNotFound, RequestTimeout
from modelctx.host import Host, HostConfig, ServerSpec
from modelctx.protocol import Request
from modelctx.transports.stdio_client import StdioClientTransport
from tests.support.paths import PEERS
from tests.support.wire import async_test

PEER = PEERS / "old_server.py"
SERVERS = {
    "1.2.0": ("MODELCTX_MCP_1_2_0_PYTHON", "2024-11-05"),
    "1.9.4": ("MODELCTX_MCP_1_9_4_PYTHON", "2025-03-26"),
}
VERSIONS = list(SERVERS)

# What a client may send a server of each revision, from schema/2024-11-05/schema.json and
# schema/2025-03-26/schema.json (modelcontextprotocol/modelcontextprotocol), field by
# field: a method's params members, and the nested objects named below. ``_meta`` on a
# request holds ``progressToken`` (and keys the schema leaves open).
_PARAMS = {
    "initialize": {"protocolVersion", "capabilities", "clientInfo"},
    "ping": {"_meta"},
    "tools/list": {"cursor", "_meta"},
    "tools/call": {"name", "arguments", "_meta"},
    "resources/list": {"cursor", "_meta"},
    "resources/templates/list": {"cursor", "_meta"},
    "resources/read": {"uri", "_meta"},
    "resources/subscribe": {"uri", "_meta"},
    "resources/unsubscribe": {"uri", "_meta"},
    "prompts/list": {"cursor", "_meta"},
    "prompts/get": {"name", "arguments", "_meta"},
    "completion/complete": {"ref", "argument", "_meta"},
    "logging/setLevel": {"level", "_meta"},
    "notifications/initialized": {"_meta"},
    "notifications/cancelled": {"requestId", "reason"},
    "notifications/progress": {"progressToken", "progress", "total"},
    "notifications/roots/list_changed": {"_meta"},
}
SCHEMA = {
    "2024-11-05": {"params": _PARAMS, "capabilities": {"experimental", "roots", "sampling"}},
    "2025-03-26": {
        "params": {**_PARAMS, "notifications/progress": {"progressToken", "progress", "total", "message"}},
        "capabilities": {"experimental", "roots", "sampling"},
    },
}
IMPLEMENTATION = {"name", "version"}
# What a client's answers to a server's requests may hold (ListRootsResult, Root,
# CreateMessageResult of both revisions).
ANSWERS = {
    "roots": {"roots", "_meta"},
    "root": {"uri", "name"},
    "sampling": {"role", "content", "model", "stopReason", "_meta"},
}
TOOLS = ["add", "progress", "sleepy", "roots", "sample", "crash"]


def old_python(version: str) -> str:
    variable = SERVERS[version][0]
    path = os.environ.get(variable)
    if not path or not Path(path).exists():
        pytest.fail(
            f"mcp {version} is not installed in its own venv: run scripts/test.sh (it makes "
            f".tools/mcp-{version} and exports {variable})"
        )
    return path


class OldServer:
    """One old server's command and the log of the lines it read."""

    def __init__(self, version: str, directory: Path) -> None:
        self.version = version
        self.revision = SERVERS[version][1]
        self.log = directory / f"mcp-{version}.jsonl"
        self.python = old_python(version)
        self.argv = [self.python, str(PEER), "stdio", str(self.log)]
        self.marker = directory / "cancelled"

    def transport(self) -> StdioClientTransport:
        # The old SDK's interpreter must not import our packages (nor the current mcp).
        env = {"PYTHONPATH": "", "PYTHONNOUSERSITE": "1"}
        return StdioClientTransport(self.argv, env=env)

    def received(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def methods(self) -> list[str]:
        return [m.get("method", "<response>") for m in self.received()]


@pytest.fixture(params=VERSIONS, ids=[f"mcp{v}" for v in VERSIONS])
def old(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OldServer]:
    yield OldServer(request.param, tmp_path)


# A short probe: mcp 1.2.0 never answers it (see the module docstring).
FAST_PROBE = ClientOptions(probe_timeout=1.5)


async def exercise(client: Client, server: OldServer) -> None:
    """Tools, a call, progress, a resource, a prompt: each answered by the old server."""
    assert client.protocol_version == server.revision
    assert client.server_info == {"name": "old-stdio-server", "version": server.version}
    assert [tool.name for tool in await client.tools()] == TOOLS
    result = await client.call_tool("add", {"a": 2, "b": 3})
    assert [block.text for block in result.content] == ["5"]
    reports: list[tuple[float, float | None, str | None]] = []
    done = await client.call_tool("progress", {"steps": 3}, progress=lambda p, t, m: reports.append((p, t, m)))
    assert [block.text for block in done.content] == ["done after 3 steps"]
    # 2024-11-05 has no progress message; 2025-03-26 does.
    messages = [None] * 3 if server.revision == "2024-11-05" else ["step 1", "step 2", "step 3"]
    assert reports == [(1, 3, messages[0]), (2, 3, messages[1]), (3, 3, messages[2])]
    read = await client.read_resource("old://greeting")
    assert read.contents[0]["text"] == "Hello from an old server"
    assert [r.uri for r in await client.resources()] == ["old://greeting"]
    prompt = await client.get_prompt("greet", {"name": "Ann"})
    assert prompt.messages[0].content.text == "Say hello to Ann."


def assert_sent_only_what_the_revision_has(server: OldServer) -> None:
    """Every message our client sent is one the revision's schema has, field by field."""
    allowed = SCHEMA[server.revision]
    sent = server.received()
    assert sent, "the server read nothing"
    for message in sent:
        assert set(message) <= {"jsonrpc", "id", "method", "params", "result", "error"}, message
        method = message.get("method")
        if method is None:
            continue  # a response to the server
        if method == "server/discover":
            continue  # the probe, before the server's revision is known
        assert method in allowed["params"], f"{method} is not a client message of {server.revision}"
        params = message.get("params", {})
        assert set(params) <= allowed["params"][method], (method, params)
        if isinstance(params.get("_meta"), dict):
            assert set(params["_meta"]) <= {"progressToken"}, (method, params["_meta"])
        if method == "initialize":
            assert set(params["clientInfo"]) <= IMPLEMENTATION


# -- our client in handshake mode ------------------------------------------------------------------
@async_test(60)
async def test_handshake_mode_speaks_the_revision_the_old_server_answers_with(old: OldServer):
    async with Client(old.transport(), mode="handshake", timeout=15) as client:
        await exercise(client, old)
    assert old.methods()[:2] == ["initialize", "notifications/initialized"]
    assert old.received()[0]["params"]["protocolVersion"] == "2025-11-25"  # we offer our newest
    assert_sent_only_what_the_revision_has(old)


@async_test(60)
async def test_a_completion_carries_no_context_the_old_revision_lacks(old: OldServer):
    async with Client(old.transport(), mode="handshake", timeout=15) as client:
        try:
            await client.complete({"type": "ref/prompt", "name": "greet"}, "name", "A", context={"x": "y"})
        except MethodNotFound:
            pass  # these FastMCP versions serve no completions; what was sent is the point
        assert (await client.call_tool("add", {"a": 1, "b": 1})).content[0].text == "2"  # still there
    (complete,) = [m for m in old.received() if m.get("method") == "completion/complete"]
    assert set(complete["params"]) == {"ref", "argument", "_meta"}
    assert_sent_only_what_the_revision_has(old)


@async_test(60)
async def test_a_timed_out_call_is_abandoned_without_telling_the_old_server(old: OldServer):
    async with Client(old.transport(), mode="handshake", timeout=15) as client:
        with pytest.raises(RequestTimeout):
            await client.call_tool("sleepy", {"marker": str(old.marker), "seconds": 2}, timeout=0.5)
        # The server lives on and answers (mcp 1.2.0 runs one request at a time, so
        # this waits for the sleep to end).
        assert (await client.call_tool("add", {"a": 4, "b": 4}, timeout=15)).content[0].text == "8"
        task = asyncio.ensure_future(client.call_tool("sleepy", {"marker": str(old.marker), "seconds": 2}))
        while not Path(str(old.marker) + ".started").exists() or "sleepy" not in json.dumps(old.received()[-1:]):
            await asyncio.sleep(0.02)
        task.cancel()  # the caller gives up
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await client.call_tool("add", {"a": 5, "b": 5}, timeout=15)).content[0].text == "10"
        # The server reads its lines in order: a cancellation sent before that call
        # would have reached the handler before the call was answered.
        assert "notifications/cancelled" not in old.methods()
        assert not old.marker.exists()


@async_test(60)
async def test_an_old_server_is_not_answered_an_elicitation_its_revision_lacks(old: OldServer):
    asked: list[Any] = []

    async def ask(question: Any) -> dict[str, Any]:
        asked.append(question)
        return {"action": "accept", "content": {}}

    async with Client(old.transport(), mode="handshake", handlers=ClientHandlers(elicitation=ask)) as client:
        assert client.protocol_version == old.revision
        # Neither old revision has elicitation/create: what the session hands the client
        # when such a request arrives is refused, and the handler is never asked.
        hook = client.session.on_server_request
        assert hook is not None
        with pytest.raises(MethodNotFound, match=f"not part of protocol version {old.revision}"):
            await hook(Request("e1", "elicitation/create", {"message": "?", "requestedSchema": {}}))
        assert asked == []
        assert (await client.call_tool("add", {"a": 1, "b": 2})).content[0].text == "3"


@async_test(60)
async def test_answers_to_the_old_servers_questions_hold_only_what_its_schema_has(old: OldServer):
    async def roots() -> list[Any]:
        return [{"uri": "file:///work", "name": "work", "_meta": {"com.example/x": 1}}]

    async def sample(_: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m", "extra": 1}

    handlers = ClientHandlers(roots=roots, sampling=sample)
    async with Client(old.transport(), mode="handshake", timeout=15, handlers=handlers) as client:
        listed = await client.call_tool("roots", {})
        assert json.loads(listed.content[0].text) == [{"uri": "file:///work", "name": "work"}]
        sampled = await client.call_tool("sample", {})
        assert sampled.content[0].text == "hello"
    answers = [m["result"] for m in old.received() if "result" in m]
    root_answer, sampling_answer = answers
    assert set(root_answer) <= ANSWERS["roots"]
    assert all(set(root) <= ANSWERS["root"] for root in root_answer["roots"])
    assert set(sampling_answer) <= ANSWERS["sampling"]  # "extra" was not sent
    assert_sent_only_what_the_revision_has(old)


# -- our client in auto mode -------------------------------------------------------------------------
@async_test(90)
async def test_auto_mode_falls_back_to_initialize_and_the_old_server_keeps_answering(old: OldServer):
    client = Client(old.transport(), timeout=15, options=FAST_PROBE)
    async with client:
        assert not client.modern
        await exercise(client, old)
        pid = client.transport.pid
        await asyncio.sleep(0.3)
        assert client.transport.returncode is None  # alive after everything
        assert (await client.call_tool("add", {"a": 20, "b": 22})).content[0].text == "42"
        assert client.transport.pid == pid
    assert "server/discover" in old.methods()  # probed, as stdio.mdx asks
    assert_sent_only_what_the_revision_has(old)


@async_test(90)
async def test_a_server_that_ended_on_the_probe_is_initialized_directly_from_then_on(tmp_path: Path):
    server = OldServer("1.2.0", tmp_path)
    async with Client(server.transport(), timeout=15, options=FAST_PROBE) as first:
        assert first.protocol_version == "2024-11-05"
    # The first process read the probe and ended; the one the client used was started
    # again and initialized at once.
    methods = server.methods()
    assert methods[0] == "server/discover"
    assert methods.count("initialize") >= 1 and "tools/list" not in methods
    server.log.unlink()
    # The same configuration again (a host restarting it, another client): no probe at
    # all, and the revision it answered is offered, with the capabilities it names.
    async def ask(_: Any) -> dict[str, Any]:
        return {"action": "decline"}

    handlers = ClientHandlers(elicitation=ask, roots=_no_roots)
    options = ClientOptions(probe_timeout=1.5, extensions={"com.example/x": {}})
    async with Client(server.transport(), timeout=15, handlers=handlers, options=options) as again:
        await exercise(again, server)
        assert again.transport.returncode is None
    sent = server.received()
    assert sent[0]["method"] == "initialize"
    assert sent[0]["params"]["protocolVersion"] == "2024-11-05"
    assert sent[0]["params"]["capabilities"] == {"roots": {"listChanged": False}}  # no elicitation, no extensions
    assert "server/discover" not in server.methods()
    assert_sent_only_what_the_revision_has(server)


async def _no_roots() -> list[str]:
    return []


# -- our host with stdio entries -----------------------------------------------------------------
@async_test(120)
async def test_a_host_serves_old_stdio_servers_and_restarts_one_without_probing_it(tmp_path: Path):
    servers = {version: OldServer(version, tmp_path / version) for version in VERSIONS}
    for server in servers.values():
        server.log.parent.mkdir()
    specs = {
        f"old{version.replace('.', '')}": ServerSpec(
            f"old{version.replace('.', '')}",
            command=server.python,
            args=(str(PEER), "stdio", str(server.log)),
            env={"PYTHONPATH": "", "PYTHONNOUSERSITE": "1"},
            approval="allow",
            timeout=20,
        )
        for version, server in servers.items()
    }
    async with Host(HostConfig(specs)) as host:
        assert host.failures == {}
        names = sorted(tool.name for tool in await host.tools())
        assert names == sorted(f"{s}_{t}" for s in specs for t in TOOLS)
        for name in specs:
            result = await host.call_tool(f"{name}_add", {"a": 1, "b": 2})
            assert result.content[0].text == "3"
            prompt = await host.get_prompt(f"{name}_greet", {"name": "Bo"})
            assert prompt.messages[0].content.text == "Say hello to Bo."
        read = await host.read_resource("old://greeting", server="old120")
        assert read.contents[0]["text"] == "Hello from an old server"
        # A crash: the host restarts the server, which it now knows: initialize first.
        servers["1.2.0"].log.unlink()
        with pytest.raises(Exception):  # noqa: B017 - the connection's end, however worded
            await host.call_tool("old120_crash", {})
        await host.servers["old120"].ready(timeout=20)
        assert (await host.call_tool("old120_add", {"a": 2, "b": 2})).content[0].text == "4"
        assert servers["1.2.0"].methods()[0] == "initialize"
    for server in servers.values():
        assert_sent_only_what_the_revision_has(server)

