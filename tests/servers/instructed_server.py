"""A server with instructions for the model, and a tool that samples with every
parameter a sampling request can carry (tests/test_host_model_context.py).

``MODELCTX_TEST_INSTRUCTIONS`` is its ``instructions``; ``ask`` sends one
``sampling/createMessage`` with maxTokens, temperature, stopSequences, systemPrompt and
modelPreferences (the hint from its argument) and returns what the host answered.
"""

from __future__ import annotations

import os
from typing import Any

from modelctx import Context, Server

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
