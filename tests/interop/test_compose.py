"""A composed server (``server.mount``, ``RemoteServer``, ``derive_tool``) as a real
subprocess, called by the official MCP SDK client (mcp==2.3.0) over stdio and HTTP.

The server is ``servers/composed_server.py``: ``billing`` mounted in process, ``catalog``
(with a lifespan) mounted in process, ``billing_server.py`` run as a child process and
mounted as ``remote``, and ``find`` derived from ``catalog_search``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters

from tests.support.paths import SERVERS
from tests.support.wire import HttpServer

COMPOSED = SERVERS / "composed_server.py"
CASES = [("stdio", "auto"), ("stdio", "legacy"), ("http", "auto"), ("http", "legacy")]


class Official:
    """The official client, called synchronously, with what the server sent it."""

    def __init__(self, portal: BlockingPortal, client: Client, mode: str, heard: dict[str, list[Any]]) -> None:
        self.portal, self.client, self.mode, self.heard = portal, client, mode, heard

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.client, name)
        return lambda *args, **kwargs: self.portal.call(lambda: attribute(*args, **kwargs))


@pytest.fixture(scope="module")
def composed_http(tmp_path_factory) -> Iterator[HttpServer]:
    with HttpServer(COMPOSED, tmp_path_factory.mktemp("composed") / "server.log") as server:
        yield server


@pytest.fixture(scope="module", params=CASES, ids=[f"{t}-{m}" for t, m in CASES])
def official(request, composed_http) -> Iterator[Official]:
    transport, mode = request.param
    heard: dict[str, list[Any]] = {"logs": [], "notifications": []}

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        heard["logs"].append(params.data)

    async def on_message(message: Any) -> None:
        method = getattr(message, "method", None)
        if method is not None:
            heard["notifications"].append(method)

    target: Any = (
        StdioServerParameters(
            command=sys.executable,
            args=["-m", "modelctx", "serve", str(COMPOSED)],
            # The official client passes only a few variables on; keep the tree under test.
            env={k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
        )
        if transport == "stdio"
        else composed_http.url
    )
    client = Client(
        target, mode=mode, logging_callback=on_log, log_level="info", message_handler=on_message,
        read_timeout_seconds=30,
    )
    with start_blocking_portal("asyncio") as portal:
        with portal.wrap_async_context_manager(client) as connected:
            yield Official(portal, connected, mode, heard)


def test_a_mounted_servers_tools_are_listed_under_its_prefix(official):
    # (Tools that other tests add to the children on the shared HTTP server join their block.)
    names = [tool.name for tool in official.list_tools().tools if "_register_" not in tool.name]

    assert names[:7] == [
        "ping", "billing_charge", "billing_decline", "billing_open_register",
        "catalog_search", "catalog_lifespan_events", "find",
    ]
    assert {"remote_charge", "remote_decline", "remote_open_register"} <= set(names)
    charge = next(t for t in official.list_tools().tools if t.name == "billing_charge")
    assert charge.description == "Charge an amount."
    assert charge.input_schema["properties"]["amount"] == {"description": "in cents", "type": "integer"}


def test_a_mounted_tool_runs_the_childs_handler_and_its_progress_and_logs_reach_the_caller(official):
    reports: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reports.append((done, total, message))

    result = official.call_tool("billing_charge", {"amount": 250}, progress_callback=progress)

    assert result.is_error is False
    assert result.content[0].text == "charged 250 by billing"  # ctx.server is the child
    assert reports == [(1, 2, "charging")]
    assert "charging 250" in official.heard["logs"]


def test_a_mounted_tools_error_and_argument_checks_are_the_childs(official):
    declined = official.call_tool("billing_decline", {})
    wrong = official.call_tool("billing_charge", {"amount": "lots"})

    assert (declined.is_error, declined.content[0].text) == (True, "card declined")
    assert wrong.is_error is True
    assert "amount" in wrong.content[0].text


def test_a_mounted_resource_template_and_resource_are_read_through_prefixed_uris(official):
    templates = [t.uri_template for t in official.list_resource_templates().resource_templates]
    resources = [r.uri for r in official.list_resources().resources]
    invoice = official.read_resource("invoice://billing/42")
    config = official.read_resource("config://billing/billing")

    assert "invoice://billing/{id}" in templates and "invoice://remote/{id}" in templates
    assert "config://billing/billing" in resources
    assert [(c.uri, c.text) for c in invoice.contents] == [("invoice://billing/42", "invoice 42")]
    assert config.contents[0].text == "currency=EUR"


def test_a_mounted_prompt_is_got_under_its_prefixed_name(official):
    got = official.get_prompt("billing_dunning", {"customer": "Ada"})

    assert got.messages[0].content.text == "Remind Ada to pay."


def test_a_mounted_handler_reads_its_own_servers_lifespan_context(official):
    result = official.call_tool("catalog_search", {"q": "tea", "limit": 1})

    assert result.structured_content == {"result": ["tea-0@catalog-pool"]}


def test_a_derived_tool_lists_its_own_schema_and_checks_calls_against_it(official):
    find = next(t for t in official.list_tools().tools if t.name == "find")
    found = official.call_tool("find", {"query": "tea"})
    wrong = official.call_tool("find", {"q": "tea"})

    assert find.description == "Find products."
    assert find.input_schema["properties"] == {"query": {"description": "Product words", "type": "string"}}
    assert find.input_schema["required"] == ["query"]
    # The wrapper upper-cased the query; the hidden limit was 2.
    assert found.structured_content == {"result": ["TEA-0@catalog-pool", "TEA-1@catalog-pool"]}
    assert wrong.is_error is True
    assert "'query' is a required property" in wrong.content[0].text


def test_a_remote_mounted_tool_is_forwarded_to_the_child_process_with_its_progress(official):
    reports: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reports.append((done, total, message))

    charged = official.call_tool("remote_charge", {"amount": 7}, progress_callback=progress)
    declined = official.call_tool("remote_decline", {})
    invoice = official.read_resource("invoice://remote/9")
    prompt = official.get_prompt("remote_dunning", {"customer": "Bo"})

    assert charged.content[0].text == "charged 7 by billing"
    assert reports == [(1, 2, "charging")]
    assert (declined.is_error, declined.content[0].text) == (True, "card declined")
    assert [(c.uri, c.text) for c in invoice.contents] == [("invoice://remote/9", "invoice 9")]
    assert prompt.messages[0].content.text == "Remind Bo to pay."


@pytest.mark.parametrize("mounted", ["billing", "remote"])
def test_a_tool_added_to_a_mounted_child_is_listed_and_its_list_changed_reaches_the_caller(official, mounted):
    name = f"{official.mode}{mounted}{len(official.heard['notifications'])}"

    official.call_tool(f"{mounted}_open_register", {"name": name})

    deadline = time.monotonic() + 10
    listed: list[str] = []
    while time.monotonic() < deadline:
        listed = [tool.name for tool in official.list_tools().tools]
        if f"{mounted}_register_{name}" in listed:
            break
        time.sleep(0.05)
    assert f"{mounted}_register_{name}" in listed
    assert official.call_tool(f"{mounted}_register_{name}", {}).content[0].text == f"register {name}"
    if official.mode == "legacy":  # a handshake session hears list_changed without asking
        while "notifications/tools/list_changed" not in official.heard["notifications"]:
            assert time.monotonic() < deadline, official.heard
            time.sleep(0.05)
