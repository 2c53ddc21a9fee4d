"""A server with tools that run as tasks, for tests/test_tasks.py.

``TASK_DB``: the SQLite file of its tasks; ``TASK_TTL_MS``: how long they are kept;
``MARKER_DIR``: where ``watched_sleep`` writes what happened to it.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from modelctx import Context, Server, ServerConfig

config = ServerConfig(
    task_db=os.environ.get("TASK_DB"),
    task_ttl_ms=int(os.environ.get("TASK_TTL_MS", "3600000")),
    task_poll_interval_ms=100,
)
server = Server("tasks-test", config=config)
MARKERS = Path(os.environ.get("MARKER_DIR", "."))


@server.tool(task="optional")
async def quick(text: str) -> str:
    """Answers at once (as a task for clients that take tasks)."""
    return f"quick: {text}"


@server.tool(task="required")
async def sleepy(seconds: float) -> str:
    """Sleeps, then answers."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}s"


@server.tool(task="required")
async def watched_sleep(seconds: float) -> str:
    """Sleeps; writes 'started' to MARKER_DIR/state first, and 'cancelled' or 'finished'."""
    state = MARKERS / "state"
    state.write_text("started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        state.write_text("cancelled")
        raise
    state.write_text("finished")
    return "finished"


@server.tool(task="optional")
async def ask_name(ctx: Context) -> str:
    """Asks for a name inside its task."""
    answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
    return f"Hello, {(answer.content or {}).get('name')}!"


@server.tool(task="required")
async def pid_sleep(tag: str, seconds: float) -> str:
    """Writes this process's pid to MARKER_DIR/TAG.pid, then sleeps."""
    (MARKERS / f"{tag}.pid").write_text(str(os.getpid()))
    await asyncio.sleep(seconds)
    return f"slept {seconds}s"
