"""An old official MCP server (mcp 1.2.0 or 1.9.4) on stdio, for our client to talk to.

Run by tests/test_interop_old_servers.py with the old SDK's own interpreter (a venv under
.tools/, made by scripts/test.sh), never with ours:

    .tools/mcp-1.2.0/bin/python tests/peers/old_stdio_server.py LOG

mcp 1.2.0 answers ``initialize`` with 2024-11-05 whatever was asked; mcp 1.9.4 speaks
2025-03-26. Every line the server reads from stdin is appended to the file LOG first (a
thread copies stdin into a pipe the SDK reads), so a test can check each message our
client sent against the old revision's schema, and see which requests reached the server.

Tools: ``add`` (a sum), ``progress`` (``steps`` progress reports, with a message where the
SDK has one), ``sleepy`` (sleeps; writes ``MARKER`` when cancelled, which mcp 1.9.4
does and mcp 1.2.0 cannot), ``roots`` and ``sample`` (ask the client: roots/list, sampling/createMessage), ``crash``
(exits the process: a server that dies). A resource
``old://greeting``, a template ``old://items/{id}``, a prompt ``greet``.
"""


import asyncio
import json
import os
import sys
import threading
from pathlib import Path

import mcp.types as types
from mcp.server.fastmcp import Context, FastMCP


def tee_stdin(log: Path) -> None:
    """Put a pipe on fd 0 whose lines are also written to ``log``, in the order read."""
    read_end, write_end = os.pipe()
    real = os.dup(0)
    os.dup2(read_end, 0)
    os.close(read_end)

    def copy() -> None:
        with open(real, "rb", buffering=0) as source, open(write_end, "wb", buffering=0) as sink, open(
            log, "ab", buffering=0
        ) as record:
            for line in source:
                record.write(line)
                sink.write(line)

    threading.Thread(target=copy, daemon=True).start()


tee_stdin(Path(sys.argv[1]))
server = FastMCP("old-stdio-server")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Report ``steps`` progress notifications, then finish."""
    for i in range(1, steps + 1):
        try:
            await ctx.report_progress(i, steps, f"step {i}")  # type: ignore[call-arg]
        except TypeError:  # mcp 1.2.0: no message (2024-11-05 has none)
            await ctx.report_progress(i, steps)
    return f"done after {steps} steps"


@server.tool()
async def sleepy(marker: str, seconds: float = 60.0) -> str:
    """Sleep; if cancelled first, write 'cancelled' to the file ``marker``."""
    Path(marker + ".started").write_text("started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        Path(marker).write_text("cancelled")
        raise
    return f"slept {seconds}"


@server.tool()
async def roots(ctx: Context) -> str:
    """Ask the client for its roots (roots/list) and return them as JSON."""
    listed = await ctx.session.list_roots()
    return json.dumps([root.model_dump(mode="json", exclude_none=True) for root in listed.roots])


@server.tool()
async def sample(ctx: Context) -> str:
    """Ask the client to sample (sampling/createMessage) and return its text."""
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))
    result = await ctx.session.create_message([message], max_tokens=5)
    return result.content.text if isinstance(result.content, types.TextContent) else "?"


@server.tool()
def crash() -> str:
    """End the server process at once."""
    os._exit(3)


@server.resource("old://greeting", mime_type="text/plain", description="A fixed greeting.")
def greeting() -> str:
    return "Hello from an old server"


@server.resource("old://items/{id}", mime_type="text/plain", description="One item by id.")
def item(id: str) -> str:
    return f"item {id}"


@server.prompt()
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Say hello to {name}."


if __name__ == "__main__":
    server.run("stdio")
