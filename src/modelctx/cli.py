"""The ``modelctx`` command.

``modelctx serve PATH[:OBJECT]`` loads a Python file (or an importable module) and
serves the ``Server`` in it: on stdio by default, on Streamable HTTP with ``--http``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

__all__ = ["main", "load_server"]


def load_server(target: str) -> Any:
    """The ``Server`` named by ``PATH[:OBJECT]`` or ``module[:OBJECT]``.

    Without ``:OBJECT`` the module's ``server``, ``app`` or ``mcp`` attribute is used,
    else its only ``Server`` instance.
    """
    from .server import Server

    path, _, attr = target.partition(":")
    if path.endswith(".py") or Path(path).is_file():
        file = Path(path).resolve()
        if not file.is_file():
            raise SystemExit(f"modelctx: no such file: {path}")
        sys.path.insert(0, str(file.parent))
        spec = importlib.util.spec_from_file_location(file.stem, file)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[file.stem] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(path)
    if attr:
        obj = getattr(module, attr, None)
        if obj is None:
            raise SystemExit(f"modelctx: {path} has no attribute {attr!r}")
    else:
        obj = next(
            (getattr(module, n) for n in ("server", "app", "mcp") if isinstance(getattr(module, n, None), Server)),
            None,
        )
        if obj is None:
            found = [v for v in vars(module).values() if isinstance(v, Server)]
            if len(found) != 1:
                raise SystemExit(
                    f"modelctx: found {len(found)} Server objects in {path}; name one as {path}:NAME"
                )
            obj = found[0]
    if callable(obj) and not isinstance(obj, Server):
        obj = obj()  # a factory
    if not isinstance(obj, Server):
        raise SystemExit(f"modelctx: {target} is not a modelctx Server")
    return obj


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="modelctx", description="Model Context Protocol tools")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve a Server from a file or module")
    serve.add_argument("target", help="PATH[:OBJECT] or module[:OBJECT]")
    serve.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    serve.add_argument("--host", default="127.0.0.1", help="HTTP host (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    serve.add_argument("--path", default="/mcp", help="HTTP endpoint path (default /mcp)")
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        help="an Origin allowed besides loopback ones (repeatable)",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        help="a Host header value allowed besides loopback ones (repeatable; for proxies)",
    )
    args = parser.parse_args(argv)
    if args.command == "serve":
        server = load_server(args.target)
        if args.http:
            server.run(
                "http",
                host=args.host,
                port=args.port,
                path=args.path,
                allowed_origins=args.allow_origin,
                allowed_hosts=args.allow_host,
            )
        else:
            server.run("stdio")


if __name__ == "__main__":
    main()
