"""Issue 25's targets, each a ratio measured in this one run, against the peers it names.

Peers: the official TypeScript SDK (``bench/servers/ts_echo.cjs``, npm
``@modelcontextprotocol/sdk`` on Node 22, installed by scripts/test.sh under
``.tools/ts-sdk``), FastMCP (``bench/servers/fastmcp_echo.py`` in its own venv,
``.tools/fastmcp``), the official Python SDK and the bare floors. The TypeScript SDK and
FastMCP speak the handshake era only, so the rows that race them use one handshake stdio
driver for every server (``initialize``, then ``tools/call`` lines with no ``_meta``).

Each measurement is a function returning ``Row``s; ``run`` calls them in turn, a failing
one becoming an error row while the others still run. A ``Row`` holds our figure, the
peer's or the floor's, the ratio in the target's direction and whether it is met.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness import (
    BENCH,
    CHILD_ENV,
    FASTMCP_PYTHON,
    IO_TIMEOUT,
    MODELCTX_CLI,
    PYTHON,
    REPO,
    START_TIMEOUT,
    BenchError,
    LineReader,
    echo_call_template,
    free_port,
    http_command,
    median,
    run_client_driver,
    stdio_command,
    write_all,
)

from . import Context, Metric, Scenario
from .stdio_pipelined import check_all, pipeline

SERVERS = BENCH / "servers"
TS_SDK_DIR = Path(os.environ.get("MODELCTX_TS_SDK_DIR", REPO / ".tools" / "ts-sdk"))
HANDSHAKE = "2025-06-18"  # a revision every peer here speaks
HS_CALL = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}\n'
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


@dataclass
class Row:
    metric: str
    ours: float | None
    peer: float | None  # the peer's or the floor's figure
    peer_name: str
    unit: str
    ratio: float | None  # in the direction the target reads
    ratio_name: str
    target: str
    met: bool | None
    note: str = ""


def _row(metric: str, ours: float, peer: float, peer_name: str, unit: str, ratio_name: str,
         ratio: float, at_least: float | None = None, at_most: float | None = None, note: str = "") -> Row:  # fmt: skip
    if at_least is not None:
        target, met = f">= {at_least:g}", ratio >= at_least
    elif at_most is not None:
        target, met = f"<= {at_most:g}", ratio <= at_most
    else:
        target, met = "-", None
    return Row(metric, ours, peer, peer_name, unit, ratio, ratio_name, target, met, note)


# -- processes ------------------------------------------------------------------------


def node() -> str:
    found = shutil.which("node")
    if found is None:
        raise BenchError("node not found: put Node 22 on PATH (scripts/test.sh installs it under .tools/node22)")
    if not (TS_SDK_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        raise BenchError(f"the TypeScript SDK is not in {TS_SDK_DIR}: run scripts/test.sh (its install step)")
    return found


def fastmcp_python() -> str:
    if not Path(FASTMCP_PYTHON).exists():
        raise BenchError(f"no FastMCP venv at {FASTMCP_PYTHON}: run scripts/test.sh (its install step)")
    return FASTMCP_PYTHON


def command(impl: str) -> list[str]:
    """stdio argv of the servers raced here."""
    if impl == "ts":
        return [node(), str(SERVERS / "ts_echo.cjs")]
    if impl == "fastmcp":
        return [fastmcp_python(), str(SERVERS / "fastmcp_echo.py")]
    if impl == "modelctx-schema":
        return [MODELCTX_CLI, "serve", str(SERVERS / "modelctx_schema_echo.py")]
    return stdio_command(impl)


def env_for(impl: str) -> dict[str, str]:
    return {"MODELCTX_TS_SDK_DIR": str(TS_SDK_DIR)} if impl == "ts" else {}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    fields = stat[stat.rfind(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ask(proc: Any, reader: LineReader, message: dict, timeout: float = IO_TIMEOUT) -> dict:
    write_all(proc, json.dumps(message).encode() + b"\n")
    deadline = time.monotonic() + timeout
    while True:
        answer = json.loads(reader.readline(max(0.0, deadline - time.monotonic())))
        if answer.get("id") == message["id"]:
            if "result" not in answer:
                raise BenchError(f"{proc.name}: {str(answer)[:300]}")
            return answer["result"]


def initialize(proc: Any, reader: LineReader, timeout: float = START_TIMEOUT) -> None:
    params = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
    ask(proc, reader, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, timeout)
    write_all(proc, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')


def check_handshake_answers(raw: bytes, first: int, sent: int) -> int:
    lines = raw.split(b"\n")[:-1]
    ids = set()
    for item in lines:
        message = json.loads(item)
        content = (message.get("result") or {}).get("content") or [{}]
        if message["result"].get("isError") or content[0].get("text") != "hi":
            raise BenchError(f"wrong echo answer: {item[:300]!r}")
        ids.add(message["id"])
    if len(ids) != len(lines) or not ids <= set(range(first, first + sent)):
        raise BenchError("answers with duplicate or unexpected ids")
    return len(lines)


def handshake_load(ctx: Context, impl: str, window: int) -> dict:
    """Echo calls over the handshake stdio driver, ``window`` in flight: calls/s and the
    server's CPU per call."""
    calls = ctx.pick(20_000, 4_000) if window == 1 else ctx.pick(60_000, 16_000)
    proc = ctx.servers.spawn(f"{impl}-hs-w{window}", command(impl), stdio=True, env=env_for(impl))
    try:
        reader = LineReader(proc)
        initialize(proc, reader)
        # Warm-up: every answer waited for, so none is left to be counted in the run.
        warm = min(window, 200)
        sent, received, _, raw = pipeline(proc, HS_CALL, 1, 200, warm, 30.0)
        if received < sent or check_handshake_answers(raw, 1, sent) != sent:
            raise BenchError(f"{impl}: the warm-up's {sent} calls were not all answered within 30 s")
        before = cpu_seconds(proc.popen.pid)
        first = 1_000_000
        sent, received, elapsed, raw = pipeline(proc, HS_CALL, first, calls, window, ctx.pick(12.0, 5.0))
        cpu = cpu_seconds(proc.popen.pid) - before
        if check_handshake_answers(raw, first, sent) != received:
            raise BenchError("counted and parsed answers differ")
        return {"calls_per_s": received / elapsed, "server_cpu_us": cpu / received * 1e6, "calls": received}
    finally:
        ctx.servers.stop(proc)


# -- the rows -------------------------------------------------------------------------


#: Rounds of the def-tool rows: every server once a round, the order rotated each round,
#: so a neighbour's burst of load lands on all of them; a ratio is the median of the
#: rounds' own ratios (each from figures taken seconds apart), its range in the note.
DEF_ROUNDS = 3


def _pair(got: dict[str, list[dict] | str], metric: str, ours: str, peer: str, peer_name: str, key: str,
          **target: float) -> Row:  # fmt: skip
    """The row comparing ``got[ours]`` with ``got[peer]`` on ``key``, round by round; an
    error row if either could not be measured (``got`` holds its error then)."""
    a, b = got[ours], got[peer]
    if isinstance(a, str) or isinstance(b, str):
        return Row(metric, None, None, "", "", None, "", "", None, f"ERROR {a if isinstance(a, str) else b}")
    ratios = sorted(x[key] / y[key] for x, y in zip(a, b, strict=False))
    note = f"{len(ratios)} rounds: {ratios[0]:.2f}-{ratios[-1]:.2f}" if len(ratios) > 1 else ""
    mine, theirs = median([x[key] for x in a]), median([y[key] for y in b])
    if key == "server_cpu_us":
        return _row(metric, mine, theirs, peer_name, "us", "def/async", median(ratios), note=note, **target)
    return _row(metric, mine, theirs, peer_name, "calls/s", f"ours/{peer_name}", median(ratios), note=note,
                **target)  # fmt: skip


def def_tools_vs_peers(ctx: Context) -> list[Row]:
    rows = []
    for window, label in ((1, "1 at a time"), (4000, "4,000 in flight")):
        got: dict[str, list[dict] | str] = {}
        raced = ["modelctx-sync", "modelctx", "ts"]
        # FastMCP once (a row with no target, and its run is the slowest by far).
        plan = [raced[r % 3 :] + raced[: r % 3] for r in range(DEF_ROUNDS)]
        plan[0].append("fastmcp")
        for order in plan:
            for impl in order:
                if isinstance(got.get(impl), str):
                    continue  # failed in an earlier round: its error stands
                try:
                    figures = handshake_load(ctx, impl, window)
                except BenchError as exc:  # the other servers' rows still stand
                    got[impl] = f"{impl}: {str(exc).splitlines()[0]}"
                    ctx.log(f"  issue25 / {impl} at {window} in flight: ERROR {exc}")
                    continue
                runs = got.setdefault(impl, [])
                assert isinstance(runs, list)
                runs.append(figures)

        rows.append(_pair(got, f"def tool vs TS SDK, stdio handshake, {label}", "modelctx-sync", "ts", "TS",
                          "calls_per_s", at_least=1.5))  # fmt: skip
        rows.append(_pair(got, f"async tool vs TS SDK, stdio handshake, {label}", "modelctx", "ts", "TS",
                          "calls_per_s"))  # fmt: skip
        rows.append(_pair(got, f"def tool vs FastMCP, stdio handshake, {label}", "modelctx-sync", "fastmcp",
                          "FastMCP", "calls_per_s"))  # fmt: skip
        if window == 1:
            rows.append(_pair(got, "def vs async tool, server CPU per call (stdio)", "modelctx-sync", "modelctx",
                              "ours async", "server_cpu_us", at_most=1.3))  # fmt: skip
    return rows


def admission(ctx: Context) -> list[Row]:
    """Past the in-flight cap (1,024 a connection): calls/s with 10,000 in flight
    against 1,000; constant-time admission keeps it near 1."""
    rates = {}
    template = echo_call_template()
    for window in (1_000, 10_000):
        proc = ctx.servers.spawn(f"modelctx-admit-{window}", stdio_command("modelctx"), stdio=True)
        try:
            sent, _, _, raw = pipeline(proc, template, 1, 2_000, window, 10.0)
            check_all(raw, 1, sent)
            first = 1_000_000
            calls = ctx.pick(100_000, 40_000)
            sent, received, elapsed, raw = pipeline(proc, template, first, calls, window, ctx.pick(12.0, 6.0))
            check_all(raw, first, sent)
            rates[window] = received / elapsed
        finally:
            ctx.servers.stop(proc)
    return [_row("admission: 10,000 vs 1,000 in flight (stdio)", rates[10_000], rates[1_000], "ours at 1,000",
                 "calls/s", "10k/1k", rates[10_000] / rates[1_000], at_least=0.8)]  # fmt: skip


def _read_line(proc: Any, timeout: float) -> bytes:
    """One (large) answer line: chunks kept in a list, joined once."""
    fd = proc.popen.stdout.fileno()
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            proc.check_alive()
            raise BenchError(f"{proc.name}: no answer within {timeout:g} s")
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            raise BenchError(f"{proc.name} closed stdout; stderr tail:\n{proc.log_tail()}")
        chunks.append(chunk)
        if b"\n" in chunk:
            return b"".join(chunks)


def on_cpu_seconds(pid: int) -> float:
    """Time the live threads of ``pid`` have run, to the nanosecond (/proc/PID/task/*/schedstat)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that just ended
    return total / 1e9


def list_seconds(ctx: Context, impl: str, tools: int, reps: int) -> tuple[float, float]:
    """Median wall time of ``tools/list`` (2026-07-28) from a stdio server with ``tools``
    tools, and the server's CPU per list."""
    script = "modelctx_many.py" if impl == "modelctx" else "official_many.py"
    argv = [MODELCTX_CLI, "serve", str(SERVERS / script)] if impl == "modelctx" else [PYTHON, str(SERVERS / script)]
    proc = ctx.servers.spawn(f"{impl}-list-{tools}", argv, stdio=True, env={"MODELCTX_BENCH_TOOLS": str(tools)})
    try:
        request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN_META}})
        data = request.encode() + b"\n"
        times = []
        unmeasured = 2 if impl == "modelctx" else 1  # the first builds the caches
        cpu = 0.0
        for i in range(reps + unmeasured):
            if i == unmeasured:
                cpu = on_cpu_seconds(proc.popen.pid)
            start = time.perf_counter()
            write_all(proc, data)
            answer = _read_line(proc, 120.0)
            elapsed = time.perf_counter() - start
            if i < unmeasured:
                listed = json.loads(answer)["result"]["tools"]
                if len(listed) != tools + 1:
                    raise BenchError(f"{impl} listed {len(listed)} tools, not {tools + 1}")
            else:
                times.append(elapsed)
        return median(times), (on_cpu_seconds(proc.popen.pid) - cpu) / reps
    finally:
        ctx.servers.stop(proc)


def large_lists(ctx: Context) -> list[Row]:
    """The server's CPU per list carries the target (its own work, steady under load);
    the wall time adds some 40 pipe hand-offs between the processes for 2.7 MB, which a
    loaded box stretches, so it is shown beside it."""
    small, small_cpu = list_seconds(ctx, "modelctx", 1_000, ctx.pick(300, 100))
    large, large_cpu = list_seconds(ctx, "modelctx", 10_000, ctx.pick(60, 20))
    official, _ = list_seconds(ctx, "official", 10_000, ctx.pick(3, 1))
    return [
        _row("tools/list 10,000 vs 10 x 1,000 tools, server CPU", large_cpu * 1e3, small_cpu * 10e3,
             "10 x ours at 1,000", "ms", "10k/(10 x 1k)", large_cpu / (10 * small_cpu), at_most=1.3),
        _row("tools/list 10,000 vs 10 x 1,000 tools, wall (stdio)", large * 1e3, small * 10e3, "10 x ours at 1,000",
             "ms", "10k/(10 x 1k)", large / (10 * small)),
        _row("tools/list of 10,000 tools vs official SDK (wall)", large * 1e3, official * 1e3, "official", "ms",
             "official/ours", official / large, at_least=50),
    ]  # fmt: skip


_REGISTER = """
import time
from modelctx import Server
source = "\\n".join(
    f'def tool_{i}(city: str, days: int = 3, units: str = "metric") -> str:\\n'
    f'    \"\"\"Forecast number {i} for a city.\\n\\n    Args:\\n        city: the city\\n        days: how many\\n    \"\"\"\\n'
    f'    return city\\n'
    for i in range(1000)
)
namespace = {}
exec(source, namespace)
server = Server("register")
start = time.process_time()
for i in range(1000):
    server.add_tool(namespace[f"tool_{i}"])
print((time.process_time() - start) / 1000 * 1e6)
"""


def registration(ctx: Context) -> list[Row]:
    """CPU per ``add_tool`` of 1,000 distinct documented functions, median of 3 processes."""
    runs = []
    for _ in range(3):
        done = subprocess.run([PYTHON, "-c", _REGISTER], capture_output=True, text=True, timeout=120, cwd=REPO,
                              env=CHILD_ENV, check=False)  # fmt: skip
        if done.returncode != 0:
            raise BenchError(f"registration run failed:\n{done.stderr[-1500:]}")
        runs.append(float(done.stdout.strip()))
    us = median(runs)
    return [_row("registration, CPU per tool (1,000 distinct)", us, 60.0, "target", "us", "us/tool", us,
                 at_most=60, note=f"runs {min(runs):.0f}-{max(runs):.0f} us")]  # fmt: skip


def big_reply(ctx: Context) -> list[Row]:
    done = subprocess.run([PYTHON, str(BENCH / "micro_i25.py"), "bigreply"], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env=CHILD_ENV, check=False)  # fmt: skip
    found = re.search(r"traced peak (\d+(?:\.\d+)?)x", done.stdout)
    if done.returncode != 0 or found is None:
        raise BenchError(f"micro_i25.py bigreply failed:\n{(done.stderr or done.stdout)[-1500:]}")
    peak = float(found.group(1))
    return [_row("10 MB reply on stdio: peak memory / size", peak, 2.0, "target", "x", "peak/size", peak,
                 at_most=2.0)]  # fmt: skip


def spawn_to_answer(ctx: Context, impl: str) -> float:
    start = time.perf_counter()
    proc = ctx.servers.spawn(f"{impl}-start", command(impl), stdio=True, env=env_for(impl))
    try:
        initialize(proc, LineReader(proc))
        return time.perf_counter() - start
    finally:
        ctx.servers.stop(proc)


def start_time(ctx: Context) -> list[Row]:
    runs = ctx.pick(7, 3)
    rows = []
    ts = None
    for impl in ("ts", "modelctx-schema", "modelctx"):
        spawn_to_answer(ctx, impl)  # unmeasured: file caches, bytecode
        seconds = median([spawn_to_answer(ctx, impl) for _ in range(runs)])
        if impl == "ts":
            ts = seconds
            continue
        assert ts is not None
        label = "an input_schema tool" if impl == "modelctx-schema" else "a typed tool"
        rows.append(_row(f"start: spawn to first answer, {label}", seconds * 1e3, ts * 1e3, "TS SDK", "ms",
                         "ours/TS", seconds / ts, at_most=1.0))  # fmt: skip
    return rows


def facade_import(ctx: Context) -> list[Row]:
    from .startup import FACADE, import_ms

    ours = median([import_ms(FACADE["modelctx"]) for _ in range(3)])
    official = median([import_ms(FACADE["official"]) for _ in range(3)])
    return [_row("facade import (from modelctx import Server)", ours, official, "official MCPServer", "ms",
                 "official/ours", official / ours)]  # fmt: skip


def http_rows(ctx: Context) -> list[Row]:
    from .http_load import run as http_run

    ours, floor = http_run(ctx, "modelctx"), http_run(ctx, "floor")
    ts = _ts_http_rate(ctx, ctx.pick(5, 3))
    return [
        _row("HTTP tools/call vs the TS SDK (stateless, 50 conns)", ours["req_per_s"], ts, "TS SDK", "req/s",
             "ours/TS", ours["req_per_s"] / ts, at_least=5),
        _row("HTTP tools/call vs bare ASGI app (50 conns)", ours["req_per_s"], floor["req_per_s"], "floor", "req/s",
             "ours/floor", ours["req_per_s"] / floor["req_per_s"], at_least=0.6),
        _row("HTTP p99 vs bare ASGI app", ours["p99_ms"], floor["p99_ms"], "floor", "ms", "ours/floor",
             ours["p99_ms"] / floor["p99_ms"], at_most=2.5),
    ]  # fmt: skip


def _ts_http_rate(ctx: Context, seconds: int) -> float:
    """req/s of the TypeScript SDK's stateless HTTP server under the same wrk load."""
    import http.client

    from .http_load import CONNECTIONS, WRK_THREADS, parse_wrk

    if not ctx.wrk:
        raise BenchError("wrk not found (apt-get install wrk): the TS SDK row needs it")
    port = free_port()
    proc = ctx.servers.spawn("ts-http", [node(), str(SERVERS / "ts_echo.cjs"), "http", str(port)], stdio=False,
                             env=env_for("ts"))  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT
        body = (BENCH / "wrk_echo_ts.lua").read_text().split("wrk.body = '")[1].rsplit("'", 1)[0]
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2025-06-18"}  # fmt: skip
        while True:
            proc.check_alive()
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2.0)
                conn.request("POST", "/mcp", body=body, headers=headers)
                answer = json.loads(conn.getresponse().read())
                conn.close()
                if answer["result"]["content"][0]["text"] != "hi":
                    raise BenchError(f"TS SDK: wrong echo answer {answer}")
                break
            except (OSError, http.client.HTTPException):
                if time.monotonic() > deadline:
                    raise BenchError(f"the TS SDK's HTTP server is not answering on {port}") from None
                time.sleep(0.05)
        runs = []
        for length in (1, *[seconds] * ctx.pick(3, 1)):
            argv = [ctx.wrk, f"-t{WRK_THREADS}", f"-c{CONNECTIONS}", f"-d{length}s", "--timeout", "5s", "--latency",
                    "-s", str(BENCH / "wrk_echo_ts.lua"), f"http://127.0.0.1:{port}/mcp"]  # fmt: skip
            done = subprocess.run(argv, capture_output=True, text=True, timeout=length + 20, check=False)
            got = parse_wrk(done.stdout)
            if got["non_2xx"] or got["socket_errors"]:
                raise BenchError(f"TS SDK under load: {got['non_2xx']} non-2xx, {got['socket_errors']} socket errors")
            runs.append(got["req_per_s"])
        return median(runs[1:])
    finally:
        ctx.servers.stop(proc)


def http_client_cpu(ctx: Context) -> list[Row]:
    from .http_load import wait_ready

    port = free_port()
    server = ctx.servers.spawn("modelctx-http-client-cpu", http_command("modelctx", port), stdio=False)
    try:
        wait_ready(server, port)
        got = run_client_driver(ctx.servers, "client-cpu", "modelctx", url=f"http://127.0.0.1:{port}/mcp",
                                calls=ctx.pick(20_000, 5_000), seconds=ctx.pick(4.0, 2.0),
                                warmup=ctx.pick(300, 100))  # fmt: skip
    finally:
        ctx.servers.stop(server)
    us = got["client_cpu_us"]
    return [_row("HTTP client CPU per call", us, 60.0, "target", "us", "us/call", us, at_most=60)]


MEASUREMENTS: tuple[Callable[[Context], list[Row]], ...] = (
    def_tools_vs_peers, http_rows, http_client_cpu, large_lists, registration, admission, big_reply,
    start_time, facade_import,
)  # fmt: skip


def run(ctx: Context, impl: str) -> dict:
    rows: list[dict] = []
    for measure in MEASUREMENTS:
        ctx.log(f"  issue25 / {measure.__name__} ...")
        started = time.perf_counter()
        try:
            rows += [asdict(row) for row in measure(ctx)]
        except Exception as exc:  # noqa: BLE001 - one failed row must not stop the others
            rows.append(asdict(Row(measure.__name__, None, None, "", "", None, "", "", None,
                                   f"ERROR {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")))  # fmt: skip
            ctx.log(f"  issue25 / {measure.__name__}: ERROR {exc}")
        ctx.log(f"  issue25 / {measure.__name__}: {time.perf_counter() - started:.1f} s")
    return {"rows": rows}


SCENARIO = Scenario(
    name="issue25",
    section="targets",
    description="issue 25's targets: def tools vs the TS SDK and FastMCP, HTTP vs the floor, lists, "
    "registration, admission, big replies, start-up vs the TS SDK",
    metrics=(Metric("rows", "issue 25 targets", "", True),),
    run=run,
    impls=("all",),
)
