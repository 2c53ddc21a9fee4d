"""Two clients of one gateway, each calling the same upstream tool at the same time: what
the upstream asks during each call reaches the client that made it, never the other one
(the gateway passes each call's own handlers upstream, ``call_tool(handlers=)``).

A real ``modelctx gateway --http`` process in front of a real upstream subprocess
(tests/fixtures/servers/per_call_server.py) of either era: a 2026-07-28 upstream asks with
``input_required`` rounds, a handshake-era one with ``elicitation/create`` requests on its
one stdio connection, where both calls' questions are in flight at once. Each question is
answered only once both have been asked, so the two calls truly overlap.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from modelctx import Client
from modelctx.client import ClientHandlers
from tests.client.test_per_call_handlers import Meeting
from tests.host.test_gateway_policy import _config, _http
from tests.support.paths import SERVERS
from tests.support.wire import async_test

UPSTREAM_ERAS = {"2026-07-28": None, "handshake": "2025-11-25"}


def _upstream(versions: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "command": sys.executable,
        "args": ["-m", "modelctx", "serve", str(SERVERS / "per_call_server.py")],
        "approval": "allow",
    }
    if versions is not None:
        spec["env"] = {"MODELCTX_TEST_VERSIONS": versions}
    return spec


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@pytest.mark.parametrize("upstream", list(UPSTREAM_ERAS))
@async_test(120)
async def test_two_clients_calling_at_once_are_each_asked_their_own_question(tmp_path, upstream, mode):
    config = _config(tmp_path, people=_upstream(UPSTREAM_ERAS[upstream]))
    meeting = Meeting()
    ada_asks = ClientHandlers(elicitation=meeting.person("Ada"))
    bob_asks = ClientHandlers(elicitation=meeting.person("Bob"))
    async with _http(config) as url:
        async with Client(url, mode=mode, handlers=ada_asks, timeout=30) as ada, Client(
            url, mode=mode, handlers=bob_asks, timeout=30
        ) as bob:
            for_ada, for_bob = await asyncio.gather(
                ada.call_tool("people_greet", {"label": "a"}), bob.call_tool("people_greet", {"label": "b"})
            )

    if upstream == "handshake" and mode == "auto":
        # A handshake-era upstream asks on its open connection while a 2026-07-28 client
        # can only be asked in stateless rounds the gateway cannot hold that call across:
        # declined, and no one is asked (host/_gateway_ui.py, CallScope._unaskable).
        assert [for_ada.content[0].text, for_bob.content[0].text] == ["a: decline", "b: decline"]
        assert meeting.asked == []
        return
    assert for_ada.content[0].text == "a: hello Ada", for_ada
    assert for_bob.content[0].text == "b: hello Bob", for_bob
    assert sorted(meeting.asked) == ["Ada: Name for a?", "Bob: Name for b?"]
