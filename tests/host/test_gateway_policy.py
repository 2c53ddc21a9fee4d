"""The approval policy at the host's and the gateway's seams (issues 20 and 22).

- "Always" holds for the client that answered it: over HTTP two sessions of the gateway
  are two clients; over stdio each gateway process's client is one (and with a shared
  ``approvalStore`` one client's "always" is not written for the next); a server with
  ``"alwaysScope": "shared"`` opts into one "always" for every client.
- ``readOnlyHint`` is a claim of the server: it lets a tool run unasked only on a server
  configured ``"trusted": true``.
- The policy covers resources (and templates) and prompts: a server at "deny" offers
  none, ``"resources"``/``"prompts"`` globs hide others; hidden ones are not listed and
  are refused when read or got, through the host and through the gateway (stdio, HTTP).
- ``Approvals.check`` returns a ``Verdict`` and is handed its asker; a store file nested
  too deeply is reported as corrupt, not raised at the next call.

Every gateway here is a real ``modelctx gateway`` process in front of real upstream
server processes; its clients are modelctx's own ``Client``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from modelctx import Client
from modelctx.auth import AccessToken
from modelctx.client import ClientHandlers
from modelctx.errors import MCPError
from modelctx.host import (
    ApprovalPolicy,
    ApprovalRequest,
    Approvals,
    Decision,
    Denied,
    GatewayUI,
    Host,
    HostConfig,
    HostConfigError,
    ScriptedUI,
    ServerRules,
    Verdict,
)
from modelctx.protocol.connection import ServerConnection
from modelctx.protocol.types.v2026_07_28 import Tool, ToolAnnotations
from tests.host.test_gateway import COUNTING, Person, _calls_reached, _text
from tests.interop.test_gateway import HttpGateway
from tests.support.wire import SAMPLE_SERVER, async_test

TRANSPORTS = ["stdio", "http"]


def _upstream(path: Path, **settings: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "modelctx", "serve", str(path)], **settings}


def _config(tmp_path: Path, *, store: Path | None = None, **servers: dict[str, Any]) -> Path:
    path = tmp_path / "mcp.json"
    data: dict[str, Any] = {"mcpServers": servers}
    if store is not None:
        data["approvalStore"] = str(store)
    path.write_text(json.dumps(data))
    return path


def _stdio(config: Path, mode: str, handlers: ClientHandlers | None = None) -> Client:
    command = [sys.executable, "-m", "modelctx", "gateway", "--config", str(config)]
    return Client(command, mode=mode, handlers=handlers, timeout=30)


@asynccontextmanager
async def _http(config: Path) -> AsyncIterator[str]:
    """A ``modelctx gateway --http`` process for ``config``: its URL."""
    gateway = await asyncio.to_thread(HttpGateway, config)
    try:
        yield gateway.url
    finally:
        await asyncio.to_thread(gateway.stop)


def _asking(person: Person) -> ClientHandlers:
    return ClientHandlers(elicitation=person)


# -- 1. "always" is the answering client's -------------------------------------------------------
@pytest.mark.parametrize("mode", ["handshake", "auto"])
@async_test(90)
async def test_over_http_always_from_one_client_does_not_approve_another_client(tmp_path, mode):
    config = _config(tmp_path, counting=_upstream(COUNTING, approval="ask", trusted=True))
    person = Person("always")
    async with _http(config) as url:
        async with Client(url, mode=mode, handlers=_asking(person), timeout=30) as a, Client(
            url, mode=mode, timeout=30
        ) as b:
            assert _text(await a.call_tool("counting_echo", {"text": "a1"})) == "a1"
            before = await _calls_reached(b)
            # B (another session; it cannot even elicit) and A again, at the same time.
            refused, again = await asyncio.gather(
                b.call_tool("counting_echo", {"text": "b1"}), a.call_tool("counting_echo", {"text": "a2"})
            )
            after = await _calls_reached(b)

    assert refused.is_error is True and "cannot be asked" in _text(refused), _text(refused)
    assert _text(again) == "a2" and not again.is_error
    assert after == before + 2  # the first count and A's second call reached the server; B's did not
    if mode == "handshake":
        assert len(person.asked) == 1  # A's "always" held for A's session
    else:
        # 2026-07-28 over HTTP without authorization: nothing tells A from another client,
        # so its "always" counts as allow once and A is asked again.
        assert len(person.asked) == 2


@pytest.mark.parametrize("transport", TRANSPORTS)
@async_test(90)
async def test_always_scope_shared_opts_into_one_always_for_every_client(tmp_path, transport):
    store = tmp_path / "approvals.json"
    counting = _upstream(COUNTING, approval="ask", trusted=True, alwaysScope="shared")
    config = _config(tmp_path, store=store, counting=counting)
    person = Person("always")

    async def calls(a: Client, b: Client) -> None:
        assert _text(await a.call_tool("counting_echo", {"text": "a1"})) == "a1"
        served = await b.call_tool("counting_echo", {"text": "b1"})
        assert _text(served) == "b1" and not served.is_error

    if transport == "http":
        async with _http(config) as url:
            async with Client(url, mode="handshake", handlers=_asking(person), timeout=30) as a, Client(
                url, mode="handshake", timeout=30
            ) as b:
                await calls(a, b)
    else:
        async with _stdio(config, "auto", _asking(person)) as a:
            await a.call_tool("counting_echo", {"text": "warm"})  # A answers "always" here
            async with _stdio(config, "auto") as b:
                await calls(a, b)
    assert len(person.asked) == 1
    assert [entry["tool"] for entry in json.loads(store.read_text())["always"]] == ["echo"]


@async_test(90)
async def test_over_stdio_one_gateway_client_s_always_is_not_stored_for_the_next_client(tmp_path):
    # Two gateway processes on one approvalStore, each with its own stdio client, open at once.
    store = tmp_path / "approvals.json"
    config = _config(tmp_path, store=store, counting=_upstream(COUNTING, approval="ask", trusted=True))
    person = Person("always")
    async with _stdio(config, "auto", _asking(person)) as a:
        for word in ("one", "two"):
            assert _text(await a.call_tool("counting_echo", {"text": word})) == word
        async with _stdio(config, "handshake") as b:
            before = await _calls_reached(b)
            refused = await b.call_tool("counting_echo", {"text": "b"})
            after = await _calls_reached(b)

    assert len(person.asked) == 1  # A's "always" held for A's connection
    assert refused.is_error is True and "cannot be asked" in _text(refused)
    assert after == before + 1
    assert not store.exists() or json.loads(store.read_text())["always"] == []


def test_the_asker_of_a_gateway_call_is_its_principal_else_its_session_else_its_connection():
    ui = GatewayUI()
    ada = AccessToken(subject="ada", issuer="https://as.example", client_id="desk")
    eve = AccessToken(subject="eve", issuer="https://as.example", client_id="desk")
    first, second = SimpleNamespace(id="s-1"), SimpleNamespace(id="s-2")
    connection, another = ServerConnection(), ServerConnection()

    def scope(principal: Any = None, session: Any = None, connection: Any = None) -> str | None:
        return ui.client_scope(SimpleNamespace(principal=principal, session=session, connection=connection))  # type: ignore[arg-type]

    # One principal is one asker across its sessions; two principals are two.
    assert scope(ada, first) == scope(ada, second) != scope(eve, first)
    assert scope(None, first) != scope(None, second)
    assert scope(connection=connection) == scope(connection=connection) != scope(connection=another)
    assert scope() is None  # nothing tells this client from another


def test_always_scope_is_checked_when_the_configuration_is_read(tmp_path):
    with pytest.raises(HostConfigError, match="'alwaysScope' must be 'client'.* or 'shared'"):
        HostConfig.from_dict({"mcpServers": {"x": {"command": "x", "alwaysScope": "everyone"}}})
    with pytest.raises(HostConfigError, match="'trusted' must be true or false"):
        HostConfig.from_dict({"mcpServers": {"x": {"command": "x", "trusted": "yes"}}})


# -- 2. annotations of untrusted servers ------------------------------------------------------------
READ = Tool(name="weather", input_schema={"type": "object"}, annotations=ToolAnnotations(read_only_hint=True))


@pytest.mark.parametrize(
    ("approval", "trusted", "expected"),
    [
        (None, False, "ask"),  # the hint is the server's word: the server's default
        (None, True, "allow"),
        ("ask", False, "ask"),
        ({"readOnly": "allow"}, False, "ask"),  # even when the configuration names the level
        ({"default": "allow", "readOnly": "deny"}, False, "deny"),  # a stricter level still holds
        ({"default": "deny", "readOnly": "allow"}, False, "deny"),
        ({"default": "deny", "readOnly": "allow"}, True, "allow"),
    ],
)
def test_read_only_hint_counts_only_on_a_trusted_server(approval, trusted, expected):
    rules = ServerRules.parse(approval, server="weather", trusted=trusted)
    assert ApprovalPolicy({"weather": rules}).level("weather", READ) == expected


@pytest.mark.parametrize("trusted", [False, True])
@async_test(60)
async def test_through_the_gateway_a_read_only_tool_of_an_untrusted_server_is_asked_about(tmp_path, trusted):
    config = _config(tmp_path, counting=_upstream(COUNTING, approval="ask", trusted=trusted))
    async with _stdio(config, "auto") as gateway:  # it cannot elicit: an "ask" is refused
        result = await gateway.call_tool("counting_pid", {})

    if trusted:
        assert not result.is_error and json.loads(_text(result))["result"] > 0
    else:
        assert result.is_error is True and "'pid'" in _text(result) and "cannot be asked" in _text(result)


@async_test(60)
async def test_through_the_host_a_read_only_tool_of_an_untrusted_server_is_asked_about():
    ui = ScriptedUI([Decision.DENY])
    config = HostConfig.from_dict({"mcpServers": {"counting": _upstream(COUNTING)}})
    async with Host(config, ui=ui) as host:
        denied = await host.call_tool("counting_pid", {})

    assert denied.is_error and "was denied: it was not approved" in _text(denied)
    [asked] = ui.requests
    assert asked.tool.name == "pid" and asked.annotations is not None and asked.annotations.read_only_hint is True


# -- 3. resources and prompts ---------------------------------------------------------------------
HIDING = {
    "resources": {"deny": ["sample://greeting", "sample://items/*"]},
    "prompts": {"deny": ["rev*"]},
}


@async_test(60)
async def test_through_the_host_globs_hide_resources_templates_and_prompts_and_refuse_them():
    config = HostConfig.from_dict({"mcpServers": {"sample": _upstream(SAMPLE_SERVER, **HIDING)}})
    async with Host(config) as host:
        uris = {resource.uri for _, resource in await host.resources()}
        templates = [template.uri_template for _, template in await host.resource_templates()]
        prompts = {prompt.name for prompt in await host.prompts()}
        with pytest.raises(Denied, match="'sample://greeting' of server 'sample' is denied by the configuration"):
            await host.read_resource("sample://greeting")
        with pytest.raises(Denied, match="'sample://items/apple'"):
            await host.read_resource("sample://items/apple", server="sample")
        with pytest.raises(Denied, match="prompt 'review'"):
            await host.get_prompt("sample_review", {"code": "x"})
        logo = await host.read_resource("sample://logo.png")

    assert "sample://greeting" not in uris and "sample://logo.png" in uris
    assert templates == []
    assert not any(name.endswith("review") for name in prompts)
    assert logo.contents


@async_test(60)
async def test_through_the_host_a_server_at_deny_offers_no_resources_and_no_prompts():
    config = HostConfig.from_dict({"mcpServers": {"sample": _upstream(SAMPLE_SERVER, approval="deny")}})
    async with Host(config) as host:
        assert await host.tools() == []
        assert await host.resources() == []
        assert await host.resource_templates() == []
        assert await host.prompts() == []
        with pytest.raises(Denied, match="denied by the configuration"):
            await host.read_resource("sample://greeting", server="sample")
        with pytest.raises(Denied):
            await host.get_prompt("sample_review", {"code": "x"})


@asynccontextmanager
async def _gateway_client(config: Path, transport: str, mode: str) -> AsyncIterator[Client]:
    if transport == "stdio":
        async with _stdio(config, mode) as client:
            yield client
        return
    async with _http(config) as url, Client(url, mode=mode, timeout=30) as client:
        yield client


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@pytest.mark.parametrize("transport", TRANSPORTS)
@async_test(90)
async def test_through_the_gateway_denied_resources_and_prompts_are_not_listed_and_refused(tmp_path, transport, mode):
    config = _config(tmp_path, sample=_upstream(SAMPLE_SERVER, **HIDING), whole=_upstream(SAMPLE_SERVER, approval="deny"))
    async with _gateway_client(config, transport, mode) as gateway:
        uris = [resource.uri for resource in await gateway.resources()]
        templates = await gateway.resource_templates()
        prompts = [prompt.name for prompt in await gateway.prompts()]
        tools = [tool.name for tool in await gateway.tools()]
        refusals = []
        for uri in ("sample://greeting", "sample://items/apple"):
            with pytest.raises(MCPError) as refused:
                await gateway.read_resource(uri)
            refusals.append(str(refused.value))
        with pytest.raises(MCPError) as prompt_refused:
            await gateway.get_prompt("sample_review", {"code": "x"})
        with pytest.raises(MCPError) as whole_refused:
            await gateway.get_prompt("whole_review", {"code": "x"})
        logo = await gateway.read_resource("sample://logo.png")

    # "whole" (at deny) offers nothing; "sample" everything its globs leave.
    assert uris == ["sample://logo.png"]
    assert templates == []
    assert prompts == []
    assert tools and all(name.startswith("sample_") for name in tools)
    assert all("denied by the configuration" in text for text in refusals), refusals
    assert "denied by the configuration" in str(prompt_refused.value)
    assert "denied by the configuration" in str(whole_refused.value)
    assert logo.contents


@async_test(60)
async def test_through_the_gateway_a_denied_prompt_is_not_completed(tmp_path):
    config = _config(tmp_path, sample=_upstream(SAMPLE_SERVER, prompts={"deny": ["review"]}))
    async with _stdio(config, "auto") as gateway:
        with pytest.raises(MCPError, match="denied by the configuration"):
            await gateway.complete({"type": "ref/prompt", "name": "sample_review"}, "language", "py")
    config = _config(tmp_path, sample=_upstream(SAMPLE_SERVER, resources={"deny": ["sample://items/*"]}))
    async with _stdio(config, "auto") as gateway:
        with pytest.raises(MCPError, match="Unknown resource or template"):
            await gateway.complete({"type": "ref/resource", "uri": "sample://items/{id}"}, "id", "a")


# -- 4. the Verdict, its asker, and a store nested too deeply ----------------------------------------
class Spec:
    identity = "python weather.py"
    approval = "ask"


class Weather:
    name = "weather"
    spec = Spec()


class Asker:
    def __init__(self, scope: str | None, answer: Decision | Verdict) -> None:
        self.scope = scope
        self.answer = answer
        self.asked: list[ApprovalRequest] = []

    async def approve(self, request: ApprovalRequest) -> Decision | Verdict:
        self.asked.append(request)
        return self.answer


WRITE = Tool(name="delete_file", input_schema={"type": "object"})


@async_test()
async def test_check_returns_a_verdict_and_always_holds_for_its_asker_only():
    approvals = Approvals(ApprovalPolicy(), ScriptedUI())  # the host's own UI is never asked here
    ada, eve = Asker("ada", Decision.ALWAYS), Asker("eve", Verdict(False, "eve's client cannot be asked"))

    first = await approvals.check(Weather(), WRITE, {}, asker=ada)
    again = await approvals.check(Weather(), WRITE, {}, asker=ada)
    other = await approvals.check(Weather(), WRITE, {}, asker=eve)
    nobody = await approvals.check(Weather(), WRITE, {}, asker=Asker(None, Decision.ALWAYS))

    assert first == Verdict(True, "it was allowed always", Decision.ALWAYS, "ada") and first
    assert again.allowed and again.scope == "ada" and len(ada.asked) == 1
    assert other == Verdict(False, "eve's client cannot be asked", Decision.DENY) and not other
    assert nobody.allowed and nobody.scope is None and "allow once" in nobody.reason
    assert await approvals.remembered() == []  # nothing of the shared scope, nothing stored


@async_test()
async def test_without_an_asker_the_host_ui_is_asked_and_its_always_is_the_shared_one(tmp_path):
    ui = ScriptedUI([Decision.ALWAYS])
    approvals = Approvals(ApprovalPolicy(), ui, store=tmp_path / "approvals.json")
    verdict = await approvals.check(Weather(), WRITE, {})
    assert verdict == Verdict(True, "it was allowed always", Decision.ALWAYS, "")
    assert await approvals.remembered() == [("python weather.py", "delete_file")]
    # An asker of a client scope does not inherit it.
    assert not await approvals.check(Weather(), WRITE, {}, asker=Asker("ada", Decision.DENY))


@pytest.mark.parametrize("text", ["[" * 200_000, '{"version": 1, "always": [' + '{"a": ' * 100_000])
@async_test()
async def test_a_store_nested_too_deeply_is_reported_corrupt_and_replaced_on_the_next_always(tmp_path, text):
    path = tmp_path / "approvals.json"
    path.write_text(text)
    path.chmod(0o600)
    ui = ScriptedUI([Decision.ALWAYS])
    approvals = Approvals(ApprovalPolicy(), ui, store=path)

    assert await approvals.check(Weather(), WRITE, {})

    [notice] = ui.notices
    assert "not a modelctx approvals file" in notice and "nested too deeply" in notice
    assert json.loads(path.read_text())["always"][0]["tool"] == "delete_file"
    assert (tmp_path / "approvals.json.corrupt").read_text() == text
