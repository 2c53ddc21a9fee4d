"""Clients over Streamable HTTP: our client and the official one, each against each server.

Each server runs once for the whole scenario, in its own uvicorn process on 127.0.0.1
and a free port (the commands of the ``http`` server scenario, with the same
defaults), and every client cell is its own subprocess (``client_driver.py``) making
sequential ``call_tool("echo")`` calls to it, after a few checked warm-up calls.
Both clients are pinned to 2026-07-28 (every call is one POST, answered with JSON).

Two more cells put ``IN_FLIGHT`` calls in flight over one client (``asyncio.gather``
of that many tasks sharing it) against our server: what a client does when an agent
calls tools in parallel. Our server is far from saturated at these rates (it serves
more than ten times as many requests from wrk), so these cells measure the clients.
"""

from __future__ import annotations

from harness import Proc, free_port, http_command, run_client_driver

from . import ClientRun, Context, Metric, Scenario
from .client_stdio import budget, file_name
from .http_load import PATH, wait_ready

IN_FLIGHT = 32

RUNS = (
    ClientRun("modelctx", "modelctx"),
    ClientRun("official", "modelctx"),
    ClientRun("modelctx", "modelctx", IN_FLIGHT),
    ClientRun("official", "modelctx", IN_FLIGHT),
    ClientRun("modelctx", "official"),
    ClientRun("official", "official"),
)

#: The server of each implementation while the scenario runs: (process, port).
_running: dict[str, tuple[Proc, int]] = {}


def server_url(ctx: Context, impl: str) -> str:
    """The URL of ``impl``'s HTTP server, started (and the other one stopped) if needed."""
    if impl in _running:
        proc, port = _running[impl]
        proc.check_alive()
        return f"http://127.0.0.1:{port}{PATH}"
    finish(ctx)  # one server at a time, so the other one cannot take CPU from this cell
    port = free_port()
    env = ctx.official_env if impl == "official" else {}
    proc = ctx.servers.spawn(f"{impl}-http-for-clients", http_command(impl, port), stdio=False, env=env)
    _running[impl] = (proc, port)
    wait_ready(proc, port)
    return f"http://127.0.0.1:{port}{PATH}"


def run(ctx: Context, key: str) -> dict:
    cell = ClientRun.parse(key)
    url = server_url(ctx, cell.server)
    result = run_client_driver(
        ctx.servers,
        f"client-http-{file_name(key)}",
        cell.client,
        url=url,
        in_flight=cell.in_flight,
        **budget(ctx),
    )
    _running[cell.server][0].check_alive()
    return result


def finish(ctx: Context) -> None:
    """Stop the servers this scenario started."""
    while _running:
        _, (proc, _) = _running.popitem()
        ctx.servers.stop(proc)


SCENARIO = Scenario(
    name="client_http",
    section="client",
    description=f"each client against each server over HTTP (sequential, and {IN_FLIGHT} in flight)",
    metrics=(Metric("calls_per_s", "HTTP", "calls/s", True),),
    run=run,
    impls=tuple(cell.key for cell in RUNS),
    finish=finish,
)
