"""Long tools for the deadline tests: one that reports progress as it works, one that
works in silence, one that reports forever.

Served as a real subprocess by ``modelctx serve tests/servers/progress_server.py``
(stdio, or ``--http``), and as the upstream of a host and a gateway.
"""

from __future__ import annotations

import asyncio

from modelctx import Context, Server

server = Server("progress-server")


@server.tool
async def reporting(ctx: Context, seconds: float = 3.0, every: float = 0.3) -> str:
    """Work for ``seconds``, reporting progress every ``every`` seconds."""
    steps = max(1, round(seconds / every))
    for step in range(1, steps + 1):
        await asyncio.sleep(every)
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"done after {steps} reports"


@server.tool
async def silent(seconds: float = 3.0) -> str:
    """Work for ``seconds`` and report nothing."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool
async def endless(ctx: Context, every: float = 0.3) -> str:
    """Report progress every ``every`` seconds and never finish."""
    step = 0
    while True:
        step += 1
        await asyncio.sleep(every)
        await ctx.report_progress(step, None, f"still going ({step})")
