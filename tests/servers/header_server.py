"""A server whose tools mirror arguments into ``Mcp-Param-*`` headers (``x-mcp-header``).

Served by ``modelctx serve tests/servers/header_server.py --http`` for
``tests/test_http_header_paths.py``: ``lookup`` mirrors ``region`` until ``swap``
registers it again mirroring ``zone``; ``count`` mirrors an integer.
"""

from __future__ import annotations

from modelctx import Server

server = Server("header-server")


def _lookup_schema(prop: str, header: str) -> dict:
    return {
        "type": "object",
        "properties": {prop: {"type": "string", "x-mcp-header": header}},
        "required": [prop],
    }


async def lookup(**arguments: str) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(arguments.items()))


server.add_tool(lookup, name="lookup", input_schema=_lookup_schema("region", "Region"))


@server.tool
async def swap() -> str:
    """Register ``lookup`` again: now its ``zone`` argument is mirrored, not ``region``."""
    server.remove_tool("lookup")
    server.add_tool(lookup, name="lookup", input_schema=_lookup_schema("zone", "Zone"))
    return "swapped"


async def count(n: int) -> str:
    return str(n)


server.add_tool(
    count,
    name="count",
    input_schema={
        "type": "object",
        "properties": {"n": {"type": "integer", "x-mcp-header": "Count"}},
        "required": ["n"],
    },
)
