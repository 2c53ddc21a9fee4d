"""A server whose handlers misbehave on purpose, for the shutdown tests."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from modelctx import Context, Server, ServerConfig

# A client that never answers a question gets 0.5 s before the question fails.
server = Server("deaf", config=ServerConfig(client_request_timeout=0.5))


@server.tool
async def deaf(marker: str) -> str:
    """Swallow every cancellation and keep running (a handler that will not stop)."""
    Path(marker + ".started").write_text("started")
    while True:
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:
            Path(marker).write_text("cancelled")


@server.tool
def stuck(marker: str) -> str:
    """A sync handler blocked in its worker thread for ten minutes."""
    Path(marker + ".started").write_text("started")
    time.sleep(600)
    return "never"


@server.tool
async def echo(text: str) -> str:
    return text


@server.resource("deaf://thing", mime_type="text/plain")
def thing() -> str:
    return "a thing"


@server.tool
async def ask_name(ctx: Context) -> str:
    """Ask the client a question (handshake era: a server-to-client request)."""
    answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
    return str(answer.content)
