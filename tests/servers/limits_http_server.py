"""A server for ``tests/test_limits.py``: Streamable HTTP with the limits a test sets.

    python limits_http_server.py PORT '{"max_sessions": 8, "header_timeout": 1}'

The JSON options named ``max_listens*`` go to ``ServerConfig``, the others to
``serve_http`` (``HttpApp``'s options and ``header_timeout``). The ``authenticate`` hook
is ``auth_http_server.bearer``: ``Authorization: Bearer <name>`` is the principal
``<name>``, no header the anonymous one. Prints "ready" once serving.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from auth_http_server import bearer  # noqa: E402

from modelctx import Context, Server, ServerConfig  # noqa: E402
from modelctx.transports.http import serve_http  # noqa: E402

options = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
config = {key: options.pop(key) for key in list(options) if key.startswith("max_listens")}
server = Server("limits", config=ServerConfig(**config))


@server.tool
async def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool
async def sleepy(marker: str, seconds: float = 60.0) -> str:
    """Hold the request: write ``<marker>.started``, then sleep."""
    Path(marker + ".started").write_text("started")
    await asyncio.sleep(seconds)
    return "slept"


@server.tool
async def chatty(count: int, size: int, marker: str, ctx: Context) -> str:
    """Send ``count`` log messages of ``size`` characters each; ``marker`` says how
    far it got: "sending N", then "done N" or "cancelled N"."""
    sent = 0
    try:
        for sent in range(count):  # noqa: B007 - read after the loop
            await ctx.info("x" * size)
            if sent % 16 == 0:
                Path(marker).write_text(f"sending {sent}")
    except asyncio.CancelledError:
        Path(marker).write_text(f"cancelled {sent}")
        raise
    Path(marker).write_text(f"done {count}")
    return "said it all"



@server.resource("limits://changes/{name}", mime_type="text/plain")
def changes(name: str) -> str:
    """A resource to subscribe to; ``updates`` announces its changes."""
    return name


@server.tool
async def updates(uri: str, count: int) -> str:
    """Announce ``count`` changes of ``uri``, each with a URI string of its own (so
    nothing is shared between the queued notifications), yielding now and then so the
    session's listener keeps up with the bus."""
    for sent in range(count):
        server.resource_updated(uri[:1] + uri[1:])
        if sent % 32 == 0:
            await asyncio.sleep(0)
    return "announced"

if __name__ == "__main__":
    serve_http(server, port=int(sys.argv[1]), authenticate=bearer, ready_message="ready", **options)
