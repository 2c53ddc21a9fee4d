"""``python -m modelctx.servers.filesystem ROOT [ROOT...] [--read-only] [--http --host --port]``."""

from __future__ import annotations

import argparse

from . import build_server


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m modelctx.servers.filesystem",
        description="Serve the files under ROOT (and nothing outside it) over MCP.",
    )
    parser.add_argument("roots", nargs="+", metavar="ROOT", help="a directory the server may use")
    parser.add_argument("--read-only", action="store_true", help="leave out the tools that write")
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    parser.add_argument("--path", default="/mcp", help="HTTP path (default /mcp)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    try:
        server = build_server(args.roots, read_only=args.read_only)
    except (NotADirectoryError, ValueError) as exc:
        raise SystemExit(f"modelctx filesystem: {exc}; give existing directories") from None
    if args.http:
        url = f"http://{args.host}:{args.port}{args.path}"
        server.run(
            "http", host=args.host, port=args.port, path=args.path,
            ready_message=f"modelctx: serving the filesystem server on Streamable HTTP at {url}",
        )
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
