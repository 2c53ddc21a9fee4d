"""One client benchmark run, in a process of its own: connect, warm up, time ``call_tool``.

    python client_driver.py --client modelctx|official (--stdio-server modelctx|official | --url URL)
                            [--calls N] [--seconds S] [--warmup N] [--in-flight K] [--deadline S]

The client under test (``modelctx.client.Client`` or the official ``mcp.Client``) is
pinned to 2026-07-28 (``mode="2026-07-28"``: no probe, the first message is the
first call). Over stdio the client starts the server itself, as a user's client would
(the command comes from ``harness.stdio_command``); over HTTP it talks to a server
the benchmark started. After ``--warmup`` checked calls (bounded by ``--seconds`` as
well), it times up to ``--calls`` calls of ``echo``, stopping early after
``--seconds``, with ``--in-flight`` tasks sharing the one client (1: strictly
sequential). Each call echoes its own text, so a mixed-up answer under concurrency
is caught; the results are checked after the clock stops.

Prints exactly one JSON line on stdout: the figures, or ``{"error": ...}`` with exit
code 1. Everything is bounded: the whole run by ``--deadline``, and 5 s later SIGALRM
reports an error and exits at once, in case closing the client hangs too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import stdio_command

CONNECT_TIMEOUT = 30.0  # the first call: includes starting the server over stdio


def make_client(args: argparse.Namespace):
    """The client object (not yet connected) and when its package finished importing."""
    if args.client == "modelctx":
        from modelctx.client import Client

        imported = time.perf_counter()
        if args.url:
            return Client(args.url, mode="2026-07-28", timeout=CONNECT_TIMEOUT), imported
        return Client(stdio_command(args.stdio_server), mode="2026-07-28", timeout=CONNECT_TIMEOUT), imported
    if args.client == "official":
        import mcp

        imported = time.perf_counter()
        if args.url:
            return mcp.Client(args.url, mode="2026-07-28", read_timeout_seconds=CONNECT_TIMEOUT), imported
        command = stdio_command(args.stdio_server)
        # env=None would give the server only the SDK's short list of variables; pass the
        # ones the benchmark sets (MCP_BENCH_LOG_LEVEL), merged over that list by the SDK.
        env = {k: v for k, v in os.environ.items() if k.startswith("MCP_BENCH_")} or None
        params = mcp.StdioServerParameters(command=command[0], args=command[1:], env=env)
        return mcp.Client(params, mode="2026-07-28", read_timeout_seconds=CONNECT_TIMEOUT), imported
    raise SystemExit(f"unknown client {args.client!r}")


def check(result, text: str) -> None:
    """Both clients return a CallToolResult with ``content[0].text`` and ``is_error``."""
    content = getattr(result, "content", None) or [None]
    got = getattr(content[0], "text", None)
    if got != text or getattr(result, "is_error", False) is True:
        raise RuntimeError(f"wrong echo result: expected text {text!r}, got {str(result)[:300]}")


async def run(args: argparse.Namespace, started: float) -> dict:
    client, imported = make_client(args)
    async with client:
        connected = time.perf_counter()
        # The first call waits out the server start (stdio) and, for the official client,
        # its automatic tools/list; bounded by the request timeout set above.
        check(await client.call_tool("echo", {"text": "w0"}), "w0")
        first = time.perf_counter()
        warm_stop = first + args.seconds
        for i in range(1, args.warmup):
            check(await client.call_tool("echo", {"text": f"w{i}"}), f"w{i}")
            if time.perf_counter() > warm_stop:
                break

        call = client.call_tool
        calls, in_flight = args.calls, args.in_flight
        results: dict[int, object] = {}  # call number -> result
        done = 0  # calls started, shared by the workers (one event loop: no lock needed)
        perf = time.perf_counter

        async def worker(stop_at: float) -> None:
            nonlocal done
            while done < calls:
                i = done
                done += 1
                results[i] = await call("echo", {"text": str(i)})
                if perf() > stop_at:
                    return

        cpu_start = time.process_time()  # this process only: the client, not its server
        start = perf()
        if in_flight == 1:
            await worker(start + args.seconds)
        else:
            await asyncio.gather(*(worker(start + args.seconds) for _ in range(in_flight)))
        elapsed = perf() - start
        cpu = time.process_time() - cpu_start

    for i in range(done):
        check(results[i], str(i))
    return {
        "calls_per_s": done / elapsed,
        # Wall time per call; with several in flight, the mean latency (Little's law).
        "mean_us": elapsed / done * 1e6 * in_flight,
        # CPU time of the client process per call; its share of the wall time per call
        # (elapsed / done) is the client's share of the cost, the rest is the server's
        # and the transport's (and, on a busy box, waiting for a core).
        "client_cpu_us": cpu / done * 1e6,
        "client_cpu_share": cpu / elapsed,
        "calls": done,
        "seconds": elapsed,
        "in_flight": in_flight,
        "import_s": imported - started,
        "connect_s": connected - imported,
        "first_call_s": first - connected,
    }


def describe(exc: BaseException) -> str:
    """``Type: message`` of the first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, asyncio.TimeoutError):
        return "TimeoutError: the run did not finish within its deadline"
    return f"{type(exc).__name__}: {exc}"


def _alarm(signum: int, frame: object) -> None:
    # Closing the client hung after the deadline: report it and leave at once. Any stdio
    # server left behind is the benchmark's to kill (it is our orphan, re-parented there).
    os.write(1, (json.dumps({"error": "the run and its clean-up did not finish within the deadline"}) + "\n").encode())
    os._exit(1)


def main() -> int:
    started = time.perf_counter()
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", required=True, choices=("modelctx", "official"))
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--stdio-server", choices=("modelctx", "official"))
    target.add_argument("--url")
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--in-flight", type=int, default=1)
    parser.add_argument("--deadline", type=float, default=60.0)
    args = parser.parse_args()
    # Backstop: if the run and even the clean-up after a timeout hang, SIGALRM ends it.
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(args.deadline) + 5)
    try:
        result = asyncio.run(asyncio.wait_for(run(args, started), args.deadline))
    except BaseException as exc:  # noqa: BLE001 - report whatever went wrong, as JSON
        traceback.print_exc(file=sys.stderr)
        print(json.dumps({"error": describe(exc)}), flush=True)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
