"""What reaches the model, and who may call a tool: servers' instructions in the system
prompt, servers' sampling parameters, the provider the flags and environment choose, and
the routing handle that cannot skip approval. The real ``anthropic`` and ``openai`` SDKs
talk to a scripted model API on 127.0.0.1 (tests/support/model_server.py); the servers are real
MCP servers on stdio behind a real ``Host``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.model_server import ScriptedModelServer, Turn
from tests.support.paths import SERVERS
from tests.support.wire import async_test

pytest.importorskip("anthropic")
pytest.importorskip("openai")

from modelctx.host import Host, HostConfig, ServerSpec  # noqa: E402
from modelctx.host._anthropic import DEFAULT_ANTHROPIC_MODEL, AnthropicModel  # noqa: E402
from modelctx.host._model import (  # noqa: E402
    INSTRUCTIONS_IN_ALL,
    INSTRUCTIONS_PER_SERVER,
    TRUNCATED,
    Conversation,
    Final,
    Model,
    ModelLoop,
    ModelSetupError,
    sample,
    server_instructions,
)
from modelctx.host._openai import OpenAIModel  # noqa: E402
from modelctx.host._providers import NO_KEY_MESSAGE, choose_model, describe_model  # noqa: E402
from modelctx.protocol.types.v2026_07_28 import CallToolResult  # noqa: E402

INSTRUCTED = SERVERS / "instructed_server.py"
TOOLS_SERVER = SERVERS / "model_tools_server.py"
PROVIDERS = ["anthropic", "openai"]


def served(name: str, target: Path, instructions: str | None = None, **settings: Any) -> ServerSpec:
    env = {"MODELCTX_TEST_INSTRUCTIONS": instructions} if instructions is not None else {}
    settings.setdefault("approval", "allow")
    return ServerSpec(name, command=sys.executable, args=("-m", "modelctx", "serve", str(target)), env=env, **settings)


def model_for(provider: str, api: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch) -> Model:
    """A model configured the way a user configures it: from the environment."""
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "MODELCTX_MODEL"):
        monkeypatch.delenv(name, raising=False)
    if provider == "anthropic":
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-anthropic")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        return AnthropicModel()
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-openai")
    monkeypatch.setenv("OPENAI_BASE_URL", api.url + "/v1")
    return OpenAIModel(model="scripted-model")


def system_sent(provider: str, body: dict[str, Any]) -> str | None:
    if provider == "anthropic":
        return body.get("system")
    first = body["messages"][0]
    return first["content"] if first["role"] == "system" else None


def text(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


# -- servers' instructions ---------------------------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
@async_test(60)
async def test_each_servers_instructions_reach_the_model_in_the_system_prompt_labelled_and_bounded(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    long = "Always cite the page. " * 200  # 4,400 characters: past the bound of one server
    config = HostConfig(
        {
            "alpha": served("alpha", INSTRUCTED, "Use alpha for questions about invoices."),
            "beta": served("beta", INSTRUCTED, long),
            "plain": served("plain", TOOLS_SERVER),  # gives no instructions: nothing about it
        }
    )
    with ScriptedModelServer([Turn("ok")]) as api:
        model = model_for(provider, api, monkeypatch)
        conversation = Conversation(system="Be brief.")
        async with Host(config) as host:
            events = [e async for e in ModelLoop(host, model).run(conversation, "hi")]

    assert events[-1] == Final("ok", "answered", 1)
    system = system_sent(provider, api.requests[0].body)
    assert system is not None and system.startswith("Be brief.\n\n")
    assert '<server-instructions server="alpha">\nUse alpha for questions about invoices.\n</server-instructions>' in system
    beta = system[system.index('server="beta"') :]
    beta = beta[: beta.index("</server-instructions>")]
    assert TRUNCATED in beta and len(beta) <= INSTRUCTIONS_PER_SERVER + 40
    assert 'server="plain"' not in system
    assert conversation.system == "Be brief."  # the person's prompt is not rewritten


def test_servers_instructions_in_all_are_bounded_and_marked_where_cut() -> None:
    many = {f"s{i}": "x" * 5000 for i in range(10)}
    block = server_instructions(many)
    assert len(block) <= INSTRUCTIONS_IN_ALL and block.endswith(TRUNCATED)
    assert server_instructions({}) == ""


# -- servers' sampling requests ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("provider", "hint", "listed", "expected"),
    [
        ("anthropic", "opus", ["claude-haiku-4-5", "claude-opus-4-1"], "claude-opus-4-1"),
        ("anthropic", "gpt-4o", ["claude-haiku-4-5"], DEFAULT_ANTHROPIC_MODEL),  # a hint it has none of
        ("openai", "gpt-4.1", ["gpt-4o-mini", "gpt-4.1-mini", "gpt-4.1"], "gpt-4.1"),  # exact beats substring
        ("openai", "claude", None, "scripted-model"),  # no model list at that endpoint: the chat's model
    ],
)
@async_test(60)
async def test_a_sampling_request_reaches_the_model_with_its_parameters_and_its_hinted_model(
    provider: str, hint: str, listed: list[str] | None, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedModelServer([Turn("a, b and c")], models=listed) as api:
        model = model_for(provider, api, monkeypatch)

        async def answer(server: str, params: dict[str, Any]) -> dict[str, Any]:
            return await sample(model, params)

        async with Host(HostConfig({"ask": served("ask", INSTRUCTED)}), sample=answer) as host:
            result = await host.call_tool("ask_ask", {"question": "Sum up: a b c", "hint": hint})

    assert not result.is_error, text(result)
    answered = json.loads(text(result))
    assert answered["content"]["text"] == "a, b and c"
    assert answered["model"] == expected and answered["stopReason"] == "endTurn"
    [request] = [r for r in api.requests if r.path.endswith(("/messages", "/completions"))]
    body = request.body
    assert body["model"] == expected
    assert system_sent(provider, body) == "You are a terse summarizer."
    if provider == "anthropic":
        assert body["max_tokens"] == 77 and body["stop_sequences"] == ["END", "STOP"]
        # The Messages API of anthropic 2.x (version 2026-10-21) answers 400 to a temperature.
        assert "temperature" not in body
    else:
        assert body["max_completion_tokens"] == 77 and body["stop"] == ["END", "STOP"]
        assert body["temperature"] == 0.25
    assert "tools" not in body


# -- which provider, which model ------------------------------------------------------------------
def clean(monkeypatch: pytest.MonkeyPatch, **values: str) -> dict[str, str]:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "MODELCTX_MODEL", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def test_with_both_keys_set_anthropic_is_used_and_the_banner_says_how_to_choose(monkeypatch: pytest.MonkeyPatch) -> None:
    env = clean(monkeypatch, ANTHROPIC_API_KEY="a", OPENAI_API_KEY="o")
    chosen = choose_model(None, None, env)
    assert isinstance(chosen, AnthropicModel)
    line = describe_model(chosen)
    assert line.startswith(f"{DEFAULT_ANTHROPIC_MODEL} (Anthropic at https://api.anthropic.com")
    assert "both ANTHROPIC_API_KEY and OPENAI_API_KEY are set" in line and "--provider openai" in line


def test_with_both_keys_set_a_model_name_that_is_clearly_one_providers_picks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    env = clean(monkeypatch, ANTHROPIC_API_KEY="a", OPENAI_API_KEY="o", MODELCTX_MODEL="gpt-4o")
    chosen = choose_model(None, None, env)
    assert isinstance(chosen, OpenAIModel) and chosen.model == "gpt-4o"
    assert "gpt-4o is an OpenAI-compatible model" in describe_model(chosen)
    assert isinstance(choose_model(None, "claude-opus-4-1", env), AnthropicModel)


@pytest.mark.parametrize(
    ("provider", "value", "names"),
    [
        ("anthropic", "gpt-4o", "an OpenAI-compatible model"),
        ("anthropic", "llama3.1", "not an Anthropic model"),
        ("openai", "claude-sonnet-4-5", "an Anthropic model"),
    ],
)
def test_modelctx_model_of_another_provider_is_an_error_that_names_it(
    provider: str, value: str, names: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = clean(monkeypatch, ANTHROPIC_API_KEY="a", OPENAI_API_KEY="o", MODELCTX_MODEL=value)
    with pytest.raises(ModelSetupError) as raised:
        choose_model(provider, None, env)
    message = str(raised.value)
    assert f"MODELCTX_MODEL={value} is {names}" in message and "--model" in message
    assert "model=" not in message.replace("MODELCTX_MODEL=", "")  # CLI words, not Python arguments
    assert choose_model(provider, "explicit-name", env).model == "explicit-name"  # type: ignore[attr-defined]


def test_a_local_model_name_applies_to_the_openai_compatible_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    env = clean(monkeypatch, OPENAI_API_KEY="o", MODELCTX_MODEL="llama3.1", OPENAI_BASE_URL="http://127.0.0.1:11434/v1")
    chosen = choose_model(None, None, env)
    assert isinstance(chosen, OpenAIModel) and chosen.model == "llama3.1"
    assert describe_model(chosen) == "llama3.1 (OpenAI-compatible at http://127.0.0.1:11434/v1)"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_provider_named_without_its_key_says_the_key_is_missing_first(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
    env = clean(monkeypatch)  # no key and no model name: the key is what it says
    with pytest.raises(ModelSetupError) as raised:
        choose_model(provider, None, env)
    assert str(raised.value).startswith(f"--provider {provider} needs {key}: export {key}=")
    # The API path too: OpenAIModel() without a key names the key, not the model.
    if provider == "openai":
        with pytest.raises(ModelSetupError, match="OPENAI_API_KEY is not set"):
            OpenAIModel()


def test_the_openai_compatible_provider_without_a_model_name_says_which_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    env = clean(monkeypatch, OPENAI_API_KEY="o")
    with pytest.raises(ModelSetupError, match="pass --model NAME or export MODELCTX_MODEL=NAME"):
        choose_model("openai", None, env)
    with pytest.raises(ModelSetupError) as raised:
        choose_model(None, None, clean(monkeypatch))
    assert str(raised.value) == NO_KEY_MESSAGE


# -- the routing handle cannot skip approval -----------------------------------------------------
@async_test(60)
async def test_the_client_find_client_for_hands_out_asks_approval_before_every_call() -> None:
    """``host.find_client_for(name)`` then ``call_tool`` was a way around approval; now
    the handle's ``call_tool`` is the host's guarded call, and the raw client is reachable
    only as ``unguarded_client``."""
    from modelctx import Client
    from modelctx.host import GuardedClient

    asked: list[str] = []

    class DenyWrites:
        def hidden(self, server: Any, tool: Any) -> bool:
            return False

        async def check(self, server: Any, tool: Any, arguments: dict[str, Any]) -> bool:
            asked.append(tool.name)
            return tool.name != "remember"

    config = HostConfig({"notes": served("notes", TOOLS_SERVER)})
    async with Host(config, approvals=DenyWrites()) as host:
        await host.tools()
        handle, original = host.find_client_for("notes_remember")
        assert isinstance(handle, GuardedClient) and handle.name == "notes" and original == "remember"
        denied = await handle.call_tool(original, {"note": "sneaked"})
        looked = await host.find_client_for("notes_lookup")[0].call_tool("lookup", {"key": "k", "wait_for": 1})
        # The handle also understands a name built by hand, and still asks.
        by_hand, own = host.find_client_for("notes_remember")
        again = await by_hand.call_tool(own, {"note": "again"})
        raw = handle.unguarded_client
        assert isinstance(raw, Client)
        written = json.loads(text(await raw.call_tool("remember", {"note": "decided elsewhere"})))

    assert denied.is_error and "denied" in text(denied) and "it was not run" in text(denied)
    assert again.is_error
    assert not looked.is_error and json.loads(text(looked))["key"] == "k"
    assert asked == ["remember", "lookup", "remember"]
    assert written["count"] == 1  # neither denied call reached the server


def test_every_way_from_a_host_to_a_raw_client_is_named_unguarded() -> None:
    # Host.mcp_clients() handed out raw Clients under a plain name: a tool called through
    # one skipped approval. What reaches a raw client now says so in its name.
    raw_ways = sorted(name for name in dir(Host) if "client" in name.lower() and not name.startswith("_"))
    assert raw_ways == ["find_client_for", "unguarded_clients"]
