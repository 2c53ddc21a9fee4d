"""The model loop, end to end: the real ``anthropic`` and ``openai`` SDKs talk to a scripted
model API on 127.0.0.1 (tests/support/model_server.py), and the tools are a real MCP server on
stdio (tests/fixtures/servers/model_tools_server.py) behind a real ``Client``. What the model was
sent is read from the requests the model API recorded."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from typing import Any

import msgspec
import pytest

from tests.support.model_server import ScriptedModelServer, Turn
from tests.support.paths import SERVERS
from tests.support.wire import async_test, serve_command

pytest.importorskip("anthropic")
pytest.importorskip("openai")

from modelctx import Client  # noqa: E402
from modelctx.host._anthropic import AnthropicModel  # noqa: E402
from modelctx.host._model import (  # noqa: E402
    Conversation,
    Final,
    ImagePart,
    Model,
    ModelError,
    ModelEvent,
    ModelLoop,
    ModelSetupError,
    TextDelta,
    TextPart,
    ToolCallRequested,
    ToolResultEvent,
    result_parts,
)
from modelctx.host._openai import ERROR_PREFIX, OpenAIModel  # noqa: E402
from modelctx.protocol.types.v2026_07_28 import CallToolResult, TextContent, Tool  # noqa: E402

TOOLS_SERVER = SERVERS / "model_tools_server.py"
sys.path.insert(0, str(TOOLS_SERVER.parent))
from model_tools_server import PIXEL_PNG  # noqa: E402

PROVIDERS = ["anthropic", "openai"]
ALL_WAYS = [(p, s) for p in PROVIDERS for s in (True, False)]


class ClientTools:
    """A ToolSet over one Client, names ``<server>_<tool>`` as the Host gives them."""

    def __init__(self, client: Client, server: str) -> None:
        self.client = client
        self.name = server

    async def tools(self) -> list[Tool]:
        return [msgspec.structs.replace(t, name=f"{self.name}_{t.name}") for t in await self.client.tools()]

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        return await self.client.call_tool(self.find_client_for(name)[1], arguments)

    def find_client_for(self, name: str) -> tuple[ClientTools, str]:
        if not name.startswith(f"{self.name}_"):
            raise LookupError(name)
        return self, name[len(self.name) + 1 :]


def model_for(provider: str, api: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, streaming: bool = True) -> Model:
    """A model configured the way a user configures it: from the environment."""
    if provider == "anthropic":
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-anthropic")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        return AnthropicModel(streaming=streaming)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-openai")
    monkeypatch.setenv("OPENAI_BASE_URL", api.url + "/v1")
    monkeypatch.setenv("MODELCTX_MODEL", "scripted-model")
    return OpenAIModel(streaming=streaming)


async def run(model: Model, text: str, max_steps: int = 10, timeout: float = 15.0) -> list[ModelEvent]:
    async with Client(serve_command(TOOLS_SERVER), timeout=timeout) as client:
        loop = ModelLoop(ClientTools(client, "notes"), model, max_steps=max_steps)
        return [event async for event in loop.run(Conversation(system="Be brief."), text)]


def sent_results(provider: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results a request carried, read back from the provider's format:
    ``{"id", "text", "is_error", "images": [(media type, base64)]}`` in order."""
    messages = body["messages"]
    if provider == "anthropic":
        blocks = [b for b in messages[-1]["content"] if b["type"] == "tool_result"]
        return [
            {
                "id": b["tool_use_id"],
                "text": "\n".join(c["text"] for c in b["content"] if c["type"] == "text"),
                "is_error": b.get("is_error", False),
                "images": [(c["source"]["media_type"], c["source"]["data"]) for c in b["content"] if c["type"] == "image"],
            }
            for b in blocks
        ]
    last_assistant = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    after = messages[last_assistant + 1 :]
    images = [
        tuple(part["image_url"]["url"].removeprefix("data:").split(";base64,"))
        for m in after
        if m["role"] == "user" and isinstance(m["content"], list)
        for part in m["content"]
        if part["type"] == "image_url"
    ]
    return [
        {
            "id": m["tool_call_id"],
            "text": m["content"],
            "is_error": m["content"].startswith(ERROR_PREFIX),
            "images": images,
        }
        for m in after
        if m["role"] == "tool"
    ]


@pytest.mark.parametrize(("provider", "streaming"), ALL_WAYS)
@async_test(60)
async def test_the_model_asks_for_a_tool_gets_its_result_and_answers(
    provider: str, streaming: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = [Turn("I will write it down.", calls=[("notes_remember", {"note": "milk"})]), Turn("Noted: milk.")]
    with ScriptedModelServer(script) as api:
        events = await run(model_for(provider, api, monkeypatch, streaming), "Remember milk")

    requested = [e for e in events if isinstance(e, ToolCallRequested)]
    assert [(e.name, e.server, e.original, e.arguments) for e in requested] == [
        ("notes_remember", "notes", "remember", {"note": "milk"})
    ]
    [result] = [e for e in events if isinstance(e, ToolResultEvent)]
    assert not result.is_error and result.id == requested[0].id
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "I will write it down.Noted: milk."
    assert events[-1] == Final("Noted: milk.", "answered", 2)

    first, second = (r.body for r in api.requests)
    # The model was shown the server's tools, namespaced, with their schemas.
    if provider == "anthropic":
        headers = api.requests[0].headers  # the key, as x-api-key or (newer SDKs) a bearer token
        assert "test-key-anthropic" in (headers.get("x-api-key"), headers.get("authorization", "")[len("Bearer ") :])
        assert first["system"] == "Be brief."
        tools = {t["name"]: t["input_schema"] for t in first["tools"]}
    else:
        assert api.requests[0].headers["authorization"] == "Bearer test-key-openai"
        assert first["messages"][0] == {"role": "system", "content": "Be brief."}
        tools = {t["function"]["name"]: t["function"]["parameters"] for t in first["tools"]}
    assert set(tools) == {"notes_lookup", "notes_remember", "notes_fail", "notes_snapshot", "notes_stall"}
    assert tools["notes_remember"]["required"] == ["note"]
    assert bool(first.get("stream")) is streaming
    # The next request carries the call and its result, as the server returned it.
    [sent] = sent_results(provider, second)
    assert sent["id"] == requested[0].id and not sent["is_error"]
    assert json.loads(sent["text"])["note"] == "milk"


@pytest.mark.parametrize("provider", PROVIDERS)
@async_test(60)
async def test_read_only_calls_of_one_turn_run_in_parallel_and_others_in_order(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("notes_lookup", {"key": "a"}),
        ("notes_lookup", {"key": "b"}),
        ("notes_remember", {"note": "between"}),  # not read-only: a barrier
        ("notes_lookup", {"key": "c", "wait_for": 1}),
    ]
    with ScriptedModelServer([Turn(calls=calls), Turn("done")]) as api:
        events = await run(model_for(provider, api, monkeypatch), "Look up a, b and c")

    assert events[-1] == Final("done", "answered", 2)
    a, b, remembered, c = (json.loads(r["text"]) for r in sent_results(provider, api.requests[1].body))
    # The server saw both lookups running at once, and their times overlap.
    assert a["running_together"] == b["running_together"] == 2
    assert a["started"] < b["finished"] and b["started"] < a["finished"]
    # The write ran after both reads finished, and the read after it waited for it.
    assert max(a["finished"], b["finished"]) <= remembered["at"] <= c["started"]
    assert c["running_together"] == 1


@pytest.mark.parametrize(("provider", "streaming"), ALL_WAYS)
@async_test(60)
async def test_a_tool_error_reaches_the_model_as_an_error(
    provider: str, streaming: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = [Turn(calls=[("notes_fail", {"reason": "disk full"})]), Turn("It failed.")]
    with ScriptedModelServer(script) as api:
        events = await run(model_for(provider, api, monkeypatch, streaming), "Try")

    [result] = [e for e in events if isinstance(e, ToolResultEvent)]
    assert result.is_error
    [sent] = sent_results(provider, api.requests[1].body)
    assert sent["is_error"] and "failed on purpose: disk full" in sent["text"]
    assert events[-1] == Final("It failed.", "answered", 2)


@pytest.mark.parametrize("provider", PROVIDERS)
@async_test(60)
async def test_a_call_that_fails_on_the_wire_reaches_the_model_as_an_error(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = [Turn(calls=[("notes_stall", {"seconds": 30})]), Turn("It timed out.")]
    with ScriptedModelServer(script) as api:  # the client waits 1 s for any answer
        events = await run(model_for(provider, api, monkeypatch), "Wait", timeout=1.0)

    [result] = [e for e in events if isinstance(e, ToolResultEvent)]
    assert result.is_error
    [sent] = sent_results(provider, api.requests[1].body)
    assert sent["is_error"] and "the call to notes_stall failed" in sent["text"]
    assert events[-1] == Final("It timed out.", "answered", 2)


@pytest.mark.parametrize("provider", PROVIDERS)
@async_test(60)
async def test_an_unknown_tool_and_unreadable_arguments_come_back_to_the_model_as_errors(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = [
        Turn(calls=[("notes_nonexistent", {"x": 1})]),
        Turn(calls=[("notes_remember", {})], raw_arguments='{"note": '),
        Turn("Sorry."),
    ]
    with ScriptedModelServer(script) as api:
        events = await run(model_for(provider, api, monkeypatch), "Go")

    requested = [e for e in events if isinstance(e, ToolCallRequested)]
    assert (requested[0].server, requested[0].original) == (None, None)
    [unknown] = sent_results(provider, api.requests[1].body)
    assert unknown["is_error"] and "no tool named 'notes_nonexistent'" in unknown["text"]
    assert "notes_remember" in unknown["text"]  # the model is told what it can call
    [unreadable] = sent_results(provider, api.requests[2].body)
    assert unreadable["is_error"] and "not valid JSON" in unreadable["text"]
    assert events[-1] == Final("Sorry.", "answered", 3)


@pytest.mark.parametrize("provider", PROVIDERS)
@async_test(60)
async def test_the_loop_stops_after_max_steps_with_a_notice(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    again = Turn(calls=[("notes_lookup", {"key": "k", "wait_for": 1})])
    with ScriptedModelServer([again, again, again, Turn("never reached")]) as api:
        events = await run(model_for(provider, api, monkeypatch), "Loop", max_steps=2)

    final = events[-1]
    assert isinstance(final, Final) and final.reason == "max_steps" and final.steps == 2
    assert "max_steps=2" in final.text
    assert len(api.requests) == 2  # the model was not asked a third time
    assert len([e for e in events if isinstance(e, ToolResultEvent)]) == 2


@pytest.mark.parametrize(("provider", "streaming"), ALL_WAYS)
@async_test(60)
async def test_an_image_result_reaches_the_model_as_an_image(
    provider: str, streaming: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedModelServer([Turn(calls=[("notes_snapshot", {})]), Turn("A pixel.")]) as api:
        await run(model_for(provider, api, monkeypatch, streaming), "Show me")

    [sent] = sent_results(provider, api.requests[1].body)
    assert sent["images"] == [("image/png", base64.b64encode(PIXEL_PNG).decode())]
    assert "a 1x1 picture" in sent["text"]
    assert "resource notes://today:\nbuy milk" in sent["text"]  # an embedded resource, as text
    if provider == "openai":  # the images follow every tool message, in a user message
        roles = [m["role"] for m in api.requests[1].body["messages"]]
        assert roles[-2:] == ["tool", "user"]


def test_structured_content_goes_to_the_model_as_json_unless_a_text_block_carries_it() -> None:
    data = {"city": "Oslo", "sky": "snow"}
    only_structured = CallToolResult(content=[], structured_content=data, result_type="complete")
    [part] = result_parts(only_structured)
    assert isinstance(part, TextPart) and json.loads(part.text.removeprefix("structured content: ")) == data
    both = CallToolResult(content=[TextContent(text=json.dumps(data))], structured_content=data, result_type="complete")
    assert result_parts(both) == [TextPart(json.dumps(data))]
    assert not any(isinstance(p, ImagePart) for p in result_parts(both))


@pytest.mark.parametrize(
    ("provider", "variable"), [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY"), ("openai", "MODELCTX_MODEL")]
)
def test_a_provider_missing_its_configuration_says_what_to_set(
    provider: str, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "MODELCTX_MODEL"):
        monkeypatch.delenv(name, raising=False)
    if variable != "MODELCTX_MODEL":
        monkeypatch.setenv("MODELCTX_MODEL", "claude-some-model" if provider == "anthropic" else "some-model")
    else:
        monkeypatch.setenv("OPENAI_API_KEY", "k")  # a missing key is said first: only the model is missing
    with pytest.raises(ModelSetupError, match=variable):
        AnthropicModel() if provider == "anthropic" else OpenAIModel()


@pytest.mark.parametrize("provider", PROVIDERS)
@async_test(60)
async def test_a_failing_model_api_raises_a_model_error_that_names_the_model(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedModelServer([]) as api:  # every request gets a 400
        with pytest.raises(ModelError, match="scripted-model|claude"):
            await run(model_for(provider, api, monkeypatch), "Hello")


@pytest.mark.parametrize("provider", PROVIDERS)
@async_test(60)
async def test_a_conversation_stopped_at_max_steps_goes_on_with_the_next_user_message(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = [Turn(calls=[("notes_lookup", {"key": "k", "wait_for": 1})]), Turn("Found k.")]
    with ScriptedModelServer(script) as api:
        model = model_for(provider, api, monkeypatch)
        conversation = Conversation()
        async with Client(serve_command(TOOLS_SERVER)) as client:
            loop = ModelLoop(ClientTools(client, "notes"), model, max_steps=1)
            first = [e async for e in loop.run(conversation, "Find k")]
            second = [e async for e in loop.run(conversation, "Go on")]

    assert isinstance(first[-1], Final) and first[-1].reason == "max_steps"
    assert second[-1] == Final("Found k.", "answered", 1)
    # The results the model had not seen go with the next message, in each API's shape.
    messages = api.requests[1].body["messages"]
    if provider == "anthropic":
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]  # roles alternate
        assert [b["type"] for b in messages[-1]["content"]] == ["tool_result", "text"]
        assert messages[-1]["content"][-1]["text"] == "Go on"
    else:
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
        [sent] = sent_results(provider, api.requests[1].body)
        assert json.loads(sent["text"])["key"] == "k" and messages[-1]["content"] == "Go on"


@async_test(60)
async def test_the_whole_path_through_a_host_with_approval(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Host as the ToolSet: a denied call reaches the model as an error and never the
    server; an allowed one runs."""
    from modelctx.host import _config as config_module
    from modelctx.host import _host as host_module

    asked: list[str] = []

    class DenyWrites:
        """An approval hook that shows every tool and denies the one that writes."""

        def hidden(self, server: Any, tool: Tool) -> bool:
            return False

        async def check(self, server: Any, tool: Tool, arguments: dict[str, Any]) -> bool:
            asked.append(tool.name)
            return tool.name != "remember"

    spec = config_module.ServerSpec(name="notes", command=sys.executable, args=tuple(serve_command(TOOLS_SERVER)[1:]))
    script = [Turn(calls=[("notes_remember", {"note": "x"}), ("notes_lookup", {"key": "k", "wait_for": 1})]), Turn("ok")]
    with ScriptedModelServer(script) as api:
        model = model_for("anthropic", api, monkeypatch)
        config = config_module.HostConfig(servers={"notes": spec})
        async with host_module.Host(config, approvals=DenyWrites()) as host:
            events = [e async for e in ModelLoop(host, model).run(Conversation(), "Note x, look k up")]

    assert sorted(asked) == ["lookup", "remember"]
    requested = [(e.server, e.original) for e in events if isinstance(e, ToolCallRequested)]
    assert requested == [("notes", "remember"), ("notes", "lookup")]
    denied, looked_up = sent_results("anthropic", api.requests[1].body)
    assert denied["is_error"] and "denied" in denied["text"]
    assert not looked_up["is_error"] and json.loads(looked_up["text"])["key"] == "k"
    assert events[-1] == Final("ok", "answered", 2)


@async_test(60)
async def test_a_tool_list_changed_by_a_server_reaches_the_models_next_turn_without_a_restart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The host's list is fresh for the model: a tool a server adds (it sends list_changed)
    is in the tools of the next request to the model, with no restart of anything."""
    from modelctx.host import Host, HostConfig, ServerSpec

    counting = SERVERS / "counting_server.py"
    command = serve_command(counting)
    spec = ServerSpec(name="c", command=command[0], args=tuple(command[1:]), approval="allow")
    script = [Turn(calls=[("c_grow", {"name": "fresh"})]), Turn("grown"), Turn("now I see it")]
    with ScriptedModelServer(script) as api:
        model = model_for("anthropic", api, monkeypatch)
        async with Host(HostConfig({"c": spec})) as host:
            heard: list[str] = []
            host.add_listener(lambda server, kind: heard.append(kind))
            loop, conversation = ModelLoop(host, model), Conversation()
            first = [e async for e in loop.run(conversation, "Grow a tool")]
            for _ in range(200):  # the list_changed travels on its own stream
                if "tools" in heard:
                    break
                await asyncio.sleep(0.05)
            second = [e async for e in loop.run(conversation, "What can you do now?")]

    offered = [{tool["name"] for tool in request.body["tools"]} for request in api.requests]
    assert "c_fresh" not in offered[0]
    assert "c_fresh" in offered[2]  # the next user turn: the list was rebuilt, nothing restarted
    assert first[-1] == Final("grown", "answered", 2) and second[-1] == Final("now I see it", "answered", 1)
