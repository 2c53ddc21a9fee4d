"""A remote mount relays what the remote asks during a call to the parent's caller:
elicitation, sampling and roots go through the parent's ``Context`` and the answers back
to the remote; its log messages and progress reach the caller too.

Real processes: tests/fixtures/servers/remote_parent_server.py served over stdio, mounting
tests/fixtures/servers/asking_server.py run as a child process twice (``now``: 2026-07-28, where the
child asks with input_required; ``old``: the handshake era, where it asks on its
connection). The caller is the official MCP client (mcp 2.3.0), answering with its own
callbacks, in both of its eras.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
from anyio.from_thread import start_blocking_portal
from mcp import Client, StdioServerParameters

from tests.support.paths import SERVERS

PARENT = SERVERS / "remote_parent_server.py"
#: Which children each caller era can be asked through: a handshake-era child asks on its
#: connection, outside the call's task, where a 2026-07-28 caller's input_required cannot
#: be raised (declined; see _remote.py).
CASES = [("legacy", "now"), ("legacy", "old"), ("auto", "now")]


class Caller:
    """The official client, called synchronously, with what it was asked and told."""

    def __init__(self, portal: Any, client: Any, heard: dict[str, list[Any]]) -> None:
        self.portal, self.client, self.heard = portal, client, heard

    def call_tool(self, name: str, arguments: dict[str, Any], **options: Any) -> Any:
        return self.portal.call(lambda: self.client.call_tool(name, arguments, **options))


@pytest.fixture(scope="module", params=["legacy", "auto"])
def caller(request: Any) -> Iterator[tuple[Caller, str]]:
    heard: dict[str, list[Any]] = {"asked": [], "sampled": [], "logs": []}

    async def elicit(context: Any, params: Any) -> Any:
        heard["asked"].append(params.message)
        return types.ElicitResult(action="accept", content={"seats": 3})

    async def sample(context: Any, params: Any) -> Any:
        heard["sampled"].append(params.messages[0].content.text)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="short"), model="m", stopReason="endTurn"
        )

    async def roots(context: Any) -> Any:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        heard["logs"].append(params.data)

    target = StdioServerParameters(
        command=sys.executable,
        args=["-m", "modelctx", "serve", str(PARENT)],
        env=dict(os.environ),  # the official client passes only a few variables on: keep this tree
    )
    client = Client(
        target, mode=request.param, elicitation_callback=elicit, sampling_callback=sample,
        list_roots_callback=roots, logging_callback=on_log, log_level="info", read_timeout_seconds=30,
    )  # fmt: skip
    with start_blocking_portal("asyncio") as portal, portal.wrap_async_context_manager(client) as connected:
        yield Caller(portal, connected, heard), request.param


def _children(mode: str) -> list[str]:
    return [child for era, child in CASES if era == mode]


def test_a_question_the_remote_asks_during_a_call_is_answered_by_the_parents_caller(caller):
    client, mode = caller
    reports: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reports.append((done, total, message))

    for child in _children(mode):
        reports.clear()
        client.heard["asked"].clear()
        booked = client.call_tool(f"{child}_book", {"day": "Monday"}, progress_callback=progress)
        assert booked.content[0].text == "booked 3 seats on Monday", child
        assert client.heard["asked"] == ["How many seats on Monday?"], child
        assert (1, 2, "asking") in reports, child


def test_the_remotes_sampling_and_roots_requests_reach_the_parents_caller(caller):
    client, mode = caller
    for child in _children(mode):
        summary = client.call_tool(f"{child}_summarize", {"text": "a long text"})
        where = client.call_tool(f"{child}_where", {})
        assert summary.content[0].text == "summary: short", child
        assert where.content[0].text == "file:///work", child
    assert "Summarize: a long text" in client.heard["sampled"]


def test_the_remotes_log_messages_during_a_call_reach_the_parents_caller(caller):
    client, mode = caller
    for child in _children(mode):
        client.heard["logs"].clear()
        client.call_tool(f"{child}_book", {"day": "Friday"})
        assert "booking Friday" in client.heard["logs"], child


def test_a_handshake_era_remote_asking_a_2026_07_28_caller_is_declined_not_left_hanging(caller):
    client, mode = caller
    answer = client.call_tool("old_book", {"day": "Sunday"}).content[0].text
    if mode == "auto":  # a 2026-07-28 caller cannot be asked mid-call by a handshake-era remote
        assert answer == "not booked: decline"
    else:  # a handshake-era caller can: it is asked, and its answer goes back
        assert answer == "booked 3 seats on Sunday"
