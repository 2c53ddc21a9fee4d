"""A server that uses what 2025-06-18 and later added, for the installed-base tests.

Served by ``modelctx serve tests/servers/legacy_server.py`` to real old official clients
(mcp 1.2.0, 2024-11-05; mcp 1.9.4, 2025-03-26; tests/peers/old_client.py): each tool,
resource and prompt carries a field or content an old revision lacks (titles, _meta,
icons, output schemas, structured content, resource links, audio, elicitation), so the
tests can check that none of it reaches the old client and what stands in for it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from modelctx import Audio, Context, ResourceLink, Server, Text, ToolResult

server = Server("legacy-server", version="2.0.0", instructions="For old clients.")

ICONS = [{"src": "https://example.com/icon.png", "mimeType": "image/png"}]


@server.tool(title="Add Numbers", annotations={"readOnlyHint": True, "title": "Adder"}, icons=ICONS, meta={"x": 1})
def add(a: int, b: int) -> dict[str, int]:
    """Add two integers (structured: an output schema and structuredContent)."""
    return {"sum": a + b}


@server.tool
def link() -> ToolResult:
    """Point at a resource (resource_link content) beside plain text."""
    return ToolResult([Text("see the greeting"), ResourceLink("legacy://greeting", "greeting", description="a hello")])


@server.tool
def sound() -> Audio:
    """Return audio content (2025-03-26 and later)."""
    return Audio(b"RIFF0000WAVE", "audio/wav")


@server.tool
async def progress(steps: int, ctx: Context) -> str:
    """Report ``steps`` progress notifications, each with a message, then finish."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"done after {steps} steps"


@server.tool
async def ask(ctx: Context) -> str:
    """Ask the user a question (elicitation: 2025-06-18 and later)."""
    answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
    return f"answer: {answer.action}"


@server.tool
async def sleepy(marker: str, seconds: float = 60.0) -> str:
    """Sleep; if cancelled first, write 'cancelled' to the file ``marker``."""
    Path(marker + ".started").write_text("started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        Path(marker).write_text("cancelled")
        raise
    return f"slept {seconds}"


@server.resource(
    "legacy://greeting", title="Greeting", mime_type="text/plain", description="A fixed greeting.",
    annotations={"audience": ["user"], "priority": 0.5, "lastModified": "2025-01-01T00:00:00Z"},
    icons=ICONS, meta={"x": 1},
)
def greeting() -> str:
    return "Hello, old client"


@server.resource("legacy://items/{id}", title="Item", mime_type="text/plain", description="One item by id.")
def item(id: str) -> str:
    return f"item {id}"


@server.prompt(title="Code Review", icons=ICONS, meta={"x": 1})
def review(code: str) -> str:
    """Ask for a code review."""
    return f"Please review:\n{code}"


@server.completion("review", "code")
def complete_code(value: str, context: dict) -> list[str]:
    return [c for c in ("print(1)", "pass") if c.startswith(value)]
