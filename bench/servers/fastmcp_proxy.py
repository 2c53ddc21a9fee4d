"""FastMCP's proxy (PyPI ``fastmcp``, in its own venv: ``.tools/fastmcp``) in front of an
upstream, for bench/gateway.py: its documented ``create_proxy``.

    python fastmcp_proxy.py stdio '["python", "upstream.py"]'   # on stdio, upstream over stdio
    python fastmcp_proxy.py http URL PORT                       # on HTTP 127.0.0.1:PORT/mcp
"""

import json
import os
import sys

from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy


def main() -> None:
    kind, target = sys.argv[1], sys.argv[2]
    if kind == "stdio":
        argv = json.loads(target)
        upstream = StdioTransport(command=argv[0], args=argv[1:], env=dict(os.environ))
        create_proxy(upstream, name="fastmcp-proxy").run("stdio", show_banner=False)
    else:
        proxy = create_proxy(target, name="fastmcp-proxy")
        proxy.run("http", host="127.0.0.1", port=int(sys.argv[3]), show_banner=False, log_level="warning")


if __name__ == "__main__":
    main()
