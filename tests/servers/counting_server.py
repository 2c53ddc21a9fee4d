"""A server that counts the ``tools/list`` requests reaching it, for the host's tests.

    modelctx serve tests/servers/counting_server.py          # stdio

Its lists are fresh for a minute (``ttlMs`` 60,000), so a host that honours the hint
sends no ``tools/list`` while its cache is fresh; ``grow`` adds a tool at run time,
which tells listeners ``notifications/tools/list_changed``. ``pid`` lets a test kill
this very process. With ``COUNTING_ONCE`` set to a file path, the server starts only
once: a second start finds the file and exits at once (a server that cannot come back). ``ask_name``, ``summarize`` and ``roots`` ask the host for input
(elicitation, sampling, roots). The server's name comes from ``COUNTING_NAME`` (default "counting").
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from modelctx import Context, Server, ServerConfig

_once = os.environ.get("COUNTING_ONCE")
if _once:
    if Path(_once).exists():
        sys.exit(f"this server starts only once, and {_once} says it already did")
    Path(_once).write_text("started")

_requests = {"tools/list": 0, "tools/call": 0}


async def count(call: Any, call_next: Any) -> Any:
    """Middleware: count each tools/list and tools/call that reaches this process."""
    if call.method in _requests:
        _requests[call.method] += 1
    return await call_next(call)


server = Server(
    os.environ.get("COUNTING_NAME", "counting"),
    config=ServerConfig(ttl_ms=60_000, middleware=[count]),
)


@server.tool(annotations={"readOnlyHint": True})
def list_requests() -> int:
    """How many tools/list requests reached this server so far."""
    return _requests["tools/list"]


@server.tool(annotations={"readOnlyHint": True})
def call_requests() -> int:
    """How many tools/call requests reached this server so far (this one included)."""
    return _requests["tools/call"]


@server.tool(annotations={"readOnlyHint": True})
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool
def grow(name: str) -> str:
    """Add a tool called ``name`` (it returns its own name); listeners hear list_changed."""

    def grown() -> str:
        return name

    server.add_tool(grown, name=name, description=f"A tool grown at run time: {name}")
    return f"added {name}"


@server.tool
async def ask_name(ctx: Context) -> str:
    """Ask the user for a name (form elicitation) and greet them, or say how it ended."""
    answer = await ctx.elicit(
        "What is your name?",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    )
    return f"hello {answer.content['name']}" if answer.accepted else f"elicitation: {answer.action}"


@server.tool
async def summarize(text: str, ctx: Context) -> str:
    """Ask the host's model to summarize ``text`` (sampling) and return what it said."""
    result = await ctx.sample(f"Summarize: {text}", 50)
    return str(result["content"]["text"])


@server.tool
async def roots(ctx: Context) -> list[str]:
    """The URIs of the roots the host offers."""
    return [root["uri"] for root in await ctx.list_roots()]
