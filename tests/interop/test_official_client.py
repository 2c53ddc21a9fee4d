"""The official MCP SDK client (mcp==2.3.0) against our server, as a real subprocess.

Every test runs for each transport (stdio through ``StdioServerParameters``, Streamable
HTTP through a URL) and each of the client's modes: ``auto`` (probe with
``server/discover``), ``legacy`` (the ``initialize`` handshake, 2025-11-25) and
``2026-07-28`` (modern, no probe). One client connection serves all tests of one
(transport, mode); it runs in a background event loop (an anyio blocking portal), so
the tests themselves are plain functions.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError

from tests.fixtures.servers.sample_server import ITEM_IDS, LOGO_PNG, SECRET
from tests.support.wire import SAMPLE_SERVER

MODES = ["auto", "legacy", "2026-07-28"]
TRANSPORTS = ["stdio", "http"]
EXPECTED_VERSION = {"auto": "2026-07-28", "legacy": "2025-11-25", "2026-07-28": "2026-07-28"}


class User:
    """The person behind the official client's elicitation callback.

    ``answers`` maps a word of the question to the form content to accept with;
    a question without an answer is declined. Every question asked is recorded.
    """

    def __init__(self) -> None:
        self.answers: dict[str, dict[str, Any]] = {}
        self.asked: list[tuple[str | int, types.ElicitRequestParams]] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.asked.append((context.request_id, params))
        for word, content in self.answers.items():
            if word in params.message:
                return types.ElicitResult(action="accept", content=content)
        return types.ElicitResult(action="decline")


class Official:
    """The official client, called synchronously: ``official.call_tool("add", {...})``."""

    def __init__(self, portal: BlockingPortal, client: Client, user: User, mode: str) -> None:
        self.portal = portal
        self.client = client
        self.user = user
        self.mode = mode

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.client, name)
        if not callable(attribute):  # protocol_version, server_info, ...
            return attribute
        return lambda *args, **kwargs: self.portal.call(lambda: attribute(*args, **kwargs))


@pytest.fixture(
    scope="module",
    params=[(t, m) for t in TRANSPORTS for m in MODES],
    ids=[f"{t}-{m}" for t in TRANSPORTS for m in MODES],
)
def official(request, http_server) -> Iterator[Official]:
    transport, mode = request.param
    if transport == "stdio":
        target: Any = StdioServerParameters(
            command=sys.executable,
            args=["-m", "modelctx", "serve", str(SAMPLE_SERVER)],
            env={"MODELCTX_LOG_LEVEL": "CRITICAL"},  # the boom test's traceback is expected
        )
    else:
        target = http_server.url
    user = User()
    client = Client(
        target,
        mode=mode,
        elicitation_callback=user,
        client_info=types.Implementation(name="interop-tests", version="0"),
        read_timeout_seconds=30,
    )
    with start_blocking_portal("asyncio") as portal:
        with portal.wrap_async_context_manager(client) as connected:
            yield Official(portal, connected, user, mode)


def test_the_client_connects_at_the_version_its_mode_selects(official):
    assert official.protocol_version == EXPECTED_VERSION[official.mode]
    if official.mode == "2026-07-28":
        # This mode sends no discover or initialize, so it has not seen serverInfo yet.
        assert official.server_info is None
    else:
        assert (official.server_info.name, official.server_info.version) == ("sample-server", "1.2.3")
        assert official.server_capabilities.tools is not None
        assert official.server_capabilities.completions is not None
        assert official.instructions == "A server for tests."


def test_tools_list_names_every_tool_with_its_schema(official):
    tools = {tool.name: tool for tool in official.list_tools().tools}

    assert list(tools) == ["echo", "add", "boom", "refuse", "sleepy", "stubborn", "progress", "register"]
    assert tools["echo"].description == "Echo the text back."
    assert tools["echo"].input_schema["properties"]["text"] == {"description": "what to echo", "type": "string"}
    assert tools["add"].input_schema["required"] == ["a", "b"]
    assert tools["add"].output_schema["properties"]["result"] == {"type": "integer"}


def test_tools_call_returns_content_and_structured_content(official):
    added = official.call_tool("add", {"a": 2, "b": 40})
    echoed = official.call_tool("echo", {"text": "héllo, wörld"})

    assert added.is_error is False
    assert added.structured_content == {"result": 42}
    assert [(block.type, block.text) for block in added.content] == [("text", '{"result":42}')]
    assert [(block.type, block.text) for block in echoed.content] == [("text", "héllo, wörld")]
    assert echoed.structured_content is None


def test_a_tool_error_reaches_the_client_as_an_is_error_result(official):
    refused = official.call_tool("refuse", {"reason": "it is Sunday"})

    assert refused.is_error is True
    assert refused.content[0].text == "refused: it is Sunday"


def test_an_unexpected_exception_becomes_a_generic_is_error_result(official):
    result = official.call_tool("boom", {})

    assert result.is_error is True
    assert result.content[0].text == "Error executing tool boom: internal error"
    assert SECRET not in result.model_dump_json()


def test_resources_read_returns_text(official):
    listed = official.list_resources().resources
    contents = official.read_resource("sample://greeting").contents

    assert {(str(r.uri), r.mime_type) for r in listed} == {
        ("sample://greeting", "text/plain"),
        ("sample://logo.png", "image/png"),
    }
    assert len(contents) == 1
    assert isinstance(contents[0], types.TextResourceContents)
    assert (str(contents[0].uri), contents[0].mime_type, contents[0].text) == (
        "sample://greeting",
        "text/plain",
        "Hello from the sample server",
    )


def test_resources_read_fills_a_template(official):
    templates = official.list_resource_templates().resource_templates
    contents = official.read_resource("sample://items/apricot").contents

    assert [t.uri_template for t in templates] == ["sample://items/{id}"]
    assert [(str(c.uri), c.text) for c in contents] == [("sample://items/apricot", "item apricot")]


def test_resources_read_returns_a_blob_as_base64(official):
    contents = official.read_resource("sample://logo.png").contents

    assert len(contents) == 1
    assert isinstance(contents[0], types.BlobResourceContents)
    assert contents[0].mime_type == "image/png"
    assert base64.b64decode(contents[0].blob) == LOGO_PNG


def test_reading_an_unknown_resource_is_invalid_params(official):
    with pytest.raises(MCPError) as caught:
        official.read_resource("sample://nothing-here")

    assert caught.value.code == -32602
    assert caught.value.error.data == {"uri": "sample://nothing-here"}


def test_prompts_get_fills_the_arguments(official):
    prompts = official.list_prompts().prompts
    result = official.get_prompt("review", {"code": "fn main() {}", "language": "rust"})

    assert [(p.name, [(a.name, a.required) for a in p.arguments]) for p in prompts] == [
        ("review", [("code", True), ("language", False)])
    ]
    assert result.description == "Ask for a code review."
    assert [(m.role, m.content.text) for m in result.messages] == [
        ("user", "Please review this rust code:\nfn main() {}")
    ]


def test_completion_completes_a_template_variable_and_a_prompt_argument(official):
    item = official.complete(
        types.ResourceTemplateReference(type="ref/resource", uri="sample://items/{id}"),
        {"name": "id", "value": "ap"},
    )
    language = official.complete(
        types.PromptReference(type="ref/prompt", name="review"), {"name": "language", "value": "p"}
    )

    assert item.completion.values == [i for i in ITEM_IDS if i.startswith("ap")] == ["apple", "apricot"]
    assert item.completion.has_more is False
    assert language.completion.values == ["python", "perl", "php"]


def test_elicitation_takes_two_round_trips_and_the_tool_sees_both_answers(official):
    official.user.answers = {"name": {"name": "Ada"}, "old": {"age": 36}}
    official.user.asked.clear()

    result = official.call_tool("register", {})

    assert result.is_error is False
    assert result.content[0].text == "registered Ada, aged 36"
    asked = official.user.asked
    assert [params.message for _, params in asked] == ["What is your name?", "How old are you, Ada?"]
    assert all(isinstance(params, types.ElicitRequestFormParams) for _, params in asked)
    assert asked[0][1].requested_schema["required"] == ["name"]
    if official.protocol_version == "2026-07-28":
        # input_required + retry: the callback is keyed by the inputRequests key.
        assert all(isinstance(key, str) for key, _ in asked)
        assert asked[0][0] != asked[1][0]
    else:
        # handshake era: real elicitation/create requests, keyed by their JSON-RPC id.
        assert all(isinstance(key, int) for key, _ in asked)


def test_a_declined_elicitation_reaches_the_tool(official):
    official.user.answers = {"name": {"name": "Grace"}}  # the age question is declined
    official.user.asked.clear()

    result = official.call_tool("register", {})

    assert result.content[0].text == "registration of Grace: decline"
    assert len(official.user.asked) == 2
