"""stdio under load (issue 25): the in-flight cap's back-pressure, big replies written
whole, and plain ``def`` tools that block while others answer.

Real server subprocesses on pipes; no timing is asserted, only what answers while what
else is still running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

from modelctx.transports.stdio import MAX_INFLIGHT
from tests.support.wire import DEADLINE, StdioServer, request, serve_command, wait_until

_HOLDING = '''
import asyncio, pathlib
from modelctx import Server

server = Server("holding", "1.0")
HERE = pathlib.Path(__file__).parent
live = 0
released = None
watching = None

async def watch() -> None:
    while not (HERE / "release").exists():
        await asyncio.sleep(0.02)
    released.set()

@server.tool
async def hold(n: int) -> int:
    """Run until the file ``release`` exists; ``live`` counts the holds running."""
    global live, released, watching
    if released is None:
        released = asyncio.Event()
        watching = asyncio.get_running_loop().create_task(watch())
    live += 1
    (HERE / "live").write_text(str(live))
    await released.wait()
    live -= 1
    return n

@server.tool
def pad(n: int, padding: str) -> int:
    return n
'''


def _server(tmp_path: Path, source: str) -> StdioServer:
    path = tmp_path / "server.py"
    path.write_text(source)
    return StdioServer(serve_command(path))


def test_past_the_in_flight_cap_stdin_is_not_read_until_a_request_ends(tmp_path: Path) -> None:
    """A peer that floods requests is slowed, not buffered: with MAX_INFLIGHT holds
    running, the server reads no more, so the peer's writes behind them stay blocked;
    once the holds end, every request is read and answered once."""
    server = _server(tmp_path, _HOLDING)
    try:
        # The cap is checked after each chunk read (64 KB): the holds past it fill more
        # than one, so the pads behind them are never in the chunk that reached it.
        count = MAX_INFLIGHT + 400
        holds = [request(i, "tools/call", {"name": "hold", "arguments": {"n": i}}) for i in range(count)]
        # Far more than a pipe and a read chunk hold: if the server read past the cap,
        # the writer would finish.
        padding = "p" * 20_000
        pads = [
            request(count + i, "tools/call", {"name": "pad", "arguments": {"n": count + i, "padding": padding}})
            for i in range(40)
        ]
        data = b"".join(json.dumps(m).encode() + b"\n" for m in holds + pads)
        assert server.process.stdin is not None
        stdin = server.process.stdin

        def write() -> None:
            stdin.write(data)
            stdin.flush()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        live = tmp_path / "live"
        wait_until(lambda: live.exists() and int(live.read_text() or 0) >= MAX_INFLIGHT, "the cap's holds to be running")
        # Let a server that ignored its cap read on (it would, and answer the pads); a
        # capped one reads nothing more however long this waits.
        seen: list[str] = []
        wait_until(lambda: seen.append(live.read_text()) or seen[-10:].count(seen[-1]) == 10, "the holds to settle")

        assert writer.is_alive(), "the server read past its in-flight cap"
        assert server.lines.empty(), "a request behind the held ones was answered"

        (tmp_path / "release").write_text("")
        answers = [server.recv() for _ in range(len(holds) + len(pads))]
        writer.join(DEADLINE)
        assert not writer.is_alive()
        assert sorted(a["id"] for a in answers) == list(range(count + len(pads)))
        assert all(a["result"]["structuredContent"] == {"result": a["id"]} for a in answers)
    finally:
        server.stop()


_BIG = '''
import pathlib
from modelctx import Server

server = Server("big", "1.0")
HERE = pathlib.Path(__file__).parent

@server.tool
async def big(n: int) -> str:
    return "x" * n

@server.tool
async def small(i: int) -> int:
    (HERE / f"small-{i}").write_text("")
    return i
'''


def test_a_10_mb_reply_arrives_whole_and_replies_sent_meanwhile_are_not_cut_into_it(tmp_path: Path) -> None:
    """The long reply goes to the pipe in pieces as the peer reads; the short replies
    answered while it waits for the peer come after it, each a whole line of its own."""
    size = 10 * 1024 * 1024
    path = tmp_path / "server.py"
    path.write_text(_BIG)
    process = subprocess.Popen(serve_command(path), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert process.stdin is not None and process.stdout is not None
        lines = [request(1, "tools/call", {"name": "big", "arguments": {"n": size}})]
        lines += [request(100 + i, "tools/call", {"name": "small", "arguments": {"i": i}}) for i in range(20)]
        process.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
        process.stdin.flush()
        # Nothing is read until every short reply is made: the long one fills the pipe
        # and waits, and the short ones are sent while it does.
        wait_until(lambda: all((tmp_path / f"small-{i}").exists() for i in range(20)), "the short calls to run")
        answers = [process.stdout.readline() for _ in range(21)]
        process.stdin.close()
        assert process.wait(DEADLINE) == 0
    finally:
        process.kill()
    messages = [json.loads(line) for line in answers]  # each a whole line of JSON
    assert messages[0]["id"] == 1
    assert messages[0]["result"]["content"] == [{"type": "text", "text": "x" * size}]
    assert sorted(m["id"] for m in messages[1:]) == [100 + i for i in range(20)]
    assert all(m["result"]["structuredContent"] == {"result": m["id"] - 100} for m in messages[1:])


_BLOCKING = '''
import pathlib, time
from modelctx import Context, Server

server = Server("blocking", "1.0")

@server.tool
def read_slow_file(path: str) -> str:
    """Blocks in open() until someone opens the FIFO for writing."""
    with open(path) as file:
        return file.read()

@server.tool
def nap(marker: str) -> str:
    """Sleeps until ``marker`` exists."""
    while not pathlib.Path(marker).exists():
        time.sleep(0.05)
    return "rested"

@server.tool
def add(a: int, b: int) -> int:
    return a + b

@server.tool
async def steps(n: int, ctx: Context) -> int:
    for i in range(n):
        await ctx.report_progress(i + 1, n)
    return n
'''


def test_plain_def_tools_blocked_in_a_slow_read_and_a_sleep_stall_no_other_request(tmp_path: Path) -> None:
    fifo = tmp_path / "slow"
    os.mkfifo(fifo)
    marker = tmp_path / "wake"
    server = _server(tmp_path, _BLOCKING)
    try:
        server.send(request(1, "tools/call", {"name": "read_slow_file", "arguments": {"path": str(fifo)}}))
        server.send(request(2, "tools/call", {"name": "nap", "arguments": {"marker": str(marker)}}))
        server.send(request(3, "ping"))
        server.send(request(4, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}))
        server.send(request(5, "tools/call", {"name": "steps", "arguments": {"n": 3}}, progressToken="t"))

        # Both blocking tools are still in their read and their sleep: nothing has
        # released them yet, so whatever answers now answered past them.
        early = [server.recv() for _ in range(6)]  # ping, add, three progress, steps
        by_id = {m["id"]: m for m in early if "id" in m}
        assert sorted(by_id) == [3, 4, 5]
        assert by_id[4]["result"]["structuredContent"] == {"result": 5}
        assert by_id[5]["result"]["structuredContent"] == {"result": 3}
        progress = [m["params"]["progress"] for m in early if m.get("method") == "notifications/progress"]
        assert progress == [1, 2, 3]
        assert early.index(by_id[5]) > max(i for i, m in enumerate(early) if m.get("method") == "notifications/progress")

        with open(fifo, "w") as writer:  # the slow file finally gives its bytes
            writer.write("at last")
        assert server.recv()["result"]["content"] == [{"type": "text", "text": "at last"}]
        marker.write_text("")
        assert server.recv()["result"]["content"] == [{"type": "text", "text": "rested"}]
    finally:
        server.stop()


def test_a_server_whose_peer_never_reads_its_10_mb_reply_still_stops_on_sigterm(tmp_path: Path) -> None:
    """The queued long reply does not hold the stop: once nothing has left for the
    grace, it is dropped (and said so) and the process exits cleanly."""
    path = tmp_path / "server.py"
    path.write_text(_BIG)
    log = tmp_path / "server.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(serve_command(path), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    try:
        assert process.stdin is not None
        process.stdin.write(json.dumps(request(1, "tools/call", {"name": "big", "arguments": {"n": 10 * 1024 * 1024}})).encode() + b"\n")
        process.stdin.write(json.dumps(request(2, "tools/call", {"name": "small", "arguments": {"i": 0}})).encode() + b"\n")
        process.stdin.flush()
        wait_until(lambda: (tmp_path / "small-0").exists(), "the short call to run")
        process.send_signal(signal.SIGTERM)
        code = process.wait(DEADLINE)
    finally:
        process.kill()
        process.wait(DEADLINE)
    assert code == 0
    text = log.read_text(errors="replace")
    assert "the peer did not read in time are dropped" in text
    assert "Traceback" not in text


_SYNC_ECHO = '''
from modelctx import Server

server = Server("sync-echo", "1.0")

@server.tool
def echo(text: str) -> str:
    return text
'''


def test_a_def_tool_with_4000_calls_in_flight_over_pipes_answers_every_call(tmp_path: Path) -> None:
    """A plain ``def`` tool (run on worker threads) driven as bench/scenarios/issue25.py
    drives it: a handshake session, then 16,000 tools/call kept 4,000 in flight (past
    the in-flight cap, so stdin's reading pauses and resumes again and again while
    answers come back from the workers in bursts). Every call is answered, once, with
    its own text; a server that stops answering fails at the first read that waits
    DEADLINE seconds."""
    server = _server(tmp_path, _SYNC_ECHO)
    try:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "load", "version": "0"}}
        answer = server.call({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        assert answer["result"]["protocolVersion"] == "2025-11-25"
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        calls, window = 16_000, 4_000
        lines = [
            json.dumps(
                {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                 "params": {"name": "echo", "arguments": {"text": f"t{i}"}}}  # fmt: skip
            ).encode()
            + b"\n"
            for i in range(1, calls + 1)
        ]
        room = threading.Semaphore(window)
        stalled: list[int] = []
        assert server.process.stdin is not None
        stdin = server.process.stdin

        def write() -> None:
            batch: list[bytes] = []
            for i, line in enumerate(lines):
                if not room.acquire(blocking=False):
                    if batch:
                        stdin.write(b"".join(batch))
                        stdin.flush()
                        batch = []
                    if not room.acquire(timeout=DEADLINE):
                        stalled.append(i)  # the reader fails the test; stop here
                        return
                batch.append(line)
            stdin.write(b"".join(batch))
            stdin.flush()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        seen: dict[int, str] = {}
        for _ in range(calls):
            answer = server.recv()  # fails after DEADLINE seconds with nothing written
            seen[answer["id"]] = answer["result"]["content"][0]["text"]
            room.release()
        writer.join(DEADLINE)
        assert not writer.is_alive() and not stalled
        assert seen == {i: f"t{i}" for i in range(1, calls + 1)}
    finally:
        server.stop()
