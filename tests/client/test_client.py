"""``modelctx.Client`` against our own servers: in-process ``Server`` objects and real subprocesses.

Each test states one requirement of the client (the issue's list, and the spec pages it
cites) and checks it through the public API only: ``Client``, its typed results, its
cache, its handlers and ``listen``. Two small test doubles make the wire visible:
``Recording`` wraps any transport and keeps every message each way, and a server
middleware records what the server was asked.

pytest-asyncio is not used: each test is an ``async def`` run by ``@run``, which gives
the whole test a deadline; every single wait inside has its own (``within``).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from modelctx import (
    CacheHint,
    Context,
    Elicit,
    ListRoots,
    Sample,
    Server,
    ServerConfig,
    ToolError,
    ToolResult,
)
from modelctx.client import (
    Client,
    ClientHandlers,
    ClientOptions,
    ClientTransport,
    Elicitation,
    InputRoundsExceeded,
    ListChanged,
    OutputSchemaViolation,
    RequestTimeout,
    ResourceUpdated,
)
from modelctx.errors import (
    ConnectionClosed,
    InvalidParams,
    LocalError,
    MethodNotFound,
    MissingRequiredClientCapability,
    UnsendableMessage,
    UnsupportedProtocolVersion,
)
from modelctx.transports.memory import MemoryTransport
from tests.fixtures.servers.sample_server import LOGO_PNG
from tests.support.wire import SAMPLE_SERVER, HttpServer, async_test, serve_command, until

DEADLINE = 10.0  # seconds any single wait may take
TEST_DEADLINE = 30.0  # seconds a whole test may take
MODERN, LEGACY = "2026-07-28", "2025-11-25"


# -- running async tests ------------------------------------------------------------------------
run = async_test(TEST_DEADLINE)  # a fresh loop and a deadline for each test


async def within(awaitable: Awaitable[Any], what: str, seconds: float = DEADLINE) -> Any:
    """The awaitable's result; the test fails if it takes longer than ``seconds``."""
    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        task.cancel()
        pytest.fail(f"timed out after {seconds:g}s waiting for {what}")
    return task.result()


# -- test doubles --------------------------------------------------------------------------------
class Recording(ClientTransport):
    """Any transport, with every message kept: ``sent`` (dicts) and ``received`` (messages).

    ``credential`` stands in for the credentials in use (the cache keys private entries
    by it); ``drop(id)`` breaks one request's stream the way a lost connection would.
    """

    def __init__(self, inner: ClientTransport, credential: str | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.kind = inner.kind
        self.credential = credential
        self.sent: list[dict[str, Any]] = []
        self.received: list[Any] = []

    async def connect(self, events: Any) -> None:
        self.events = events
        await self.inner.connect(self)

    # TransportEvents, forwarded to the session
    def message(self, message: Any) -> None:
        self.received.append(message)
        self.events.message(message)

    def request_failed(self, request_id: Any, exc: BaseException) -> None:
        self.events.request_failed(request_id, exc)

    def closed(self, exc: BaseException) -> None:
        self.events.closed(exc)

    async def send(self, outgoing: Any) -> None:
        self.sent.append(outgoing.message)
        await self.inner.send(outgoing)

    async def cancel(self, request_id: Any, reason: str | None = None) -> None:
        await self.inner.cancel(request_id, reason)

    async def close(self) -> None:
        await self.inner.close()

    def end_handshake_session(self) -> None:
        self.inner.end_handshake_session()

    def diagnostics(self) -> str:
        return self.inner.diagnostics()

    @property
    def credential_key(self) -> str | None:
        return self.credential

    async def drop(self, request_id: Any) -> None:
        await self.inner.cancel(request_id)
        self.events.request_failed(request_id, ConnectionClosed(f"{self.name}: the stream broke"))

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.sent if m.get("method") == method and "id" in m]

    def result_for(self, request_id: Any) -> dict[str, Any]:
        return next(m.result for m in self.received if getattr(m, "id", None) == request_id)


class Listener:
    """``client.listen(**filters)`` running in the background, its events in a queue."""

    def __init__(self, client: Client, **filters: Any) -> None:
        self.events: asyncio.Queue[Any] = asyncio.Queue()
        self.seen: list[Any] = []
        self.task = asyncio.ensure_future(self._run(client, filters))

    async def _run(self, client: Client, filters: dict[str, Any]) -> None:
        async for event in client.listen(**filters):
            self.seen.append(event)
            self.events.put_nowait(event)

    async def expect(self, wanted: Any, trigger: Callable[[], Awaitable[Any] | Any]) -> None:
        """Trigger until ``wanted`` arrives: the stream may not be open when the first
        trigger fires, and nothing is replayed to a stream opened later."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE
        while loop.time() < deadline:
            outcome = trigger()
            if asyncio.iscoroutine(outcome):
                await outcome
            stop = loop.time() + 0.3
            while (left := stop - loop.time()) > 0:
                if self.task.done():
                    self.task.result()  # the listen iterator failed: say why
                    pytest.fail("the listen iterator ended")
                try:
                    event = await asyncio.wait_for(self.events.get(), min(left, 0.05))
                except TimeoutError:
                    continue
                if event == wanted:
                    return
        pytest.fail(f"no {wanted} within {DEADLINE:g}s; got {self.seen}")

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.wait({self.task}, timeout=DEADLINE)


# -- the in-process server -------------------------------------------------------------------------
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
RAW_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}, "x-vendor": [1, 2]}},
    "properties": {"at": {"$ref": "#/$defs/point"}, "tags": {"type": "array", "items": {"type": "string"}}},
    "additionalProperties": False,
    "x-mcp-extra": {"kept": True},
}
COUNT_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def build_server(config: ServerConfig | None = None) -> tuple[Server, list[tuple[str, dict[str, Any]]]]:
    """A server with one tool, resource or prompt per behaviour under test, and the list
    of (method, params) it has been asked, in order."""
    asked: list[tuple[str, dict[str, Any]]] = []

    async def record(call: Any, call_next: Any) -> Any:
        asked.append((call.method, call.params))
        return await call_next(call)

    config = config or ServerConfig()
    config.middleware = [record, *config.middleware]
    server = Server("memory-server", version="9.9.9", instructions="For client tests.", config=config)

    @server.tool
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool
    def refuse() -> str:
        raise ToolError("refused on purpose")

    @server.tool(input_schema=RAW_SCHEMA)
    def shapes(**arguments: Any) -> str:
        return "ok"

    @server.tool(output_schema=COUNT_SCHEMA)
    def liar() -> ToolResult:
        return ToolResult(["seven"], structured={"n": "seven"})

    @server.tool(output_schema=COUNT_SCHEMA)
    def honest() -> ToolResult:
        return ToolResult(["7"], structured={"n": 7})

    @server.tool
    async def signup(ctx: Context) -> str:
        who = await ctx.elicit("What is your name?", NAME_FORM)
        if not who.accepted:
            return f"signup: {who.action}"
        login = await ctx.elicit_url("Please log in", "https://auth.example/login")
        return f"{who.content['name']} signed up; login {login.action}"

    @server.tool
    async def preferences(ctx: Context) -> str:
        form = {
            "type": "object",
            "properties": {"color": {"type": "string", "default": "blue"}, "size": {"type": "integer", "default": 3}},
        }
        answer = await ctx.elicit("Preferences?", form)
        return f"{answer.action} {sorted(answer.content.items())}"

    @server.tool
    async def ask_model(ctx: Context) -> str:
        answer = await ctx.sample("Say hi", max_tokens=20)
        return f"model {answer['model']} said {answer['content']['text']}"

    @server.tool
    async def where(ctx: Context) -> str:
        roots = await ctx.list_roots()
        return " ".join(root["uri"] for root in roots)

    @server.tool
    async def all_at_once(ctx: Context) -> str:
        answers = await ctx.ask(
            {"name": Elicit("Name?", NAME_FORM), "hello": Sample("Greet", max_tokens=5), "roots": ListRoots()}
        )
        return f"{answers['name'].content['name']}|{answers['hello']['content']['text']}|{len(answers['roots'])}"

    @server.tool
    async def forever(ctx: Context) -> str:
        round_number = 0
        while True:  # every answer brings another question
            await ctx.elicit(f"Question {round_number}?", NAME_FORM, key=f"q{round_number}")
            round_number += 1

    @server.tool
    async def progress(steps: int, ctx: Context, delay: float = 0.0) -> str:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
            await asyncio.sleep(delay)
        return f"done after {steps} steps"

    @server.tool
    async def stall(ctx: Context) -> str:
        await ctx.report_progress(1, None, "started")
        await asyncio.sleep(600)
        return "never"

    @server.tool
    async def sleepy(ctx: Context) -> str:
        server.started.set()
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:
            server.cancelled.set()
            raise
        return "never"

    @server.tool
    def bump(name: str) -> str:
        server.add_tool(lambda: "added", name=name, replace=True)
        return f"added {name}"

    @server.tool
    async def touch(uri: str, ctx: Context) -> str:
        ctx.resource_updated(uri)
        return f"touched {uri}"

    @server.resource("mem://greeting", mime_type="text/plain", cache=CacheHint(60_000))
    def greeting() -> str:
        return "hello"

    @server.resource("mem://other", mime_type="text/plain", cache=CacheHint(60_000))
    def other() -> str:
        return "other"

    @server.resource("mem://fleeting", cache=CacheHint(100))
    def fleeting() -> str:
        return "soon stale"

    @server.resource("mem://logo", mime_type="image/png")
    def logo() -> bytes:
        return LOGO_PNG

    @server.resource("mem://secret", cache=CacheHint(60_000))
    async def secret(ctx: Context) -> str:
        who = await ctx.elicit("Who wants the secret?", NAME_FORM)
        return f"secret for {who.content['name']}"

    @server.resource("mem://items/{id}", mime_type="text/plain")
    def item(id: str) -> str:
        return f"item {id}"

    @server.prompt
    def review(code: str, language: str = "python") -> str:
        """Ask for a code review."""
        return f"Review this {language}:\n{code}"

    @server.completion("review", "language")
    def languages(value: str, context: dict) -> list[str]:
        return [lang for lang in ("python", "perl", "rust") if lang.startswith(value)]

    server.started = asyncio.Event()
    server.cancelled = asyncio.Event()
    return server, asked


def methods(asked: list[tuple[str, dict[str, Any]]], method: str) -> list[dict[str, Any]]:
    return [params for m, params in asked if m == method]


class User:
    """The application's handlers: answers forms with ``name``, accepts URLs, fakes a model."""

    def __init__(self, name: str = "Ada", action: str = "accept") -> None:
        self.name = name
        self.action = action
        self.asked: list[Elicitation] = []
        self.sampled: list[dict[str, Any]] = []

    async def elicit(self, request: Elicitation) -> dict[str, Any]:
        self.asked.append(request)
        if self.action != "accept":
            return {"action": self.action}
        if request.mode == "url":
            return {"action": "accept"}
        return {"action": "accept", "content": {"name": self.name} if "name" in str(request.requested_schema) else {}}

    async def sample(self, params: dict[str, Any]) -> dict[str, Any]:
        self.sampled.append(params)
        return {"role": "assistant", "content": {"type": "text", "text": "hi!"}, "model": "fake-1"}

    async def roots(self) -> list[Any]:
        return ["file:///work/a", {"uri": "file:///work/b", "name": "b"}]

    def handlers(self) -> ClientHandlers:
        return ClientHandlers(elicitation=self.elicit, sampling=self.sample, roots=self.roots)


# -- typed results ---------------------------------------------------------------------------------
@run
async def test_every_client_method_returns_its_typed_result():
    server, _ = build_server()
    async with Client(server, timeout=DEADLINE) as client:
        discovered = await client.discover()
        tools = await client.list_tools()
        added = await client.call_tool("add", {"a": 2, "b": 40})
        text = await client.read_resource("mem://greeting")
        blob = await client.read_resource("mem://logo")
        templates = await client.list_resource_templates()
        prompt = await client.get_prompt("review", {"code": "x = 1"})
        completion = await client.complete({"type": "ref/prompt", "name": "review"}, "language", "p")

    assert discovered.supported_versions[0] == MODERN
    assert discovered.capabilities.tools.list_changed is True
    assert discovered.instructions == "For client tests."
    assert client.server_info == {"name": "memory-server", "version": "9.9.9"}
    assert [t.name for t in tools.tools] == [t["name"] for t in server.tools]
    assert tools.tools[0].description == "Echo the text back."
    assert added.content[0].text == '{"result":42}'
    assert (added.structured_content, added.result_type) == ({"result": 42}, "complete")
    assert text.contents == [{"uri": "mem://greeting", "mimeType": "text/plain", "text": "hello"}]
    assert base64.b64decode(blob.contents[0]["blob"]) == LOGO_PNG
    assert [t.uri_template for t in templates.resource_templates] == ["mem://items/{id}"]
    assert [(m.role, m.content.text) for m in prompt.messages] == [("user", "Review this python:\nx = 1")]
    assert prompt.description == "Ask for a code review."
    assert completion.completion.values == ["python", "perl"]


@run
async def test_a_tool_error_is_a_result_with_is_error_not_an_exception():
    server, _ = build_server()
    async with Client(server, timeout=DEADLINE) as client:
        refused = await client.call_tool("refuse")

    assert refused.is_error is True
    assert refused.content[0].text == "refused on purpose"


@run
async def test_a_server_error_is_raised_as_the_matching_exception():
    server, _ = build_server()
    async with Client(server, timeout=DEADLINE) as client:
        with pytest.raises(InvalidParams) as caught:
            await client.read_resource("mem://nothing")

    assert caught.value.code == -32602 and caught.value.remote is True
    assert "mem://nothing" in str(caught.value)


@run
async def test_handshake_era_results_are_typed_the_same_way():
    server, _ = build_server()
    async with Client(server, mode="handshake", timeout=DEADLINE) as client:
        added = await client.call_tool("add", {"a": 1, "b": 2})
        text = await client.read_resource("mem://greeting")
        prompts = await client.prompts()

    assert client.protocol_version == LEGACY and client.modern is False
    assert client.server_info == {"name": "memory-server", "version": "9.9.9"}
    assert (added.structured_content, added.result_type) == ({"result": 3}, "complete")
    assert text.contents[0]["text"] == "hello"
    assert [p.name for p in prompts] == ["review"]


# -- JSON schemas -----------------------------------------------------------------------------------
@run
async def test_tool_schemas_are_kept_exactly_as_the_server_gave_them():
    server, _ = build_server()
    async with Client(server, timeout=DEADLINE) as client:
        tools = {tool.name: tool for tool in await client.tools()}

    assert tools["shapes"].input_schema == RAW_SCHEMA
    assert tools["liar"].output_schema == COUNT_SCHEMA


@run
async def test_structured_content_is_validated_against_the_declared_output_schema():
    server, _ = build_server()
    async with Client(server, timeout=DEADLINE) as client:
        await client.tools()  # the client learns output schemas from tools/list
        honest = await client.call_tool("honest")
        with pytest.raises(OutputSchemaViolation) as caught:
            await client.call_tool("liar")

    assert honest.structured_content == {"n": 7}
    message = str(caught.value)
    assert "memory-server" in message and "'liar'" in message and "at n" in message


@run
async def test_output_is_validated_even_before_the_tools_were_listed():
    """The client lists the tools itself to learn the outputSchema (server/tools.mdx)."""
    server, _ = build_server()
    async with Client(server, timeout=DEADLINE) as client:
        with pytest.raises(OutputSchemaViolation):
            await client.call_tool("liar")
        honest = await client.call_tool("honest")

    assert honest.structured_content == {"n": 7}


@run
async def test_output_validation_can_be_turned_off():
    server, _ = build_server()
    async with Client(server, timeout=DEADLINE, options=ClientOptions(validate_output=False)) as client:
        await client.tools()
        result = await client.call_tool("liar")

    assert result.structured_content == {"n": "seven"}


# -- pagination ---------------------------------------------------------------------------------------
@run
async def test_list_returns_one_page_and_the_all_pages_form_follows_every_cursor():
    server = Server("paged", config=ServerConfig(page_size=2))
    for n in range(5):
        server.add_tool(lambda: "x", name=f"tool_{n}")
        server.resource(f"paged://r{n}")(lambda: "r")
        server.prompt(lambda: "p", name=f"prompt_{n}")
    for n in range(3):
        server.resource(f"paged://t{n}/{{id}}")(lambda id: id)

    async with Client(server, timeout=DEADLINE) as client:
        first = await client.list_tools()
        second = await client.list_tools(first.next_cursor)
        tools = await client.tools()
        resources = await client.resources()
        templates = await client.resource_templates()
        prompts = await client.prompts()

    assert [t.name for t in first.tools] == ["tool_0", "tool_1"] and first.next_cursor
    assert [t.name for t in second.tools] == ["tool_2", "tool_3"]
    assert [t.name for t in tools] == [f"tool_{n}" for n in range(5)]
    assert [r.uri for r in resources] == [f"paged://r{n}" for n in range(5)]
    assert [t.uri_template for t in templates] == [f"paged://t{n}/{{id}}" for n in range(3)]
    assert [p.name for p in prompts] == [f"prompt_{n}" for n in range(5)]


# -- caching (server/utilities/caching.mdx) -----------------------------------------------------------------
@run
async def test_list_results_are_reused_until_their_ttl_ends():
    server, asked = build_server(ServerConfig(ttl_ms=60_000, page_size=4))
    async with Client(server, timeout=DEADLINE) as client:
        first = await client.tools()
        hits = client.cache.hits
        again = await client.tools()
        await client.discover()  # cached by the connect probe

    pages = -(-len(first) // 4)
    assert [t.name for t in again] == [t.name for t in first]
    assert len(methods(asked, "tools/list")) == pages  # the second listing never reached the server
    assert client.cache.hits == hits + pages + 1
    assert len(methods(asked, "server/discover")) == 1


@run
async def test_a_ttl_of_zero_means_the_result_is_not_reused():
    server, asked = build_server(ServerConfig(ttl_ms=0))
    async with Client(server, timeout=DEADLINE) as client:
        await client.list_tools()
        await client.list_tools()

    assert len(methods(asked, "tools/list")) == 2
    assert client.cache.hits == 0


@run
async def test_resources_read_is_cached_per_uri_by_its_own_hint_and_expires():
    server, asked = build_server()
    async with Client(server, timeout=DEADLINE) as client:
        for _ in range(3):
            await client.read_resource("mem://greeting")
        await client.read_resource("mem://fleeting")
        await asyncio.sleep(0.25)  # past its 100 ms TTL
        await client.read_resource("mem://fleeting")
        await client.read_resource("mem://logo")  # no hint: ttl 0
        await client.read_resource("mem://logo")

    reads = [params["uri"] for params in methods(asked, "resources/read")]
    assert reads.count("mem://greeting") == 1
    assert reads.count("mem://fleeting") == 2
    assert reads.count("mem://logo") == 2
    assert client.cache.hits == 2


@run
async def test_private_results_are_keyed_by_the_credentials_in_use():
    server, asked = build_server(ServerConfig(ttl_ms=60_000, cache_scope="private"))
    transport = Recording(MemoryTransport(server), credential="alice")
    async with Client(transport, timeout=DEADLINE) as client:
        await client.list_prompts()
        await client.list_prompts()  # alice again: reused
        transport.credential = "bob"
        await client.list_prompts()  # bob must not see alice's private result
        transport.credential = "alice"
        await client.list_prompts()

    assert len(methods(asked, "prompts/list")) == 2
    assert client.cache.hits == 2


@run
async def test_public_results_are_shared_across_credentials():
    server, asked = build_server(ServerConfig(ttl_ms=60_000, cache_scope="public"))
    transport = Recording(MemoryTransport(server), credential="alice")
    async with Client(transport, timeout=DEADLINE) as client:
        await client.list_prompts()
        transport.credential = "bob"
        await client.list_prompts()

    assert len(methods(asked, "prompts/list")) == 1


@run
async def test_list_changed_drops_the_cached_list_at_once_while_listening():
    server, asked = build_server(ServerConfig(ttl_ms=60_000))
    async with Client(server, timeout=DEADLINE) as client:
        before = {t.name for t in await client.tools()}
        listener = Listener(client, tools=True)
        await listener.expect(
            ListChanged("tools"), lambda: client.call_tool("bump", {"name": f"new_{len(server.tools)}"})
        )
        after = {t.name for t in await client.tools()}
        await listener.close()

    assert after - before and all(name.startswith("new_") for name in after - before)
    assert len(methods(asked, "tools/list")) == 2


@run
async def test_resource_updated_drops_only_that_resources_cached_read():
    server, asked = build_server()
    async with Client(server, timeout=DEADLINE) as client:
        await client.read_resource("mem://greeting")
        await client.read_resource("mem://other")
        listener = Listener(client, resource_uris=["mem://greeting"])
        await listener.expect(ResourceUpdated("mem://greeting"), lambda: server.resource_updated("mem://greeting"))
        await client.read_resource("mem://greeting")
        await client.read_resource("mem://other")
        await listener.close()

    reads = [params["uri"] for params in methods(asked, "resources/read")]
    assert reads == ["mem://greeting", "mem://other", "mem://greeting"]


@run
async def test_results_of_input_rounds_are_never_cached():
    server, asked = build_server()
    user = User()
    async with Client(server, timeout=DEADLINE, handlers=ClientHandlers(elicitation=user.elicit)) as client:
        first = await client.read_resource("mem://secret")
        second = await client.read_resource("mem://secret")

    assert first.contents[0]["text"] == second.contents[0]["text"] == "secret for Ada"
    assert len(methods(asked, "resources/read")) == 4  # two rounds, twice


# -- multi round-trip requests (basic/patterns/mrtr.mdx) ---------------------------------------------------
@pytest.mark.parametrize("mode", ["auto", "handshake"])
@run
async def test_form_and_url_elicitation_are_answered_by_the_application(mode):
    server, _ = build_server()
    user = User()
    async with Client(server, mode=mode, timeout=DEADLINE, handlers=ClientHandlers(elicitation=user.elicit)) as client:
        result = await client.call_tool("signup")

    assert result.content[0].text == "Ada signed up; login accept"
    form, url = user.asked
    assert (form.mode, form.message, form.requested_schema) == ("form", "What is your name?", NAME_FORM)
    assert (url.mode, url.message, url.url) == ("url", "Please log in", "https://auth.example/login")
    assert form.server == client.transport.name


@run
async def test_a_declined_elicitation_reaches_the_tool():
    server, _ = build_server()
    user = User(action="decline")
    async with Client(server, timeout=DEADLINE, handlers=ClientHandlers(elicitation=user.elicit)) as client:
        result = await client.call_tool("signup")

    assert result.content[0].text == "signup: decline"


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@run
async def test_an_accepted_form_gets_the_schema_defaults_for_fields_left_out(mode):
    server, _ = build_server()
    user = User()
    async with Client(server, mode=mode, timeout=DEADLINE, handlers=ClientHandlers(elicitation=user.elicit)) as client:
        result = await client.call_tool("preferences")

    assert result.content[0].text == "accept [('color', 'blue'), ('size', 3)]"


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@run
async def test_sampling_and_roots_are_answered_by_their_handlers(mode):
    server, _ = build_server()
    user = User()
    async with Client(server, mode=mode, timeout=DEADLINE, handlers=user.handlers()) as client:
        sampled = await client.call_tool("ask_model")
        roots = await client.call_tool("where")

    assert sampled.content[0].text == "model fake-1 said hi!"
    assert user.sampled[0]["maxTokens"] == 20
    assert user.sampled[0]["messages"] == [{"role": "user", "content": {"type": "text", "text": "Say hi"}}]
    assert roots.content[0].text == "file:///work/a file:///work/b"


@run
async def test_several_input_requests_are_answered_in_one_round():
    server, asked = build_server()
    user = User()
    async with Client(server, timeout=DEADLINE, handlers=user.handlers()) as client:
        result = await client.call_tool("all_at_once")

    assert result.content[0].text == "Ada|hi!|2"
    assert len(methods(asked, "tools/call")) == 2


@run
async def test_each_retry_has_a_new_id_and_echoes_request_state_unchanged():
    server, _ = build_server()
    transport = Recording(MemoryTransport(server))
    user = User()
    async with Client(transport, timeout=DEADLINE, handlers=ClientHandlers(elicitation=user.elicit)) as client:
        await client.call_tool("signup")

    calls = transport.requests("tools/call")
    assert len(calls) == 3
    assert len({call["id"] for call in calls}) == 3
    assert "requestState" not in calls[0]["params"]
    for earlier, retry in itertools.pairwise(calls):
        answered = transport.result_for(earlier["id"])
        assert answered["resultType"] == "input_required"
        assert retry["params"]["requestState"] == answered["requestState"]  # byte for byte
        assert set(retry["params"]["inputResponses"]) == set(answered["inputRequests"])
        assert retry["params"]["name"] == "signup"
        assert retry["params"].get("arguments") == calls[0]["params"].get("arguments")


@run
async def test_a_server_that_keeps_asking_is_stopped_after_max_rounds_with_a_clear_error():
    server, asked = build_server()
    user = User()
    handlers, options = ClientHandlers(elicitation=user.elicit), ClientOptions(max_rounds=3)
    async with Client(server, timeout=DEADLINE, handlers=handlers, options=options) as client:
        with pytest.raises(InputRoundsExceeded) as caught:
            await client.call_tool("forever")
        still_working = await client.call_tool("echo", {"text": "ok"})

    assert len(methods(asked, "tools/call")) == 1 + 3 + 1  # the first try, 3 rounds, then echo
    assert "memory-server" in str(caught.value) and "3 rounds" in str(caught.value)
    assert "tools/call" in str(caught.value)
    assert still_working.content[0].text == "ok"


@run
async def test_input_the_client_cannot_give_is_a_missing_capability_error():
    server, _ = build_server()
    async with Client(server, timeout=DEADLINE) as client:  # no elicitation handler
        with pytest.raises(MissingRequiredClientCapability) as caught:
            await client.call_tool("signup")

    assert caught.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}


@run
async def test_declaring_a_handler_is_what_declares_the_capability():
    server, asked = build_server()
    user = User()
    handlers = ClientHandlers(elicitation=user.elicit, sampling=user.sample)
    async with Client(server, timeout=DEADLINE, handlers=handlers) as client:
        await client.call_tool("echo", {"text": "x"})

    capabilities = methods(asked, "tools/call")[0]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert capabilities == {"elicitation": {"form": {}, "url": {}}, "sampling": {}}


ASKER = '''
"""A handshake-era server that asks the client for sampling and roots, declared or not."""
import json, sys

heard = open(sys.argv[1], "a")
for line in sys.stdin:
    heard.write(line)
    heard.flush()
    message = json.loads(line)
    if message.get("method") == "initialize":
        info = {"name": "asker", "version": "0"}
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": info}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
    elif message.get("method") == "tools/call":
        sampling = {"messages": [], "maxTokens": 5}
        ask = {"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage", "params": sampling}
        print(json.dumps(ask), flush=True)
        print(json.dumps({"jsonrpc": "2.0", "id": "r1", "method": "roots/list"}), flush=True)
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}}), flush=True)
'''


@run
async def test_a_server_request_the_client_has_no_handler_for_is_answered_method_not_found(tmp_path):
    asker, heard = tmp_path / "asker.py", tmp_path / "heard.jsonl"
    asker.write_text(ASKER)
    user = User()
    command = [sys.executable, str(asker), str(heard)]
    async with Client(command, mode="handshake", timeout=DEADLINE, handlers=ClientHandlers(roots=user.roots)) as client:
        await client.call_tool("anything")
        await until(lambda: '"id":"r1"' in heard.read_text() and '"id":"s1"' in heard.read_text(), "both answers")

    answers = {m["id"]: m for m in map(json.loads, heard.read_text().splitlines()) if m.get("id") in ("s1", "r1")}
    assert answers["r1"]["result"] == {"roots": [{"uri": "file:///work/a"}, {"uri": "file:///work/b", "name": "b"}]}
    assert answers["s1"]["error"]["code"] == -32601  # no sampling handler: the method is not available


# -- progress, cancellation and deadlines -----------------------------------------------------------------
@run
async def test_progress_updates_reach_the_callback_in_order():
    server, _ = build_server()
    updates: list[tuple[Any, ...]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async with Client(server, timeout=DEADLINE) as client:
        result = await client.call_tool("progress", {"steps": 3}, progress=on_progress)
        await until(lambda: len(updates) == 3, "three progress callbacks")

    assert result.content[0].text == "done after 3 steps"
    assert updates == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


@run
async def test_a_progress_update_extends_the_request_deadline():
    server, _ = build_server()
    async with Client(server, timeout=DEADLINE) as client:
        # 12 steps of 0.1 s: longer than the 0.6 s deadline, but progress keeps pushing it back.
        result = await client.call_tool("progress", {"steps": 12, "delay": 0.1}, progress=lambda *a: None, timeout=0.6)

    assert result.content[0].text == "done after 12 steps"


@run
async def test_progress_extends_by_the_requests_own_timeout_not_the_clients_default():
    server, _ = build_server()
    async with Client(server, timeout=60) as client:
        with pytest.raises(RequestTimeout):
            await within(client.call_tool("stall", progress=lambda *a: None, timeout=0.5), "the 0.5 s deadline")


@run
async def test_a_request_past_its_deadline_raises_request_timeout_and_is_cancelled_on_the_server():
    server, _ = build_server()
    async with Client(server, timeout=DEADLINE) as client:
        with pytest.raises(RequestTimeout) as caught:
            await within(client.call_tool("sleepy", timeout=0.3), "the 0.3 s deadline")
        await within(server.cancelled.wait(), "the server-side cancellation")
        after = await client.call_tool("echo", {"text": "still here"})

    assert "memory-server" in str(caught.value) and "tools/call" in str(caught.value)
    assert after.content[0].text == "still here"


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@run
async def test_cancelling_the_awaiting_task_cancels_the_request_on_the_server(mode):
    server, _ = build_server()
    async with Client(server, mode=mode, timeout=DEADLINE) as client:
        call = asyncio.ensure_future(client.call_tool("sleepy"))
        await within(server.started.wait(), "the tool to start")
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await within(server.cancelled.wait(), "the server-side cancellation")
        after = await client.call_tool("echo", {"text": "next"})

    assert after.content[0].text == "next"


# -- subscriptions (basic/patterns/subscriptions.mdx; resources/subscribe before it) -------------------------
@pytest.mark.parametrize("mode", ["auto", "handshake"])
@run
async def test_listen_yields_typed_events_for_what_was_asked_and_nothing_else(mode):
    server, _ = build_server()
    async with Client(server, mode=mode, timeout=DEADLINE) as client:
        listener = Listener(client, tools=True, prompts=True, resource_uris=["mem://greeting"])
        names = iter(range(1000))

        def tools_change() -> None:
            server.resource_updated("mem://other")  # not subscribed
            server.resource("mem://extra", replace=True)(lambda: "x")  # resources list: not asked for
            server.add_tool(lambda: "x", name=f"t{next(names)}")

        await listener.expect(ListChanged("tools"), tools_change)
        await listener.expect(ListChanged("prompts"), lambda: server.prompt(lambda: "p", name=f"p{next(names)}"))
        await listener.expect(
            ResourceUpdated("mem://greeting"), lambda: client.call_tool("touch", {"uri": "mem://greeting"})
        )
        await listener.close()

    assert ResourceUpdated("mem://other") not in listener.seen
    assert ListChanged("resources") not in listener.seen
    assert set(listener.seen) <= {ListChanged("tools"), ListChanged("prompts"), ResourceUpdated("mem://greeting")}


@run
async def test_a_dropped_listen_stream_is_opened_again():
    server, _ = build_server()
    transport = Recording(MemoryTransport(server))
    async with Client(transport, timeout=DEADLINE) as client:
        listener = Listener(client, tools=True)
        await listener.expect(ListChanged("tools"), lambda: server.add_tool(lambda: "x", name="first", replace=True))
        first = transport.requests("subscriptions/listen")[-1]["id"]
        await transport.drop(first)
        await until(lambda: len(transport.requests("subscriptions/listen")) >= 2, "a second subscriptions/listen")
        await listener.expect(ListChanged("tools"), lambda: server.add_tool(lambda: "x", name="second", replace=True))
        await listener.close()

    second = transport.requests("subscriptions/listen")[1]
    assert second["id"] != first
    assert second["params"]["notifications"] == {"toolsListChanged": True}


@run
async def test_a_listen_stream_outlives_the_clients_maximum_request_time_without_reopening():
    # A listen stream is open-ended: max_timeout bounds requests, not it. It was cut at
    # max_timeout (600 s) and opened again, and what changed in between was not heard.
    server, _ = build_server()
    transport = Recording(MemoryTransport(server))
    async with Client(transport, timeout=DEADLINE, options=ClientOptions(max_timeout=0.3)) as client:
        listener = Listener(client, tools=True)
        await listener.expect(ListChanged("tools"), lambda: server.add_tool(lambda: "x", name="first", replace=True))
        await asyncio.sleep(1.0)  # past max_timeout
        await listener.expect(ListChanged("tools"), lambda: server.add_tool(lambda: "x", name="later", replace=True))
        await listener.close()

    assert len(transport.requests("subscriptions/listen")) == 1


@run
async def test_a_listen_the_server_refuses_is_raised_not_retried():
    refuse = failing("subscriptions/listen", lambda c: MethodNotFound("Method not found"), times=99)
    server, asked = build_server(ServerConfig(middleware=[refuse]))
    async with Client(server, timeout=DEADLINE) as client:
        listener = Listener(client, tools=True)
        with pytest.raises(MethodNotFound):
            await within(listener.task, "the refusal")

    assert len(methods(asked, "subscriptions/listen")) == 1


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@run
async def test_closing_the_client_ends_an_open_listen_with_connection_closed(mode):
    server, _ = build_server()
    client = Client(server, mode=mode, timeout=DEADLINE)
    await client.connect()
    listener = Listener(client, tools=True)
    await listener.expect(ListChanged("tools"), lambda: server.add_tool(lambda: "x", name=f"t{len(server.tools)}"))
    await client.close()

    with pytest.raises(ConnectionClosed):
        await within(listener.task, "the listen iterator to end")


# -- era negotiation (basic/versioning.mdx, Backward Compatibility) -------------------------------------------
@run
async def test_auto_mode_probes_with_server_discover_and_stays_modern():
    server, _ = build_server()
    transport = Recording(MemoryTransport(server))
    async with Client(transport, timeout=DEADLINE) as client:
        await client.list_tools()

    assert [m["method"] for m in transport.sent] == ["server/discover", "tools/list"]
    assert client.protocol_version == MODERN and client.modern
    assert client.supported_versions[0] == MODERN


@run
async def test_a_pinned_version_sends_no_probe_and_carries_the_version_on_every_request():
    server, _ = build_server()
    transport = Recording(MemoryTransport(server))
    async with Client(transport, mode=MODERN, timeout=DEADLINE) as client:
        await client.call_tool("echo", {"text": "x"})

    assert [m["method"] for m in transport.sent] == ["tools/call"]
    assert transport.sent[0]["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN
    assert client.protocol_version == MODERN


@run
async def test_handshake_mode_uses_the_initialize_handshake():
    server, _ = build_server()
    transport = Recording(MemoryTransport(server))
    async with Client(transport, mode="handshake", timeout=DEADLINE) as client:
        await client.call_tool("echo", {"text": "x"})

    assert [m["method"] for m in transport.sent] == ["initialize", "notifications/initialized", "tools/call"]
    assert transport.sent[0]["params"]["protocolVersion"] == LEGACY
    # No modern envelope: only the progress token every request carries.
    assert transport.sent[2]["params"]["_meta"] == {"progressToken": transport.sent[2]["id"]}
    assert client.protocol_version == LEGACY


def test_a_handshake_version_cannot_be_pinned_and_the_error_says_what_to_use():
    server, _ = build_server()
    with pytest.raises(ValueError, match="mode='handshake'"):
        Client(server, mode=LEGACY)


def failing(method: str, error: Callable[[Any], BaseException] | None = None, times: int = 1) -> Any:
    """Server middleware: the first ``times`` requests for ``method`` fail with ``error``
    (or, without one, never answer)."""
    left = [times]

    async def middleware(call: Any, call_next: Any) -> Any:
        if call.method == method and left[0] > 0:
            left[0] -= 1
            if error is None:
                await asyncio.sleep(600)
            raise error(call)
        return await call_next(call)

    return middleware


@run
async def test_auto_mode_falls_back_to_initialize_when_discover_is_unknown():
    server, _ = build_server(ServerConfig(middleware=[failing("server/discover", lambda c: MethodNotFound("nope"))]))
    async with Client(server, timeout=DEADLINE) as client:
        result = await client.call_tool("echo", {"text": "old"})

    assert client.protocol_version == LEGACY and result.content[0].text == "old"


@run
async def test_auto_mode_falls_back_to_initialize_when_discover_gets_no_answer():
    server, _ = build_server(ServerConfig(middleware=[failing("server/discover")]))
    async with Client(server, timeout=DEADLINE, options=ClientOptions(probe_timeout=0.3)) as client:
        result = await client.call_tool("echo", {"text": "slow"})

    assert client.protocol_version == LEGACY and result.content[0].text == "slow"


@run
async def test_auto_mode_falls_back_when_discover_names_only_handshake_versions():
    unsupported = failing("server/discover", lambda c: UnsupportedProtocolVersion(c.version, [LEGACY, "2025-06-18"]))
    server, _ = build_server(ServerConfig(middleware=[unsupported]))
    async with Client(server, timeout=DEADLINE) as client:
        pass

    assert client.protocol_version == LEGACY


@run
async def test_unsupported_protocol_version_is_retried_with_a_version_from_data_supported():
    unsupported = failing("tools/call", lambda c: UnsupportedProtocolVersion(c.version, ["2099-01-01", MODERN]))
    server, _ = build_server(ServerConfig(middleware=[unsupported]))
    transport = Recording(MemoryTransport(server))
    async with Client(transport, mode=MODERN, timeout=DEADLINE) as client:
        result = await client.call_tool("echo", {"text": "again"})

    calls = transport.requests("tools/call")
    assert result.content[0].text == "again"
    assert len(calls) == 2 and calls[0]["id"] != calls[1]["id"]
    assert calls[1]["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN


@run
async def test_unsupported_protocol_version_with_no_common_version_is_raised_after_one_try():
    unsupported = failing("tools/call", lambda c: UnsupportedProtocolVersion(c.version, ["2099-01-01"]), times=5)
    server, asked = build_server(ServerConfig(middleware=[unsupported]))
    async with Client(server, mode=MODERN, timeout=DEADLINE) as client:
        with pytest.raises(UnsupportedProtocolVersion) as caught:
            await client.call_tool("echo", {"text": "x"})

    assert caught.value.data["supported"] == ["2099-01-01"]
    assert len(methods(asked, "tools/call")) == 1


# -- real subprocesses: the sample server over stdio and Streamable HTTP ----------------------------------------
@pytest.fixture(params=["stdio", "http"])
def sample_target(request) -> Any:
    if request.param == "stdio":
        return serve_command(SAMPLE_SERVER)
    return request.getfixturevalue("http_server").url


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@pytest.mark.parametrize(
    "arguments",
    [{"text": "\ud800"}, {"text": {"nested": object()}}],
    ids=["lone-surrogate", "no-json-type"],
)
@run
async def test_arguments_json_cannot_carry_are_refused_before_sending_and_the_connection_goes_on(
    sample_target, mode, arguments
):
    # A lone surrogate escaped as a raw UnicodeEncodeError from deep in a transport.
    async with Client(sample_target, mode=mode, timeout=DEADLINE) as client:
        with pytest.raises(UnsendableMessage, match=r"tools/call cannot be sent: its params are not JSON") as refused:
            await client.call_tool("echo", arguments)
        assert isinstance(refused.value, LocalError) and isinstance(refused.value, ValueError)
        assert (await client.call_tool("echo", {"text": "still here"})).content[0].text == "still here"


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@run
async def test_a_subprocess_server_answers_typed_results(sample_target, mode):
    async with Client(sample_target, mode=mode, timeout=DEADLINE) as client:
        tools = await client.tools()
        added = await client.call_tool("add", {"a": 20, "b": 22})
        logo = await client.read_resource("sample://logo.png")
        prompt = await client.get_prompt("review", {"code": "x", "language": "rust"})
        completion = await client.complete({"type": "ref/resource", "uri": "sample://items/{id}"}, "id", "b")

    assert client.protocol_version == (MODERN if mode == "auto" else LEGACY)
    assert client.server_info["name"] == "sample-server"
    assert "register" in [t.name for t in tools]
    assert added.structured_content == {"result": 42}
    assert base64.b64decode(logo.contents[0]["blob"]) == LOGO_PNG
    assert prompt.messages[0].content.text == "Please review this rust code:\nx"
    assert completion.completion.values == ["banana", "blueberry"]


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@run
async def test_a_subprocess_server_asks_through_the_handlers_in_either_era(sample_target, mode):
    async def elicit(request: Elicitation) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Grace"} if "name" in request.message else {"age": 85}}

    handlers = ClientHandlers(elicitation=elicit)
    async with Client(sample_target, mode=mode, timeout=DEADLINE, handlers=handlers) as client:
        result = await client.call_tool("register")

    assert result.content[0].text == "registered Grace, aged 85"


@run
async def test_a_subprocess_server_reports_progress(sample_target):
    updates: list[tuple[Any, ...]] = []
    async with Client(sample_target, timeout=DEADLINE) as client:
        result = await client.call_tool("progress", {"steps": 3}, progress=lambda *update: updates.append(update))

    assert result.content[0].text == "done after 3 steps"
    assert updates == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@run
async def test_cancelling_a_call_cancels_it_in_the_server_process(sample_target, mode, tmp_path):
    marker = tmp_path / "sleepy"
    async with Client(sample_target, mode=mode, timeout=DEADLINE) as client:
        call = asyncio.ensure_future(client.call_tool("sleepy", {"seconds": 60, "marker": str(marker)}))
        await until(lambda: Path(f"{marker}.started").exists(), "the tool to start")
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await until(marker.exists, "the server to cancel the tool")
        after = await client.call_tool("echo", {"text": "next"})

    assert marker.read_text() == "cancelled"
    assert after.content[0].text == "next"


@run
async def test_a_deadline_on_a_subprocess_call_raises_request_timeout_and_cancels_it(sample_target, tmp_path):
    marker = tmp_path / "sleepy"
    async with Client(sample_target, timeout=DEADLINE) as client:
        with pytest.raises(RequestTimeout) as caught:
            call = client.call_tool("sleepy", {"seconds": 60, "marker": str(marker)}, timeout=0.5)
            await within(call, "the deadline")
        await until(marker.exists, "the server to cancel the tool")

    assert client.transport.name in str(caught.value)


EVENTS_SERVER = '''
"""Changes its own lists on request, for the listen tests."""
from modelctx import Context, Server

server = Server("events-server")


@server.tool
async def bump(name: str) -> str:
    server.add_tool(lambda: "added", name=name, replace=True)
    return f"added {name}"


@server.tool
async def touch(uri: str, ctx: Context) -> str:
    ctx.resource_updated(uri)
    return f"touched {uri}"


@server.resource("events://watched")
def watched() -> str:
    return "watched"
'''


@pytest.fixture(scope="module")
def events_server(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("events") / "events_server.py"
    path.write_text(EVENTS_SERVER)
    return path


@pytest.fixture(scope="module")
def events_http(events_server, tmp_path_factory):
    with HttpServer(events_server, tmp_path_factory.mktemp("events-http") / "server.log") as server:
        yield server


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("mode", ["auto", "handshake"])
@run
async def test_listen_over_a_real_transport_in_either_era(events_server, transport, mode, request):
    target = serve_command(events_server) if transport == "stdio" else request.getfixturevalue("events_http").url
    names = (f"tool_{mode}_{transport}_{n}" for n in range(1000))
    async with Client(target, mode=mode, timeout=DEADLINE) as client:
        listener = Listener(client, tools=True, resource_uris=["events://watched"])
        await listener.expect(ListChanged("tools"), lambda: client.call_tool("bump", {"name": next(names)}))
        await listener.expect(
            ResourceUpdated("events://watched"), lambda: client.call_tool("touch", {"uri": "events://watched"})
        )
        await listener.close()
