"""An MCP Apps server written with the official MCP Python SDK (mcp==2.3.0): it lists its
app-only tool to every client, as the SDK does, so the host must keep it from the model.

    python tests/servers/official_apps_server.py            # stdio
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("official-apps", log_level="WARNING")
BOARD = "ui://official/board"


@mcp.resource(BOARD, mime_type="text/html;profile=mcp-app")
def board() -> str:
    return "<!doctype html><p>board</p>"


@mcp.tool(meta={"ui": {"resourceUri": BOARD}})
def show(city: str) -> str:
    """Shows the board for a city."""
    return f"board for {city}"


@mcp.tool(meta={"ui": {"resourceUri": BOARD, "visibility": ["app"]}})
def poll(city: str) -> str:
    """Only the board calls this."""
    return f"polled {city}"


if __name__ == "__main__":
    mcp.run()
