"""The official SDK (mcp==2.3.0) echo server the benchmark drives.

    python official_echo.py              # stdio
    python official_echo.py http PORT    # Streamable HTTP on 127.0.0.1:PORT/mcp

HTTP uses the SDK's defaults for ``mcp.run("streamable-http", ...)``: json_response=False,
stateless_http=False (2026-07-28 requests are stateless and answered as JSON anyway),
uvicorn in one process with the SDK's default log level INFO (one access-log line per
request, to stderr). ``MCP_BENCH_LOG_LEVEL=WARNING`` overrides the level, to see what
the logging costs; the benchmark leaves it unset unless asked.
"""

import os
import sys

from mcp.server.mcpserver import MCPServer

level = os.environ.get("MCP_BENCH_LOG_LEVEL")
mcp = MCPServer("bench-echo", version="1.0", **({"log_level": level} if level else {}))


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run()
