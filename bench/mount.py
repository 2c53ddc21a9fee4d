"""What a mount costs one ``tools/call``: a directly registered tool vs the same tool
mounted in a parent (``server.mount``), and a tool derived from it (``derive_tool``).

    python bench/mount.py              # about 20 seconds
    python bench/mount.py --quick      # fewer calls

Two stdio server processes of this checkout: ``bench/servers/modelctx_echo.py`` (``echo``)
and ``bench/servers/modelctx_echo_mounted.py`` (``own_echo`` registered directly; the
first server mounted as ``child``: ``child_echo``; ``derived_echo``, derived from it with
its argument renamed). Compare ``mounted`` with ``own``: the same process, so the
difference is the mount's alone (two processes differ by more than that on a shared
machine). One raw
client sends 2026-07-28 ``tools/call`` requests one at a time; the fronts take turns, a
block of calls each, so the machine's load falls on all of them alike. Per-call time at
p50 and p99 (each over its own calls) and the difference from direct. Goal (issue 24): the
mounted tool within noise of the direct one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402 - the bench folder is put on the path first
    BENCH,
    MODELCTX_CLI,
    REPO,
    LineReader,
    Servers,
    line,
    write_all,
)

CHECKOUT_ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
#: front: (server script, tool, argument name)
FRONTS = {
    "direct": ("modelctx_echo.py", "echo", "text"),
    "own": ("modelctx_echo_mounted.py", "own_echo", "text"),
    "mounted": ("modelctx_echo_mounted.py", "child_echo", "text"),
    "derived": ("modelctx_echo_mounted.py", "derived_echo", "words"),
}
BLOCK = 100


def call(request_id: int, tool: str, arg: str) -> dict:
    params = {"name": tool, "arguments": {arg: "hi"}, "_meta": META}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 rounds instead of 40")
    parser.add_argument("--out", type=Path, default=Path("/tmp/modelctx-bench/mount.json"))
    args = parser.parse_args(argv)
    rounds = 10 if args.quick else 40
    servers = Servers()
    try:
        procs = {}
        for script in sorted({s for s, _, _ in FRONTS.values()}):
            proc = servers.spawn(script, [MODELCTX_CLI, "serve", str(BENCH / "servers" / script)], stdio=True, env=CHECKOUT_ENV)
            procs[script] = (proc, LineReader(proc))
        times: dict[str, list[float]] = {front: [] for front in FRONTS}
        request_id = 0
        for warm in (True, False):
            for _ in range(3 if warm else rounds):
                for front, (script, tool, arg) in FRONTS.items():
                    proc, reader = procs[script]
                    for _ in range(BLOCK):
                        request_id += 1
                        message = line(call(request_id, tool, arg))
                        start = time.perf_counter()
                        write_all(proc, message)
                        answer = json.loads(reader.readline())
                        elapsed = time.perf_counter() - start
                        if answer.get("id") != request_id or answer["result"]["content"][0]["text"] != "hi":
                            raise SystemExit(f"{front}: wrong answer {answer}")
                        if not warm:
                            times[front].append(elapsed)
    finally:
        servers.close()
        servers.remove_logs()
    report = {}
    print(f"{'front':8} {'calls':>6} {'p50 us':>8} {'p99 us':>8} {'+p50 us':>8} {'+p99 us':>8}")
    base50, base99 = percentile(times["direct"], 50), percentile(times["direct"], 99)
    for front, values in times.items():
        p50, p99 = percentile(values, 50), percentile(values, 99)
        report[front] = {"calls": len(values), "p50_us": p50 * 1e6, "p99_us": p99 * 1e6}
        print(
            f"{front:8} {len(values):6} {p50 * 1e6:8.1f} {p99 * 1e6:8.1f} "
            f"{(p50 - base50) * 1e6:+8.1f} {(p99 - base99) * 1e6:+8.1f}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
