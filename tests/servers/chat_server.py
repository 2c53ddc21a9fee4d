"""Tools for the chat's own displays (tests/test_host_chat_editing.py, test_host_chat_once.py):
a long tool that reports progress, a tool that needs a page opened first (-32042, as a
2025-11-25 server answers), a form with a titled enum, and a resource.

Served as a real subprocess by ``modelctx serve tests/servers/chat_server.py``.
"""

from __future__ import annotations

import asyncio

from modelctx import Context, Server
from modelctx.errors import ProtocolError

server = Server("chat-server")
_asked_for_page = 0


class URLElicitationRequired(ProtocolError):
    code = -32042


@server.tool(annotations={"readOnlyHint": True})
async def slow(ctx: Context, seconds: float = 30.0) -> str:
    """Work for ``seconds``, reporting progress every 0.2 s."""
    steps = max(1, round(seconds / 0.2))
    for step in range(1, steps + 1):
        await asyncio.sleep(0.2)
        await ctx.report_progress(step, steps, f"chunk {step}")
    return f"done after {steps} chunks"


@server.tool(annotations={"readOnlyHint": True})
def connect_bank() -> str:
    """Needs the user to authorize at the bank's page first (the first call only)."""
    global _asked_for_page
    _asked_for_page += 1
    if _asked_for_page == 1:
        page = {
            "mode": "url",
            "elicitationId": "bank-1",
            "url": "https://bank.example.com/authorize?state=xyz",
            "message": "Authorize read access to your bank account.",
        }
        raise URLElicitationRequired("This request requires browser-based authorization.", {"elicitations": [page]})
    return f"connected after {_asked_for_page} calls"


@server.tool(annotations={"readOnlyHint": True})
async def pick_hero(ctx: Context) -> str:
    """Ask the user to pick a hero (a titled enum) and a team (a default list)."""
    answer = await ctx.elicit(
        "Who leads?",
        {
            "type": "object",
            "properties": {
                "hero": {
                    "type": "string",
                    "oneOf": [{"const": "hero-1", "title": "Ada Lovelace"}, {"const": "hero-2", "title": "Alan Turing"}],
                },
                "tags": {"type": "array", "items": {"enum": ["math", "code", "art"]}, "default": ["math", "code"]},
            },
            "required": ["hero"],
        },
    )
    return f"{answer.action} {answer.content}"


@server.resource("notes://today", mime_type="text/plain")
def today() -> str:
    return "Buy milk."
