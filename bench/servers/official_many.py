"""The official SDK's echo server with ``MODELCTX_BENCH_TOOLS`` more tools, as
``modelctx_many.py``: ``python official_many.py`` (stdio)."""

import os

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("bench-many", version="1.0", log_level="WARNING")


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


def _add(i: int) -> None:
    def tool(city: str, days: int = 3) -> str:
        return city

    mcp.add_tool(tool, name=f"tool_{i}", description=f"Forecast number {i} for a city.")


for _i in range(int(os.environ.get("MODELCTX_BENCH_TOOLS", "0"))):
    _add(_i)

if __name__ == "__main__":
    mcp.run()
