"""What a newcomer's client meets when it forgets a handler: the error says how this
client declares the capability (a handler in ``ClientHandlers``), in both eras."""

from __future__ import annotations

import asyncio

import pytest

from modelctx import Client, Context, Server
from modelctx.errors import MissingRequiredClientCapability


@pytest.mark.parametrize("mode", ["2026-07-28", "handshake"])
def test_a_missing_elicitation_handler_is_named_as_the_fix(mode):
    server = Server("asks")

    @server.tool
    async def subscribe(ctx: Context) -> str:
        answer = await ctx.elicit("Where to?", {"type": "object", "properties": {"email": {"type": "string"}}})
        return str(answer.action)

    async def call() -> None:
        async with Client(server, mode=mode) as client:  # no handlers given
            await client.call_tool("subscribe", {})

    with pytest.raises(MissingRequiredClientCapability) as raised:
        asyncio.run(asyncio.wait_for(call(), 15))

    assert "handlers=ClientHandlers(elicitation=...)" in str(raised.value)
    assert raised.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}
