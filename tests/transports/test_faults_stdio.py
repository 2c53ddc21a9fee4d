"""Faults a client inflicts on a ``modelctx serve`` process over stdio, through real pipes.

Lines that arrive in pieces (split at every byte boundary, or one byte at a time) are
served as if they came whole; a client process killed while a tool runs ends its server
cleanly, the tool seeing its cancellation. Each test reads the server's stderr for an
unhandled error and its ``/proc/PID/fd`` for descriptors that outlive a fault.
Floods and a client that never reads stdout: ``tests/server/test_attacker.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.leaks import alive, fd_count, settle, unhandled
from tests.support.wire import SAMPLE_SERVER, StdioServer, request, serve_command

DEADLINE = 15.0

Start = Callable[..., StdioServer]


def _echo(request_id: int, text: str) -> dict[str, Any]:
    return request(request_id, "tools/call", {"name": "echo", "arguments": {"text": text}})


def _messages() -> list[dict[str, Any]]:
    """A few requests of different shapes, with ids the tests replace."""
    return [
        _echo(0, "split ✓ in pieces"),  # a multi-byte character to split inside
        request(0, "tools/list"),
        request(0, "resources/read", {"uri": "sample://items/apple"}),
    ]


def _write_in_pieces(server: StdioServer, pieces: list[bytes]) -> None:
    """Write each piece with its own flush and a pause, so the server reads them apart."""
    stdin = server.process.stdin
    assert stdin is not None
    for piece in pieces:
        stdin.write(piece)
        stdin.flush()
        time.sleep(0.001)


def test_a_line_split_at_every_byte_boundary_is_served_as_if_it_came_whole(stdio_server: StdioServer) -> None:
    warm = stdio_server.call(_echo(-1, "warm"))  # the server's descriptors, once started
    assert warm["result"]["content"][0]["text"] == "warm"
    # A sync tool's first call opens the eventfd its loop is woken through, once.
    added = stdio_server.call(request(-2, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}))
    assert added["result"]["structuredContent"] == {"result": 3}
    baseline = fd_count(stdio_server.process.pid)
    next_id = 1
    for message in _messages():
        length = len(json.dumps({**message, "id": 1_000_000}).encode())
        for at in range(1, length + 1):  # the newline, at ``length``, arrives alone too
            line = json.dumps({**message, "id": 1_000_000 + next_id}).encode() + b"\n"
            _write_in_pieces(stdio_server, [line[:at], line[at:]])
            reply = stdio_server.recv_until(1_000_000 + next_id)[-1]
            assert "result" in reply, f"{message['method']} split at byte {at}: {reply}"
            next_id += 1
    assert next_id > 300
    assert fd_count(stdio_server.process.pid) <= baseline
    assert unhandled(stdio_server.stderr) == []


def test_lines_written_one_byte_at_a_time_are_each_answered(stdio_server: StdioServer) -> None:
    lines = [json.dumps({**message, "id": n}).encode() + b"\n" for n, message in enumerate(_messages(), 1)]
    _write_in_pieces(stdio_server, [bytes([byte]) for byte in b"".join(lines)])
    replies = stdio_server.recv_until(len(lines))
    assert [reply["id"] for reply in replies] == [1, 2, 3]
    assert replies[0]["result"]["content"][0]["text"] == "split ✓ in pieces"
    assert unhandled(stdio_server.stderr) == []


def test_half_a_line_then_eof_ends_the_server_cleanly(stdio_server: StdioServer) -> None:
    line = json.dumps(_echo(1, "never finished")).encode()
    _write_in_pieces(stdio_server, [line[: len(line) // 2]])
    stdio_server.close_stdin()
    assert stdio_server.wait() == 0
    assert unhandled(stdio_server.stderr) == []


def test_sigterm_in_the_grace_after_stdin_closed_cancels_the_running_tool_and_exits_cleanly(
    stdio_server: StdioServer, tmp_path: Path
) -> None:
    # stdio.mdx, Shutdown: a client closes stdin, waits, then sends SIGTERM. The signal
    # must reach the server's handlers, not kill it in the middle of its grace.
    marker = tmp_path / "sleepy"
    stdio_server.send(
        request(1, "tools/call", {"name": "sleepy", "arguments": {"seconds": 600, "marker": str(marker)}})
    )
    assert settle(Path(f"{marker}.started").exists, DEADLINE)
    stdio_server.close_stdin()
    time.sleep(0.5)  # inside the server's grace for running requests
    stdio_server.process.send_signal(signal.SIGTERM)
    assert stdio_server.wait() == 0, stdio_server.stderr
    assert marker.read_text() == "cancelled"
    assert unhandled(stdio_server.stderr) == []


def test_a_server_whose_client_never_reads_still_stops_on_sigterm(tmp_path: Path) -> None:
    # 5 MB of answers against a 64 KB pipe nobody empties: the server's writes block,
    # and so, in turn, does its reading (tests/server/test_attacker.py). The SIGTERM a client
    # sends at the end (stdio.mdx, Shutdown) must still end it: no wait on those writes
    # is unbounded.
    log = tmp_path / "server.log"
    with log.open("wb") as stderr:
        server = subprocess.Popen(serve_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    assert server.stdin is not None and server.stdout is not None
    stdin = server.stdin

    def flood() -> None:
        try:
            for n in range(50):
                stdin.write(json.dumps(_echo(n, "x" * 100_000)).encode() + b"\n")
                stdin.flush()
        except (OSError, ValueError):
            pass  # the server has gone

    writer = threading.Thread(target=flood, daemon=True)
    writer.start()
    try:
        assert not settle(lambda: not writer.is_alive(), 1.0), "the server read everything: no back-pressure"
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            pytest.fail("the server hung on a stdout nobody reads")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(DEADLINE)
        server.stdout.close()
        writer.join(DEADLINE)
        with contextlib.suppress(OSError):
            stdin.close()
    assert code == 0
    assert unhandled(log.read_text(errors="replace")) == []


# A client process: starts the sample server with its stderr in a file, calls a tool
# that sleeps, and writes the server's pid once the call is running. The test kills it.
CLIENT = r"""
import asyncio, sys
from modelctx.client import Client
from modelctx.transports.stdio_client import StdioClientTransport

serve, marker, log, pid_file = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]


async def main():
    command = ["sh", "-c", f'exec "$0" -m modelctx serve "$1" 2>>"$2"', sys.executable, serve, log]
    async with Client(StdioClientTransport(command), mode="2026-07-28", timeout=600) as client:
        call = asyncio.ensure_future(client.call_tool("sleepy", {"seconds": 600, "marker": marker}))
        while True:
            try:
                open(marker + ".started").close()
                break
            except FileNotFoundError:
                await asyncio.sleep(0.01)
        with open(pid_file, "w") as out:
            out.write(str(client.transport.pid))
        await call

asyncio.run(main())
"""


def test_a_client_process_killed_mid_call_cancels_the_tool_and_its_server_exits_cleanly(tmp_path: Path) -> None:
    client_script, log, pid_file = tmp_path / "client.py", tmp_path / "server.log", tmp_path / "server.pid"
    client_script.write_text(CLIENT)
    marker = tmp_path / "sleepy"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    client = subprocess.Popen(
        [sys.executable, str(client_script), str(SAMPLE_SERVER), str(marker), str(log), str(pid_file)], env=env
    )
    server_pid = 0
    try:
        assert settle(lambda: pid_file.exists() and pid_file.read_text() != "", DEADLINE), "the call never started"
        server_pid = int(pid_file.read_text())
        client.send_signal(signal.SIGKILL)
        client.wait(DEADLINE)
        assert settle(lambda: not alive(server_pid), DEADLINE), "the server outlived its client"
        assert settle(lambda: marker.exists(), DEADLINE), "the tool never saw its cancellation"
        assert marker.read_text() == "cancelled"
        assert unhandled(log.read_text(errors="replace")) == []
    finally:
        if client.poll() is None:
            client.kill()
            client.wait(DEADLINE)
        if server_pid and alive(server_pid):
            os.kill(server_pid, signal.SIGKILL)


def test_a_client_that_closes_both_pipes_mid_call_ends_the_server_with_the_tool_cancelled(tmp_path: Path) -> None:
    # What a client's death looks like from the server: stdin at EOF, stdout a broken pipe.
    marker, log = tmp_path / "sleepy", tmp_path / "server.log"
    with log.open("wb") as stderr:
        server = subprocess.Popen(serve_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    assert server.stdin is not None and server.stdout is not None
    try:
        sleepy = request(1, "tools/call", {"name": "sleepy", "arguments": {"seconds": 600, "marker": str(marker)}})
        server.stdin.write(json.dumps(sleepy).encode() + b"\n")
        server.stdin.flush()
        assert settle(lambda: Path(f"{marker}.started").exists(), DEADLINE)
        server.stdout.close()
        server.stdin.write(json.dumps(_echo(2, "x" * 200_000)).encode() + b"\n")  # meets the broken pipe
        server.stdin.close()
        try:
            code = server.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            pytest.fail("the server outlived both of its pipes")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(DEADLINE)
    assert code == 0
    assert marker.read_text() == "cancelled"
    assert unhandled(log.read_text(errors="replace")) == []
