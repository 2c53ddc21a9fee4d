"""The official SDK (mcp==2.3.0) echo server in its stateless HTTP mode, for the scale section.

    python official_echo_stateless.py http PORT    # Streamable HTTP on 127.0.0.1:PORT/mcp

The same server as official_echo.py, run with ``stateless_http=True`` (no session per
client: what the SDK offers for running behind a load balancer) and ``json_response=True``
(JSON replies, as ours give when nothing is streamed). One uvicorn process, the SDK's
default log level unless ``MCP_BENCH_LOG_LEVEL`` says otherwise (see official_echo.py).
"""

import sys

from official_echo import mcp

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "http":
        raise SystemExit("usage: official_echo_stateless.py http PORT")
    mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), stateless_http=True, json_response=True)
