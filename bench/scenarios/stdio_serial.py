"""stdio, one call at a time: write one request line, read one answer line, repeat.

This is the per-call latency of the whole server path (read, parse, validate, dispatch,
call the tool, encode, write) with nothing to overlap it. The client is the same raw
loop for both servers and does as little as it can: it formats the request from a
template and keeps the raw answers; they are parsed and checked after the clock stops.
"""

from __future__ import annotations

import os
import time

from harness import (
    IO_TIMEOUT,
    SERVER_IMPLS,
    BenchError,
    LineReader,
    check_echo_response,
    echo_call,
    echo_call_template,
    request_response,
    stdio_command,
)

from . import Context, Metric, Scenario, Target


def run(ctx: Context, impl: str) -> dict:
    calls = ctx.pick(20_000, 3_000)
    warmup = ctx.pick(1_000, 300)
    max_seconds = ctx.pick(15.0, 5.0)
    env = ctx.official_env if impl == "official" else {}
    proc = ctx.servers.spawn(f"{impl}-stdio-serial", stdio_command(impl), stdio=True, env=env)
    try:
        reader = LineReader(proc)
        os.set_blocking(proc.popen.stdin.fileno(), False)
        # Warm-up, every answer fully checked; the first call also waits out the import.
        check_echo_response(request_response(proc, reader, echo_call(1), timeout=30.0), 1)
        for i in range(2, warmup + 2):
            check_echo_response(request_response(proc, reader, echo_call(i)), i)

        template = echo_call_template()
        fd = proc.popen.stdin.fileno()
        write = os.write
        readline = reader.readline
        answers: list[bytes] = []
        append = answers.append
        first = warmup + 2
        stop_at = time.perf_counter() + max_seconds
        start = time.perf_counter()
        for i in range(first, first + calls):
            data = template % i
            # stdin is non-blocking and a line is under PIPE_BUF: the write is whole, or it
            # raises BlockingIOError because the server stopped reading (never a hang).
            if write(fd, data) != len(data):
                raise BenchError(f"{impl}: partial write of one request line")
            append(readline(IO_TIMEOUT))
            if not i & 255 and time.perf_counter() > stop_at:
                break
        elapsed = time.perf_counter() - start

        for offset, answer in enumerate(answers):
            check_echo_response(answer, first + offset)
        return {
            "calls_per_s": len(answers) / elapsed,
            "mean_us": elapsed / len(answers) * 1e6,
            "calls": len(answers),
            "seconds": elapsed,
        }
    finally:
        ctx.servers.stop(proc)


SCENARIO = Scenario(
    name="stdio_serial",
    section="server",
    description="stdio, one tools/call echo in flight at a time (raw client over pipes)",
    metrics=(
        Metric("calls_per_s", "stdio 1-at-a-time", "calls/s", True, Target("speedup", 6.0), sync_within=1.5),
        Metric("mean_us", "stdio 1-at-a-time latency", "us", False),
    ),
    run=run,
    impls=SERVER_IMPLS,
)
