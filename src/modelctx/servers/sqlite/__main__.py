"""``python -m modelctx.servers.sqlite DB_PATH [--timeout S] [--max-rows N] [--max-bytes N] [--http ...]``."""

from __future__ import annotations

import argparse
import sqlite3
import sys

from .._serving import add_transport_options, serve
from . import Limits, build_server

_DEFAULTS = Limits()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m modelctx.servers.sqlite",
        description="A SQLite database over MCP: the schema as resources, read-only queries, confirmed writes.",
    )
    parser.add_argument("database", metavar="DB_PATH", help="the SQLite file (created if missing)")
    parser.add_argument(
        "--timeout", type=float, default=_DEFAULTS.timeout, help=f"seconds a statement may run (default {_DEFAULTS.timeout:g})"
    )
    parser.add_argument(
        "--max-rows", type=int, default=_DEFAULTS.max_rows, help=f"rows a page may hold (default {_DEFAULTS.max_rows})"
    )
    parser.add_argument(
        "--max-bytes", type=int, default=_DEFAULTS.max_bytes, help=f"JSON bytes a page may hold (default {_DEFAULTS.max_bytes})"
    )
    add_transport_options(parser)
    args = parser.parse_args(argv)
    if args.timeout <= 0 or args.max_rows < 1 or args.max_bytes < 1:
        parser.error("--timeout, --max-rows and --max-bytes must be positive")
    try:
        server = build_server(args.database, Limits(args.max_rows, args.max_bytes, args.timeout))
    except (OSError, sqlite3.Error) as exc:
        print(f"modelctx sqlite: cannot open {args.database}: {exc}; check the path and its permissions", file=sys.stderr)
        raise SystemExit(2) from None
    serve(server, args)


if __name__ == "__main__":
    main()
