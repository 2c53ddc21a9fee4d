"""The sample server on Streamable HTTP with an ``authenticate`` hook and a session cap.

Run as ``python auth_http_server.py PORT MAX_SESSIONS [PER_PRINCIPAL]`` by
``tests/test_http_sessions.py``, ``tests/test_limits.py`` and ``bench/initialize_flood.py``
(PER_PRINCIPAL: ``max_sessions_per_principal``, default the app's). The hook reads ``Authorization: Bearer <name>`` from
the scope headers; the principal is a new ``Principal`` with that name as its ``subject``
on every request. No header is the anonymous principal (None), so unauthenticated floods
can be tried too.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from sample_server import server  # noqa: E402

from modelctx.transports.http import serve_http  # noqa: E402


class Principal:
    """Who the token names; a new object per request, alike only by ``subject``."""

    __slots__ = ("subject",)

    def __init__(self, subject: str) -> None:
        self.subject = subject


async def bearer(scope: dict[str, Any]) -> Principal | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() != "bearer" or not token:
                raise PermissionError("Authorization must be 'Bearer <token>'")
            return Principal(token)
    return None


if __name__ == "__main__":
    serve_http(
        server,
        port=int(sys.argv[1]),
        max_sessions=int(sys.argv[2]),
        **({"max_sessions_per_principal": int(sys.argv[3])} if len(sys.argv) > 3 else {}),
        authenticate=bearer,
        ready_message="ready",
    )
