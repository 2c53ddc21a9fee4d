"""Tools for the model-loop tests (tests/test_host_model.py), served on stdio.

``lookup`` is read-only and waits (up to 5 s) until ``wait_for`` lookups are running at
once, then reports when it started and finished and how many it saw: the proof that the
host ran them in parallel comes from this server, not from timings in the test.
``remember`` is not read-only and says when it ran. ``fail`` fails; ``snapshot``
returns an image and an embedded text resource.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from modelctx import EmbeddedResource, Image, Server, Text, ToolError

server = Server("model-tools", version="1.0.0")

# A 1x1 PNG: the tests compare the bytes the model is sent with these.
PIXEL_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)

_running_lookups = 0
_notes: list[str] = []


@server.tool(annotations={"readOnlyHint": True})
async def lookup(key: str, wait_for: int = 2) -> dict[str, Any]:
    """Look a key up; waits until `wait_for` lookups run at once (at most 5 s)."""
    global _running_lookups
    started = time.time()
    _running_lookups += 1
    try:
        deadline = time.monotonic() + 5.0
        while _running_lookups < wait_for and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        seen = _running_lookups
        await asyncio.sleep(0.05)  # stay running a moment, so that the others see this one too
    finally:
        _running_lookups -= 1
    return {"key": key, "started": started, "finished": time.time(), "running_together": seen}


@server.tool
def remember(note: str) -> dict[str, Any]:
    """Write a note down (not read-only)."""
    _notes.append(note)
    return {"note": note, "count": len(_notes), "at": time.time()}


@server.tool(annotations={"readOnlyHint": True})
def fail(reason: str) -> str:
    """Always fails, with the reason given."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool(annotations={"readOnlyHint": True})
def snapshot() -> list[Any]:
    """A picture, a caption and a text resource."""
    return [
        Text("a 1x1 picture"),
        Image(PIXEL_PNG, "image/png"),
        EmbeddedResource("notes://today", text="buy milk", mime_type="text/plain"),
    ]


@server.tool
async def stall(seconds: float = 30.0) -> str:
    """Take ``seconds`` to answer (longer than a test's client waits)."""
    await asyncio.sleep(seconds)
    return "too late"
