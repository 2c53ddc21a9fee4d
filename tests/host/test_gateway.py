"""The gateway (``modelctx gateway --config FILE``) as a client sees it: one MCP server in
front of several, over a real stdio subprocess, with real upstream server processes.

The gateway's client here is modelctx's own ``Client`` in both eras ("auto" speaks
2026-07-28 to the gateway, "handshake" the initialize handshake), with an elicitation
handler standing for the person: approval ``ask`` reaches it as a form.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from modelctx import Client
from modelctx.client import ClientHandlers, Elicitation, ListChanged
from tests.support.paths import SERVERS
from tests.support.wire import SAMPLE_SERVER, async_test

COUNTING = SERVERS / "counting_server.py"
MODES = ["auto", "handshake"]


def _upstream(path: Path, **settings: Any) -> dict[str, Any]:
    # Trusted: the counting server's readOnlyHint tools (the counts) run without asking.
    return {"command": sys.executable, "args": ["-m", "modelctx", "serve", str(path)], "trusted": True, **settings}


def _config(tmp_path: Path, **servers: dict[str, Any]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def _gateway(config: Path, mode: str, handlers: ClientHandlers | None = None, *extra: str) -> Client:
    command = [sys.executable, "-m", "modelctx", "gateway", "--config", str(config), *extra]
    return Client(command, mode=mode, handlers=handlers, timeout=30)


class Person:
    """Answers the gateway's questions: ``decision`` for an approval form, or ``action``."""

    def __init__(self, decision: str = "allow_once", action: str = "accept") -> None:
        self.decision = decision
        self.action = action
        self.asked: list[Elicitation] = []

    async def __call__(self, elicitation: Elicitation) -> dict[str, Any]:
        self.asked.append(elicitation)
        if self.action != "accept":
            return {"action": self.action}
        return {"action": "accept", "content": {"decision": self.decision}}


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content)


async def _calls_reached(client: Client) -> int:
    """tools/call requests that reached the counting server, this one excluded."""
    return int(json.loads(_text(await client.call_tool("counting_call_requests", {})))["result"]) - 1


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_ask_is_a_form_to_the_gateway_client_and_an_allowed_call_runs(tmp_path, mode):
    config = _config(tmp_path, counting=_upstream(COUNTING, approval="ask"))
    person = Person("allow_once")
    async with _gateway(config, mode, ClientHandlers(elicitation=person)) as gateway:
        result = await gateway.call_tool("counting_echo", {"text": "hello through"})
        again = await gateway.call_tool("counting_echo", {"text": "twice"})

        assert _text(result) == "hello through" and not result.is_error
        assert _text(again) == "twice"
        # Allow once: asked for each call; the form shows the server, the tool, the arguments.
        assert len(person.asked) == 2
        form = person.asked[0]
        assert form.mode == "form"
        assert "counting" in form.message and "'echo'" in form.message and '"hello through"' in form.message
        choices = [choice["const"] for choice in form.requested_schema["properties"]["decision"]["oneOf"]]
        assert choices == ["allow_once", "always", "deny"]


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_always_is_remembered_for_the_gateway_run(tmp_path, mode):
    config = _config(tmp_path, counting=_upstream(COUNTING, approval="ask"))
    person = Person("always")
    async with _gateway(config, mode, ClientHandlers(elicitation=person)) as gateway:
        for word in ("one", "two", "three"):
            assert _text(await gateway.call_tool("counting_echo", {"text": word})) == word

        assert len(person.asked) == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("answer", ["decline", "cancel", "deny"])
@async_test(60)
async def test_a_declined_or_denied_approval_never_reaches_the_upstream_server(tmp_path, mode, answer):
    config = _config(tmp_path, counting=_upstream(COUNTING, approval={"default": "ask"}))
    person = Person("deny") if answer == "deny" else Person(action=answer)
    async with _gateway(config, mode, ClientHandlers(elicitation=person)) as gateway:
        before = await _calls_reached(gateway)  # read-only: allowed without asking
        refused = await gateway.call_tool("counting_echo", {"text": "must not run"})
        after = await _calls_reached(gateway)

        assert refused.is_error is True
        assert "was not run" in _text(refused) and "echo" in _text(refused)
        assert after == before + 1  # the read-only count call itself, nothing else
        assert len(person.asked) == 1


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_a_client_that_cannot_elicit_gets_an_error_result_and_the_call_does_not_run(tmp_path, mode):
    config = _config(tmp_path, counting=_upstream(COUNTING, approval="ask"))
    async with _gateway(config, mode) as gateway:  # no elicitation handler: not declared
        before = await _calls_reached(gateway)
        refused = await gateway.call_tool("counting_echo", {"text": "x"})
        after = await _calls_reached(gateway)

    assert refused.is_error is True
    assert "cannot be asked" in _text(refused)
    assert after == before + 1


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_deny_hides_the_tool_and_refuses_a_call_to_it(tmp_path, mode):
    config = _config(
        tmp_path, counting=_upstream(COUNTING, approval={"default": "allow", "tools": {"echo": "deny"}})
    )
    async with _gateway(config, mode) as gateway:
        names = [tool.name for tool in await gateway.tools()]
        before = await _calls_reached(gateway)
        with pytest.raises(Exception) as unknown:  # not offered: an unknown tool (-32602)
            await gateway.call_tool("counting_echo", {"text": "x"})
        after = await _calls_reached(gateway)

    assert "counting_grow" in names and "counting_echo" not in names
    assert "counting_echo" in str(unknown.value)
    assert after == before + 1


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_an_upstream_list_change_reaches_the_gateway_listeners(tmp_path, mode):
    config = _config(tmp_path, counting=_upstream(COUNTING, approval="allow"))
    async with _gateway(config, mode) as gateway:
        before = [tool.name for tool in await gateway.tools()]
        opened = asyncio.Event()
        heard: list[Any] = []

        async def listen() -> None:
            async for event in gateway.listen(tools=True, on_open=opened.set):
                heard.append(event)
                return

        listener = asyncio.ensure_future(listen())
        if gateway.modern:
            await asyncio.wait_for(opened.wait(), 15)
        await gateway.call_tool("counting_grow", {"name": "sprouted"})
        await asyncio.wait_for(listener, 15)
        after = [tool.name for tool in await gateway.tools()]
        grown = await gateway.call_tool("counting_sprouted", {})

    assert heard == [ListChanged("tools")]
    assert "counting_sprouted" not in before and "counting_sprouted" in after
    assert _text(grown) == "sprouted"


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_two_upstreams_with_the_same_tools_are_each_reached_by_their_own_names(tmp_path, mode):
    config = _config(tmp_path, a=_upstream(COUNTING), b=_upstream(COUNTING))
    async with _gateway(config, mode) as gateway:
        names = {tool.name for tool in await gateway.tools()}
        pids = [_text(await gateway.call_tool(name, {})) for name in ("a_pid", "b_pid", "a_pid")]

    assert {"a_pid", "b_pid", "a_grow", "b_grow"} <= names
    assert pids[0] == pids[2] != pids[1]  # a's process twice, b's once


COUNTED_UPSTREAM = textwrap.dedent(
    """
    from modelctx import Server

    counts = {}


    class Counted(Server):
        def handle(self, request, peer, send, stream=None):
            counts[request.method] = counts.get(request.method, 0) + 1
            return super().handle(request, peer, send, stream)


    server = Counted("counted")


    @server.tool
    def echo(text: str) -> str:
        return text


    @server.tool
    def counts_so_far() -> dict:
        return dict(counts)
    """
)


@pytest.mark.parametrize("mode", MODES)
@async_test(90)
async def test_the_upstream_connection_is_opened_once_and_reused_by_every_call(tmp_path, mode):
    script = tmp_path / "counted.py"
    script.write_text(COUNTED_UPSTREAM)
    config = _config(tmp_path, counted=_upstream(script, approval="allow"))
    async with _gateway(config, mode) as gateway:
        for number in range(50):
            assert _text(await gateway.call_tool("counted_echo", {"text": str(number)})) == str(number)
        counts = json.loads(_text(await gateway.call_tool("counted_counts_so_far", {})))

    assert counts.get("server/discover", 0) + counts.get("initialize", 0) == 1
    assert counts["tools/call"] == 51


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_progress_of_the_upstream_call_reaches_the_gateway_client(tmp_path, mode):
    config = _config(tmp_path, sample=_upstream(SAMPLE_SERVER, approval="allow"))
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    async with _gateway(config, mode) as gateway:
        result = await gateway.call_tool("sample_progress", {"steps": 3}, progress=progress)

    assert _text(result) == "done after 3 steps"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_cancelling_a_gateway_call_cancels_the_upstream_call(tmp_path, mode):
    config = _config(tmp_path, sample=_upstream(SAMPLE_SERVER, approval="allow"))
    marker = tmp_path / "sleepy"
    async with _gateway(config, mode) as gateway:
        call = asyncio.ensure_future(gateway.call_tool("sample_sleepy", {"seconds": 60, "marker": str(marker)}))
        started = Path(str(marker) + ".started")
        while not started.exists():
            await asyncio.sleep(0.05)
        call.cancel()
        while not marker.exists():  # the upstream handler was cancelled and said so
            await asyncio.sleep(0.05)

    assert marker.read_text() == "cancelled"


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_an_upstream_elicitation_is_asked_of_the_gateway_client(tmp_path, mode):
    config = _config(tmp_path, counting=_upstream(COUNTING, approval="allow"))
    asked: list[Elicitation] = []

    async def person(elicitation: Elicitation) -> dict[str, Any]:
        asked.append(elicitation)
        return {"action": "accept", "content": {"name": "Ada"}}

    async with _gateway(config, mode, ClientHandlers(elicitation=person)) as gateway:
        result = await gateway.call_tool("counting_ask_name", {})

    assert "Ada" in _text(result)
    assert len(asked) == 1 and asked[0].mode == "form"


@async_test(60)
async def test_prompts_and_resources_are_served_too(tmp_path):
    config = _config(tmp_path, sample=_upstream(SAMPLE_SERVER, approval="allow"))
    async with _gateway(config, "auto") as gateway:
        prompts = [prompt.name for prompt in await gateway.prompts()]
        review = await gateway.get_prompt("sample_review", {"code": "x = 1", "language": "python"})
        uris = [resource.uri for resource in await gateway.resources()]
        greeting = await gateway.read_resource("sample://greeting")
        item = await gateway.read_resource("sample://items/apricot")  # from a template

    assert prompts == ["sample_review"]
    assert "python" in review.messages[0].content.text
    assert "sample://greeting" in uris
    assert _resource_text(greeting) == "Hello from the sample server"
    assert _resource_text(item) == "item apricot"


def _resource_text(result: Any) -> str:
    content = result.contents[0]
    return str(content["text"] if isinstance(content, dict) else content.text)


def test_a_bad_configuration_is_reported_naming_the_file_and_the_problem(tmp_path):
    import subprocess

    broken = tmp_path / "mcp.json"
    broken.write_text('{"mcpServers": {"x": {"args": []}}}')
    missing = tmp_path / "absent.json"
    runs = [
        subprocess.run(
            [sys.executable, "-m", "modelctx", "gateway", "--config", str(path)],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
        for path in (broken, missing)
    ]

    assert [run.returncode for run in runs] == [2, 2]
    assert str(broken) in runs[0].stderr and "'x'" in runs[0].stderr
    assert str(missing) in runs[1].stderr


EXTENDED_UPSTREAM = textwrap.dedent(
    """
    from modelctx import Server


    class Extended(Server):
        # Results may carry members the schema does not name (Result: [key: string]: unknown).
        async def handle(self, request, peer, send, stream=None):
            response = await super().handle(request, peer, send, stream)
            result = (response or {}).get("result")
            if request.method == "tools/call" and isinstance(result, dict):
                result["x-extension"] = {"kept": True}
                if request.params.get("name") == "broken":
                    del result["content"]
            return response


    server = Extended("extended")


    @server.tool
    def echo(text: str) -> str:
        return text


    @server.tool
    def broken() -> str:
        return "its result loses its content on the way out"
    """
)


@pytest.mark.parametrize("mode", MODES)
@async_test(60)
async def test_a_call_result_reaches_the_gateway_client_as_the_upstream_sent_it(tmp_path, mode):
    script = tmp_path / "extended.py"
    script.write_text(EXTENDED_UPSTREAM)
    config = _config(tmp_path, extended=_upstream(script, approval="allow"))
    async with _gateway(config, mode) as gateway:
        relayed = await gateway.call_tool_raw("extended_echo", {"text": "as sent"})
        malformed = await gateway.call_tool("extended_broken", {})

    assert relayed["content"] == [{"type": "text", "text": "as sent"}]
    assert relayed["x-extension"] == {"kept": True}  # a member the gateway does not know, kept
    assert malformed.is_error is True
    assert "server 'extended' could not run 'broken'" in _text(malformed) and "content" in _text(malformed)


def test_a_gateway_whose_stdout_is_a_regular_file_still_answers_and_exits_cleanly(tmp_path):
    # On pipes the gateway serves on uvloop when it is installed; uvloop aborts the
    # process on a stdout that is a regular file, so there it must stay on plain asyncio.
    script = tmp_path / "extended.py"
    script.write_text(EXTENDED_UPSTREAM)
    config = _config(tmp_path, extended=_upstream(script, approval="allow"))
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "extended_echo", "arguments": {"text": "to a file"}, "_meta": meta}}
    out = tmp_path / "out.jsonl"
    with out.open("wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "modelctx", "gateway", "--config", str(config)],
            input=(json.dumps(call) + "\n").encode(), stdout=stdout, stderr=subprocess.PIPE, timeout=60,
        )

    assert done.returncode == 0, done.stderr.decode()[-2000:]
    answer = json.loads(out.read_text().splitlines()[0])
    assert answer["id"] == 7 and answer["result"]["content"] == [{"type": "text", "text": "to a file"}]
