"""Benchmark modelctx against the official MCP Python SDK (mcp==2.3.0).

    python bench/run.py                  # everything, about 4 minutes
    python bench/run.py --only scale     # 1 and 2 workers vs the official stateless server
    python bench/run.py --quick          # smaller counts and shorter loads, about 1.5 minutes
    python bench/run.py --only http --only startup
    python bench/run.py --only client    # the client matrices only
    python bench/run.py --list
    python bench/run.py --only gateway   # bench/gateway.py: direct vs modelctx gateway vs fastmcp proxy
    python bench/run.py --only mount     # bench/mount.py: a tool direct vs mounted vs derived

Each server scenario (bench/scenarios/) runs the same client against every server, one
after the other: ours (its echo tool async, sync on a worker thread, and sync inline), the
official SDK's, and a floor that only parses and answers. The tables show the figures,
how many times better ours is, and what share of the floor it reaches.
The client scenarios run our client and the official client against both servers (each
client run in its own subprocess) and print the 2x2 matrix with its ratios. Results
also go to a JSON file (``--out``, default /tmp/modelctx-bench/latest.json). Every server
process is killed at the end, also on error or Ctrl-C. See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import math
import os
import platform
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import IMPLS, BenchError, Servers
from scenarios import SCENARIOS, ClientRun, Context, Metric, Scenario

DEFAULT_OUT = Path("/tmp/modelctx-bench/latest.json")
GATEWAY_BENCH = "tools/call direct vs through modelctx gateway vs through fastmcp's proxy (bench/gateway.py)"
MOUNT_BENCH = "tools/call of a tool registered directly vs mounted (server.mount) vs derived (bench/mount.py)"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def select(names: list[str]) -> list[Scenario]:
    """Scenarios matching any of ``names``: a scenario name, a prefix of one, or a section."""
    if not names:
        return list(SCENARIOS)
    wanted = [n.strip() for arg in names for n in arg.split(",") if n.strip()]
    chosen = [s for s in SCENARIOS if any(s.name.startswith(n) or s.section == n for n in wanted)]
    if not chosen:
        known = ", ".join(s.name for s in SCENARIOS)
        raise SystemExit(f"run.py: --only {','.join(wanted)} matches no scenario; known: {known}")
    return chosen


def speedup(metric: Metric, ours: float | None, official: float | None) -> float | None:
    """How many times better ours is, in the metric's own direction."""
    if not ours or not official:
        return None
    return ours / official if metric.higher_is_better else official / ours


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "error"
    if unit in ("calls/s", "req/s"):
        return f"{value:,.0f} {unit}"
    if unit == "s":
        return f"{value * 1e3:,.0f} ms" if value < 10 else f"{value:.1f} s"
    if unit == "us":
        return f"{value:,.1f} us"
    return f"{value:,.2f} {unit}"


def measure(scenario: Scenario, ctx: Context) -> dict:
    results: dict[str, dict] = {}
    try:
        for impl in scenario.impls:
            log(f"  {scenario.name} / {impl} ...")
            started = time.perf_counter()
            try:
                results[impl] = scenario.run(ctx, impl)
            except Exception as exc:  # noqa: BLE001 - one failed measurement must not stop the others
                results[impl] = {"error": f"{type(exc).__name__}: {exc}"}
                log(f"  {scenario.name} / {impl}: ERROR {exc}")
                if not isinstance(exc, BenchError):
                    log(traceback.format_exc())
            log(f"  {scenario.name} / {impl}: {time.perf_counter() - started:.1f} s")
    finally:
        if scenario.finish is not None:
            scenario.finish(ctx)
    if scenario.section == "scale":
        rows = [scale_row(metric, results) for metric in scenario.metrics]
        return {"section": scenario.section, "description": scenario.description, "results": results, "rows": rows}
    if scenario.section == "targets":
        rows = list(results.get("all", {}).get("rows", []))
        return {"section": scenario.section, "description": scenario.description, "results": results, "rows": rows}
    if scenario.section == "client":
        rows = client_rows(scenario, results)
        return {"section": scenario.section, "description": scenario.description, "results": results, "rows": rows}
    rows = [server_row(metric, results) for metric in scenario.metrics]
    return {"section": scenario.section, "description": scenario.description, "results": results, "rows": rows}


def server_row(metric: Metric, results: dict[str, dict]) -> dict:
    """One metric of a server scenario: every implementation's value and the ratios.

    ``ratios`` are in the metric's better direction, so above 1 means the first named is
    better: ``async/official`` is our async server against the SDK's, ``async/floor`` our
    async server against the bare floor (at most 1), ``sync/async`` our sync tool against
    our async one (``sync_within`` asks it to be at least 1/1.5).
    """
    values = {impl: results.get(impl, {}).get(metric.key) for impl in results}
    ours, official = values.get("modelctx"), values.get("official")
    times = speedup(metric, ours, official)
    ratios = {
        f"{SHORT[a]}/{SHORT[b]}": speedup(metric, values.get(a), values.get(b))
        for a, b in RATIOS
        if a in values and b in values
    }
    sync_vs_async = ratios.get("sync/async")
    return {
        "metric": metric.key,
        "label": metric.label,
        "unit": metric.unit,
        "higher_is_better": metric.higher_is_better,
        "modelctx": ours,
        "official": official,
        "speedup": times,
        "target": metric.target.describe(metric.unit) if metric.target else None,
        "target_met": metric.target.met(ours, official, times) if metric.target else None,
        "values": values,
        "ratios": ratios,
        "sync_target": f">= async/{metric.sync_within:g}" if metric.sync_within else None,
        "sync_target_met": (
            None if metric.sync_within is None or sync_vs_async is None
            else sync_vs_async >= 1 / metric.sync_within
        ),
    }


#: Column names of the server tables, by implementation.
SHORT = {"modelctx": "async", "modelctx-sync": "sync", "modelctx-inline": "inline", "official": "official",
         "floor": "floor"}  # fmt: skip
#: The ratios shown: (a, b) is "a/b", in the metric's better direction.
RATIOS = (
    ("modelctx", "official"), ("modelctx-sync", "official"), ("modelctx", "floor"),
    ("modelctx-sync", "floor"), ("modelctx-sync", "modelctx"), ("modelctx-inline", "modelctx"),
)  # fmt: skip


WHO = {"modelctx": "our", "official": "official"}


def client_rows(scenario: Scenario, results: dict[str, dict]) -> list[dict]:
    """The rows of a client matrix: one per cell, then the ratios.

    ``client_ratio``: our client / the official client, same server and calls in flight
    (what our client saves); ``server_ratio``: our server / the official server, same
    client (what our server saves, as that client sees it). Both >1 when ours is faster.
    """
    metric = scenario.metrics[0]
    cells = [ClientRun.parse(key) for key in scenario.impls]
    value = {c: results.get(c.key, {}).get(metric.key) for c in cells}
    rows: list[dict] = []
    for c in cells:
        flight = f", {c.in_flight} in flight" if c.in_flight > 1 else ""
        rows.append({
            "metric": metric.key, "kind": "cell", "unit": metric.unit,
            "higher_is_better": metric.higher_is_better,
            "label": f"{metric.label} {WHO[c.client]} client -> {WHO[c.server]} server{flight}",
            "client": c.client, "server": c.server, "in_flight": c.in_flight, "value": value[c],
            "client_cpu_us": results.get(c.key, {}).get("client_cpu_us"),
            "client_cpu_share": results.get(c.key, {}).get("client_cpu_share"),
        })  # fmt: skip

    def ratio(ours: ClientRun, theirs: ClientRun) -> float | None:
        a, b = value.get(ours), value.get(theirs)
        if not a or not b:
            return None
        return a / b if metric.higher_is_better else b / a

    for c in cells:
        other = ClientRun("official", c.server, c.in_flight)
        if c.client == "modelctx" and other in value:
            flight = f", {c.in_flight} in flight" if c.in_flight > 1 else ""
            rows.append({
                "metric": "client_ratio", "kind": "client_ratio", "unit": "x",
                "label": f"{metric.label} our client vs official client, {WHO[c.server]} server{flight}",
                "server": c.server, "in_flight": c.in_flight, "value": ratio(c, other),
            })  # fmt: skip
    for c in cells:
        other = ClientRun(c.client, "official", c.in_flight)
        if c.server == "modelctx" and other in value:
            flight = f", {c.in_flight} in flight" if c.in_flight > 1 else ""
            rows.append({
                "metric": "server_ratio", "kind": "server_ratio", "unit": "x",
                "label": f"{metric.label} our server vs official server, {WHO[c.client]} client{flight}",
                "client": c.client, "in_flight": c.in_flight, "value": ratio(c, other),
            })  # fmt: skip
    return rows


def _render(head: tuple[str, ...], lines: list[tuple[str, ...]], left: tuple[int, ...]) -> list[str]:
    widths = [max(len(str(x[i])) for x in [head, *lines]) for i in range(len(head))]

    def render(cells) -> str:
        return " | ".join(
            str(c).ljust(w) if i in left else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=False))
        ).rstrip()

    return [render(head), "-+-".join("-" * w for w in widths), *(render(x) for x in lines)]


def server_table(report: dict) -> list[str]:
    """Two tables: every implementation's figure per row, then the ratios and targets."""
    entries = [e for e in report["scenarios"].values() if e["section"] == "server"]
    rows = [row for e in entries for row in e["rows"]]
    if not rows:
        return []
    impls = [i for i in SHORT if any(i in row.get("values", {}) for row in rows)]
    head = ("scenario", *(NAMES[i] for i in impls))
    lines = []
    for row in rows:
        cells = [fmt(row["values"][i], row["unit"]) if i in row["values"] else "" for i in impls]
        lines.append((row["label"], *cells))
    out = _render(head, lines, left=(0,))
    out.append("")
    names = [n for n in (f"{SHORT[a]}/{SHORT[b]}" for a, b in RATIOS) if any(n in r["ratios"] for r in rows)]
    head = ("scenario", *names, "target: async vs official", "target: sync")
    lines = []
    for row in rows:
        cells = [_times(row["ratios"].get(n), percent=n.endswith("/floor")) for n in names]
        lines.append((row["label"], *cells, _verdict(row["target"], row["target_met"]),
                      _verdict(row["sync_target"], row["sync_target_met"])))  # fmt: skip
    out += _render(head, lines, left=(0, len(head) - 2, len(head) - 1))
    out.append("x/y = how many times better x is than y: x's rate / y's, or y's time / x's (x/floor: as a")
    out.append("share of the floor). target: sync = our sync tool at most 1.5x worse than our async one. async, sync,")
    out.append("inline: our echo tool as `async def`, as `def` (on a worker thread, the default) and as")
    out.append("`def` with inline=True (on the loop); floor: a bare server that only parses and answers.")
    return out


NAMES = {"modelctx": "ours async", "modelctx-sync": "ours sync", "modelctx-inline": "ours inline",
         "official": "official", "floor": "floor"}  # fmt: skip


def _times(value: float | None, percent: bool = False) -> str:
    if value is None:
        return "-"
    if percent:  # a share of the floor
        return f"{value:.0%}"
    # Rounded down, so that a shown 10.0x never hides a miss of ">= 10x".
    return f"{math.floor(value * 100) / 100:.2f}x"


def _verdict(target: str | None, met: bool | None) -> str:
    if not target:
        return ""
    return f"{target}: {({True: 'PASS', False: 'MISS', None: 'n/a'})[met]}"


def client_table(report: dict) -> list[str]:
    """The client matrices: a line per client (and number in flight), a column per server;
    then our/official client under each column, and our/official server at the end of a line."""
    head = ("client: sequential call_tool(echo)", "-> our server", "-> official server", "our/official server")
    lines: list[tuple[str, ...]] = []
    cpu_lines: list[tuple[str, ...]] = []

    def times(table: dict, key: tuple) -> str:
        if key not in table:
            return ""
        return "-" if table[key] is None else f"{table[key]:.2f}x"

    for entry in report["scenarios"].values():
        if entry["section"] != "client":
            continue
        rows = entry["rows"]
        cells = {(r["client"], r["server"], r["in_flight"]): r for r in rows if r["kind"] == "cell"}
        by_client = {(r["server"], r["in_flight"]): r["value"] for r in rows if r["kind"] == "client_ratio"}
        by_server = {(r["client"], r["in_flight"]): r["value"] for r in rows if r["kind"] == "server_ratio"}
        transport = rows[0]["label"].split(" ")[0]
        for flight in sorted({key[2] for key in cells}):
            suffix = f", {flight} in flight" if flight > 1 else ""
            for client in IMPLS:
                if not any((client, server, flight) in cells for server in IMPLS):
                    continue
                line = [f"{transport} {WHO[client]} client{suffix}"]
                cpu_line = [line[0]]
                for server in IMPLS:
                    cell = cells.get((client, server, flight))
                    line.append("" if cell is None else fmt(cell["value"], cell["unit"]))
                    cpu_line.append(_cpu(cell))
                line.append(times(by_server, (client, flight)))
                lines.append(tuple(line))
                cpu_lines.append(tuple(cpu_line))
            if any(key[1] == flight for key in by_client):
                line = [f"{transport} our/official client{suffix}"]
                line += [times(by_client, (server, flight)) for server in IMPLS]
                lines.append((*line, ""))
    if not lines:
        return []
    out = _render(head, lines, left=(0,))
    out.append("our/official = times faster with ours: down a column, the client's share; across a line, the server's.")
    out.append("")
    cpu_head = ("client CPU per call (share of wall)", "-> our server", "-> official server")
    out += _render(cpu_head, cpu_lines, left=(0,))
    out.append("client CPU: the client process's CPU time per call, and as a share of the wall time; the rest is")
    out.append("the server, the transport and waiting for a core.")
    return out


def _cpu(cell: dict | None) -> str:
    if cell is None:
        return ""
    us, share = cell.get("client_cpu_us"), cell.get("client_cpu_share")
    if us is None or share is None:
        return "error" if cell.get("value") is None else "-"
    return f"{us:,.0f} us ({share:.0%})"


#: The scale section's columns and ratios ("a/b": a's figure over b's, in the better direction).
SCALE_NAMES = {"modelctx": "ours 1 worker", "modelctx-2w": "ours 2 workers", "official-stateless": "official stateless"}
SCALE_RATIOS = (("modelctx-2w", "modelctx", "2w/1w"), ("modelctx", "official-stateless", "1w/official"),
                ("modelctx-2w", "official-stateless", "2w/official"))  # fmt: skip


def scale_row(metric: Metric, results: dict[str, dict]) -> dict:
    """One metric of the scale section: each server's value and the ratios of SCALE_RATIOS."""
    values = {impl: results.get(impl, {}).get(metric.key) for impl in results}
    ratios = {name: speedup(metric, values.get(a), values.get(b)) for a, b, name in SCALE_RATIOS}
    return {"metric": metric.key, "label": metric.label, "unit": metric.unit,
            "higher_is_better": metric.higher_is_better, "values": values, "ratios": ratios}  # fmt: skip


def scale_table(report: dict) -> list[str]:
    """The scale section: a line per metric, a column per server, then the ratios."""
    rows = [row for e in report["scenarios"].values() if e["section"] == "scale" for row in e["rows"]]
    if not rows:
        return []
    head = ("scale: same wrk load", *SCALE_NAMES.values(), *(name for _, _, name in SCALE_RATIOS))
    lines = [
        (row["label"], *(fmt(row["values"].get(i), row["unit"]) for i in SCALE_NAMES),
         *(_times(row["ratios"].get(name)) for _, _, name in SCALE_RATIOS))
        for row in rows
    ]  # fmt: skip
    out = _render(head, lines, left=(0,))
    out.append("2w/1w: our server with 2 worker processes (--workers 2) against 1; x/official: against the SDK's")
    out.append("server in stateless HTTP mode. On 2 cores wrk shares them with the workers.")
    return out


def targets_table(report: dict) -> list[str]:
    """Issue 25's rows: metric | ours | peer/floor | ratio | target | met?"""
    rows = [row for e in report["scenarios"].values() if e["section"] == "targets" for row in e["rows"]]
    if not rows:
        return []
    head = ("issue 25 target", "ours", "peer / floor", "ratio", "target", "met?")
    lines = []
    for row in rows:
        if row["ours"] is None:
            lines.append((row["metric"], "error", "", "", "", row["note"]))
            continue
        peer = f"{_figure(row['peer'], row['unit'])} ({row['peer_name']})"
        ratio = f"{row['ratio_name']} {row['ratio']:.2f}"
        met = {True: "PASS", False: "MISS", None: "-"}[row["met"]]
        lines.append((row["metric"], _figure(row["ours"], row["unit"]), peer, ratio, row["target"],
                      met + (f" ({row['note']})" if row["note"] else "")))  # fmt: skip
    out = _render(head, lines, left=(0, 2, 5))
    out.append("ratio: measured in this run, in the direction its target reads (ours/TS: how many times the TS SDK's")
    out.append("rate ours is; def/async: how many times the async tool's CPU the def tool costs). met?: the ratio against")
    out.append("its target in this one run; see bench/README.md for reading it on a noisy machine.")
    return out


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit in ("calls/s", "req/s"):
        return f"{value:,.0f} {unit}"
    return f"{value:,.2f} {unit}" if value < 100 else f"{value:,.0f} {unit}"


def table(report: dict) -> str:
    out = server_table(report)
    for part in (client_table(report), scale_table(report), targets_table(report)):
        if out and part:
            out.append("")
        out += part
    for name, entry in report["scenarios"].items():
        for impl, result in entry["results"].items():
            if "error" in result:
                out.append(f"ERROR {name} / {impl}: {result['error'].splitlines()[0]}")
            elif "load_generator" in result and impl == "modelctx":
                out.append(f"{name}: load generator: {result['load_generator']}")
    return "\n".join(out)


def environment(wrk: str | None) -> dict:
    def version(dist: str) -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "modelctx": version("modelctx"),
        "mcp": version("mcp"),
        "wrk": wrk,
    }


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts, shorter loads (about 1 min)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="scenario name, prefix or section (repeatable, or comma-separated)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON results (default {DEFAULT_OUT})")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--official-log-level", metavar="LEVEL",
                        help="run the official server at this log level instead of its default INFO")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)

    if args.list:
        for s in SCENARIOS:
            print(f"{s.name:22} [{s.section}] {s.description}")
        print(f"{'gateway':22} [separate] {GATEWAY_BENCH}")
        print(f"{'mount':22} [separate] {MOUNT_BENCH}")
        return 0
    if "gateway" in args.only:  # its own runner: four fronts per transport, not ours vs official
        import gateway

        args.only.remove("gateway")
        code = gateway.main(["--quick"] if args.quick else [])
        if not args.only:
            return code
    if "mount" in args.only:  # its own runner: fronts in one process and another, taking turns
        import mount

        args.only.remove("mount")
        code = mount.main(["--quick"] if args.quick else [])
        if not args.only:
            return code

    wrk = shutil.which("wrk")
    if wrk is None:
        log("wrk not found: HTTP load falls back to a Python httpx load generator (far weaker)")
    servers = Servers()
    # SIGTERM ends the run like Ctrl-C does, so the finally below still kills the servers.
    signal.signal(signal.SIGTERM, _interrupt)
    ctx = Context(
        servers=servers,
        quick=args.quick,
        log=log,
        official_env={"MCP_BENCH_LOG_LEVEL": args.official_log_level} if args.official_log_level else {},
        wrk=wrk,
    )
    report = {
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "official_log_level": args.official_log_level or "INFO (SDK default)",
        "environment": environment(wrk),
        "scenarios": {},
    }
    load = os.getloadavg()[0]
    report["load_before"] = round(load, 2)
    if load > 0.5:
        log(f"note: 1-minute load average is {load:.2f} before the run; other processes will add noise")
    started = time.perf_counter()
    try:
        for scenario in select(args.only):
            log(f"{scenario.name}: {scenario.description}")
            report["scenarios"][scenario.name] = measure(scenario, ctx)
    except KeyboardInterrupt:
        log("interrupted: stopping the servers")
        return 130
    finally:
        servers.close()
    report["seconds"] = round(time.perf_counter() - started, 1)
    report["load_after"] = round(os.getloadavg()[0], 2)

    print(table(report))
    print(
        f"(total {report['seconds']} s{', --quick' if args.quick else ''}; load average before "
        f"{report['load_before']}, after {report['load_after']}; JSON: {args.out})"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")

    errors = any("error" in r for e in report["scenarios"].values() for r in e["results"].values()) or any(
        row.get("note", "").startswith("ERROR") for e in report["scenarios"].values() for row in e["rows"]
    )
    if errors:
        print(f"server logs (stderr of every server started): {servers.log_dir}")
    else:
        servers.remove_logs()
    missed = any(
        row.get("target_met") is False or row.get("sync_target_met") is False or row.get("met") is False
        for e in report["scenarios"].values()
        for row in e["rows"]
    )
    return 1 if errors or (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
