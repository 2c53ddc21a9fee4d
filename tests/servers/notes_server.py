"""A server to protect with OAuth, for the authorization tests (CLI, host, end to end).

Served by ``modelctx serve tests/servers/notes_server.py --http --auth-issuer ...``.
Every tool that runs appends its name to the file named by ``NOTES_RAN_LOG`` (when set),
so a test can show that a refused request ran nothing. ``write_note`` needs the scope
``notes:write`` (the ``RequiredScopes`` middleware: 403 ``insufficient_scope`` without it).
"""

from __future__ import annotations

import os

from modelctx import Context, Server, ServerConfig
from modelctx.auth import RequiredScopes

server = Server("notes", config=ServerConfig(middleware=[RequiredScopes(tools={"write_note": ["notes:write"]})]))


def _ran(tool: str) -> None:
    log = os.environ.get("NOTES_RAN_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as file:
            file.write(tool + "\n")


@server.tool
def whoami(ctx: Context) -> str:
    """Who the token says is calling, and with which scopes."""
    _ran("whoami")
    principal = ctx.principal
    subject = principal.subject if principal is not None else None
    return f"{subject} {' '.join(sorted(ctx.scopes))}".strip()


@server.tool
def write_note(text: str) -> str:
    """Keep a note (needs notes:write)."""
    _ran("write_note")
    return f"saved: {text}"
