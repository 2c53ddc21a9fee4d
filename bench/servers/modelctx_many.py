"""Our echo server with ``MODELCTX_BENCH_TOOLS`` more tools (tool_0 ...), each a distinct
function with its own docstring: what ``tools/list`` of a large server sends."""

import os

from modelctx import Server

server = Server("bench-many", "1.0")


@server.tool
async def echo(text: str) -> str:
    """Echo the text back."""
    return text


def _add(i: int) -> None:
    def tool(city: str, days: int = 3) -> str:
        return city

    server.add_tool(tool, name=f"tool_{i}", description=f"Forecast number {i} for a city.")


for _i in range(int(os.environ.get("MODELCTX_BENCH_TOOLS", "0"))):
    _add(_i)
