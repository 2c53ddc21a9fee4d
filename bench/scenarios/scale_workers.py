"""The scale section: the same wrk load against our server with 1 and 2 worker
processes (``modelctx serve --http --workers N``) and the official SDK's server in its
stateless HTTP mode (``stateless_http=True``), one after the other.

The load is that of the ``http`` scenario (``wrk -t2 -c50 --latency``, the echo
``tools/call`` of wrk_echo.lua, checked before and after, median of the runs). On this
2-core box wrk's two threads share the cores with the workers, so 2 workers gain less
than 2x; on a machine with spare cores the gain is larger.
"""

from __future__ import annotations

from harness import BENCH, PYTHON, BenchError, free_port, http_command

from . import Context, Metric, Scenario
from .http_load import CONNECTIONS, WRK_THREADS, _check_lua_body, _median_run, post_echo, run_wrk, wait_ready

#: What the scale section runs, in order: ours with 1 worker, with 2, the SDK's stateless server.
SCALE_IMPLS = ("modelctx", "modelctx-2w", "official-stateless")


def command(impl: str, port: int) -> list[str]:
    if impl == "modelctx":
        return http_command("modelctx", port)
    if impl == "modelctx-2w":
        return [*http_command("modelctx", port), "--workers", "2"]
    if impl == "official-stateless":
        return [PYTHON, str(BENCH / "servers" / "official_echo_stateless.py"), "http", str(port)]
    raise ValueError(f"unknown scale implementation {impl!r}; expected one of {SCALE_IMPLS}")


def run(ctx: Context, impl: str) -> dict:
    if not ctx.wrk:
        raise BenchError("the scale section needs wrk (apt-get install wrk)")
    seconds = ctx.pick(5, 3)
    rounds = ctx.pick(3, 1)
    _check_lua_body()
    port = free_port()
    env = ctx.official_env if impl.startswith("official") else {}
    proc = ctx.servers.spawn(f"{impl}-scale", command(impl, port), stdio=False, env=env)
    try:
        wait_ready(proc, port)
        run_wrk(ctx.wrk, port, 1)  # warm-up (with 2 workers: both, as connections spread)
        runs = [run_wrk(ctx.wrk, port, seconds) for _ in range(rounds)]
        proc.check_alive()
        post_echo(port, 2)
        for r in runs:
            if r["non_2xx"] or r["socket_errors"]:
                raise BenchError(
                    f"{r['non_2xx']} non-2xx answers and {r['socket_errors']} socket errors "
                    f"under load; stderr tail:\n{proc.log_tail()}"
                )
        result = _median_run(runs)
        result["load_generator"] = f"wrk -t{WRK_THREADS} -c{CONNECTIONS} -d{seconds}s --latency, median of {rounds}"
        return result
    finally:
        ctx.servers.stop(proc)


SCENARIO = Scenario(
    name="scale",
    section="scale",
    description=f"HTTP {CONNECTIONS} conns: ours with 1 and 2 workers vs the official server (stateless mode)",
    metrics=(
        Metric("req_per_s", f"HTTP {CONNECTIONS} conns", "req/s", True),
        Metric("p50_ms", f"HTTP {CONNECTIONS} conns p50", "ms", False),
        Metric("p99_ms", f"HTTP {CONNECTIONS} conns p99", "ms", False),
    ),
    run=run,
    impls=SCALE_IMPLS,
)
