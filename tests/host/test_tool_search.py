"""Many tools in a small context: past a budget the model is shown a search tool, the
tools pinned in the configuration and the tools it used or found, not every definition.

Twenty in-process modelctx servers with 500 tools (``bench/many_tools.py``) behind a real
``Host``; the model is a scripted Messages / Chat Completions server on loopback, reached
through the real ``anthropic`` and ``openai`` libraries.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import msgspec
import pytest

from tests.support.model_server import ScriptedModelServer, Turn
from tests.support.paths import BENCH, SERVERS
from tests.support.wire import async_test, serve_command, until

pytest.importorskip("anthropic")
pytest.importorskip("openai")

sys.path.insert(0, str(BENCH))

import many_tools  # noqa: E402  (bench/many_tools.py)

from modelctx import Client  # noqa: E402
from modelctx.host import Host, HostConfig, HostConfigError  # noqa: E402
from modelctx.host._anthropic import AnthropicModel  # noqa: E402
from modelctx.host._anthropic import to_tool as anthropic_tool  # noqa: E402
from modelctx.host._model import (  # noqa: E402
    AssistantMessage,
    Conversation,
    Final,
    Model,
    ModelLoop,
    ToolCall,
    ToolCallRequested,
    ToolResult,
    ToolResultEvent,
    ToolResults,
)
from modelctx.host._openai import OpenAIModel  # noqa: E402
from modelctx.host._openai import to_tool as openai_tool  # noqa: E402
from modelctx.host._tool_search import SEARCH_OWNER, SEARCH_TOOL, ToolBudget, ToolSearch  # noqa: E402
from modelctx.protocol.types.v2026_07_28 import Tool  # noqa: E402

COUNTING = SERVERS / "counting_server.py"


def model_for(provider: str, api: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch) -> Model:
    if provider == "anthropic":
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-anthropic")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        return AnthropicModel()
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-openai")
    monkeypatch.setenv("OPENAI_BASE_URL", api.url + "/v1")
    monkeypatch.setenv("MODELCTX_MODEL", "scripted-model")
    return OpenAIModel()


def offered(provider: str, body: dict[str, Any]) -> list[str]:
    """The tool names one recorded request showed the model."""
    tools = body.get("tools", [])
    return [t["name"] if provider == "anthropic" else t["function"]["name"] for t in tools]


def tool(name: str, description: str = "", params: tuple[str, ...] = ()) -> Tool:
    schema = {"type": "object", "properties": {p: {"type": "string"} for p in params}}
    return Tool(name=name, description=description, input_schema=schema)


def catalog_tools() -> dict[str, Tool]:
    return {
        f"{server}_{name}": tool(f"{server}_{name}", description, tuple(params))
        for server in many_tools.CATALOG
        for name, description, params in many_tools.tools_of(server)
    }


# -- end to end, through the real provider libraries ------------------------------------------------


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@async_test(120)
async def test_past_the_budget_the_model_searches_then_calls_the_found_tool_in_its_next_turn(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = "open a github issue saying the login page crashes on Safari"
    script = [
        Turn("Let me find the tool.", calls=[(SEARCH_TOOL, {"query": task})]),
        Turn(calls=[("github_create_issue", {"title": "Login crashes on Safari"})]),
        Turn("Opened."),
    ]
    with ScriptedModelServer(script) as api:
        model = model_for(provider, api, monkeypatch)
        async with many_tools.many_tools_host() as host:
            events = [e async for e in ModelLoop(host, model).run(Conversation(), task)]
            every = await host.tools()

    assert len(every) == 500  # host.tools() stays complete for code that wants every tool
    first, second, third = (offered(provider, r.body) for r in api.requests)
    assert first == [SEARCH_TOOL]
    assert second[0] == SEARCH_TOOL and "github_create_issue" in second[1:] and len(second) <= 6
    assert "github_create_issue" in third  # used: it stays shown
    requested = [(e.name, e.server, e.original) for e in events if isinstance(e, ToolCallRequested)]
    assert requested == [(SEARCH_TOOL, SEARCH_OWNER, SEARCH_TOOL), ("github_create_issue", "github", "create_issue")]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    searched = results[0].result.structured_content
    assert isinstance(searched, dict) and "github_create_issue" in [t["name"] for t in searched["tools"]]
    created = json.loads(results[1].result.content[0].text)  # type: ignore[union-attr]
    assert created == {"tool": "create_issue", "arguments": {"title": "Login crashes on Safari"}}
    assert events[-1] == Final("Opened.", "answered", 3)
    # What the budget is for: the definitions of one request, with and without search.
    to_tool = anthropic_tool if provider == "anthropic" else openai_tool
    sizes = [len(json.dumps(r.body["tools"])) for r in api.requests]
    assert max(sizes) < 4_000 and len(json.dumps([to_tool(t) for t in every])) > 140_000


@async_test(60)
async def test_within_the_budget_every_tool_is_shown_and_no_search_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    from modelctx.host import AllowAll, Host

    with ScriptedModelServer([Turn("nothing to do")]) as api:
        model = model_for("anthropic", api, monkeypatch)
        host = Host(approvals=AllowAll())
        try:
            for name in ("github", "weather"):  # 50 tools: over 40, so a budget of 60 tools
                client = Client(many_tools.server_for(name), name=name)
                await client.connect()
                host.register(client)
            loop = ModelLoop(host, model, tool_search=ToolSearch(ToolBudget(max_tools=60, max_bytes=None)))
            [e async for e in loop.run(Conversation(), "hi")]
        finally:
            await host.close()

    names = offered("anthropic", api.requests[0].body)
    assert len(names) == 50 and SEARCH_TOOL not in names


# -- the index and what is offered ------------------------------------------------------------------


def test_the_intended_tool_is_in_the_first_five_results_for_at_least_80_percent_of_the_tasks() -> None:
    search = ToolSearch()
    search.offer(Conversation(), catalog_tools())
    assert len(many_tools.TASKS) >= 50
    hits = [want in [t.name for t in search.search(task, 5)] for task, want in many_tools.TASKS]
    assert sum(hits) / len(hits) >= 0.80, f"{sum(hits)}/{len(hits)}"


def test_the_byte_budget_alone_turns_search_on() -> None:
    """Ten tools are few, but ten with 5 KB descriptions are 50 KB of context."""
    tools = {f"big_{i}": tool(f"big_{i}", "word " * 1000) for i in range(10)}
    assert [t.name for t in ToolSearch().offer(Conversation(), tools)] == [SEARCH_TOOL]
    assert len(ToolSearch(ToolBudget(max_bytes=None)).offer(Conversation(), tools)) == 10


def test_pinned_tools_from_the_configuration_are_always_shown() -> None:
    config = HostConfig.from_dict({"toolSearch": {"pinned": ["weather_*", "files_read_file"]}})
    search = ToolSearch.for_toolset(Host(config))  # as ModelLoop(host, model) does
    names = [t.name for t in search.offer(Conversation(), catalog_tools())]
    assert names[0] == SEARCH_TOOL
    assert set(names[1:]) == {n for n in catalog_tools() if n.startswith("weather_")} | {"files_read_file"}


def test_a_tool_search_setting_that_cannot_be_used_is_refused_naming_the_key() -> None:
    with pytest.raises(HostConfigError, match=r"toolSearch\.maxTools"):
        HostConfig.from_dict({"toolSearch": {"maxTools": "many"}})
    with pytest.raises(HostConfigError, match="unknown key 'pinnned'"):
        HostConfig.from_dict({"toolSearch": {"pinnned": []}})
    with pytest.raises(HostConfigError, match=r"toolSearch\.results' must be a whole number of at least 1"):
        HostConfig.from_dict({"toolSearch": {"results": 0}})
    assert HostConfig.from_dict({"toolSearch": False}).tool_search.enabled is False
    assert HostConfig.from_dict({"toolSearch": {"maxTools": None}}).tool_search.max_tools is None


def test_what_is_offered_comes_from_the_conversation_so_a_resumed_one_sees_the_same_tools() -> None:
    tools = catalog_tools()
    conversation = Conversation()
    search = ToolSearch()
    search.offer(conversation, tools)
    call = ToolCall("s", SEARCH_TOOL, {"query": "skip this song"})
    result = search.answer(call)
    assert result is not None
    conversation.add_assistant(AssistantMessage(tool_calls=(call, ToolCall("u", "slack_post_message", {}))))
    conversation.add_tool_results([ToolResult(call, result)])
    shown = [t.name for t in ToolSearch().offer(conversation, tools)]  # a new loop, the same conversation
    assert shown[:2] == [SEARCH_TOOL, "slack_post_message"] and "spotify_skip_to_next" in shown
    # Kept without its structured content (as a file might keep it), the text says the same.
    plain = msgspec.structs.replace(result, structured_content=msgspec.UNSET)
    conversation.messages[-1] = ToolResults((ToolResult(call, plain),))
    assert [t.name for t in ToolSearch().offer(conversation, tools)] == shown


def test_a_call_to_no_tool_while_searching_tells_the_model_to_search_not_500_names() -> None:
    search = ToolSearch()
    search.offer(Conversation(), catalog_tools())
    result = search.answer(ToolCall("x", "github_open_issue", {}))
    assert result is not None and result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert SEARCH_TOOL in text and len(text) < 300
    empty = search.answer(ToolCall("y", SEARCH_TOOL, {"query": "  "}))
    assert empty is not None and empty.is_error and "query" in empty.content[0].text  # type: ignore[union-attr]
    assert search.answer(ToolCall("z", "github_create_issue", {})) is None  # the loop runs it


def test_the_search_tool_takes_another_name_when_a_server_has_one_called_search_tools() -> None:
    tools = catalog_tools() | {SEARCH_TOOL: tool(SEARCH_TOOL, "a server's own tool")}
    search = ToolSearch()
    assert search.offer(Conversation(), tools)[0].name == f"{SEARCH_TOOL}_2"
    assert search.answer(ToolCall("a", SEARCH_TOOL, {})) is None  # the server's tool: the loop runs it


def test_a_query_is_words_not_fts5_syntax_and_a_long_one_is_cut() -> None:
    search = ToolSearch()
    search.offer(Conversation(), catalog_tools())
    for query in ['"', "NOT AND OR", "col:*", "drop table tools; --", "(((", "the a of", "issue " + "x" * 10**6]:
        result = search.answer(ToolCall("q", SEARCH_TOOL, {"query": query}))
        assert result is not None and not result.is_error
    many = " ".join(f"w{i}" for i in range(10_000)) + " github issue"
    assert search.search("github issue " + many, 5) and not search.search(many, 5)  # only the first 64 words


@async_test(90)
async def test_a_tool_a_server_adds_is_found_by_the_next_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """The index follows the host's fresh list: the counting server adds a tool and sends
    list_changed; the next turn's search finds it, with nothing restarted."""
    script = [
        Turn(calls=[(SEARCH_TOOL, {"query": "grown at run time"})]),
        Turn(calls=[("c_grow", {"name": "teleporter"})]),
        Turn("grown"),
        Turn(calls=[(SEARCH_TOOL, {"query": "grown at run time"})]),
        Turn("found"),
    ]
    with ScriptedModelServer(script) as api:
        model = model_for("anthropic", api, monkeypatch)
        async with many_tools.many_tools_host() as host:
            client = Client(serve_command(COUNTING), name="c")
            await client.connect()
            host.register(client)
            heard: list[str] = []
            host.add_listener(lambda server, kind: heard.append(kind))
            loop, conversation = ModelLoop(host, model), Conversation()
            before = [e async for e in loop.run(conversation, "grow a teleporter")]
            await until(lambda: "tools" in heard, "the list_changed of the grown tool")
            await asyncio.sleep(0)
            after = [e async for e in loop.run(conversation, "what was grown?")]

    def found(events: list[Any]) -> list[str]:
        [searched] = [e for e in events if isinstance(e, ToolResultEvent) and e.name == SEARCH_TOOL]
        structured: Any = searched.result.structured_content
        return [t["name"] for t in structured["tools"]]

    assert "c_teleporter" not in found(before)
    assert found(after)[0] == "c_teleporter"
    assert "c_teleporter" in offered("anthropic", api.requests[4].body)


def test_words_of_any_script_are_searched() -> None:
    tools = catalog_tools() | {"meteo_prevision": tool("meteo_prevision", "Prévision météo pour une ville")}
    search = ToolSearch()
    search.offer(Conversation(), tools)
    assert [t.name for t in search.search("la météo à Lyon", 1)] == ["meteo_prevision"]


def test_found_and_used_tools_stay_within_the_budget() -> None:
    tools = catalog_tools()
    conversation = Conversation()
    calls = tuple(ToolCall(str(i), name, {}) for i, name in enumerate(list(tools)[:30]))
    conversation.add_assistant(AssistantMessage(tool_calls=calls))
    shown = ToolSearch(ToolBudget(max_tools=10)).offer(conversation, tools)
    assert len(shown) == 10 and shown[0].name == SEARCH_TOOL
    assert [t.name for t in shown[1:]] == [c.name for c in calls[:9]]  # the model's order within one turn


def test_within_the_budget_search_still_answers_code_that_asks() -> None:
    tools = {name: t for name, t in catalog_tools().items() if name.startswith("weather_")}
    search = ToolSearch()
    assert len(search.offer(Conversation(), tools)) == 25  # no search tool shown
    assert search.search("will it rain tomorrow", 1)[0].name == "weather_get_forecast"
    assert search.answer(ToolCall("s", SEARCH_TOOL, {"query": "rain"})) is None  # not shown: the loop says no such tool
