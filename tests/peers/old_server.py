"""An old official MCP server (mcp 1.2.0 or 1.9.4) on the HTTP+SSE transport of 2024-11-05.

Run by tests/test_legacy_sse_client.py with the old SDK's own interpreter (a venv under
.tools/, made by scripts/test.sh), never with ours:

    .tools/mcp-1.9.4/bin/python tests/peers/old_server.py PORT

It is the server people run: ``FastMCP(...).run("sse")``, so ``GET /sse`` opens the event
stream (its first event names ``/messages/?session_id=...``) and ``POST /sse`` is answered
405 by Starlette. It serves a tool ``add``, a tool ``count`` that reports progress, a tool
``sleepy`` that writes ``<marker>`` when its call is cancelled (mcp 1.2.0 cancels
nothing, and runs one request at a time), a resource
``memo://greeting`` and a prompt ``greet``.
"""

import sys
from pathlib import Path

import anyio
from mcp.server.fastmcp import Context, FastMCP

server = FastMCP("old-sse-server", host="127.0.0.1", port=int(sys.argv[1]), log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
async def count(steps: int, ctx: Context) -> str:
    """Report progress once a step, then finish."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps)
    return f"counted to {steps}"


@server.tool()
async def sleepy(marker: str, seconds: float = 60) -> str:
    """Sleep (a minute); write 'cancelled' to the file ``marker`` when cancelled."""
    Path(marker + ".started").write_text("started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        Path(marker).write_text("cancelled")
        raise
    return "slept"


@server.resource("memo://greeting")
def greeting() -> str:
    """A fixed greeting."""
    return "hello from an old server"


@server.prompt()
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Say hello to {name}."


if __name__ == "__main__":
    server.run(transport="sse")
