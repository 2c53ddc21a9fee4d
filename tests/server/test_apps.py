"""MCP Apps (io.modelcontextprotocol/ui) on the server: a tool's view declared in its
decorator, served as a ``ui://`` resource of type ``text/html;profile=mcp-app``, the
tool's ``_meta.ui`` pointing at it, and the extension declared in the capabilities.

Checked with the official MCP client (mcp 2.3.0) against tests/fixtures/servers/apps_server.py run
as a real stdio process, in both eras (legacy: initialize; auto: server/discover), with and without the client declaring the
extension.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from mcp import Client, StdioServerParameters
from mcp.client import advertise

from modelctx import RegistrationError, Server
from modelctx.server import UiCsp, UiResource
from tests.support.paths import SERVERS

SERVER = SERVERS / "apps_server.py"
UI = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"


class Official:
    def __init__(self, portal: Any, client: Any, mode: str) -> None:
        self.portal, self.client, self.mode = portal, client, mode

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.client, name)
        if not callable(attribute):
            return attribute
        return lambda *args, **kwargs: self.portal.call(lambda: attribute(*args, **kwargs))


@pytest.fixture(
    scope="module",
    params=[(mode, ui) for mode in ("legacy", "auto") for ui in (True, False)],
    ids=lambda p: f"{p[0]}-{'ui' if p[1] else 'no-ui'}",
)
def official(request: Any) -> Iterator[tuple[Official, bool]]:
    mode, shows_ui = request.param
    target = StdioServerParameters(command=sys.executable, args=["-m", "modelctx", "serve", str(SERVER)])
    extensions = [advertise(UI, {"mimeTypes": [MIME]})] if shows_ui else None
    client = Client(target, mode=mode, extensions=extensions, read_timeout_seconds=30)
    with start_blocking_portal("asyncio") as portal, portal.wrap_async_context_manager(client) as connected:
        yield Official(portal, connected, mode), shows_ui


def test_the_server_declares_the_ui_extension_in_its_capabilities(official):
    client, _ = official
    assert client.protocol_version == ("2025-11-25" if client.mode == "legacy" else "2026-07-28")
    assert client.server_capabilities.extensions == {UI: {}}


def test_a_tool_with_a_view_names_its_ui_resource_in_meta_ui(official):
    client, _ = official
    tools = {tool.name: tool for tool in client.list_tools().tools}
    assert tools["forecast"].meta == {"ui": {"resourceUri": "ui://weather/board"}}
    assert tools["secret_plan"].meta == {"ui": {"visibility": ["model"]}}


def test_a_tool_only_the_app_may_call_is_listed_only_to_a_client_that_shows_views(official):
    client, shows_ui = official
    names = [tool.name for tool in client.list_tools().tools]
    if shows_ui:
        assert names == ["forecast", "refresh", "secret_plan", "hostile"]
        refresh = client.list_tools().tools[1]
        assert refresh.meta == {"ui": {"resourceUri": "ui://weather/board", "visibility": ["app"]}}
    else:
        assert names == ["forecast", "secret_plan", "hostile"]  # its model would otherwise be handed it


def test_the_view_is_a_ui_resource_with_the_mcp_app_type_and_its_csp_in_meta(official):
    client, _ = official
    listed = {str(r.uri): r for r in client.list_resources().resources}
    board = listed["ui://weather/board"]
    assert (board.mime_type, board.name, board.description) == (MIME, "Weather board", "The forecast as a board.")
    expected_meta = {"ui": {"csp": {"connectDomains": ["https://api.weather.example"]}, "prefersBorder": True}}
    assert board.meta == expected_meta

    contents = client.read_resource("ui://weather/board").contents
    assert len(contents) == 1
    assert (str(contents[0].uri), contents[0].mime_type) == ("ui://weather/board", MIME)
    assert contents[0].text.startswith("<!doctype html>")
    assert contents[0].meta == expected_meta


def test_a_tool_with_a_view_still_answers_with_text_for_hosts_without_one(official):
    client, _ = official
    result = client.call_tool("forecast", {"city": "Oslo"})
    assert [block.text for block in result.content] == ["sunny in Oslo"]


# -- registration ---------------------------------------------------------------------------------
def test_one_view_named_by_many_tools_is_one_resource():
    server = Server("s")
    view = UiResource("ui://s/v", html="<!doctype html><p>v</p>")
    for name in ("one", "two"):
        server.add_tool(lambda: "x", name=name, ui=view)
    assert list(server.registry.resources) == ["ui://s/v"]
    assert server.capabilities()["extensions"] == {UI: {}}


def test_a_server_without_views_declares_no_ui_extension():
    server = Server("s")
    server.add_tool(lambda: "x", name="plain")
    assert "extensions" not in server.capabilities()


def test_another_resource_at_the_views_uri_is_refused():
    server = Server("s")
    server.resource("ui://s/v")(lambda: "taken")
    with pytest.raises(RegistrationError, match="already registered"):
        server.add_tool(lambda: "x", name="t", ui=UiResource("ui://s/v", html="<p>"))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: UiResource("https://example.com/v", html="<p>"), "not a ui:// URI"),
        (lambda: UiResource("ui://s/v", html=b"<p>"), "html must be the document as text"),
        (lambda: UiResource("ui://s/v", html="<p>", permissions=["usb"]), "permissions \\['usb'\\] are not known"),
        # A space or ";" in a domain would add CSP directives of the server's choosing to the host's policy.
        (lambda: UiCsp(connect_domains=["https://a.example; script-src *"]), "is not an origin"),
        (lambda: UiCsp(resource_domains=["https://a.example/path"]), "is not an origin"),
    ],
)
def test_a_malformed_view_is_refused_at_registration(make, message):
    with pytest.raises(RegistrationError, match=message):
        make()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ui": "https://example.com/v"}, "is not a UiResource nor a ui:// URI"),
        ({"ui": "ui://s/v", "ui_visibility": ["agent"]}, "must list who may call the tool"),
        ({"ui": "ui://s/v", "ui_visibility": []}, "must list who may call the tool"),
        ({"ui": "ui://s/v", "meta": {"ui": {}}}, "not both"),
    ],
)
def test_a_wrong_ui_option_is_refused_naming_the_tool(options, message):
    server = Server("s")
    with pytest.raises(RegistrationError, match=f"tool 'weather'.*{message}|{message}"):
        server.add_tool(lambda: "x", name="weather", **options)
