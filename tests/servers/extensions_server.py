"""A server that declares two extensions, for tests/test_extensions.py."""

import json

from modelctx import Context, Server

EXTENSIONS = {
    "io.modelcontextprotocol/tasks": {},
    "com.example/weather-alerts": {"regions": ["EU", "US"]},
}

server = Server("extended", extensions=EXTENSIONS)


@server.tool
async def client_extensions(ctx: Context) -> str:
    """The extensions the client declared, as JSON."""
    return json.dumps(ctx.client_capabilities.get("extensions", {}), sort_keys=True)
