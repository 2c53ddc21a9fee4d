"""``python -m modelctx.servers.memory [--store PATH] [--http [--host H] [--port P] [--path /mcp]]``."""

from __future__ import annotations

import argparse
import sqlite3
import sys

from .._serving import add_transport_options, serve
from . import build_server, default_store


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m modelctx.servers.memory",
        description="A persistent knowledge graph (the tools of @modelcontextprotocol/server-memory) stored in SQLite.",
    )
    parser.add_argument(
        "--store",
        default=None,
        help=f"the SQLite file of the graph, created if missing (default: {default_store()})",
    )
    add_transport_options(parser)
    args = parser.parse_args(argv)
    store = args.store or default_store()
    try:
        server = build_server(store)
    except (OSError, sqlite3.Error) as exc:
        print(f"modelctx memory: cannot open the store {store}: {exc}; give another --store", file=sys.stderr)
        raise SystemExit(2) from None
    serve(server, args)


if __name__ == "__main__":
    main()
