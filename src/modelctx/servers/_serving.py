"""The transport options every reference server takes, and serving by them.

``--http`` serves Streamable HTTP at ``http://HOST:PORT/PATH`` (loopback by default),
as ``modelctx serve --http`` does; without it the server speaks on stdio. Serving goes
through ``Server.run``, the transports' public entry.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_transport_options", "serve"]


def add_transport_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--http``, ``--host``, ``--port`` and ``--path`` to ``parser``."""
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP host (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    parser.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")


def serve(server: Any, args: argparse.Namespace) -> None:
    """Run ``server`` on the transport ``args`` chose, until stopped."""
    if not args.http:
        server.run("stdio")
        return
    shown = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{shown}:{args.port}/{args.path.strip('/')}"
    server.run(
        "http",
        host=args.host,
        port=args.port,
        path=args.path,
        ready_message=f"modelctx: serving {server.name!r} on Streamable HTTP at {url}",
    )
