"""A server run as several replicas sharing one Redis, for tests/test_scale_sessions.py.

    MODELCTX_REDIS_URL=redis://... modelctx serve tests/servers/session_replica.py --http --port P
    MODELCTX_REDIS_URL=redis://... python tests/servers/session_replica.py --port P --idle 1 --auth

Run directly, it takes what the CLI does not offer: ``--idle`` (the handshake-era sessions'
``session_idle_seconds``), ``--auth`` (each request's principal is its ``X-User``
header; none: 401), ``--max-sessions`` and ``--per-principal`` (the caps). ``whereami`` names the replica (its ``REPLICA`` environment
variable), so a test can see which one served a call.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from modelctx import Context, Server

server = Server("replica-server", version="0.0.1")


@server.tool
def whereami() -> str:
    """The name of the replica that runs this call."""
    return os.environ.get("REPLICA", "?")


@server.tool
async def chatty(ctx: Context) -> str:
    """Logs one message at each of debug and warning; which ones arrive says the level."""
    await ctx.debug("a debug line")
    await ctx.warning("a warning line")
    return os.environ.get("REPLICA", "?")


@server.tool
async def ask_name(ctx: Context) -> str:
    """Asks the user their name (elicitation) and greets them, naming the replica."""
    answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
    name = answer.content["name"] if answer.accepted and answer.content else "nobody"
    return f"hello {name} from {os.environ.get('REPLICA', '?')}"


@server.tool
async def work(ctx: Context, seconds: float = 1.0) -> str:
    """Logs a line, works for ``seconds``, then answers naming the replica."""
    await ctx.info("working")
    await asyncio.sleep(seconds)
    return f"worked on {os.environ.get('REPLICA', '?')}"


@server.tool
async def wait_forever() -> str:
    """Runs until cancelled."""
    await asyncio.sleep(3600)
    return "never"


@server.tool
def touch_memo(ctx: Context) -> str:
    """Says that memo://note changed (resources/updated to its subscribers)."""
    ctx.resource_updated("memo://note")
    return "touched"


@server.resource("memo://note")
def note() -> str:
    return "a note"


async def _principal(scope: dict[str, Any]) -> str:
    for name, value in scope["headers"]:
        if name == b"x-user":
            return str(value.decode())
    raise PermissionError("send X-User")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--idle", type=float, default=900.0)
    parser.add_argument("--auth", action="store_true")
    parser.add_argument("--max-sessions", type=int, default=10_000)
    parser.add_argument("--per-principal", type=int, default=100)
    args = parser.parse_args()
    extra: dict[str, Any] = {"authenticate": _principal} if args.auth else {}
    server.run(
        "http",
        port=args.port,
        session_idle_seconds=args.idle,
        max_sessions=args.max_sessions,
        max_sessions_per_principal=args.per_principal,
        ready_message=f"modelctx: serving on http://127.0.0.1:{args.port}/mcp",
        **extra,
    )
