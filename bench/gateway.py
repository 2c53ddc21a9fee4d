"""What a gateway adds to one ``tools/call``: direct vs ``modelctx gateway`` vs fastmcp's proxy.

    python bench/gateway.py              # stdio and HTTP, about a minute
    python bench/gateway.py --quick      # fewer calls
    python bench/gateway.py --only stdio --out /tmp/gateway.json
    python bench/gateway.py --only stdio --baseline /work/main   # A/B against main's gateway

The same upstream (our echo server, ``bench/servers/modelctx_echo.py``) is called three
ways by the same raw client (over stdio the fronts take turns, 100 calls each, so a
shared machine's load falls on all of them alike; every process runs this checkout) (one request at a time, a 2026-07-28
``tools/call`` of ``echo`` with the envelope in ``_meta``):

- **direct**: the client talks to the upstream itself;
- **modelctx**: through ``modelctx gateway --config CFG --bare-names`` (the tool keeps
  its name ``echo``, so every request is byte for byte the same);
- **fastmcp**: through ``fastmcp.server.create_proxy(...)`` (fastmcp from PyPI, in the venv
  scripts/test.sh makes, ``.tools/fastmcp``; ``MODELCTX_FASTMCP_PYTHON`` names another),
  run by ``servers/fastmcp_proxy.py``;
- **relay** (stdio only): the floor of any stdio gateway, a process that copies each line
  to the upstream and its answer back with blocking reads and writes, parsing nothing
  (``--relay-floor``). What it adds is the cost of one more process hop on this machine.
- **looprelay** (stdio only): the same copy done from event-loop callbacks (uvloop when
  installed, as our gateway runs), parsing nothing (``--loop-relay-floor``): the floor of
  a gateway written on an event loop.
- **baseline** (stdio only, with ``--baseline CHECKOUT``): our gateway as another checkout
  has it (its ``src``; the upstream still runs this one's), taking turns with ours: an
  A/B of a change in one run, under the same load.

Over stdio the client writes to the front process's stdin and the front reaches the
upstream over stdio; over HTTP every hop is Streamable HTTP on 127.0.0.1 (one kept-alive
connection for the client). Added latency = a front's per-call time minus direct's,
at p50 and p99 (each percentile taken over its own run). The ratio is fastmcp's added
latency over ours. Goal (issue 8): ours at most a third of fastmcp's, and at most 150 us
at p50 on stdio.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402 - the bench folder is put on the path first
    BENCH,
    FASTMCP_PYTHON,
    HTTP_HEADERS,
    IO_TIMEOUT,
    MODELCTX_CLI,
    PYTHON,
    REPO,
    BenchError,
    LineReader,
    Proc,
    Servers,
    check_echo_response,
    echo_call,
    echo_call_template,
    free_port,
    http_command,
    request_response,
    stdio_command,
)

FASTMCP_PROXY = BENCH / "servers" / "fastmcp_proxy.py"
FRONTS = ("direct", "relay", "looprelay", "modelctx", "baseline", "fastmcp")
#: Calls a stdio front makes in one turn (the fronts take turns).
STDIO_BLOCK = 100
#: The processes run this checkout's modelctx (not whichever copy is installed).
CHECKOUT_ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
DEFAULT_OUT = Path("/tmp/modelctx-bench/gateway.json")
#: The environment of the "baseline" front's gateway (``--baseline``); empty: no such front.
BASELINE_ENV: dict[str, str] = {}
GOAL_RATIO = 3.0
GOAL_STDIO_P50_US = 150.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- the fronts -----------------------------------------------------------------------------
def _gateway_config(folder: Path, upstream: dict[str, Any], name: str = "gateway.json") -> Path:
    path = folder / name
    path.write_text(json.dumps({"mcpServers": {"echo": {**upstream, "approval": "allow"}}}))
    return path


def stdio_front(front: str, folder: Path) -> list[str]:
    upstream = stdio_command("modelctx")
    if front == "direct":
        return upstream
    if front in ("modelctx", "baseline"):
        # The upstream runs this checkout, whichever checkout runs the gateway.
        spec = {"command": upstream[0], "args": upstream[1:], "env": CHECKOUT_ENV}
        config = _gateway_config(folder, spec, f"{front}.json")
        return [MODELCTX_CLI, "gateway", "--config", str(config), "--bare-names"]
    if front == "relay":
        return [PYTHON, __file__, "--relay-floor", "--target", json.dumps(upstream)]
    if front == "looprelay":
        return [PYTHON, __file__, "--loop-relay-floor", "--target", json.dumps(upstream)]
    return [FASTMCP_PYTHON, str(FASTMCP_PROXY), "stdio", json.dumps(upstream)]


def run_relay_floor(target: str) -> None:
    """Copy each stdin line to the upstream ``target`` (an argv as JSON) and its one answer
    line back, blocking, parsing nothing: the least a stdio gateway can do."""
    import subprocess

    # Buffered: an unbuffered pipe's readline reads one byte a syscall (it inflated this
    # floor by about 150 us an answer).
    upstream = subprocess.Popen(json.loads(target), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert upstream.stdin is not None and upstream.stdout is not None
    answers = upstream.stdout
    pending = b""
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        pending += chunk
        while b"\n" in pending:
            request, pending = pending.split(b"\n", 1)
            upstream.stdin.write(request + b"\n")
            upstream.stdin.flush()
            os.write(1, answers.readline())
    upstream.stdin.close()
    upstream.wait(10)


def run_loop_relay_floor(target: str) -> None:
    """``run_relay_floor`` on an event loop: stdin's data written to the upstream
    ``target`` and its stdout's data to ours, each from the loop's read callback."""
    import asyncio

    loop: asyncio.AbstractEventLoop
    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()

    class Copy(asyncio.Protocol):
        def __init__(self, write: Any, done: asyncio.Future[None] | None = None) -> None:
            self.write, self.done = write, done

        def data_received(self, data: bytes) -> None:
            self.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self.done is not None and not self.done.done():
                self.done.set_result(None)

    class Upstream(asyncio.SubprocessProtocol):
        def __init__(self, write: Any) -> None:
            self.write = write

        def pipe_data_received(self, fd: int, data: bytes) -> None:
            if fd == 1:
                self.write(data)

    async def relay() -> None:
        out: Any
        upstream: Any
        out, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(1, "wb", buffering=0))
        argv = json.loads(target)
        upstream, _ = await loop.subprocess_exec(lambda: Upstream(out.write), *argv, stderr=None)
        upstream_stdin = upstream.get_pipe_transport(0)
        done: asyncio.Future[None] = loop.create_future()
        await loop.connect_read_pipe(lambda: Copy(upstream_stdin.write, done), os.fdopen(0, "rb", buffering=0))
        await done
        upstream.close()

    loop.run_until_complete(relay())


def http_front(front: str, folder: Path, upstream_url: str, port: int) -> list[str]:
    if front == "modelctx":
        config = _gateway_config(folder, {"url": upstream_url})
        return [MODELCTX_CLI, "gateway", "--config", str(config), "--bare-names", "--http", "--port", str(port)]
    return [FASTMCP_PYTHON, str(FASTMCP_PROXY), "http", upstream_url, str(port)]


# -- one client, one call at a time ----------------------------------------------------------
class _StdioFront:
    """One front started on stdio and warmed up, ready for timed calls."""

    def __init__(self, servers: Servers, name: str, argv: list[str], warmup: int, env: dict[str, str]) -> None:
        self.name = name
        self.proc = servers.spawn(name, argv, stdio=True, env=env)
        self.reader = LineReader(self.proc)
        stdin = self.proc.popen.stdin
        assert stdin is not None  # spawned with stdio=True
        os.set_blocking(stdin.fileno(), False)
        self.fd = stdin.fileno()
        check_echo_response(request_response(self.proc, self.reader, echo_call(1), timeout=60.0), 1)
        for i in range(2, warmup + 2):
            check_echo_response(request_response(self.proc, self.reader, echo_call(i)), i)
        self.next_id = warmup + 2
        self.times: list[float] = []

    def calls(self, template: bytes, count: int) -> None:
        """``count`` timed calls, one at a time; every answer is checked afterwards."""
        answers: list[bytes] = []
        first = self.next_id
        for i in range(first, first + count):
            data = template % i
            start = time.perf_counter()
            if os.write(self.fd, data) != len(data):
                raise BenchError(f"{self.name}: partial write of one request line")
            answers.append(self.reader.readline(IO_TIMEOUT))
            self.times.append(time.perf_counter() - start)
        self.next_id = first + count
        for offset, answer in enumerate(answers):
            check_echo_response(answer, first + offset)


def measure_stdio(
    servers: Servers, fronts: dict[str, list[str]], calls: int, warmup: int, max_seconds: float
) -> dict[str, list[float]]:
    """Each front's per-call times. The fronts take turns, ``STDIO_BLOCK`` calls each: on
    a machine others share, every front sees the same load (one after the other, a burst
    of someone else's work lands on one front only), and each stays warm within a block."""
    started: list[_StdioFront] = []
    try:
        for name, argv in fronts.items():
            log(f"  stdio / {name} ...")
            try:
                env = BASELINE_ENV if name == "baseline" else CHECKOUT_ENV
                started.append(_StdioFront(servers, f"{name}-stdio", argv, warmup, env))
            except Exception as exc:  # noqa: BLE001 - one front failing must not hide the others
                log(f"  stdio / {name}: ERROR {type(exc).__name__}: {exc}")
        template = echo_call_template()
        stop_at = time.perf_counter() + max_seconds * max(1, len(started))
        for _ in range(0, calls, STDIO_BLOCK):
            for front in list(started):
                try:
                    front.calls(template, STDIO_BLOCK)
                except Exception as exc:  # noqa: BLE001
                    log(f"  stdio / {front.name}: ERROR {type(exc).__name__}: {exc}")
                    started.remove(front)
            if time.perf_counter() > stop_at:
                break
        return {front.name.removesuffix("-stdio"): front.times for front in started}
    finally:
        for front in started:
            servers.stop(front.proc)


def _wait_listening(proc: Proc, port: int, deadline: float = 60.0) -> None:
    end = time.monotonic() + deadline
    while True:
        proc.check_alive()
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.connect()
            connection.close()
            return
        except OSError:
            if time.monotonic() > end:
                raise BenchError(f"{proc.name} did not listen on {port} within {deadline:g}s") from None
            time.sleep(0.05)


def _http_answer(response: http.client.HTTPResponse) -> dict[str, Any]:
    body = response.read()
    if response.status != 200:
        raise BenchError(f"HTTP {response.status}: {body[:300]!r}")
    if response.getheader("content-type", "").startswith("text/event-stream"):
        for event_line in body.decode().splitlines():
            if event_line.startswith("data:") and event_line[5:].strip():
                message: dict[str, Any] = json.loads(event_line[5:])
                if "id" in message:
                    return message
        raise BenchError(f"no response in the event stream: {body[:300]!r}")
    answer: dict[str, Any] = json.loads(body)
    return answer


def measure_http(url_port: int, calls: int, warmup: int, max_seconds: float) -> list[float]:
    connection = http.client.HTTPConnection("127.0.0.1", url_port, timeout=IO_TIMEOUT)

    def call(request_id: int) -> dict[str, Any]:
        body = json.dumps(echo_call(request_id), separators=(",", ":"))
        connection.request("POST", "/mcp", body=body, headers=HTTP_HEADERS)
        return _http_answer(connection.getresponse())

    try:
        check_echo_response(call(1), 1)
        for i in range(2, warmup + 2):
            check_echo_response(call(i), i)
        times: list[float] = []
        stop_at = time.perf_counter() + max_seconds
        for i in range(warmup + 2, warmup + 2 + calls):
            start = time.perf_counter()
            answer = call(i)
            times.append(time.perf_counter() - start)
            check_echo_response(answer, i)
            if time.perf_counter() > stop_at:
                break
        return times
    finally:
        connection.close()


# -- figures ----------------------------------------------------------------------------------------
def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def summarize(times: dict[str, list[float]]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    base = {q: percentile(times["direct"], q) for q in (0.5, 0.99)}
    for front, values in times.items():
        p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
        figures[front] = {
            "calls": len(values),
            "p50_us": p50 * 1e6,
            "p99_us": p99 * 1e6,
            "added_p50_us": (p50 - base[0.5]) * 1e6,
            "added_p99_us": (p99 - base[0.99]) * 1e6,
        }
    for q in ("p50", "p99"):
        ours = figures.get("modelctx", {}).get(f"added_{q}_us")
        theirs = figures.get("fastmcp", {}).get(f"added_{q}_us")
        figures[f"fastmcp_over_ours_{q}"] = theirs / ours if ours and theirs and ours > 0 else None
    return figures


def print_table(transport: str, figures: dict[str, Any]) -> None:
    print(f"\n{transport}: per tools/call, one at a time (us)")
    print(f"  {'front':<10}{'calls':>8}{'p50':>10}{'p99':>10}{'added p50':>12}{'added p99':>12}")
    for front in FRONTS:
        row = figures.get(front)
        if row is None:
            if front != "baseline" and (transport == "stdio" or front not in ("relay", "looprelay")):
                print(f"  {front:<10}{'error':>8}")
            continue
        print(
            f"  {front:<10}{row['calls']:>8}{row['p50_us']:>10.0f}{row['p99_us']:>10.0f}"
            f"{row['added_p50_us']:>12.0f}{row['added_p99_us']:>12.0f}"
        )
    for q in ("p50", "p99"):
        ratio = figures.get(f"fastmcp_over_ours_{q}")
        shown = f"{ratio:.1f}x" if ratio else "n/a"
        print(f"  fastmcp added / ours added at {q}: {shown} (goal >= {GOAL_RATIO:g}x)")
    if transport == "stdio" and "modelctx" in figures:
        added = figures["modelctx"]["added_p50_us"]
        verdict = "met" if added <= GOAL_STDIO_P50_US else "missed"
        print(f"  ours added at p50: {added:.0f} us (goal <= {GOAL_STDIO_P50_US:g} us: {verdict})")


def run(transports: list[str], quick: bool, out: Path) -> dict[str, Any]:
    calls = 800 if quick else 4000
    warmup = 100 if quick else 300
    max_seconds = 8.0 if quick else 20.0
    servers = Servers()
    results: dict[str, Any] = {}
    folder = Path(tempfile.mkdtemp(prefix="modelctx-gateway-bench-"))
    try:
        if "stdio" in transports:
            fronts = {front: stdio_front(front, folder) for front in FRONTS if front != "baseline" or BASELINE_ENV}
            times = measure_stdio(servers, fronts, calls, warmup, max_seconds)
            if "direct" in times:
                results["stdio"] = summarize(times)
                print_table("stdio", results["stdio"])
        if "http" in transports:
            upstream_port = free_port()
            upstream = servers.spawn(
                "upstream-http", http_command("modelctx", upstream_port), stdio=False, env=CHECKOUT_ENV
            )
            _wait_listening(upstream, upstream_port)
            upstream_url = f"http://127.0.0.1:{upstream_port}/mcp"
            times = {}
            for front in FRONTS:
                log(f"  http / {front} ...")
                try:
                    if front in ("relay", "looprelay", "baseline"):
                        continue
                    if front == "direct":
                        times[front] = measure_http(upstream_port, calls, warmup, max_seconds)
                        continue
                    port = free_port()
                    argv = http_front(front, folder, upstream_url, port)
                    proc = servers.spawn(f"{front}-http", argv, stdio=False, env=CHECKOUT_ENV)
                    try:
                        _wait_listening(proc, port)
                        times[front] = measure_http(port, calls, warmup, max_seconds)
                    finally:
                        servers.stop(proc)
                except Exception as exc:  # noqa: BLE001
                    log(f"  http / {front}: ERROR {type(exc).__name__}: {exc}")
            servers.stop(upstream)
            if "direct" in times:
                results["http"] = summarize(times)
                print_table("http", results["http"])
    finally:
        servers.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    log(f"results in {out}")
    return results


def goals_met(results: dict[str, Any]) -> bool:
    """Ours at most a third of fastmcp's added latency (p50, both transports), and at most
    150 us added at p50 on stdio."""
    checks: list[bool] = []
    for transport in ("stdio", "http"):
        ratio = results.get(transport, {}).get("fastmcp_over_ours_p50")
        checks.append(ratio is not None and ratio >= GOAL_RATIO)
    stdio = results.get("stdio", {}).get("modelctx")
    checks.append(stdio is not None and stdio["added_p50_us"] <= GOAL_STDIO_P50_US)
    return all(checks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls")
    parser.add_argument("--only", action="append", choices=["stdio", "http"], help="one transport (repeatable)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON results (default {DEFAULT_OUT})")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal is missed")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout whose gateway runs as the 'baseline' stdio front, taking turns with ours (A/B)",
    )
    parser.add_argument("--relay-floor", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--loop-relay-floor", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.relay_floor:
        run_relay_floor(args.target)
        return 0
    if args.loop_relay_floor:
        run_loop_relay_floor(args.target)
        return 0
    if args.baseline is not None:
        BASELINE_ENV["PYTHONPATH"] = str(args.baseline.resolve() / "src")
    results = run(args.only or ["stdio", "http"], args.quick, args.out)
    return 1 if args.strict and not goals_met(results) else 0



if __name__ == "__main__":
    sys.exit(main())
