"""A parent server composed of others: a local child mounted in process (with its own
lifespan), the same child's module run as a remote child process, and derived tools."""

from __future__ import annotations

import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from modelctx import ArgTransform, Context, Server
from modelctx.host import RemoteServer

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from billing_server import server as billing  # noqa: E402 - the path above finds it

events: list[str] = []


@asynccontextmanager
async def shop_lifespan(server: Server) -> Any:
    events.append("shop up")
    yield {"pool": "shop-pool"}
    events.append("shop down")


@asynccontextmanager
async def catalog_lifespan(server: Server) -> Any:
    events.append("catalog up")
    yield {"pool": "catalog-pool"}
    events.append("catalog down")


catalog = Server("catalog", lifespan=catalog_lifespan)


@catalog.tool
async def search(q: str, limit: int = 5, ctx: Context | None = None) -> list[str]:
    """Search the catalog.

    Args:
        q: what to look for
        limit: how many results
    """
    assert ctx is not None
    return [f"{q}-{i}@{ctx.lifespan_context['pool']}" for i in range(limit)]


@catalog.tool
def lifespan_events() -> list[str]:
    return list(events)


server = Server("shop", version="1.0.0", lifespan=shop_lifespan)


@server.tool
def ping() -> str:
    return "pong"


server.mount(billing, prefix="billing")
server.mount(catalog, prefix="catalog")
server.mount(RemoteServer([sys.executable, str(HERE / "billing_server.py")], name="remote"), prefix="remote")


async def shout(call: Any, **args: Any) -> Any:
    args["query"] = args["query"].upper()
    return await call(**args)


server.derive_tool(
    "catalog_search",
    name="find",
    description="Find products.",
    arguments={
        "q": ArgTransform(name="query", description="Product words"),
        "limit": ArgTransform(hide=True, default=2),
    },
    wrap=shout,
)

if __name__ == "__main__":
    server.run()
