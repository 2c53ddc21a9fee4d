"""Clients over stdio: our client and the official one, each against each server.

Every cell is its own subprocess (``client_driver.py``): the client imports, starts
the echo server as its stdio subprocess (``harness.stdio_command``, the same commands
as the server scenarios), makes a few checked warm-up calls, then times sequential
``call_tool("echo", {"text": ...})`` calls (a bounded count, cut short after a bounded
time). Both clients are pinned to 2026-07-28: no probe, no handshake.

A cell is the cost of the whole call path: client encode + pipe + server + pipe +
client decode, with nothing overlapping. Read along a row (same client) for what the
server costs, down a column (same server) for what the client costs.
"""

from __future__ import annotations

from harness import run_client_driver

from . import ClientRun, Context, Metric, Scenario

RUNS = (
    ClientRun("modelctx", "modelctx"),
    ClientRun("official", "modelctx"),
    ClientRun("modelctx", "official"),
    ClientRun("official", "official"),
)


def budget(ctx: Context) -> dict:
    """Counts and times of one cell: at most ``calls`` timed calls or ``seconds``."""
    seconds = ctx.pick(3.0, 1.0)
    return {
        "calls": ctx.pick(30_000, 5_000),
        "seconds": seconds,
        "warmup": ctx.pick(200, 50),
        "deadline": 30.0 + 3 * seconds,
    }


def file_name(key: str) -> str:
    return key.replace("->", "-to-").replace("*", "x")


def run(ctx: Context, key: str) -> dict:
    cell = ClientRun.parse(key)
    return run_client_driver(
        ctx.servers,
        f"client-stdio-{file_name(key)}",
        cell.client,
        stdio_server=cell.server,
        in_flight=cell.in_flight,
        env=ctx.official_env if cell.server == "official" else None,
        **budget(ctx),
    )


SCENARIO = Scenario(
    name="client_stdio",
    section="client",
    description="each client against each server over stdio, sequential call_tool(echo)",
    metrics=(Metric("calls_per_s", "stdio", "calls/s", True),),
    run=run,
    impls=tuple(cell.key for cell in RUNS),
)
