"""A server with a lifespan, for tests/test_lifespan.py.

The lifespan appends "start" and "stop" to the file named by $LIFESPAN_LOG and yields a
dict the tools read; with $LIFESPAN_FAIL set, its startup raises that text.
"""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from modelctx import Context, Server
from modelctx.client import Client


def note(event: str) -> None:
    with Path(os.environ["LIFESPAN_LOG"]).open("a") as log:
        log.write(event + "\n")


@asynccontextmanager
async def lifespan(server: Server) -> AsyncIterator[dict[str, Any]]:
    note("start")
    failure = os.environ.get("LIFESPAN_FAIL")
    if failure:
        raise RuntimeError(failure)
    try:
        yield {"pool": "the-pool", "server": server.name}
    finally:
        note("stop")


server = Server("lifespan-demo", lifespan=lifespan)


@server.tool
async def pool(ctx: Context) -> str:
    """What the lifespan yielded."""
    return f"{ctx.lifespan_context['pool']} of {ctx.lifespan_context['server']}"


@server.tool
def pool_from_a_thread(ctx: Context) -> str:
    """The same, from a sync handler (a worker thread)."""
    return str(ctx.lifespan_context["pool"])


@server.tool
async def pool_through_an_inner_client(ctx: Context) -> str:
    """Open an in-process client on this same server (the lifespan must not run again)."""
    async with Client(ctx.server) as inner:
        result = await inner.call_tool("pool", {})
    return result.content[0].text
