"""MCP Apps views in `modelctx inspect`, in a real headless Chromium: a real inspector
process connected to tests/fixtures/servers/apps_server.py, whose ``forecast`` tool has a view.

The view is loaded in a sandboxed iframe (``allow-scripts``, no same origin) from a path
without the page's token, and the host's half of the ext-apps bridge answers it: the
``ui/initialize`` handshake, the tool's input and result delivered after
``initialized``, the view calling an app tool through the host (and refused a
model-only one), size changes, the CSP that keeps it off the network, and a teardown
when the page shows something else.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.inspector_processes import Screenshots, chromium_page, running_inspector
from tests.support.paths import SERVERS

SERVER = SERVERS / "apps_server.py"


@pytest.fixture
def page() -> Any:
    with chromium_page() as page:
        yield page


def test_a_tools_view_runs_sandboxed_and_speaks_the_apps_bridge(page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    shots = Screenshots(tmp_path, prefix="inspector-apps")
    with running_inspector("inspect", str(SERVER)) as url:
        token = url.rstrip("/").rsplit("/", 1)[1]
        page.goto(url)
        expect(page.locator("#status")).to_have_text("connected")
        # The inspector declares the extension, so the app-only tool is listed to it too.
        expect(page.locator("#tools button")).to_have_count(4)
        expect(page.locator("#capabilities")).to_contain_text("io.modelcontextprotocol/ui")

        page.locator('#tools button[data-key="forecast"]').click()
        expect(page.locator(".ui-note")).to_contain_text("ui://weather/board")
        page.locator('input[name="arg.city"]').fill("Oslo")
        page.locator("#call").click()
        expect(page.locator("#result pre.text")).to_have_text("sunny in Oslo")  # the text fallback stays

        frame_element = page.locator("iframe.mcp-app")
        expect(frame_element).to_have_attribute("sandbox", "allow-scripts")
        src = frame_element.get_attribute("src") or ""
        assert src.startswith("/apps/") and token not in src
        view = page.frame_locator("iframe.mcp-app")
        # Handshake, then the tool's input and result, in that order.
        expect(view.locator("#host")).to_have_text("host modelctx inspector for forecast")
        expect(view.locator("#input")).to_have_text('input {"city":"Oslo"}')
        expect(view.locator("#result")).to_have_text("result sunny in Oslo")
        # Its origin is opaque: the page (which holds the token) is out of its reach.
        expect(view.locator("#origin")).to_have_text("origin null")
        expect(view.locator("#parent-access")).to_have_text("parent blocked")
        shots.take(page, "view-shown")

        # The view calls a tool through the host: one the app may call...
        view.locator("#refresh").click()
        expect(view.locator("#refreshed")).to_have_text("refreshed Oslo: 21 C")
        expect(page.locator('#log li[data-direction="out"][data-method="tools/call"]')).to_have_count(2)
        # ...and is refused one only the model may call, before it reaches the server.
        view.locator("#forbidden").click()
        expect(view.locator("#forbidden-result")).to_contain_text(
            "refused: tool 'secret_plan' is not callable from a view"
        )
        expect(page.locator('#log li[data-direction="out"][data-method="tools/call"]')).to_have_count(2)

        # Size changes resize the frame; the CSP keeps the view off undeclared origins.
        view.locator("#grow").click()
        expect(frame_element).to_have_attribute("data-height", re.compile(r"^(6[5-9]\d|[7-9]\d\d|1\d\d\d)$"))
        view.locator("#fetch").click()
        expect(view.locator("#fetch-result")).to_have_text("fetch blocked")
        shots.take(page, "view-interacted")

        # The view's own answer: the extension's restrictive policy, sandboxed, framed by us only.
        origin = url.split(f"/{token}/")[0]
        answer = page.request.get(origin + src)
        policy = answer.headers["content-security-policy"]
        assert "sandbox allow-scripts" in policy
        assert "connect-src https://api.weather.example" in policy
        assert "default-src 'none'" in policy and "'self'" not in policy
        assert f"frame-ancestors {origin}" in policy
        assert page.request.get(origin + "/apps/not-a-view").status == 404
        assert page.request.post(origin + src).status == 403

        # The page shows something else: the view is told (ui/resource-teardown) and goes.
        page.locator('#tools button[data-key="secret_plan"]').click()
        expect(page.locator("iframe.mcp-app")).to_have_count(0)

        # A server's CSP "domain" with a directive in it is dropped; the plain origin is kept.
        page.locator('#tools button[data-key="hostile"]').click()
        page.locator("#call").click()
        expect(page.frame_locator("iframe.mcp-app").locator("#hostile")).to_have_text("hostile view")
        hostile_src = page.locator("iframe.mcp-app").get_attribute("src") or ""
        hostile_policy = page.request.get(origin + hostile_src).headers["content-security-policy"]
        assert "connect-src https://ok.weather.example;" in hostile_policy
        assert "x.example" not in hostile_policy and "script-src *" not in hostile_policy


def test_a_view_cannot_call_through_the_host_without_an_open_view(page: Any) -> None:
    """The page's app-call API names the view it acts for; an id that is not an open view is refused."""
    with running_inspector("inspect", str(SERVER)) as url:
        page.goto(url)
        from playwright.sync_api import expect

        expect(page.locator("#status")).to_have_text("connected")
        answer = page.request.post(
            url + "api/app-call",
            data=json.dumps({"view": "guessed", "name": "refresh", "arguments": {"city": "x"}}),
            headers={"Content-Type": "application/json"},
        )
        assert answer.status == 400
        assert "open view" in answer.json()["error"]["message"]
