"""A server with instructions for the model, and a tool that samples with every
parameter a sampling request can carry (tests/test_host_model_context.py).

``MODELCTX_TEST_INSTRUCTIONS`` is its ``instructions``; ``ask`` sends one
``sampling/createMessage`` with maxTokens, temperature, stopSequences, systemPrompt and
modelPreferences (the hint from its argument) and returns what the host answered.
For the CLI tests (tests/test_cli_model_items.py): ``connect_account`` answers -32042
(the person must open a URL first), and a tool has a name long enough to wrap.
"""

from __future__ import annotations

import os
from typing import Any

from modelctx import Context, Server
from modelctx.errors import HANDSHAKE_ERA_URL_ELICITATION_REQUIRED, ProtocolError

server = Server("instructed", version="1.0.0", instructions=os.environ.get("MODELCTX_TEST_INSTRUCTIONS") or None)


@server.tool(annotations={"readOnlyHint": True})
async def ask(question: str, hint: str, ctx: Context) -> dict[str, Any]:
    """Ask the host's model, with every sampling parameter set."""
    return await ctx.sample(
        question,
        77,
        temperature=0.25,
        stopSequences=["END", "STOP"],
        systemPrompt="You are a terse summarizer.",
        modelPreferences={"hints": [{"name": hint}], "intelligencePriority": 0.9},
    )


class URLElicitationRequired(ProtocolError):
    code = HANDSHAKE_ERA_URL_ELICITATION_REQUIRED


CONNECT_URL = "https://example.com/connect?session=e1"


@server.tool
async def connect_account() -> str:
    """Needs the person to authorize at a URL first (-32042)."""
    raise URLElicitationRequired(
        "This request requires more information.",
        {"elicitations": [{"mode": "url", "elicitationId": "e1", "url": CONNECT_URL,
                           "message": "Authorize access to your files."}]},
    )


@server.tool(annotations={"readOnlyHint": True})
def fetch_the_quarterly_revenue_report_for_a_region(region: str, quarter: str) -> str:
    """Fetch the quarterly revenue report of one region, with a description long enough to wrap twice."""
    return f"{region} {quarter}"
