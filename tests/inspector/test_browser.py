"""`modelctx inspect` in a real browser: headless Chromium driving the page of a real
inspector process connected to a real server process (tests/fixtures/servers/inspector_server.py).

One walk through the page, a screenshot after each step: connect and see the server,
fill a form generated from a nested schema, call tools (text, image, progress, isError),
answer an elicitation, see the message log with timings, follow list_changed, read a
resource and a template, get a prompt.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.inspector_processes import Screenshots, chromium_page, running_inspector
from tests.support.paths import SERVERS

SERVER = SERVERS / "inspector_server.py"


@pytest.fixture
def page() -> Any:
    with chromium_page() as page:
        yield page


def _tool(page: Any, name: str) -> None:
    page.locator(f'#tools button[data-key="{name}"]').click()


def test_the_inspector_connects_calls_tools_answers_elicitation_and_follows_list_changed(
    page: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    shots = Screenshots(tmp_path)
    with running_inspector("inspect", str(SERVER)) as url:
        page.goto(url)

        # Connected: server info, version, capabilities; the lists.
        expect(page.locator("#status")).to_have_text("connected")
        expect(page.locator('dd[data-row="Server"]')).to_have_text("inspector-test 2.0.0")
        expect(page.locator('dd[data-row="Protocol version"]')).to_have_text("2026-07-28")
        expect(page.locator("#capabilities")).to_contain_text('"listChanged": true')
        expect(page.locator("#tools button")).to_have_count(9)
        shots.take(page, "connected")

        # A form from the nested schema: required fields are enforced before any call.
        _tool(page, "book_trip")
        expect(page.locator('select[name="arg.cabin"]')).to_have_value("1")  # "economy", its default
        expect(page.locator('input[name="arg.seats"]')).to_have_value("1")
        expect(page.locator('fieldset[data-field="arg.destination"] legend .required')).to_have_text("destination")
        page.locator("#call").click()
        expect(page.locator('input[name="arg.destination.city"] + .field-error')).to_have_text("required")
        expect(page.locator('#log li[data-method="tools/call"]')).to_have_count(0)
        shots.take(page, "required-fields")

        page.locator('input[name="arg.destination.city"]').fill("Oslo")
        page.locator('input[name="arg.destination.nights"]').fill("3")
        page.locator('select[name="arg.cabin"]').select_option(label="business")
        page.locator("#call").click()
        expect(page.locator("#result pre.text")).to_have_text("booked 1 business seat(s) to Oslo for 3 nights")
        shots.take(page, "tool-result")

        # The message log: the request went out with the form's arguments, its answer came back timed.
        call = page.locator('#log li[data-direction="out"][data-method="tools/call"]').last
        expect(call).to_contain_text("tools/call")
        call.locator("summary").click()
        expect(call.locator("pre")).to_contain_text('"city": "Oslo"')
        answer = page.locator('#log li[data-direction="in"][data-kind="response"]').last
        expect(answer.locator(".elapsed")).to_contain_text("ms")
        shots.take(page, "message-log")

        # An image result, as an image.
        _tool(page, "picture")
        page.locator("#call").click()
        expect(page.locator("#result img.image")).to_have_attribute("src", re.compile(r"^data:image/png;base64,iVBOR"))
        shots.take(page, "image-result")

        # Audio, a resource link (read from the result) and an embedded resource.
        _tool(page, "media")
        page.locator("#call").click()
        expect(page.locator("#result audio.audio")).to_have_attribute(
            "src", re.compile(r"^data:audio/wav;base64,UklGR")
        )
        expect(page.locator("#result .resource pre")).to_have_text("an embedded note")
        shots.take(page, "media-result")
        page.locator("#result .resource-link button").click()
        expect(page.locator("#result .read-result pre")).to_have_text("A server for the inspector's tests.")

        # Structured content, as pretty JSON.
        _tool(page, "quote")
        page.locator('input[name="arg.city"]').fill("Lisbon")
        page.locator('textarea[name="arg.extras"]').fill("[not json")  # arrays are JSON text
        page.locator("#call").click()
        expect(page.locator('textarea[name="arg.extras"] + .field-error')).to_contain_text("not valid JSON")
        page.locator('textarea[name="arg.extras"]').fill('["breakfast", "view"]')
        page.locator("#call").click()
        expect(page.locator("#result pre.json")).to_contain_text('"price": 119.5')
        shots.take(page, "structured-content")

        # Progress notifications, shown as they come.
        _tool(page, "count")
        page.locator('input[name="arg.to"]').fill("3")
        page.locator("#call").click()
        expect(page.locator("#result pre.text")).to_have_text("counted to 3")
        expect(page.locator("#progress .progress-text")).to_have_text("3 / 3 — step 3")
        shots.take(page, "progress")

        # A tool error (isError) reads as a tool error.
        _tool(page, "fail")
        page.locator("#call").click()
        expect(page.locator("#result .tool-error")).to_contain_text("Tool error (isError: true)")
        expect(page.locator("#result .tool-error")).to_contain_text("the tool failed on purpose")
        shots.take(page, "tool-error")

        # Elicitation: a form from the requested schema, answered in a dialog.
        _tool(page, "confirm_booking")
        page.locator("#call").click()
        dialog = page.locator("dialog#elicitation")
        expect(dialog).to_be_visible()
        expect(dialog.locator(".message")).to_have_text("Confirm the booking?")
        dialog.locator('input[name="arg.confirm"]').check()
        dialog.locator('select[name="arg.seat"]').select_option(label="window")
        shots.take(page, "elicitation")
        dialog.locator("#elicitation-accept").click()
        expect(dialog).to_be_hidden()
        expect(page.locator("#result pre.text")).to_have_text("confirmed=True seat=window")
        shots.take(page, "elicitation-answered")

        # URL-mode elicitation: a link to open, then accept or decline.
        _tool(page, "sign_in")
        page.locator("#call").click()
        expect(dialog.locator("#elicitation-url")).to_have_attribute("href", "https://example.com/sign-in")
        expect(dialog.locator("#elicitation-cancel")).to_have_count(0)
        shots.take(page, "url-elicitation")
        dialog.locator("#elicitation-accept").click()
        expect(page.locator("#result pre.text")).to_have_text("sign-in accepted")

        # list_changed: a tool the server adds appears without a reload.
        _tool(page, "add_tool")
        page.locator('input[name="arg.name"]').fill("newcomer")
        page.locator("#call").click()
        expect(page.locator("#result pre.text")).to_have_text("added newcomer")
        expect(page.locator('#tools button[data-key="newcomer"]')).to_be_visible()
        shots.take(page, "list-changed")

        # Resources, templates and prompts.
        page.locator('#resources button[data-key="inspector://readme"]').click()
        page.locator("#read").click()
        expect(page.locator("#result .resource pre")).to_have_text("A server for the inspector's tests.")
        page.locator('#resourceTemplates button[data-key="inspector://greeting/{who}"]').click()
        page.locator('input[name="arg.who"]').fill("Ada Lovelace")
        page.locator("#read").click()
        expect(page.locator("#result .resource pre")).to_have_text("hello, Ada Lovelace")
        page.locator('#prompts button[data-key="review"]').click()
        page.locator('input[name="arg.topic"]').fill("the inspector")
        page.locator("#get-prompt").click()
        expect(page.locator(".prompt-result pre")).to_have_text("Please review the inspector.")
        shots.take(page, "prompt")


def test_a_declined_elicitation_and_a_jsonrpc_error_are_shown_apart(page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    shots = Screenshots(tmp_path, prefix="inspector-errors")
    with running_inspector("inspect", str(SERVER)) as url:
        page.goto(url)
        expect(page.locator("#status")).to_have_text("connected")
        _tool(page, "confirm_booking")
        page.locator("#call").click()
        page.locator("#elicitation-decline").click()
        expect(page.locator("#result pre.text")).to_have_text("booking declined")

        # A template URI the server does not know: a JSON-RPC error, not a tool error.
        page.locator('#resourceTemplates button[data-key="inspector://greeting/{who}"]').click()
        page.locator('input[name="arg.who"]').fill("nobody")
        page.locator("#read").click()
        error = page.locator("#result .rpc-error")
        expect(error).to_contain_text("JSON-RPC error -32602")
        expect(page.locator("#result .tool-error")).to_have_count(0)
        shots.take(page, "jsonrpc-error")


def test_what_a_hostile_server_sends_is_shown_as_text_and_never_run(page: Any, tmp_path: Path) -> None:
    """A server names a ``javascript:`` URL for the user to open and answers with markup:
    neither runs in the inspector's page (which holds the access token)."""
    from playwright.sync_api import expect

    shots = Screenshots(tmp_path, prefix="inspector-hostile")
    ran: list[str] = []
    page.on("dialog", lambda dialog: (ran.append(dialog.message), dialog.dismiss()))
    with running_inspector("inspect", str(SERVER)) as url:
        response = page.goto(url)
        assert response is not None
        policy = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy and response.headers.get("referrer-policy") == "no-referrer"
        expect(page.locator("#status")).to_have_text("connected")

        _tool(page, "sign_in")
        page.locator('input[name="arg.url"]').fill("javascript:alert('from the server')")
        page.locator("#call").click()
        dialog = page.locator("dialog#elicitation")
        shown = dialog.locator("#elicitation-url")
        expect(shown).to_contain_text("not an http(s) URL")
        expect(dialog.locator("a")).to_have_count(0)
        shown.click()
        shots.take(page, "javascript-url-refused")
        dialog.locator("#elicitation-decline").click()
        expect(page.locator("#result pre.text")).to_have_text("sign-in declined")

        _tool(page, "sign_in")
        page.locator('input[name="arg.url"]').fill("https://example.com/<img src=x onerror=alert(1)>")
        page.locator("#call").click()
        expect(dialog.locator("img")).to_have_count(0)
        dialog.locator("#elicitation-decline").click()
        expect(page.locator("#result pre.text")).to_have_text("sign-in declined")
    assert ran == []
