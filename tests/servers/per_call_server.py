"""A server whose tool asks its caller a question and logs on the way, for the tests of
per-call handlers (tests/test_client_per_call_handlers.py, tests/test_host_gateway_per_call.py).

``MODELCTX_TEST_VERSIONS`` (comma-separated, optional) narrows the revisions it speaks:
a handshake revision alone makes it a handshake-era server, which asks with real
``elicitation/create`` requests on its connection instead of ``input_required``.
"""

from __future__ import annotations

import os

from modelctx import Context, Server
from modelctx.server import ServerConfig

_VERSIONS = os.environ.get("MODELCTX_TEST_VERSIONS")
config = ServerConfig(versions=tuple(_VERSIONS.split(","))) if _VERSIONS else ServerConfig()
server = Server("per-call", config=config)

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@server.tool
async def greet(label: str, ctx: Context) -> str:
    """Log, ask the caller its name (a form elicitation), and greet it by ``label``."""
    await ctx.info(f"asking for {label}")
    answer = await ctx.elicit(f"Name for {label}?", NAME_FORM)
    if answer.action != "accept" or not isinstance(answer.content, dict):
        return f"{label}: {answer.action}"
    return f"{label}: hello {answer.content['name']}"
