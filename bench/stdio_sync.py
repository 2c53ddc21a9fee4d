"""Plain ``def`` tools over stdio: calls/s and server CPU per call, beside ``async def`` and
the TypeScript SDK (issue 25). Run on its own, never in tests:

    python bench/stdio_sync.py                 # 3 rounds, every server
    python bench/stdio_sync.py --rounds 5 --calls 20000
    python bench/stdio_sync.py --only def,async
    python bench/stdio_sync.py --hop [--base ../main/src]   # the worker hop alone, in process

Every server has the conformance fixture's tool ``test_simple_text`` (no arguments, one
text block). The driver is the same for all: ``initialize`` (2025-11-25), then
``notifications/initialized``, then ``tools/call`` lines, one at a time (``serial``) and
with ``--window`` (4,000) in flight (``pipelined``). Servers run one after the other,
round after round, so a noisy neighbour spreads over all of them.

Server CPU is the process's user+system time (``/proc/PID/stat``, every thread) over the
measured calls, divided by the calls. Output: one line per server and mode per round,
then a table of medians (range in brackets) and the ratios the issue asks for:
``def/async cpu`` (target at most 1.3) and ``def/ts calls/s`` (target at least 1.5).
The TypeScript SDK is read from ``--ts-modules`` (a node_modules holding
``@modelcontextprotocol/sdk`` and ``zod``; default: the first of the project's
``.tools/*/node_modules`` that has it) and run with ``node`` from ``PATH``.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_TEXT = "This is a simple text response for testing."

_MODELCTX_DEF = f'''
from modelctx import Server
from modelctx.transports.stdio import serve_stdio
server = Server("bench-def", "1.0")
@server.tool
def test_simple_text() -> str:
    return {_TEXT!r}
serve_stdio(server)
'''

_MODELCTX_ASYNC = _MODELCTX_DEF.replace("def test_simple_text", "async def test_simple_text").replace(
    "bench-def", "bench-async"
)

_TS = f'''
const path = require("path");
const root = process.argv[2];
const {{ McpServer }} = require(path.join(root, "@modelcontextprotocol/sdk/dist/cjs/server/mcp.js"));
const {{ StdioServerTransport }} = require(path.join(root, "@modelcontextprotocol/sdk/dist/cjs/server/stdio.js"));
const server = new McpServer({{ name: "bench-ts", version: "1.0" }});
server.tool("test_simple_text", "simple text", async () => ({{
  content: [{{ type: "text", text: {json.dumps(_TEXT)} }}],
}}));
server.connect(new StdioServerTransport());
'''


def _ts_modules(given: str | None) -> Path | None:
    candidates = [Path(given)] if given else sorted((REPO / ".tools").glob("*/node_modules"))
    if not given and Path("/work/main/.tools").is_dir():
        candidates += sorted(Path("/work/main/.tools").glob("*/node_modules"))
    for c in candidates:
        if (c / "@modelcontextprotocol/sdk/dist/cjs/server/mcp.js").is_file():
            return c
    return None


class Server:  # noqa: D101 - one server process and its pipes
    def __init__(self, name: str, argv: list[str]) -> None:
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        self._buf = b""

    def cpu(self) -> float:
        """User + system seconds of the server process, all its threads."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def send(self, message: dict) -> None:
        os.write(self.wfd, json.dumps(message).encode() + b"\n")

    def line(self, timeout: float = 30.0) -> bytes:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.rfd], [], [], left)[0]:
                raise RuntimeError(f"{self.name}: no answer in {timeout} s")
            chunk = os.read(self.rfd, 1 << 16)
            if not chunk:
                raise RuntimeError(f"{self.name}: closed stdout")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def handshake(self) -> None:
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        answer = json.loads(self.line())
        if "result" not in answer:
            raise RuntimeError(f"{self.name}: initialize failed: {answer}")
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_CALL = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}\n'


def _check(raw: bytes) -> int:
    message = json.loads(raw)
    if message["result"]["content"][0]["text"] != _TEXT:
        raise RuntimeError(f"wrong answer: {raw[:200]!r}")
    return int(message["id"])


def serial(server: Server, first: int, calls: int) -> tuple[float, float]:
    """(calls/s, CPU us per call), one call at a time."""
    answers = []
    cpu0, start = server.cpu(), time.perf_counter()
    for i in range(first, first + calls):
        os.write(server.wfd, _CALL % i)
        answers.append(server.line())
    elapsed, cpu = time.perf_counter() - start, server.cpu() - cpu0
    got = [_check(a) for a in answers]
    if got != list(range(first, first + calls)):
        raise RuntimeError(f"{server.name}: answers out of step")
    return calls / elapsed, cpu / calls * 1e6


def pipelined(server: Server, first: int, calls: int, window: int) -> tuple[float, float]:
    """(calls/s, CPU us per call) keeping ``window`` calls in flight."""
    os.set_blocking(server.wfd, False)
    pending = b""
    sent = received = 0
    chunks: list[bytes] = [server._buf]
    server._buf = b""
    cpu0, start = server.cpu(), time.perf_counter()
    while received < calls:
        can_send = sent < calls and sent - received < window
        readable, writable, _ = select.select([server.rfd], [server.wfd] if (pending or can_send) else [], [], 30)
        if not readable and not writable:
            raise RuntimeError(f"{server.name}: stalled with {sent - received} in flight")
        if writable:
            if not pending:
                n = min(window - (sent - received), calls - sent)
                pending = b"".join([_CALL % i for i in range(first + sent, first + sent + n)])
                sent += n
            try:
                pending = pending[os.write(server.wfd, pending):]
            except BlockingIOError:
                pass
        if readable:
            chunk = os.read(server.rfd, 1 << 18)
            if not chunk:
                raise RuntimeError(f"{server.name}: closed stdout")
            chunks.append(chunk)
            received += chunk.count(b"\n")
    elapsed, cpu = time.perf_counter() - start, server.cpu() - cpu0
    os.set_blocking(server.wfd, True)
    lines = b"".join(chunks).split(b"\n")[:-1]
    if sorted(_check(a) for a in lines) != list(range(first, first + calls)):
        raise RuntimeError(f"{server.name}: missing or extra answers")
    return calls / elapsed, cpu / calls * 1e6


_HOP = """
import asyncio, sys, time
from modelctx.server._threads import run_in_worker
def f(): return 1
async def main(n):
    for _ in range(1000): await run_in_worker(f, {})
    c0 = time.process_time()
    for _ in range(n): await run_in_worker(f, {})
    serial = (time.process_time() - c0) / n * 1e6
    c0 = time.process_time()
    for _ in range(n // 100): await asyncio.gather(*[run_in_worker(f, {}) for _ in range(100)])
    print(serial, (time.process_time() - c0) / n * 1e6)
asyncio.run(main(int(sys.argv[1])))
"""


def hop(args: argparse.Namespace) -> None:
    """The hop alone (run_in_worker of a function returning at once), in one process:
    CPU per call one at a time and with 100 in flight, median of rounds."""
    trees = {"this": os.environ.get("PYTHONPATH", "")}
    if args.base:
        trees["base"] = args.base
    got: dict[str, list[list[float]]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, path in trees.items():
            out = subprocess.run([sys.executable, "-c", _HOP, str(args.calls)], env={**os.environ, "PYTHONPATH": path},
                                 check=True, capture_output=True, text=True).stdout
            got[name].append([float(v) for v in out.split()])
    for name, runs in got.items():
        serial = sorted(r[0] for r in runs)
        many = sorted(r[1] for r in runs)
        print(f"hop {name:5} one at a time {statistics.median(serial):5.1f} us CPU/call [{serial[0]:.1f}-{serial[-1]:.1f}]"
              f"   100 in flight {statistics.median(many):5.1f} [{many[0]:.1f}-{many[-1]:.1f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=10_000, help="calls per measurement")
    parser.add_argument("--window", type=int, default=4_000)
    parser.add_argument("--only", default="def,async,ts")
    parser.add_argument("--ts-modules", default=os.environ.get("MODELCTX_TS_SDK_NODE_MODULES"))
    parser.add_argument("--base", help="another checkout's src/: adds def@base and async@base, run with it on "
                        "PYTHONPATH, interleaved with these (before/after in one run)")
    parser.add_argument("--wrap", default="", help='a command every server runs under, e.g. "taskset -c 1" '
                        "(run the driver under taskset -c 0: each on a CPU of its own, steadier figures)")
    parser.add_argument("--hop", action="store_true", help="measure the worker hop alone, in process")
    args = parser.parse_args()
    if args.hop:
        hop(args)
        return
    wanted = args.only.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="modelctx-bench-sync-"))
    commands: dict[str, list[str]] = {}
    for name, source in (("def", _MODELCTX_DEF), ("async", _MODELCTX_ASYNC)):
        (tmp / f"{name}.py").write_text(source)
        commands[name] = [*args.wrap.split(), sys.executable, str(tmp / f"{name}.py")]
        if args.base:
            commands[f"{name}@base"] = ["env", f"PYTHONPATH={args.base}", *commands[name]]
            wanted.append(f"{name}@base")
    if "ts" in wanted:
        modules, node = _ts_modules(args.ts_modules), shutil.which("node")
        if modules is None or node is None:
            raise SystemExit("stdio_sync.py: the TypeScript SDK needs node on PATH and --ts-modules "
                             "(a node_modules with @modelcontextprotocol/sdk); or pass --only def,async")
        (tmp / "ts.js").write_text(_TS)
        commands["ts"] = [*args.wrap.split(), node, str(tmp / "ts.js"), str(modules)]
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for round_ in range(args.rounds):
        for name in wanted:
            server = Server(name, commands[name])
            try:
                server.handshake()
                serial(server, 1, 500)  # warm-up
                figures = {
                    "serial": serial(server, 1_000, args.calls),
                    "pipelined": pipelined(server, 1_000 + args.calls, args.calls * 2, args.window),
                }
            finally:
                server.stop()
            for mode, (rate, cpu) in figures.items():
                results.setdefault((name, mode), []).append((rate, cpu))
                print(f"round {round_ + 1} {name:10} {mode:9} {rate:10,.0f} calls/s {cpu:7.1f} us CPU/call", flush=True)

    def med(name: str, mode: str, i: int) -> float:
        return statistics.median(v[i] for v in results[(name, mode)])

    def span(name: str, mode: str, i: int) -> str:
        vals = [v[i] for v in results[(name, mode)]]
        return f"[{min(vals):,.{1 if i else 0}f}-{max(vals):,.{1 if i else 0}f}]"

    print(f"\nmedians of {args.rounds} rounds, {args.calls} calls serial, {args.calls * 2} with {args.window} in flight")
    for mode in ("serial", "pipelined"):
        for name in wanted:
            print(f"{mode:9} {name:10} {med(name, mode, 0):10,.0f} calls/s {span(name, mode, 0):20} "
                  f"{med(name, mode, 1):7.1f} us CPU/call {span(name, mode, 1)}")
        if "def" in wanted and "async" in wanted:
            print(f"{mode:9} def/async cpu {med('def', mode, 1) / med('async', mode, 1):.2f}x (target <= 1.3)")
        if "def@base" in wanted:
            print(f"{mode:9} def@base/async@base cpu {med('def@base', mode, 1) / med('async@base', mode, 1):.2f}x")
            print(f"{mode:9} def/def@base cpu {med('def', mode, 1) / med('def@base', mode, 1):.2f}x")
        if "def" in wanted and "ts" in wanted:
            print(f"{mode:9} def/ts calls/s {med('def', mode, 0) / med('ts', mode, 0):.2f}x (target >= 1.5)")
        if "async" in wanted and "ts" in wanted:
            print(f"{mode:9} async/ts calls/s {med('async', mode, 0) / med('ts', mode, 0):.2f}x")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
