"""A server whose handlers misbehave on purpose, for the shutdown tests."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from modelctx import Server

server = Server("deaf")


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
