"""stdio with many calls in flight: a window of WINDOW requests pipelined on one pipe.

The client keeps WINDOW requests outstanding: whenever answers come back it writes as
many new requests as answers arrived, while it keeps reading. Writing and reading are
multiplexed on one thread with select() on both pipes (non-blocking), so neither
direction waits for the other and no thread switching adds noise. This measures the
server's throughput when it can batch reads and writes and run calls concurrently.
Answers may come back in any order; they are all parsed and checked after the clock
stops.
"""

from __future__ import annotations

import json
import os
import select
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

from . import Context, Metric, Scenario


def pipeline(proc, template: bytes, first: int, calls: int, window: int, max_seconds: float):
    """Send ids ``first .. first+calls-1`` keeping ``window`` outstanding; return
    (requests sent, answers received, seconds, raw bytes received)."""
    wfd = proc.popen.stdin.fileno()
    rfd = proc.popen.stdout.fileno()
    os.set_blocking(wfd, False)
    chunks: list[bytes] = []
    pending = b""
    sent = received = 0
    next_id = first
    start = time.perf_counter()
    stop_at = start + max_seconds
    while received < calls:
        can_send = sent < calls and sent - received < window
        readable, writable, _ = select.select([rfd], [wfd] if (pending or can_send) else [], [], IO_TIMEOUT)
        if not readable and not writable:
            proc.check_alive()
            raise BenchError(f"{proc.name}: stalled with {sent - received} calls outstanding")
        if writable:
            if not pending:
                n = min(window - (sent - received), calls - sent)
                pending = b"".join([template % i for i in range(next_id, next_id + n)])
                next_id += n
                sent += n
            try:
                pending = pending[os.write(wfd, pending) :]
            except BlockingIOError:
                pass
        if readable:
            chunk = os.read(rfd, 1 << 18)
            if not chunk:
                proc.check_alive()
                raise BenchError(f"{proc.name} closed stdout; stderr tail:\n{proc.log_tail()}")
            received += chunk.count(b"\n")
            chunks.append(chunk)
            if time.perf_counter() > stop_at:
                break
    return sent, received, time.perf_counter() - start, b"".join(chunks)


def check_all(raw: bytes, first: int, sent: int) -> int:
    """Check every complete answer line (one per id, ids among those sent); return how
    many there were."""
    lines = raw.split(b"\n")[:-1]  # the last piece is an incomplete line (or empty)
    seen = set()
    for item in lines:
        message = json.loads(item)
        check_echo_response(message, message.get("id"))
        seen.add(message["id"])
    if len(seen) != len(lines) or not seen <= set(range(first, first + sent)):
        raise BenchError("answers with duplicate or unexpected ids")
    return len(lines)


def make(window: int) -> Scenario:
    def run(ctx: Context, impl: str) -> dict:
        calls = ctx.pick(60_000, 10_000)
        max_seconds = ctx.pick(12.0, 4.0)
        env = ctx.official_env if impl == "official" else {}
        proc = ctx.servers.spawn(f"{impl}-stdio-w{window}", stdio_command(impl), stdio=True, env=env)
        try:
            reader = LineReader(proc)
            check_echo_response(request_response(proc, reader, echo_call(1), timeout=30.0), 1)
            template = echo_call_template()
            # Warm-up: a short pipelined burst, fully checked.
            sent, _, _, raw = pipeline(proc, template, 2, 1_000, window, 10.0)
            check_all(raw, 2, sent)
            first = 1_000_000
            sent, received, elapsed, raw = pipeline(proc, template, first, calls, window, max_seconds)
            checked = check_all(raw, first, sent)
            if checked != received:
                raise BenchError(f"counted {received} answers but parsed {checked}")
            return {"calls_per_s": received / elapsed, "calls": received, "seconds": elapsed, "window": window}
        finally:
            ctx.servers.stop(proc)

    return Scenario(
        name=f"stdio_pipelined_{window}",
        section="server",
        description=f"stdio, {window} tools/call echo requests outstanding on one pipe",
        metrics=(Metric("calls_per_s", f"stdio {window} in flight", "calls/s", True, sync_within=1.5),),
        run=run,
        impls=SERVER_IMPLS,
    )


SCENARIOS = [make(64), make(256)]
