"""The client's public surface: typed results, a constructor a reader can hold in their head,
and local errors that are never mistaken for the server's.

Results are checked with ``isinstance`` against the 2026-07-28 wire types through real
servers: an in-process ``Server`` in both eras, and the sample server as a subprocess over
stdio and over Streamable HTTP.
"""

from __future__ import annotations

import inspect
import sys
import typing
from typing import Any

import pytest

import modelctx
from modelctx import Client, ClientHandlers, ClientOptions, Server, ServerConfig
from modelctx.client import Elicitation, _client
from modelctx.errors import LocalError, MalformedResponse, ProtocolError
from modelctx.protocol.types import v2026_07_28 as wire
from tests.support.wire import SAMPLE_SERVER, async_test, serve_command

DEADLINE = 10.0
TEST_DEADLINE = 30.0
MODERN, LEGACY = "2026-07-28", "2025-11-25"


run = async_test(TEST_DEADLINE)  # a fresh loop and a deadline for each test


def catalogue(middleware: list[Any] | None = None) -> Server:
    server = Server("typed", instructions="typed results", config=ServerConfig(middleware=middleware or []))

    @server.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool
    async def name(ctx: modelctx.Context) -> str:
        answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return str(answer.content)

    @server.resource("mem://greeting", mime_type="text/plain")
    def greeting() -> str:
        return "hello"

    @server.resource("mem://items/{id}")
    def item(id: str) -> str:
        return id

    @server.prompt
    def review(code: str, language: str = "python") -> str:
        """Ask for a review."""
        return f"Review this {language}:\n{code}"

    @server.completion("review", "language")
    def languages(value: str, context: dict[str, str]) -> list[str]:
        return [lang for lang in ("python", "perl") if lang.startswith(value)]

    return server


# -- typed results ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["auto", "handshake"])
@run
async def test_every_method_returns_the_wire_type_of_its_result(mode):
    async with Client(catalogue(), mode=mode, timeout=DEADLINE) as client:
        results = {
            "list_tools": await client.list_tools(),
            "call_tool": await client.call_tool("add", {"a": 1, "b": 2}),
            "list_resources": await client.list_resources(),
            "list_resource_templates": await client.list_resource_templates(),
            "read_resource": await client.read_resource("mem://greeting"),
            "list_prompts": await client.list_prompts(),
            "get_prompt": await client.get_prompt("review", {"code": "x"}),
            "complete": await client.complete({"type": "ref/prompt", "name": "review"}, "language", "p"),
        }
        if mode == "auto":
            results["discover"] = await client.discover()
        tools, resources = await client.tools(), await client.resources()
        templates, prompts = await client.resource_templates(), await client.prompts()

    expected = {
        "list_tools": wire.ListToolsResult,
        "call_tool": wire.CallToolResult,
        "list_resources": wire.ListResourcesResult,
        "list_resource_templates": wire.ListResourceTemplatesResult,
        "read_resource": wire.ReadResourceResult,
        "list_prompts": wire.ListPromptsResult,
        "get_prompt": wire.GetPromptResult,
        "complete": wire.CompleteResult,
        "discover": wire.DiscoverResult,
    }
    for method, result in results.items():
        assert isinstance(result, expected[method]), (method, type(result))
    assert all(isinstance(tool, wire.Tool) for tool in tools) and tools
    assert all(isinstance(resource, wire.Resource) for resource in resources) and resources
    assert all(isinstance(template, wire.ResourceTemplate) for template in templates) and templates
    assert all(isinstance(prompt, wire.Prompt) for prompt in prompts) and prompts
    assert results["call_tool"].structured_content == {"result": 3}


@pytest.fixture(params=["stdio", "http"])
def sample_target(request) -> Any:
    if request.param == "stdio":
        return serve_command(SAMPLE_SERVER)
    return request.getfixturevalue("http_server").url


@run
async def test_results_over_stdio_and_http_are_the_same_wire_types(sample_target):
    async with Client(sample_target, timeout=DEADLINE) as client:
        tools = await client.tools()
        added = await client.call_tool("add", {"a": 20, "b": 22})
        logo = await client.read_resource("sample://logo.png")

    assert all(isinstance(tool, wire.Tool) for tool in tools)
    assert isinstance(added, wire.CallToolResult) and added.structured_content == {"result": 42}
    assert isinstance(added.content[0], wire.TextContent)
    assert isinstance(logo, wire.ReadResourceResult)


TYPED_METHODS = {
    "discover": wire.DiscoverResult,
    "list_tools": wire.ListToolsResult,
    "tools": list[wire.Tool],
    "call_tool": wire.CallToolResult,
    "list_resources": wire.ListResourcesResult,
    "resources": list[wire.Resource],
    "list_resource_templates": wire.ListResourceTemplatesResult,
    "resource_templates": list[wire.ResourceTemplate],
    "read_resource": wire.ReadResourceResult,
    "list_prompts": wire.ListPromptsResult,
    "prompts": list[wire.Prompt],
    "get_prompt": wire.GetPromptResult,
    "complete": wire.CompleteResult,
}


def test_each_method_is_annotated_with_its_wire_type_not_any():
    # The wire types are imported only for type checkers (they load lazily at run time),
    # so the annotations are resolved with them in scope.
    names = {**vars(_client), **vars(wire)}
    for method, expected in TYPED_METHODS.items():
        hints = typing.get_type_hints(getattr(Client, method), globalns=names)
        assert hints["return"] == expected, method
    assert inspect.iscoroutinefunction(Client.call_tool)


def test_the_wire_types_are_not_imported_until_a_result_needs_them():
    import subprocess

    code = (
        "import sys; from modelctx import Client; "
        "print('modelctx.protocol.types.v2026_07_28' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


# -- the constructor -------------------------------------------------------------------------------
def test_the_constructor_takes_a_target_two_settings_two_groups_a_name_and_auth():
    parameters = inspect.signature(Client).parameters
    assert list(parameters) == ["target", "mode", "timeout", "handlers", "options", "name", "auth"]
    assert all(p.kind is p.KEYWORD_ONLY for name, p in parameters.items() if name != "target")


def test_a_target_the_client_cannot_use_says_what_to_pass_instead():
    with pytest.raises(TypeError) as caught:
        Client(42)  # type: ignore[arg-type]

    assert "StdioClientTransport" in str(caught.value) and "int" in str(caught.value)


@run
async def test_handlers_declare_capabilities_and_options_reach_the_wire():
    seen: list[dict[str, Any]] = []

    async def record(call: Any, call_next: Any) -> Any:
        seen.append(call.params["_meta"])
        return await call_next(call)

    async def ask(request: Elicitation) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Ada"}}

    handlers = ClientHandlers(elicitation=ask, elicitation_modes=("form",))
    options = ClientOptions(client_info={"name": "typed-tests", "version": "1"}, log_level="error")
    async with Client(catalogue([record]), mode=MODERN, timeout=DEADLINE, handlers=handlers, options=options) as client:
        answered = await client.call_tool("name")

    assert "Ada" in answered.content[0].text
    meta = seen[0]
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {"elicitation": {"form": {}}}
    assert meta["io.modelcontextprotocol/clientInfo"] == {"name": "typed-tests", "version": "1"}
    assert meta["io.modelcontextprotocol/logLevel"] == "error"


# -- local errors ----------------------------------------------------------------------------------
def answering(result: dict[str, Any]) -> Any:
    """Middleware that answers every tools/call with ``result`` instead of running the tool."""

    async def middleware(call: Any, call_next: Any) -> Any:
        if call.method == "tools/call":
            return dict(result)
        return await call_next(call)

    return middleware


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        ({"resultType": "task", "task": {}}, "resultType 'task'"),
        ({"resultType": "input_required"}, "neither inputRequests nor requestState"),
        ({"resultType": "complete", "content": "not a list"}, "CallToolResult is malformed"),
        ({"resultType": "input_required", "inputRequests": {"q": "not a request"}}, "inputRequests['q']"),
    ],
    ids=["unknown-result-type", "input-required-without-input", "wrong-shape", "bad-input-request"],
)
@run
async def test_a_malformed_reply_is_a_local_error_with_no_json_rpc_code(reply, words):
    async with Client(catalogue([answering(reply)]), mode=MODERN, timeout=DEADLINE) as client:
        with pytest.raises(MalformedResponse) as caught:
            await client.call_tool("add", {"a": 1, "b": 2})
        still_working = await client.read_resource("mem://greeting")

    assert isinstance(caught.value, LocalError) and not isinstance(caught.value, ProtocolError)
    assert not hasattr(caught.value, "code")
    assert words in str(caught.value)
    assert isinstance(still_working, wire.ReadResourceResult)


@run
async def test_a_handler_that_returns_nonsense_is_a_local_error_naming_the_handler():
    async def confused(request: Elicitation) -> Any:
        return "yes please"

    handlers = ClientHandlers(elicitation=confused)
    async with Client(catalogue(), mode=MODERN, timeout=DEADLINE, handlers=handlers) as client:
        with pytest.raises(LocalError) as caught:
            await client.call_tool("name")

    assert not isinstance(caught.value, ProtocolError)
    assert "elicitation handler" in str(caught.value) and "'yes please'" in str(caught.value)
