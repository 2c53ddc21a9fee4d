"""``modelctx.Host`` against real servers (issue 8: "modelctx.Host", "One tool list for
the model", "Freshness", "Input requests from servers").

Every server here is a real process: our example server and tests/fixtures/servers/*.py over
stdio, the sample server over Streamable HTTP, a server written with the official
``mcp`` package, and ``@modelcontextprotocol/server-everything`` from npm.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from modelctx import Host
from modelctx.client import Elicitation
from modelctx.errors import MissingRequiredClientCapability
from modelctx.host import (
    NAME_PATTERN,
    AllowAll,
    ApprovalRequest,
    Decision,
    HostConfig,
    HostServer,
    RestartPolicy,
    ServerSpec,
    ServerUnavailable,
    ToolFilter,
    namespaced,
)
from tests.support.paths import EXAMPLES, SERVERS
from tests.support.wire import HttpServer, async_test, serve_command

COUNTING = SERVERS / "counting_server.py"
OFFICIAL = SERVERS / "official_server.py"
WEATHER = EXAMPLES / "weather_server.py"
WAIT = 20.0


def served(name: str, target: Path, **settings: Any) -> ServerSpec:
    """``modelctx serve target`` on stdio, as the configuration would start it. Trusted
    (``"approval": "allow"``) unless ``approval`` says otherwise: these tests are about
    joining servers; tests/host/test_approval.py is about approving calls."""
    settings.setdefault("approval", "allow")
    return ServerSpec(name, command=sys.executable, args=("-m", "modelctx", "serve", str(target)), **settings)


def text(result: Any) -> str:
    return result.content[0].text


def number(result: Any) -> int:
    return int(result.structured_content["result"])


async def until(condition: Any, what: str) -> None:
    """Wait (polling the loop, never blocking it) until ``condition()`` is true."""
    for _ in range(int(WAIT / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


async def tool_names_once(host: Host, condition: Any) -> set[str]:
    """``host.tools()`` names, asked until ``condition(names)`` holds."""
    for _ in range(int(WAIT / 0.05)):
        names = {tool.name for tool in await host.tools()}
        if condition(names):
            return names
        await asyncio.sleep(0.05)
    pytest.fail("the host's tool list never changed")


# -- the sketch of the issue ------------------------------------------------------------------------
@async_test(60)
async def test_the_hosts_sketch_from_the_issue_runs_with_our_objects(http_server):
    config = HostConfig(
        {"weather": served("weather", WEATHER), "sample": ServerSpec("sample", url=http_server.url, approval="allow")}
    )
    host = Host()
    try:
        for spec in config.servers.values():
            client = await host.connect(spec)  # discover or initialize happens here
            if client.server_capabilities.tools:  # typed capabilities, not a dict
                host.register(client)  # client.name is the configured name
        available_tools = []
        for client in host.unguarded_clients():
            for tool in (await client.list_tools()).tools:
                available_tools.append(namespaced(client.name, tool.name))
        client, original = host.find_client_for("weather_forecast")
        result = await client.call_tool(original, {"city": "Oslo"})
    finally:
        await host.close()

    assert {"weather_forecast", "weather_list_cities", "sample_echo"} <= set(available_tools)
    assert (client.name, original) == ("weather", "forecast")
    assert result.structured_content["city"] == "Oslo"


# -- one tool list ---------------------------------------------------------------------------------------
def everything_spec() -> ServerSpec:
    command = os.environ.get("MODELCTX_EVERYTHING_BIN")
    if not command or not Path(command).exists():
        reason = "@modelcontextprotocol/server-everything is not installed (MODELCTX_EVERYTHING_BIN)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return ServerSpec("everything", command=command, args=("stdio",), approval="allow")


@pytest.fixture
def weather_over_http(tmp_path):
    """The example server, served with ``modelctx serve --http``."""
    with HttpServer(WEATHER, tmp_path / "weather.log") as server:
        yield server


@async_test(90)
async def test_servers_of_every_kind_join_one_namespaced_tool_list(http_server, weather_over_http):
    config = HostConfig(
        {
            "weather": served("weather", WEATHER),
            "forecasts": ServerSpec("forecasts", url=weather_over_http.url, approval="allow"),
            "sample": ServerSpec("sample", url=http_server.url, approval="allow"),
            "official": ServerSpec("official", command=sys.executable, args=(str(OFFICIAL),), approval="allow"),
            "everything": everything_spec(),
        }
    )
    async with Host(config) as host:
        assert host.failures == {}
        tools = await host.tools()
        names = [tool.name for tool in tools]
        forecast = await host.call_tool("weather_forecast", {"city": "Lisbon"})
        over_http = await host.call_tool("forecasts_forecast", {"city": "Paris"})
        added = await host.call_tool("official_add", {"a": 2, "b": 3})
        echoed = await host.call_tool("sample_echo", {"text": "hi"})
        everything = await host.call_tool("everything_echo", {"message": "hi"})

    assert len(names) == len(set(names))
    assert all(NAME_PATTERN.fullmatch(name) for name in names)
    assert {"weather_forecast", "forecasts_forecast", "sample_echo", "official_add", "everything_echo"} <= set(names)
    assert names == sorted(names, key=lambda name: name.split("_")[0])  # by server name
    assert forecast.structured_content["city"] == "Lisbon"
    assert over_http.structured_content["sky"] == "rain"
    assert text(added) == "5"
    assert text(echoed) == "hi"
    assert text(everything) == "Echo: hi"


async def names_connecting_in_order(order: list[str]) -> dict[str, str]:
    """Connect counting servers "c" and "c_list" in ``order``; give "c_list" a tool
    "requests", so "c"'s "list_requests" and it collide on "c_list_requests"."""
    host = Host()
    try:
        for name in order:
            host.register(await host.connect(served(name, COUNTING)))
        await until(lambda: host.servers["c_list"].listening, "c_list's listen stream")
        before = len(await host.tools())
        await host.call_tool("c_list_grow", {"name": "requests"})
        names: dict[str, str] = {}
        for _ in range(int(WAIT / 0.05)):
            names = {tool.name: "" for tool in await host.tools()}
            if len(names) == before + 1:
                break
            await asyncio.sleep(0.05)
        for name in names:
            client, original = host.find_client_for(name)
            names[name] = f"{client.name}/{original}"
        # Each side of the collision maps back exactly.
        ours = {value: key for key, value in names.items()}
        assert text(await host.call_tool(ours["c_list/requests"])) == "requests"
        assert number(await host.call_tool(ours["c/list_requests"])) >= 1
        return names
    finally:
        await host.close()


@async_test(90)
async def test_a_name_collision_is_resolved_the_same_whatever_the_connection_order():
    forward = await names_connecting_in_order(["c", "c_list"])
    backward = await names_connecting_in_order(["c_list", "c"])

    assert forward == backward
    assert "c_list_requests" not in forward  # neither side keeps the plain name
    assert {"c/list_requests", "c_list/requests"} <= set(forward.values())


@async_test(60)
async def test_allow_and_deny_globs_choose_a_servers_tools():
    config = HostConfig(
        {
            "only": served("only", COUNTING, tools=ToolFilter(allow=("e*", "pid"))),
            "most": served("most", COUNTING, tools=ToolFilter(deny=("grow", "*_requests"))),
        }
    )
    async with Host(config) as host:
        names = {tool.name for tool in await host.tools()}
        hidden = await host.call_tool("most_grow", {"name": "x"})

    assert {name for name in names if name.startswith("only_")} == {"only_echo", "only_pid"}
    assert "most_echo" in names and "most_grow" not in names and "most_list_requests" not in names
    assert hidden.is_error and "there is no tool named 'most_grow'" in text(hidden)


# -- servers come and go ------------------------------------------------------------------------------
@async_test(60)
async def test_a_server_that_fails_to_start_is_reported_and_the_others_keep_working():
    config = HostConfig(
        {
            "missing": ServerSpec("missing", command="/nonexistent/mcp-server"),
            "silent": ServerSpec(
                "silent", command=sys.executable, args=("-c", "import time; time.sleep(60)"), timeout=1.5
            ),
            "good": served("good", COUNTING),
        }
    )
    async with Host(config) as host:
        echoed = await host.call_tool("good_echo", {"text": "still here"})
        names = {tool.name for tool in await host.tools()}

        assert set(host.failures) == {"missing", "silent"}
        assert "/nonexistent/mcp-server" in host.failures["missing"]
        assert "did not finish connecting within 1.5s" in host.failures["silent"]
        assert host.servers["good"].status == "ready"
    assert text(echoed) == "still here"
    assert names and all(name.startswith("good_") for name in names)


@async_test(60)
async def test_servers_are_added_and_removed_at_run_time():
    changes: list[tuple[str, str]] = []
    async with Host(HostConfig({"one": served("one", COUNTING)})) as host:
        host.add_listener(lambda server, kind: changes.append((server, kind)))
        added = await host.add_server(served("two", COUNTING))
        assert added.status == "ready"
        both = {tool.name.split("_")[0] for tool in await host.tools()}
        await host.remove_server("one")
        gone = await host.call_tool("one_echo", {"text": "x"})
        after = {tool.name.split("_")[0] for tool in await host.tools()}

    assert both == {"one", "two"} and after == {"two"}
    assert gone.is_error and "there is no tool named 'one_echo'" in text(gone)
    assert ("two", "all") in changes and ("one", "all") in changes


@async_test(60)
async def test_a_guarded_client_calls_its_own_servers_tool_where_two_servers_share_the_name():
    async with Host(HostConfig({"a": served("a", COUNTING), "b": served("b", COUNTING)})) as host:
        await host.tools()
        a, original = host.find_client_for("a_pid")
        b, _ = host.find_client_for("b_pid")
        pids = {number(await handle.call_tool(original)) for handle in (a, b)}
        direct = {number(await host.call_tool(name)) for name in ("a_pid", "b_pid")}
        unknown = await a.call_tool("no_such_tool")
        await host.remove_server("b")
        gone = await b.call_tool(original)

    assert original == "pid" and len(pids) == 2 and pids == direct  # each its own process
    assert unknown.is_error and "server 'a' offers no tool named 'no_such_tool'" in text(unknown)
    assert gone.is_error and "server 'b' offers no tool named 'pid'" in text(gone)


@async_test(60)
async def test_a_guarded_client_finds_a_tool_its_server_added_right_after_list_changed():
    heard: list[tuple[str, str]] = []
    async with Host(HostConfig({"c": served("c", COUNTING)})) as host:
        host.add_listener(lambda server, kind: heard.append((server, kind)))
        await until(lambda: host.servers["c"].listening, "the listen stream")
        await host.tools()
        handle, _ = host.find_client_for("c_grow")
        assert text(await handle.call_tool("grow", {"name": "fresh"})) == "added fresh"
        await until(lambda: ("c", "tools") in heard, "list_changed")
        grown = await handle.call_tool("fresh")  # not in the last tools(): found by refreshing
        by_name = await host.call_tool("c_fresh")

    assert not grown.is_error and text(grown) == "fresh"
    assert text(by_name) == "fresh"


@async_test(90)
async def test_a_crashed_stdio_server_is_restarted_while_another_keeps_serving():
    config = HostConfig({"fragile": served("fragile", COUNTING), "steady": served("steady", COUNTING)})
    async with Host(config) as host:
        first_pid = number(await host.call_tool("fragile_pid"))
        await until(lambda: host.servers["fragile"].listening, "the listen stream")
        os.kill(first_pid, signal.SIGKILL)
        await until(lambda: host.servers["fragile"].status != "ready", "the host to see the crash")

        # The other server kept serving while this one was down.
        assert text(await host.call_tool("steady_echo", {"text": "meanwhile"})) == "meanwhile"
        await until(lambda: host.servers["fragile"].restarts == 1, "the restart")
        second_pid = number(await host.call_tool("fragile_pid"))
        echoed = await host.call_tool("fragile_echo", {"text": "back"})
        await until(lambda: host.servers["fragile"].listening, "the listen stream to be re-opened")
        await host.call_tool("fragile_grow", {"name": "reborn"})
        names = await tool_names_once(host, lambda names: "fragile_reborn" in names)

    assert second_pid != first_pid
    assert text(echoed) == "back"
    assert "fragile_reborn" in names  # heard over the re-opened listen stream


@async_test(60)
async def test_a_server_that_cannot_come_back_is_given_up_after_a_bounded_number_of_restarts(tmp_path):
    once = served("once", COUNTING, env={"COUNTING_ONCE": str(tmp_path / "started")})
    policy = RestartPolicy(attempts=2, first_backoff=0.05)
    async with Host(HostConfig({"once": once, "steady": served("steady", COUNTING)}), restarts=policy) as host:
        os.kill(number(await host.call_tool("once_pid")), signal.SIGKILL)
        await until(lambda: host.servers["once"].status == "failed", "the host to give up")

        with pytest.raises(ServerUnavailable, match="once"):
            await host.call_tool("once_echo", {"text": "x"})
        assert text(await host.call_tool("steady_echo", {"text": "still"})) == "still"
        assert "gave up after 2 restarts in a row" in host.failures["once"]
        assert "starts only once" in host.failures["once"]  # the last attempt's stderr, quoted
        assert {tool.name.split("_")[0] for tool in await host.tools()} == {"steady"}


# -- freshness ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("era", ["2026-07-28", "handshake"])
@async_test(60)
async def test_a_cache_hit_sends_no_tools_list_and_a_change_reaches_the_next_tools_list(era):
    # 2026-07-28: the list is kept for its ttlMs (a minute) and list_changed comes over
    # subscriptions/listen. Handshake era (a client the host adopts): kept until a
    # notifications/tools/list_changed, as the server declared listChanged.
    if era == "handshake":
        from modelctx import Client

        host = Host(approvals=AllowAll())  # adopted: no configuration to say "allow"
        client = Client(serve_command(COUNTING), mode="handshake", name="c")
        await client.connect()
        host.register(client)
    else:
        host = Host(HostConfig({"c": served("c", COUNTING)}))
        await host.start()
    heard: list[tuple[str, str]] = []
    host.add_listener(lambda server, kind: heard.append((server, kind)))
    async with host:
        counting = host.servers["c"]
        await until(lambda: counting.listening, "the listen stream")
        first = {tool.name for tool in await host.tools()}
        for _ in range(5):
            assert {tool.name for tool in await host.tools()} == first
        after_hits = number(await host.call_tool("c_list_requests"))

        await host.call_tool("c_grow", {"name": "fresh"})
        # Asking again and again sends nothing until list_changed arrives; then one tools/list.
        changed = await tool_names_once(host, lambda names: names != first)
        after_change = number(await host.call_tool("c_list_requests"))

    assert after_hits == 1  # six host.tools(), one tools/list: the rest were cache hits
    assert changed == first | {"c_fresh"}  # no restart, no waiting for the TTL (a minute)
    assert after_change == 2
    assert ("c", "tools") in heard  # what a gateway passes on to its own listeners


# -- the approval seam -----------------------------------------------------------------------------------
class DenyEcho:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str, dict[str, Any]]] = []

    async def check(self, server: HostServer, tool: Any, arguments: dict[str, Any]) -> bool:
        self.asked.append((server.name, tool.name, arguments))
        return tool.name != "echo"

    def hidden(self, server: HostServer, tool: Any) -> bool:
        return False


@async_test(60)
async def test_a_denied_call_never_reaches_the_server():
    approvals = DenyEcho()
    async with Host(HostConfig({"c": served("c", COUNTING)}), approvals=approvals) as host:
        await host.tools()
        denied = await host.call_tool("c_echo", {"text": "secret"})
        calls = number(await host.call_tool("c_call_requests"))

    assert denied.is_error and "was denied" in text(denied) and "'echo' of server 'c'" in text(denied)
    assert approvals.asked[0] == ("c", "echo", {"text": "secret"})
    assert calls == 1  # only call_requests itself reached the server


# -- what servers ask of the host ---------------------------------------------------------------------------
class FriendlyUI:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def elicit(self, server: str, elicitation: Elicitation) -> dict[str, Any]:
        self.asked.append((server, elicitation.message))
        return {"action": "accept", "content": {"name": "Ada"}}

    async def approve(self, request: ApprovalRequest) -> Decision:
        return Decision.ALLOW_ONCE

    async def show(self, message: str) -> None:
        pass


@async_test(60)
async def test_elicitation_goes_to_the_ui_sampling_to_the_callback_and_roots_come_from_the_config(tmp_path):
    sampled: list[str] = []

    async def sample(server: str, params: dict[str, Any]) -> dict[str, Any]:
        sampled.append(server)
        return {"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "scripted"}

    ui = FriendlyUI()
    config = HostConfig({"c": served("c", COUNTING)}, roots=(str(tmp_path),))
    async with Host(config, ui=ui, sample=sample) as host:
        await host.tools()
        greeted = await host.call_tool("c_ask_name")
        summary = await host.call_tool("c_summarize", {"text": "a long story"})
        roots = await host.call_tool("c_roots")

    assert text(greeted) == "hello Ada" and ui.asked == [("c", "What is your name?")]
    assert text(summary) == "short" and sampled == ["c"]
    assert tmp_path.resolve().as_uri() in text(roots)


@async_test(60)
async def test_without_a_ui_an_elicitation_is_declined_and_sampling_is_not_offered():
    async with Host(HostConfig({"c": served("c", COUNTING)})) as host:
        await host.tools()
        greeted = await host.call_tool("c_ask_name")
        with pytest.raises(MissingRequiredClientCapability, match="sampling"):
            await host.call_tool("c_summarize", {"text": "x"})

    assert text(greeted) == "elicitation: decline"


# -- prompts and resources ------------------------------------------------------------------------------------
@async_test(60)
async def test_prompts_and_resources_of_every_server_are_offered(http_server):
    config = HostConfig({"sample": ServerSpec("sample", url=http_server.url, approval="allow"), "weather": served("weather", WEATHER)})
    async with Host(config) as host:
        prompts = {prompt.name for prompt in await host.prompts()}
        review = await host.get_prompt("sample_review", {"code": "x = 1"})
        resources = await host.resources()
        cities = await host.read_resource("weather://cities")

    assert "sample_review" in prompts
    assert "x = 1" in review.messages[0].content.text
    assert ("weather", "weather://cities") in {(server, resource.uri) for server, resource in resources}
    assert "oslo" in cities.contents[0]["text"]


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@async_test(60)
async def test_a_changed_tool_list_of_an_official_sdk_server_reaches_the_next_tools_list(mode):
    from modelctx import Client

    # A client the host did not start is adopted under its own name; in the handshake era
    # changes arrive as notifications, in 2026-07-28 over subscriptions/listen.
    client = Client([sys.executable, str(OFFICIAL)], mode=mode, name="official")
    await client.connect()
    host = Host(approvals=AllowAll())  # no approval at all: this test is about freshness
    try:
        host.register(client)
        await until(lambda: host.servers["official"].listening, "the host to listen for changes")
        first = {tool.name for tool in await host.tools()}
        await host.call_tool("official_bump", {"name": f"grown_{mode}"})
        changed = await tool_names_once(host, lambda names: names != first)
        grown = await host.call_tool(f"official_grown_{mode}")
    finally:
        await host.close()

    assert changed == first | {f"official_grown_{mode}"}
    assert text(grown) == "added"
