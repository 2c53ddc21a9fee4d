"""Load test: 2 replicas behind nginx with Redis, one killed and restarted mid-run.

    python bench/scale.py --seconds 20            # about 25 s
    python bench/scale.py --seconds 20 --rate 3000 --connections 32

Starts ``redis-server`` on a free port, two replicas (``python -m modelctx serve
bench/servers/modelctx_echo.py --http --port P``, each with ``MODELCTX_REDIS_URL``) and
nginx in front of them with the repository's deploy/nginx/modelctx.conf (ports filled
in). wrk then sends stateless 2026-07-28 ``tools/call`` of echo through nginx at a steady
rate (bench/wrk_scale.lua: each connection pauses between answer and next request) for
``--seconds``. At ``--kill-at`` of the run, replica A is killed with SIGKILL (its whole
process group: with ``--workers N``, the supervisor and every worker) and started again
on the same port.

Errors are read from nginx's access log (format ``mcp`` in the conf: end time, duration,
status, upstream), and split in two:

- **in flight on the killed replica**: answered 502/504 by nginx for a request that was
  sent to replica A before it was dead (started before the kill was complete, ended
  after it was sent). nginx does not pass a POST that was already written to a replica on
  to another (``proxy_next_upstream`` without ``non_idempotent``: a ``tools/call`` may
  have side effects), so these are lost, as the issue allows; so is a reply the replica
  died in the middle of (its headers had gone out, the body had not: the access log says
  200, nginx's error log says the upstream closed while it was read, and nginx closes
  the client's connection, which wrk counts as one read error);
- **other errors**: everything else that was not a 200 (a refused connect to the dead
  replica is retried on the other one, so none should come from the kill), plus wrk's
  socket errors other than those cut replies. The requirement is zero.

Requests wrk leaves unanswered when its time is up are logged 499 by nginx at the very
end; they are counted apart (``cut_at_end``), not as errors. Exit status 1 when there
are other errors.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))  # the tests' helpers: tests.support
sys.path.insert(0, str(BENCH))

from scenarios.http_load import parse_wrk  # noqa: E402  (one reading of wrk's output for every bench)

from tests.support.scale_processes import Processes, ScaleError, post_json, tools_call  # noqa: E402

ECHO_SERVER = BENCH / "servers" / "modelctx_echo.py"
LUA = BENCH / "wrk_scale.lua"
WRK = shutil.which("wrk") or "/usr/bin/wrk"


def check_echo(port: int) -> None:
    answer = post_json(port, tools_call("echo", {"text": "hi"}))
    if answer.get("result", {}).get("content", [{}])[0].get("text") != "hi":
        raise ScaleError(f"wrong answer through port {port}: {answer}")


def start_wrk(url: str, seconds: int, connections: int, rate: float, log: Path) -> subprocess.Popen[bytes]:
    """wrk in the background at about ``rate`` requests/s over ``connections``."""
    delay_ms = max(0, round(connections * 1000 / rate))
    threads = min(2, connections)
    argv = [WRK, f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--timeout", "5s", "--latency",
            "-s", str(LUA), url]  # fmt: skip
    with open(log, "wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "MODELCTX_WRK_DELAY_MS": str(delay_ms)})  # fmt: skip


def classify(access_log: Path, error_log: str, killed: str, kill_sent: float, kill_done: float,
             load_end: float) -> dict[str, Any]:  # fmt: skip
    """Sort nginx's log lines (format ``mcp``) into answered, lost in flight on the
    killed replica ``killed`` (host:port), cut at the end of the load, other errors.

    A reply the killed replica died in the middle of (its status line had gone out, the
    body had not) is logged 200 in the access log; nginx's error log names it ("upstream
    prematurely closed connection while reading upstream"), and it is counted lost in
    flight: nginx closed the client's connection, which wrk counts as a read error."""
    counts = {"answered": 0, "in_flight_on_killed": 0, "cut_mid_reply_on_killed": 0, "cut_at_end": 0,
              "other_errors": 0, "retried_to_other_replica": 0}  # fmt: skip
    by_replica: dict[str, int] = {}
    served_after_restart = 0
    examples: list[str] = []
    for line in access_log.read_text().splitlines():
        fields = line.split(" ", 3)
        if len(fields) < 4:
            continue
        end, duration, status = float(fields[0]), float(fields[1]), int(fields[2])
        start = end - duration
        upstreams = re.findall(r"\d+\.\d+\.\d+\.\d+:\d+", fields[3].split('" "')[0])
        last = upstreams[-1] if upstreams else "-"
        if len(upstreams) > 1:
            counts["retried_to_other_replica"] += 1
        in_kill_window = last == killed and start <= kill_done and end >= kill_sent
        if status == 200:
            counts["answered"] += 1
            by_replica[last] = by_replica.get(last, 0) + 1
            if last == killed and start > kill_done:
                served_after_restart += 1
        elif status in (502, 504) and in_kill_window:
            counts["in_flight_on_killed"] += 1
        elif status == 499 and end >= load_end - 1.0:
            counts["cut_at_end"] += 1
        else:
            counts["other_errors"] += 1
            if len(examples) < 5:
                examples.append(line)
    cut = sum(1 for line in error_log.splitlines()
              if "prematurely closed connection while reading upstream" in line and f"//{killed}/" in line)  # fmt: skip
    counts["cut_mid_reply_on_killed"] = cut
    counts["in_flight_on_killed"] += cut
    counts["answered"] -= cut
    return {**counts, "answered_by_replica": by_replica, "killed_replica_answered_after_restart": served_after_restart,
            "other_error_lines": examples}  # fmt: skip


def run(seconds: int = 20, *, rate: float = 2000.0, connections: int = 20, kill_at: float = 0.35,
        down: float = 0.5, workers: int = 1, workdir: Path | None = None,
        log: Any = print) -> dict[str, Any]:  # fmt: skip
    """One load run; the figures as a dict (``ok``: no other errors)."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="modelctx-scale-"))
    with Processes(workdir) as procs:
        redis = procs.start_redis()
        replicas = [procs.start_replica(ECHO_SERVER, redis_url=redis.extra["url"], workers=workers) for _ in range(2)]
        nginx = procs.start_nginx([r.port for r in replicas])
        check_echo(nginx.port)
        log(f"redis :{redis.port}, replicas :{replicas[0].port} :{replicas[1].port}, nginx :{nginx.port}; "
            f"wrk {seconds} s at ~{rate:g} req/s over {connections} connections")  # fmt: skip
        wrk_log = workdir / "wrk.out"
        began = time.time()
        wrk = start_wrk(nginx.url, seconds, connections, rate, wrk_log)
        try:
            time.sleep(seconds * kill_at)
            victim = replicas[0]
            kill_sent = time.time()
            victim.kill()
            kill_done = time.time()
            log(f"killed replica A (:{victim.port}) at {kill_sent - began:.2f} s")
            time.sleep(down)
            replicas[0] = procs.restart(victim)
            log(f"replica A back at {time.time() - began:.2f} s")
            wrk.wait(timeout=seconds + 30)
        finally:
            if wrk.poll() is None:
                wrk.kill()
                wrk.wait()
        load_end = time.time()
        for replica in replicas:
            replica.check_alive()
        check_echo(nginx.port)
        figures = parse_wrk(wrk_log.read_text())
        nginx.stop()  # flushes its access log
        errors = classify(nginx.extra["access_log"], nginx.log(), f"127.0.0.1:{victim.port}", kill_sent, kill_done,
                          load_end)  # fmt: skip
    # A reply cut mid-body on the killed replica is one wrk socket error (read) as well:
    # those are explained; any other socket error is not.
    explained = min(figures["socket_errors_by_kind"].get("read", 0), errors["cut_mid_reply_on_killed"])
    other = errors["other_errors"] + figures["socket_errors"] - explained
    return {"seconds": seconds, "target_rate": rate, "connections": connections, **figures, **errors,
            "wrk_socket_errors": figures["socket_errors"], "unexpected_errors": other, "ok": other == 0,
            "kill_at_s": round(kill_sent - began, 2)}  # fmt: skip


def report(result: dict[str, Any]) -> str:
    return "\n".join([
        f"requests/s {result['req_per_s']:,.0f} (target ~{result['target_rate']:,.0f}), "
        f"p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms, {result['requests']:,} requests",
        f"answered 200: {result['answered']:,} (by replica: {result['answered_by_replica']}); the killed replica "
        f"answered {result['killed_replica_answered_after_restart']:,} after its restart",
        f"errors: {result['in_flight_on_killed']} in flight on the killed replica (allowed), "
        f"{result['unexpected_errors']} other (wrk socket errors {result['wrk_socket_errors']}"
        f"{' ' + str(result['socket_errors_by_kind']) if result['socket_errors_by_kind'] else ''}); "
        f"{result['retried_to_other_replica']} requests moved to the other replica after a refused connect; "
        f"{result['cut_at_end']} cut by the end of the load",
        *(f"  other error: {line}" for line in result["other_error_lines"]),
        "PASS: no errors apart from the requests in flight on the killed replica" if result["ok"]
        else "FAIL: unexpected errors",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=20, help="length of the load (default 20)")
    parser.add_argument("--rate", type=float, default=2000.0, help="target requests/s (default 2000)")
    parser.add_argument("--connections", type=int, default=20, help="wrk connections (default 20)")
    parser.add_argument("--kill-at", type=float, default=0.35, help="when to kill replica A, as a share of the run")
    parser.add_argument("--workers", type=int, default=1, help="worker processes per replica (default 1)")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    result = run(args.seconds, rate=args.rate, connections=args.connections, kill_at=args.kill_at,
                 workers=args.workers)
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
