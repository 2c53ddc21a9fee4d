"""The legacy server (tests/servers/legacy_server.py) on HTTP, for tests/test_legacy_sse_server.py.

Run as ``python legacy_sse_server.py PORT [--auth] [--no-sse] [--workers N] [--max-body N]
[--max-sessions N] [--per-principal N] [--path P]`` (``HttpApp``'s options of those names).
``--auth``: an ``authenticate`` hook reading ``Authorization: Bearer <name>`` (that name
is the principal; no header is the anonymous principal, a malformed one is refused
with 401). Adds a tool ``pid`` naming the process that runs it (a worker, with
``--workers``). Prints ``ready`` on stderr once serving.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from legacy_server import server  # noqa: E402

from modelctx.transports.http import serve_http  # noqa: E402


@server.tool
def pid() -> int:
    """The id of the process running this call."""
    return os.getpid()


class Principal:
    __slots__ = ("subject",)

    def __init__(self, subject: str) -> None:
        self.subject = subject


async def bearer(scope: dict[str, Any]) -> Principal | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() != "bearer" or not token or token == "wrong":
                raise PermissionError("Authorization must be 'Bearer <a known name>'")
            return Principal(token)
    return None


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--auth", action="store_true")
    parser.add_argument("--no-sse", action="store_true")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--max-body", type=int, default=4 * 1024 * 1024)
    parser.add_argument("--max-sessions", type=int, default=10_000)
    parser.add_argument("--per-principal", type=int, default=100)
    parser.add_argument("--path", default="/mcp")
    args = parser.parse_args()
    serve_http(
        server,
        port=args.port,
        workers=args.workers,
        max_body=args.max_body,
        max_sessions=args.max_sessions,
        max_sessions_per_principal=args.per_principal,
        path=args.path,
        legacy_sse=not args.no_sse,
        **({"authenticate": bearer} if args.auth else {}),
        ready_message="ready",
    )
