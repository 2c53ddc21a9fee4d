"""MCP Apps on the host side: a tool only a view may call never reaches the model, and
``modelctx chat`` (a terminal, no views) says once that a tool has a UI it cannot show.

Real servers on stdio: tests/fixtures/servers/apps_server.py (modelctx) and
tests/fixtures/servers/official_apps_server.py (the official SDK, which lists its app-only tool to
every client); the chat in a real terminal with the model API scripted (as
tests/host/test_chat.py does).
"""

from __future__ import annotations

import sys
from typing import Any

from modelctx import Host
from modelctx.host import HostConfig, ServerSpec
from tests.host.test_chat import chat, stdio  # noqa: F401 - the fixture, used by name
from tests.support.model_server import Turn
from tests.support.paths import SERVERS
from tests.support.wire import async_test

APPS = SERVERS / "apps_server.py"
OFFICIAL_APPS = SERVERS / "official_apps_server.py"


@async_test(60)
async def test_a_tool_whose_visibility_leaves_out_the_model_is_not_in_the_hosts_tool_list():
    config = HostConfig(
        {
            "weather": ServerSpec("weather", command=sys.executable, args=("-m", "modelctx", "serve", str(APPS))),
            "official": ServerSpec("official", command=sys.executable, args=(str(OFFICIAL_APPS),)),
        }
    )
    async with Host(config) as host:
        names = [tool.name for tool in await host.tools()]
        # The official SDK listed "poll" (visibility ["app"]); the host keeps it from the model.
        official = await host.servers["official"].tools()
        assert [tool.name for tool in official] == ["show", "poll"]
        # Nor is it reachable by routing: the guarded handle refuses it as call_tool does.
        handle, own = host.find_client_for("official_poll")
        routed = await handle.call_tool(own, {})
    assert names == ["official_show", "weather_forecast", "weather_secret_plan", "weather_hostile"]
    assert routed.is_error and "only an MCP Apps view may call it" in routed.content[0].text


def test_the_chat_says_once_that_a_tool_has_a_ui_it_cannot_show(chat: Any) -> None:  # noqa: F811
    api, terminal = chat(
        [
            Turn(calls=[("weather_forecast", {"city": "Oslo"})]),
            Turn("Sunny in Oslo."),
            Turn(calls=[("weather_forecast", {"city": "Bergen"})]),
            Turn("Sunny in Bergen too."),
        ],
        {"weather": {**stdio(APPS), "approval": "allow"}},
    )
    terminal.type("weather in Oslo?")
    screen = terminal.wait_for("Sunny in Oslo.")
    assert "this tool has a UI the terminal cannot show" in screen
    assert "✓ result weather_forecast: sunny in Oslo" in screen
    terminal.type("and Bergen?")
    screen = terminal.wait_for("Sunny in Bergen too.")
    assert screen.count("this tool has a UI the terminal cannot show") == 1
    # The model was offered the tools it may call, not the view's own "refresh".
    offered = [tool["name"] for tool in api.requests[0].body["tools"]]
    assert offered == ["weather_forecast", "weather_secret_plan", "weather_hostile"]
    terminal.type("/quit")
    terminal.wait_for("[exited 0]")
