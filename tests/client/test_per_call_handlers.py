"""``Client.call_tool(..., handlers=)``: two calls at once on one connection, each with its
own handlers, are each asked their own question and hear their own log message (no
cross-talk), against a real server subprocess (tests/fixtures/servers/per_call_server.py) in both
eras: 2026-07-28 ``input_required`` rounds, and handshake-era ``elicitation/create``
requests on stdio, related to their call by the ``_meta`` key modelctx's servers add."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import pytest

from modelctx import Client
from modelctx.client import ClientHandlers, ClientOptions, Elicitation
from modelctx.protocol import Notification
from modelctx.transports.stdio_client import StdioClientTransport
from tests.support.paths import SERVERS
from tests.support.wire import async_test

SERVER = SERVERS / "per_call_server.py"
ERAS = {"2026-07-28": None, "handshake": "2025-11-25"}


class Meeting:
    """Both callers' persons: each answers only once both have been asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.both = asyncio.Event()

    def person(self, name: str) -> Any:
        async def answer(elicitation: Elicitation) -> dict[str, Any]:
            self.asked.append(f"{name}: {elicitation.message}")
            if len(self.asked) >= 2:
                self.both.set()
            await asyncio.wait_for(self.both.wait(), 20)
            return {"action": "accept", "content": {"name": name}}

        return answer


@pytest.mark.parametrize("era", list(ERAS))
@async_test(60)
async def test_two_calls_at_once_are_each_asked_by_their_own_handlers(era):
    env = dict(os.environ)
    if ERAS[era] is not None:
        env["MODELCTX_TEST_VERSIONS"] = ERAS[era]
    unrelated: list[str] = []

    async def client_wide(elicitation: Elicitation) -> dict[str, Any]:
        unrelated.append(elicitation.message)
        return {"action": "accept", "content": {"name": "Client"}}

    meeting = Meeting()
    heard: dict[str, list[Any]] = {"Ada": [], "Bob": []}

    def hearing(name: str) -> Any:
        def note(notification: Notification) -> None:
            heard[name].append(notification.params.get("data"))

        return note

    transport = StdioClientTransport([sys.executable, "-m", "modelctx", "serve", str(SERVER)], env=env)
    options = ClientOptions(log_level="info")
    async with Client(transport, handlers=ClientHandlers(elicitation=client_wide), options=options, timeout=30) as client:
        assert client.modern is (era == "2026-07-28")
        ada, bob = await asyncio.gather(
            client.call_tool(
                "greet", {"label": "a"}, handlers=ClientHandlers(elicitation=meeting.person("Ada"), notification=hearing("Ada"))
            ),
            client.call_tool(
                "greet", {"label": "b"}, handlers=ClientHandlers(elicitation=meeting.person("Bob"), notification=hearing("Bob"))
            ),
        )
        alone = await client.call_tool("greet", {"label": "c"})  # no handlers of its own: the client's

    assert ada.content[0].text == "a: hello Ada"
    assert bob.content[0].text == "b: hello Bob"
    assert sorted(meeting.asked) == ["Ada: Name for a?", "Bob: Name for b?"]
    assert alone.content[0].text == "c: hello Client" and unrelated == ["Name for c?"]
    assert heard["Ada"] and set(heard["Ada"]) == {"asking for a"}
    assert heard["Bob"] and set(heard["Bob"]) == {"asking for b"}
