"""MCP Apps through the gateway: a tool's view reachable by the gateway's clients.

``modelctx gateway`` runs as a real stdio process in front of tests/fixtures/servers/apps_server.py
(one instance, then two, which name the same ``ui://`` URIs); the official MCP client
(mcp 2.3.0) talks to it in both eras, declaring the extension for HTML views or not.
The gateway declares the extension because its upstream does, lists a tool's
``_meta.ui.resourceUri`` under the gateway's name for that view, relays ``resources/read``
of it with its type and ``_meta.ui``, and lists a tool only a view may call to the
clients that show views, never to the model of a ``Host``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from mcp import Client, StdioServerParameters
from mcp.client import advertise
from mcp.shared.exceptions import MCPError as McpError

from modelctx import Host
from modelctx.host import HostConfig, ServerSpec
from tests.support.paths import SERVERS
from tests.support.wire import async_test

APPS = SERVERS / "apps_server.py"
UI = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
BOARD_META = {"ui": {"csp": {"connectDomains": ["https://api.weather.example"]}, "prefersBorder": True}}


def _upstream() -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "modelctx", "serve", str(APPS)], "approval": "allow"}


class Official:
    def __init__(self, portal: Any, client: Any) -> None:
        self.portal, self.client = portal, client

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.client, name)
        if not callable(attribute):
            return attribute
        return lambda *args, **kwargs: self.portal.call(lambda: attribute(*args, **kwargs))


@pytest.fixture(
    scope="module",
    params=[("legacy", True, 1), ("auto", True, 1), ("auto", False, 1), ("auto", True, 2), ("legacy", True, 2)],
    ids=lambda p: f"{p[0]}-{'ui' if p[1] else 'no-ui'}-{p[2]}-upstream{'s' if p[2] > 1 else ''}",
)
def gateway(request: Any, tmp_path_factory: Any) -> Iterator[tuple[Official, bool, int]]:
    mode, shows_ui, upstreams = request.param
    servers = {"weather": _upstream()} if upstreams == 1 else {"weather": _upstream(), "twin": _upstream()}
    config = tmp_path_factory.mktemp("apps-gateway") / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    arguments = ["-m", "modelctx", "gateway", "--config", str(config)]
    # Our environment (the official client passes only a few variables): this checkout's modelctx.
    target = StdioServerParameters(command=sys.executable, args=arguments, env=dict(os.environ))
    extensions = [advertise(UI, {"mimeTypes": [MIME]})] if shows_ui else None
    client = Client(target, mode=mode, extensions=extensions, read_timeout_seconds=30)
    with start_blocking_portal("asyncio") as portal, portal.wrap_async_context_manager(client) as connected:
        yield Official(portal, connected), shows_ui, upstreams


def _views(upstreams: int) -> dict[str, str]:
    """Gateway tool name to the URI its view is served under."""
    if upstreams == 1:  # one server names it: the gateway serves it under its own URI
        return {"weather_forecast": "ui://weather/board", "weather_hostile": "ui://weather/hostile"}
    # Both instances name ui://weather/board: each is served under its server's name.
    return {
        "twin_forecast": "ui://twin/weather/board",
        "twin_hostile": "ui://twin/weather/hostile",
        "weather_forecast": "ui://weather/weather/board",
        "weather_hostile": "ui://weather/weather/hostile",
    }


def test_the_gateway_declares_the_ui_extension_when_an_upstream_does(gateway):
    client, _, _ = gateway
    assert UI in (client.server_capabilities.extensions or {})


def test_a_tools_view_is_named_by_the_gateways_uri_for_it(gateway):
    client, _, upstreams = gateway
    tools = {tool.name: tool for tool in client.list_tools().tools}
    for name, uri in _views(upstreams).items():
        assert tools[name].meta == {"ui": {"resourceUri": uri}}
    assert tools["weather_secret_plan"].meta == {"ui": {"visibility": ["model"]}}


def test_a_tool_only_a_view_may_call_is_listed_only_to_a_client_that_shows_views(gateway):
    client, shows_ui, upstreams = gateway
    tools = {tool.name: tool for tool in client.list_tools().tools}
    if not shows_ui:
        assert "weather_refresh" not in tools  # its model would otherwise be handed it
        return
    board = _views(upstreams)["weather_forecast"]
    assert tools["weather_refresh"].meta == {"ui": {"resourceUri": board, "visibility": ["app"]}}
    # The view's call, relayed by its host through the gateway, reaches the server.
    result = client.call_tool("weather_refresh", {"city": "Oslo"})
    assert not result.is_error
    assert "Oslo" in result.content[0].text


def test_a_view_calls_its_own_servers_tools_by_their_own_names_through_the_gateway(gateway):
    # A view knows its server's names (refresh, forecast), not the gateway's
    # (weather_refresh): they reached nothing ("Unknown tool") unless --bare-names.
    client, _, upstreams = gateway
    if upstreams > 1:  # two servers own "refresh": its own name is ambiguous, so not routed
        with pytest.raises(McpError, match="Unknown tool"):
            client.call_tool("refresh", {"city": "Oslo"})
        return
    assert "refresh" not in {tool.name for tool in client.list_tools().tools}  # routed, never listed
    for own in ("refresh", "forecast"):
        result = client.call_tool(own, {"city": "Oslo"})
        assert not result.is_error and "Oslo" in result.content[0].text, own
    with pytest.raises(McpError, match="Unknown tool"):  # a tool no view may call: only its listed name
        client.call_tool("secret_plan", {})


def test_reading_a_tools_view_relays_it_with_its_type_and_meta_ui(gateway):
    client, _, upstreams = gateway
    for name, uri in _views(upstreams).items():
        contents = client.read_resource(uri).contents
        assert len(contents) == 1, name
        assert (str(contents[0].uri), contents[0].mime_type) == (uri, MIME)
        assert contents[0].text.startswith("<!doctype html>") or "hostile" in name
    board = client.read_resource(_views(upstreams)["weather_forecast"]).contents[0]
    assert board.meta == BOARD_META


def test_the_listed_views_carry_the_gateways_uris_and_their_meta_ui(gateway):
    client, _, upstreams = gateway
    listed = {str(resource.uri): resource for resource in client.list_resources().resources}
    board = listed[_views(upstreams)["weather_forecast"]]
    assert (board.mime_type, board.meta) == (MIME, BOARD_META)


@async_test(60)
async def test_a_hosts_model_is_never_offered_a_tool_only_a_view_may_call():
    spec = ServerSpec("weather", command=sys.executable, args=("-m", "modelctx", "serve", str(APPS)))
    host = Host(HostConfig({"weather": spec}))
    host.client_extensions = {UI: {"mimeTypes": [MIME]}}  # as the gateway's host: the server lists it
    async with host:
        model = [tool.name for tool in await host.tools()]
        for_views = [tool.name for tool in await host.tools(views=True)]
        refused = await host.call_tool("weather_refresh", {"city": "Oslo"})
    assert "weather_refresh" in for_views
    assert "weather_refresh" not in model
    assert refused.is_error and "only an MCP Apps view may call it" in refused.content[0].text
