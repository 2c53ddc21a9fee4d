"""``python -m modelctx.servers.filesystem ROOT [ROOT...] [--read-only] [--http --host --port]``."""

from __future__ import annotations

import argparse

from .._serving import add_transport_options, serve
from . import build_server


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m modelctx.servers.filesystem",
        description="Serve the files under ROOT (and nothing outside it) over MCP.",
    )
    parser.add_argument("roots", nargs="+", metavar="ROOT", help="a directory the server may use")
    parser.add_argument("--read-only", action="store_true", help="leave out the tools that write")
    add_transport_options(parser)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        server = build_server(args.roots, read_only=args.read_only)
    except (NotADirectoryError, ValueError) as exc:
        raise SystemExit(f"modelctx filesystem: {exc}; give existing directories") from None
    serve(server, args)


if __name__ == "__main__":
    main()
