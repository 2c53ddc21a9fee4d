"""What ``modelctx.Client`` does when the server misbehaves: every failure is a clear error
within the deadline, the client still usable after it, and nothing hangs or outlives the client.

The servers are scripts run as subprocesses: a modelctx server that crashes on request, raw
scripts that write garbage or nothing at all, a process tree that ignores signals, a raw stdio
server and raw HTTP servers on loopback that break their replies on purpose (a reply split at
every byte boundary, written one byte at a time, cut in the middle of an event, never written),
and the sample server, killed in the middle of a call. Each client gets a long default timeout
(60 s) where the test expects a prompt failure, so only the failure detection can pass the test
in time; the tests marked ``run_long`` also check, through ``leaks.leak_free``, that the fault
left no task, file descriptor or child process behind and logged no unhandled error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from modelctx.client import Client, ClientOptions, ClientTransport, ListChanged, RequestTimeout
from modelctx.errors import ConnectionClosed
from modelctx.transports.http_client import HttpClientTransport
from modelctx.transports.stdio_client import ServerNotStarted, StdioClientTransport
from tests.support.leaks import alive, fd_count, leak_free
from tests.support.wire import SAMPLE_SERVER, HttpServer, async_test, free_port, serve_command, until

DEADLINE = 10.0  # seconds any single wait may take
TEST_DEADLINE = 30.0
PATIENT = 60.0  # the clients' own timeout where a failure must come sooner
MODERN = "2026-07-28"


run = async_test(TEST_DEADLINE)  # a fresh loop and a deadline for each test
run_long = async_test(120.0)  # the same, for the faults whose leftovers are checked (leak_free)


async def within(awaitable: Awaitable[Any], what: str, seconds: float = DEADLINE) -> Any:
    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        task.cancel()
        pytest.fail(f"timed out after {seconds:g}s waiting for {what}")
    return task.result()


async def fails_within(awaitable: Awaitable[Any], error: type[BaseException], what: str) -> BaseException:
    """The error ``awaitable`` fails with, within DEADLINE; the test fails otherwise."""
    with pytest.raises(error) as caught:
        await within(awaitable, what)
    return caught.value


def script(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(source)
    return path


# -- stdio: the server process dies --------------------------------------------------------------------
DOOMED = '''
"""A modelctx server that fails in the ways the tests ask for."""
import asyncio, os, sys
from pathlib import Path
from modelctx import Server

server = Server("doomed")


@server.tool
async def hang(marker: str) -> str:
    print(f"doomed: {marker} is hanging now", file=sys.stderr, flush=True)
    Path(marker).write_text("started")
    await asyncio.sleep(600)
    return "never"


@server.tool
async def die(code: int) -> str:
    print("fatal: the disk is on fire", file=sys.stderr, flush=True)
    os._exit(code)


@server.tool
def chatty() -> str:
    print("Loading weights... 42%", flush=True)  # print() debugging: lands on stdout
    print("{not json at all", flush=True)
    print('{"jsonrpc": "2.0", "result": "no id"}', flush=True)
    return "still fine"
'''


@pytest.fixture
def doomed(tmp_path) -> list[str]:
    return serve_command(script(tmp_path, "doomed.py", DOOMED))


@pytest.mark.parametrize("mode", [MODERN, "handshake"])
@run
async def test_a_server_killed_mid_call_fails_every_pending_call_naming_server_cause_and_stderr(doomed, tmp_path, mode):
    async with Client(doomed, mode=mode, timeout=PATIENT) as client:
        calls = [asyncio.ensure_future(client.call_tool("hang", {"marker": str(tmp_path / f"m{n}")})) for n in (1, 2)]
        await until(lambda: (tmp_path / "m1").exists() and (tmp_path / "m2").exists(), "both calls to start")
        os.kill(client.transport.pid, signal.SIGKILL)

        errors = [await fails_within(call, ConnectionClosed, "the pending call to fail") for call in calls]
        later = await fails_within(client.call_tool("hang", {"marker": "x"}), ConnectionClosed, "a later call")

    for error in [*errors, later]:
        message = str(error)
        assert client.transport.name in message  # which server
        assert "killed by signal SIGKILL" in message  # the cause
        assert "is hanging now" in message  # the stderr tail


@run
async def test_a_server_that_exits_mid_call_reports_its_exit_code_and_stderr(doomed):
    async with Client(doomed, mode=MODERN, timeout=PATIENT) as client:
        error = await fails_within(client.call_tool("die", {"code": 3}), ConnectionClosed, "the call to fail")

    assert "exited with code 3" in str(error)
    assert "fatal: the disk is on fire" in str(error)


CRASH = """
import sys
print("ModuleNotFoundError: No module named 'weather_api'", file=sys.stderr)
sys.exit(3)
"""


@run
async def test_a_server_that_crashes_at_start_fails_connect_with_its_stderr(tmp_path):
    crash = script(tmp_path, "crash.py", CRASH)
    client = Client([sys.executable, str(crash)], timeout=PATIENT)
    error = await fails_within(client.connect(), ConnectionClosed, "connect")

    assert "stdio server" in str(error) and "exited with code 3" in str(error)
    assert "No module named 'weather_api'" in str(error)


@run
async def test_a_command_that_does_not_exist_fails_connect_at_once():
    error = await fails_within(
        Client(["/nonexistent/mcp-server-nowhere"], timeout=PATIENT).connect(), ServerNotStarted, "connect"
    )

    assert "mcp-server-nowhere" in str(error)


# -- stdio: garbage and silence ---------------------------------------------------------------------------
GARBAGE_ONLY = '''
import sys
print("garbage server: starting", file=sys.stderr, flush=True)
for n, line in enumerate(sys.stdin):
    sys.stdout.write(f"garbage {n}: this is not JSON-RPC\\n")
    sys.stdout.flush()
'''

SILENT = '''
import sys
log = open(sys.argv[1], "a")
print("silent server: reading, never answering", file=sys.stderr, flush=True)
for line in sys.stdin:
    log.write(line)
    log.flush()
'''


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@run
async def test_garbage_on_stdout_is_ignored_and_the_next_valid_answer_still_arrives(doomed, mode):
    async with Client(doomed, mode=mode, timeout=DEADLINE) as client:
        result = await within(client.call_tool("chatty"), "the answer after the garbage")
        again = await within(client.call_tool("chatty"), "a second answer")
        diagnostics = client.transport.diagnostics()

    assert result.content[0].text == again.content[0].text == "still fine"
    assert "Loading weights... 42%" in diagnostics and "{not json at all" in diagnostics


@run
async def test_a_server_that_only_writes_garbage_fails_connect_within_the_deadline(tmp_path):
    garbage = script(tmp_path, "garbage.py", GARBAGE_ONLY)
    client = Client([sys.executable, str(garbage)], timeout=0.5, options=ClientOptions(probe_timeout=0.3))
    error = await fails_within(client.connect(), RequestTimeout, "connect to give up")

    message = str(error)
    assert client.transport.name in message and "initialize" in message
    assert "this is not JSON-RPC" in message  # what the server wrote instead
    assert "garbage server: starting" in message  # and its stderr


@run
async def test_a_server_that_never_answers_gets_request_timeout_and_a_cancellation(tmp_path):
    heard = tmp_path / "heard.jsonl"
    silent = script(tmp_path, "silent.py", SILENT)
    async with Client([sys.executable, str(silent), str(heard)], mode=MODERN, timeout=PATIENT) as client:
        error = await fails_within(client.call_tool("anything", timeout=0.5), RequestTimeout, "the deadline")
        await until(lambda: "notifications/cancelled" in heard.read_text(), "the cancellation")

    assert client.transport.name in str(error) and "tools/call" in str(error)
    assert "reading, never answering" in str(error)
    request, cancelled = (json.loads(line) for line in heard.read_text().splitlines())
    assert cancelled["params"]["requestId"] == request["id"]


@run
async def test_connecting_to_a_server_that_never_answers_ends_within_the_deadline(tmp_path):
    silent = script(tmp_path, "silent.py", SILENT)
    argv = [sys.executable, str(silent), str(tmp_path / "heard")]
    client = Client(argv, timeout=0.5, options=ClientOptions(probe_timeout=0.3))
    error = await fails_within(client.connect(), RequestTimeout, "connect to give up")

    assert client.transport.name in str(error) and "initialize" in str(error)


# -- stdio: closing ends the whole process tree --------------------------------------------------------------
TREE = '''
import os, subprocess, sys
from pathlib import Path
from modelctx import Server

child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
Path(os.environ["PIDS_FILE"]).write_text(f"{os.getpid()} {child.pid}")
server = Server("tree")


@server.tool
def ping() -> str:
    return "pong"
'''

STUBBORN = '''
import os, signal, subprocess, sys, time
from pathlib import Path

signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the child
child = subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(1)"])
Path(sys.argv[1]).write_text(f"{os.getpid()} {child.pid}")
sys.stdin.close()  # no EOF will ever stop it
while True:
    time.sleep(1)
'''


def kill_leftovers(pids: list[int]) -> None:
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@run
async def test_closing_the_client_ends_the_server_and_the_processes_it_started(tmp_path):
    pids_file = tmp_path / "pids"
    tree = script(tmp_path, "tree.py", TREE)
    pids: list[int] = []
    try:
        server = StdioClientTransport(serve_command(tree), env={"PIDS_FILE": str(pids_file)})
        async with Client(server, timeout=DEADLINE) as client:
            assert (await client.call_tool("ping")).content[0].text == "pong"
            pids = [int(pid) for pid in pids_file.read_text().split()]
            assert all(alive(pid) for pid in pids)
        await until(lambda: not any(alive(pid) for pid in pids), "the server and its child to end")
    finally:
        kill_leftovers(pids)


@run
async def test_closing_ends_a_process_tree_that_ignores_eof_and_sigterm(tmp_path):
    pids_file = tmp_path / "pids"
    stubborn = script(tmp_path, "stubborn.py", STUBBORN)
    pids: list[int] = []
    try:
        client = Client([sys.executable, str(stubborn), str(pids_file)], mode=MODERN, timeout=DEADLINE)
        await client.connect()
        await until(lambda: pids_file.exists() and len(pids_file.read_text().split()) == 2, "the tree to start")
        pids = [int(pid) for pid in pids_file.read_text().split()]
        await within(client.close(), "close")  # stdin, SIGTERM, then SIGKILL
        await until(lambda: not any(alive(pid) for pid in pids), "the tree to end")
    finally:
        kill_leftovers(pids)


# -- HTTP: a connection that drops ---------------------------------------------------------------------------
class RawHttp:
    """An asyncio socket server that reads one POST per connection and answers it with
    ``behaviour(request, writer)``: enough HTTP to break a response exactly as wanted."""

    def __init__(self, behaviour: Callable[[dict[str, Any], asyncio.StreamWriter], Awaitable[None]]) -> None:
        self.behaviour = behaviour
        self.writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/mcp"

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        for writer in self.writers:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
            request = json.loads(await reader.readexactly(length))
            await self.behaviour(request, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def sse_then_close(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
    """A stream that carries a progress notification, then ends before the response."""
    progress = {"progressToken": request["id"], "progress": 1}
    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": progress}
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
    writer.write(b"event: message\r\ndata: " + json.dumps(note).encode() + b"\r\n\r\n")
    await writer.drain()


async def chunked_then_cut(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
    """A chunked SSE body cut off in the middle of an event."""
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    partial = b'event: message\r\ndata: {"jsonrpc": "2.0", "id": '
    writer.write(b"%x\r\n%s\r\n" % (len(partial) + 40, partial))  # promises more than it sends
    await writer.drain()


async def json_then_cut(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
    """A JSON body shorter than its Content-Length."""
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n")
    writer.write(b'{"jsonrpc": "2.0", "id": ' + str(request["id"]).encode())
    await writer.drain()


async def never(request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(600)


@pytest.mark.parametrize("behaviour", [sse_then_close, chunked_then_cut, json_then_cut], ids=lambda b: b.__name__)
@run
async def test_an_http_stream_closed_mid_response_fails_the_call_promptly_and_clearly(behaviour):
    progress: list[Any] = []
    async with RawHttp(behaviour) as url, Client(url, mode=MODERN, timeout=PATIENT) as client:
        error = await fails_within(
            client.call_tool("echo", {"text": "x"}, progress=lambda *update: progress.append(update)),
            ConnectionClosed,
            "the call to fail",
        )

    message = str(error)
    assert url in message and "tools/call" in message
    if behaviour is sse_then_close:
        assert "closed before the response" in message
        assert progress == [(1, None, None)]  # what came before the break was delivered


@run
async def test_an_http_server_that_never_answers_gets_request_timeout():
    async with RawHttp(never) as url, Client(url, mode=MODERN, timeout=PATIENT) as client:
        error = await fails_within(client.call_tool("echo", {"text": "x"}, timeout=0.5), RequestTimeout, "the deadline")

    assert url in str(error) and "tools/call" in str(error)


@run
async def test_an_http_server_that_is_not_there_fails_connect_clearly():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        url = f"http://127.0.0.1:{port}/mcp"
        error = await fails_within(Client(url, timeout=PATIENT).connect(), ConnectionClosed, "connect")

    assert url in str(error) and "server/discover" in str(error)


@pytest.fixture
def own_http_server(tmp_path):
    with HttpServer(SAMPLE_SERVER, tmp_path / "server.log") as server:
        yield server


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@run
async def test_an_http_server_killed_mid_call_fails_the_call_promptly(own_http_server, tmp_path, mode):
    marker = tmp_path / "sleepy"
    async with Client(own_http_server.url, mode=mode, timeout=PATIENT) as client:
        call = asyncio.ensure_future(client.call_tool("sleepy", {"seconds": 60, "marker": str(marker)}))
        await until(lambda: Path(f"{marker}.started").exists(), "the tool to start")
        own_http_server.process.kill()
        error = await fails_within(call, ConnectionClosed, "the call to fail")

    assert own_http_server.url in str(error) and "tools/call" in str(error)


# -- HTTP: the listen stream survives a server restart ---------------------------------------------------------
BUMPER = '''
from modelctx import Server

server = Server("bumper")


@server.tool
async def bump(name: str) -> str:
    server.add_tool(lambda: "added", name=name, replace=True)
    return f"added {name}"
'''


def start_http(target: Path, port: int, log: Path) -> subprocess.Popen:
    with log.open("ab") as output:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            serve_command(target, "--http", "--port", str(port)), stdout=output, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"the HTTP server did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.02)


class Counting(ClientTransport):
    """An HTTP transport that counts the subscriptions/listen requests it sends."""

    def __init__(self, url: str) -> None:
        self.inner = HttpClientTransport(url)
        self.name, self.kind = self.inner.name, self.inner.kind
        self.listens = 0

    async def connect(self, events: Any) -> None:
        await self.inner.connect(events)

    async def send(self, outgoing: Any) -> None:
        self.listens += outgoing.message.get("method") == "subscriptions/listen"
        await self.inner.send(outgoing)

    async def cancel(self, request_id: Any, reason: str | None = None) -> None:
        await self.inner.cancel(request_id, reason)

    async def close(self) -> None:
        await self.inner.close()


@run
async def test_a_listen_stream_dropped_by_a_server_restart_is_opened_again(tmp_path):
    bumper = script(tmp_path, "bumper.py", BUMPER)
    port, log = free_port(), tmp_path / "server.log"
    process = start_http(bumper, port, log)
    names = (f"tool_{n}" for n in range(1000))
    try:
        transport = Counting(f"http://127.0.0.1:{port}/mcp")
        async with Client(transport, timeout=DEADLINE) as client:
            events: asyncio.Queue[Any] = asyncio.Queue()

            async def listen() -> None:
                async for event in client.listen(tools=True):
                    events.put_nowait(event)

            async def bump_until_heard() -> None:
                while True:
                    try:
                        await client.call_tool("bump", {"name": next(names)})
                        if await asyncio.wait_for(events.get(), 0.3) == ListChanged("tools"):
                            return
                    except (TimeoutError, ConnectionClosed):
                        await asyncio.sleep(0.1)  # the server is restarting, or the stream reopening

            listening = asyncio.ensure_future(listen())
            await within(bump_until_heard(), "an event on the first stream")
            opened = transport.listens
            process.kill()
            process.wait(DEADLINE)
            process = start_http(bumper, port, log)
            while not events.empty():  # only an event from the new server counts
                events.get_nowait()
            await within(bump_until_heard(), "an event on the re-opened stream")
            listening.cancel()
            await asyncio.wait({listening}, timeout=DEADLINE)

        assert transport.listens > opened
    finally:
        process.kill()
        process.wait(DEADLINE)


def text_of(result: Any) -> str:
    return str(result.content[0].text)


# -- the raw HTTP server --------------------------------------------------------------------------
# Answers POSTs by the name of the tool called; every reply but the broken ones is a
# valid MCP reply. Prints its port, then serves until killed.
RAW_HTTP = r'''
import asyncio, json, socket, struct, sys

pending_resume = {}  # Last-Event-ID -> the event that completes that stream


def event(message, event_id=None):
    head = b"" if event_id is None else b"id: " + event_id.encode() + b"\n"
    return head + b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


def result(request, text):
    content = {"content": [{"type": "text", "text": text}], "resultType": "complete"}
    return {"jsonrpc": "2.0", "id": request["id"], "result": content}


def head(status, fields):
    lines = [f"HTTP/1.1 {status}"] + [f"{name}: {value}" for name, value in fields]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


SSE = ("content-type", "text/event-stream")


def sse_with_length(body):
    return head("200 OK", [SSE, ("content-length", len(body))]) + body


def split_reply(request, args):
    # The response event split at byte ``at``: the two halves arrive in separate reads.
    # The text ends with "1" once ``at`` is past the end (the test stops there).
    body = event(result(request, args["text"] + "|0"))
    if args["at"] >= len(body):
        body = event(result(request, args["text"] + "|1"))
    if args["framing"] == "chunked":
        wire = head("200 OK", [SSE, ("transfer-encoding", "chunked")]) + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        at = len(wire) - len(body) - 7 + min(args["at"], len(body))  # the same byte of the body
    else:
        wire, at = sse_with_length(body), len(head("200 OK", [SSE, ("content-length", len(body))])) + args["at"]
    return [wire[:at], wire[at:]]


def progress_event(request):
    token = request["params"].get("_meta", {}).get("progressToken")
    if token is None:
        return b""
    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1}}
    return event(note)


async def answer(request, headers, writer):
    """Write the reply; return False to close the connection."""
    method = request.get("method")
    if "id" not in request:
        writer.write(head("202 Accepted", [("content-length", 0)]))
        return True
    if method == "initialize":
        init = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "0"}}
        body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": init}).encode()
        writer.write(head("200 OK", [("content-type", "application/json"), ("mcp-session-id", "s1"), ("content-length", len(body))]) + body)
        return True
    params = request.get("params") or {}
    name, args = params.get("name"), params.get("arguments") or {}
    if name == "split":
        for piece in split_reply(request, args):
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.002)
        return True
    if name == "bytewise":  # head and body, one byte per write
        body = progress_event(request) + event(result(request, args["text"]))
        for byte in sse_with_length(body):
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.0005)
        return True
    if name == "cut_sse":  # one whole event, then half of the response event
        response = event(result(request, "never whole"))
        writer.write(head("200 OK", [SSE, ("connection", "close")]) + progress_event(request) + response[: len(response) // 2])
        return False
    if name == "cut_json":  # half of a JSON body
        body = json.dumps(result(request, "never whole")).encode()
        writer.write(head("200 OK", [("content-type", "application/json"), ("content-length", len(body))]) + body[: len(body) // 2])
        return False
    if name == "cut_head":  # the status line and half a header
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-ty")
        return False
    if name == "reset_sse":  # half an event, then a reset instead of a close
        response = event(result(request, "never whole"))
        writer.write(head("200 OK", [SSE]) + response[: len(response) // 2])
        await writer.drain()
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return False
    if name == "stall_sse":  # half an event, then nothing: the client's deadline ends it
        response = event(result(request, "never whole"))
        writer.write(head("200 OK", [SSE]) + response[: len(response) // 2])
        return None
    if name == "overlong_json":  # a whole JSON reply, then bytes its length does not count
        body = json.dumps(result(request, "whole")).encode()
        writer.write(head("200 OK", [("content-type", "application/json"), ("content-length", len(body))]) + body + b"HTTP/1.1 200 OK\r\n")
        return True
    if name == "cut_for_good":  # primed like cut_resumable, but every resumption is cut at once
        response = event(result(request, "never whole"))
        priming = f"id: gone{request['id']}:1\nretry: 50\ndata: \n\n".encode()
        writer.write(head("200 OK", [SSE, ("connection", "close")]) + priming + response[: len(response) // 2])
        return False
    if name == "cut_resumable":  # a handshake-era stream: primed, then cut mid-event
        stream = f"r{request['id']}"
        response = event(result(request, "resumed whole"), f"{stream}:2")
        pending_resume[f"{stream}:1"] = response
        priming = f"id: {stream}:1\nretry: 50\ndata: \n\n".encode()
        writer.write(head("200 OK", [SSE, ("connection", "close")]) + priming + response[: len(response) // 2])
        return False
    if name == "release_get":
        while waiting_gets:
            waiting_gets.pop().set_result(None)
    if name == "chatter":  # an SSE stream of keep-alive comments that never answers
        writer.write(head("200 OK", [SSE]))
        try:
            while True:
                writer.write(b": keep-alive\n\n")
                await writer.drain()
                await asyncio.sleep(0.05)
        except ConnectionError:
            return False
    if name == "lingering":  # the response event, then a chunked stream that never ends
        body = event(result(request, args.get("text", "")))
        writer.write(head("200 OK", [SSE, ("transfer-encoding", "chunked")]) + b"%x\r\n%s\r\n" % (len(body), body))
        return None
    if name == "informational":  # interim 1xx responses before the final one (RFC 9110, 15.2)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </style.css>\r\n\r\n")
    if name == "silent":
        return None
    body = json.dumps(result(request, args.get("text", ""))).encode()
    writer.write(head("200 OK", [("content-type", "application/json"), ("content-length", len(body))]) + body)
    return True


waiting_gets = []  # standalone GET streams held until a call of ``release_get``


def changed(kind):
    return {"jsonrpc": "2.0", "method": f"notifications/{kind}/list_changed"}


async def get(headers, reader, writer):
    """A resumption (Last-Event-ID of a cut POST stream), or the standalone stream: held
    until ``release_get``, then one whole event and half of the next (id g2), cut; its
    resumption from g1 sends the second whole and stays open."""
    last = headers.get("last-event-id", "")
    if last.startswith("gone"):
        return False  # closed without a word
    rest = pending_resume.pop(last, None)
    if rest is not None:
        writer.write(head("200 OK", [SSE, ("connection", "close")]) + rest)
        return False
    if last == "g1":
        writer.write(head("200 OK", [SSE]) + event(changed("prompts"), "g2"))
        return None
    released = asyncio.get_running_loop().create_future()
    waiting_gets.append(released)
    leaving = asyncio.ensure_future(reader.read())
    await asyncio.wait({released, leaving}, return_when=asyncio.FIRST_COMPLETED)
    if leaving.done():
        return False
    leaving.cancel()
    second = event(changed("prompts"), "g2")
    writer.write(head("200 OK", [SSE, ("connection", "close")]) + event(changed("tools"), "g1") + second[: len(second) // 2])
    return False


async def handle(reader, writer):
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            raw = await reader.readuntil(b"\r\n\r\n")
            lines = raw.decode("latin-1").split("\r\n")
            verb = lines[0].split()[0]
            headers = dict((k.strip().lower(), v.strip()) for k, v in (l.split(":", 1) for l in lines[1:] if l))
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if verb == "GET":
                keep = await get(headers, reader, writer)
            elif verb == "DELETE":
                writer.write(head("200 OK", [("content-length", 0)]))
                keep = True
            else:
                keep = await answer(json.loads(body), headers, writer)
            if keep is None:  # silent: hold the connection until the client leaves
                await reader.read()
                return
            await writer.drain()
            if not keep:
                return
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()

asyncio.run(main())
'''


class Script:
    """A raw server script run as a subprocess (started before any leak check, so it
    counts as already there), with its stderr in a file the tests read."""

    def __init__(self, path: Path, *argv: str, stdout: Any = subprocess.PIPE) -> None:
        self.log = path.with_suffix(".log")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen([sys.executable, str(path), *argv], stdout=stdout, stderr=log)

    def stop(self) -> str:
        self.process.kill()
        self.process.wait(DEADLINE)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def raw_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("raw") / "raw_http.py"
    path.write_text(RAW_HTTP)
    server = Script(path)
    assert server.process.stdout is not None
    port = int(server.process.stdout.readline())
    yield f"http://127.0.0.1:{port}/mcp"
    log = server.stop()
    assert "Traceback" not in log, log


async def calls_split_at_every_byte(client: Client, **args: Any) -> int:
    """Call ``split`` at every byte of its reply; the number of splits made."""
    at = 0
    while True:
        result = await within(client.call_tool("split", {"at": at, "text": "split reply", **args}), f"split at {at}")
        text, past_the_end = text_of(result).split("|")
        assert text == "split reply", f"split at byte {at}"
        if past_the_end == "1":
            return at
        at += 1


# -- partial frames --------------------------------------------------------------------------------
@pytest.mark.parametrize("framing", ["length", "chunked"])
@run_long
async def test_http_an_sse_reply_split_at_every_byte_boundary_reaches_the_caller_whole(
    raw_http: str, framing: str
) -> None:
    async with leak_free("SSE replies split at every byte"):
        async with Client(raw_http, mode=MODERN, timeout=DEADLINE) as client:
            splits = await calls_split_at_every_byte(client, framing=framing)
    assert splits > 100  # every boundary of a whole event was tried


@run_long
async def test_http_a_reply_written_one_byte_at_a_time_head_included_arrives_with_its_progress(raw_http: str) -> None:
    progress: list[Any] = []
    async with leak_free("a reply written byte by byte"):
        async with Client(raw_http, mode=MODERN, timeout=DEADLINE) as client:
            result = await within(
                client.call_tool("bytewise", {"text": "slowly"}, progress=lambda *update: progress.append(update)),
                "the byte-by-byte reply",
            )
    assert text_of(result) == "slowly"
    assert progress == [(1, None, None)]


# A stdio server that writes the response to call ``at`` split at byte ``at`` (two
# writes, a pause between them), and every other answer one byte at a time.
RAW_STDIO = r"""
import json, sys, time

out = sys.stdout.buffer
for line in sys.stdin.buffer:
    request = json.loads(line)
    if "id" not in request:
        continue
    args = (request.get("params") or {}).get("arguments") or {}
    at = args.get("at")
    def reply(flag):
        result = {"content": [{"type": "text", "text": f"split reply|{flag}"}], "resultType": "complete"}
        return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode() + b"\n"
    if at is None:
        for byte in reply(0):
            out.write(bytes([byte]))
            out.flush()
        continue
    wire = reply(0)
    if at >= len(wire):
        wire = reply(1)
    for piece in (wire[:at], wire[at:]):
        out.write(piece)
        out.flush()
        time.sleep(0.002)
"""


@run_long
async def test_stdio_a_response_line_split_at_every_byte_boundary_reaches_the_caller_whole(tmp_path: Path) -> None:
    path = tmp_path / "raw_stdio.py"
    path.write_text(RAW_STDIO)
    async with leak_free("stdio lines split at every byte"):
        async with Client([sys.executable, str(path)], mode=MODERN, timeout=DEADLINE) as client:
            splits = await calls_split_at_every_byte(client)
            bytewise = await within(client.call_tool("bytewise"), "a line written byte by byte")
    assert splits > 80
    assert text_of(bytewise) == "split reply|0"


@run_long
async def test_http_interim_1xx_responses_before_the_reply_are_skipped(raw_http: str) -> None:
    async with leak_free("interim responses"):
        async with Client(raw_http, mode=MODERN, timeout=DEADLINE) as client:
            for _ in range(2):  # and the connection stays usable
                result = await within(client.call_tool("informational", {"text": "final"}), "the final reply")
                assert text_of(result) == "final"


@run_long
async def test_http_a_stream_left_open_after_its_response_is_closed_by_the_client(raw_http: str) -> None:
    async with leak_free("streams left open by the server"):  # their connections are closed, not pooled
        async with Client(raw_http, mode=MODERN, timeout=DEADLINE) as client:
            open_fds = []
            for round in range(5):
                result = await within(client.call_tool("lingering", {"text": f"r{round}"}), "the response")
                assert text_of(result) == f"r{round}"
                after = await within(client.call_tool("echo", {"text": f"after {round}"}), "the next call")
                assert text_of(after) == f"after {round}"
                open_fds.append(fd_count())
            assert open_fds[-1] <= open_fds[0], f"descriptors while the client runs: {open_fds}"


# -- a server that dies mid-response -----------------------------------------------------------------
@pytest.mark.parametrize("tool", ["cut_sse", "cut_json", "cut_head", "reset_sse"])
@run_long
async def test_http_a_reply_cut_mid_event_fails_that_call_clearly_and_the_client_goes_on(
    raw_http: str, tool: str
) -> None:
    async with leak_free(f"replies cut by {tool}"):
        async with Client(raw_http, mode=MODERN, timeout=PATIENT) as client:
            for round in range(3):
                error = await fails_within(client.call_tool(tool, progress=lambda *_: None), ConnectionClosed, tool)
                assert raw_http in str(error) and "tools/call" in str(error)
                after = await within(client.call_tool("echo", {"text": f"after {round}"}), "the next call")
                assert text_of(after) == f"after {round}"


@run_long
async def test_http_a_handshake_stream_cut_mid_event_is_resumed_and_the_half_event_dropped(raw_http: str) -> None:
    async with leak_free("a resumable stream cut mid-event"):
        async with Client(raw_http, mode="handshake", timeout=PATIENT) as client:
            result = await within(client.call_tool("cut_resumable"), "the resumed reply")
            after = await within(client.call_tool("echo", {"text": "after"}), "the next call")
    assert text_of(result) == "resumed whole"
    assert text_of(after) == "after"


@run_long
async def test_http_the_standalone_get_stream_cut_mid_event_resumes_without_losing_the_cut_event(raw_http: str) -> None:
    heard: list[Any] = []
    async with leak_free("a GET stream cut mid-event"):
        async with Client(raw_http, mode="handshake", timeout=DEADLINE) as client:

            async def listen() -> None:
                async for item in client.listen(tools=True, prompts=True):
                    heard.append(item)
                    if len(heard) == 2:
                        return

            listening = asyncio.ensure_future(listen())
            await asyncio.sleep(0)  # one step of listen() registers it, before any event is let out
            await within(client.call_tool("release_get"), "the release")
            await within(listening, "both events: the one before the cut and the one cut")
    assert [item.kind for item in heard] == ["tools", "prompts"]


@run_long
async def test_http_a_handshake_stream_that_cannot_be_resumed_fails_its_call_after_a_few_attempts(
    raw_http: str,
) -> None:
    async with leak_free("a stream that cannot be resumed"):
        async with Client(raw_http, mode="handshake", timeout=PATIENT) as client:
            error = await fails_within(client.call_tool("cut_for_good"), ConnectionClosed, "the call to fail")
            after = await within(client.call_tool("echo", {"text": "after"}), "the next call")
    assert "attempts to resume it failed" in str(error)
    assert text_of(after) == "after"


@run_long
async def test_http_a_call_cancelled_while_its_reply_trickles_in_leaves_nothing(raw_http: str) -> None:
    async with leak_free("calls cancelled mid-reply"):
        async with Client(raw_http, mode=MODERN, timeout=DEADLINE) as client:
            for round in range(3):
                call = asyncio.ensure_future(client.call_tool("bytewise", {"text": "slowly"}))
                await asyncio.sleep(0.05)  # some bytes of it have arrived
                call.cancel()
                await asyncio.wait({call}, timeout=DEADLINE)
                assert call.cancelled()
                after = await within(client.call_tool("echo", {"text": f"after {round}"}), "the next call")
                assert text_of(after) == f"after {round}"


@pytest.mark.parametrize("mode", [MODERN, "handshake"])
@run_long
async def test_stdio_a_server_killed_mid_call_fails_it_promptly_and_leaves_no_process(
    tmp_path: Path, mode: str
) -> None:
    marker = tmp_path / "sleepy"
    async with leak_free("servers killed mid-call"):
        for round in range(3):
            async with Client(serve_command(SAMPLE_SERVER), mode=mode, timeout=PATIENT) as client:
                started = Path(f"{marker}{round}.started")
                call = asyncio.ensure_future(client.call_tool("sleepy", {"seconds": 60, "marker": f"{marker}{round}"}))
                while not started.exists():
                    await asyncio.sleep(0.01)
                assert isinstance(client.transport, StdioClientTransport)
                pid = client.transport.pid
                assert pid is not None
                os.kill(pid, signal.SIGKILL)
                error = await fails_within(call, ConnectionClosed, "the pending call to fail")
                assert "SIGKILL" in str(error)
            assert not alive(pid)


# A stdio server that dies in the middle of writing its answer: half a line, then SIGKILL.
DIES_MID_LINE = r"""
import json, os, signal, sys

line = sys.stdin.buffer.readline()
request = json.loads(line)
result = {"content": [{"type": "text", "text": "never whole"}], "resultType": "complete"}
wire = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
print("dies-mid-line: writing half an answer", file=sys.stderr, flush=True)
sys.stdout.buffer.write(wire[: len(wire) // 2])
sys.stdout.buffer.flush()
os.kill(os.getpid(), signal.SIGKILL)
"""


@run_long
async def test_stdio_a_server_killed_mid_line_fails_the_call_as_a_closed_connection_naming_the_kill(
    tmp_path: Path,
) -> None:
    path = tmp_path / "dies.py"
    path.write_text(DIES_MID_LINE)
    async with leak_free("a server killed mid-line"):
        async with Client([sys.executable, str(path)], mode=MODERN, timeout=PATIENT) as client:
            error = await fails_within(client.call_tool("anything"), ConnectionClosed, "the call to fail")
    assert "killed by signal SIGKILL" in str(error)
    assert "writing half an answer" in str(error)  # its stderr


@pytest.fixture
def http_sample(tmp_path: Path) -> Iterator[HttpServer]:
    """The sample server on HTTP, of this test alone (it may be killed)."""
    with HttpServer(SAMPLE_SERVER, tmp_path / "server.log") as server:
        yield server


@pytest.mark.parametrize("mode", [MODERN, "handshake"])
@run_long
async def test_http_a_server_killed_mid_call_fails_it_promptly_and_leaves_nothing(
    http_sample: HttpServer, tmp_path: Path, mode: str
) -> None:
    marker = tmp_path / "sleepy"
    async with leak_free("an HTTP server killed mid-call"):
        async with Client(http_sample.url, mode=mode, timeout=PATIENT) as client:
            call = asyncio.ensure_future(client.call_tool("sleepy", {"seconds": 60, "marker": str(marker)}))
            await within(until_exists(Path(f"{marker}.started")), "the tool to start")
            http_sample.process.kill()
            error = await fails_within(call, ConnectionClosed, "the pending call to fail")
            later = await fails_within(client.call_tool("echo", {"text": "x"}), ConnectionClosed, "a later call")
    assert http_sample.url in str(error) and http_sample.url in str(later)


async def until_exists(path: Path) -> None:
    while not path.exists():
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("transport", ["stdio", "http"])
@run_long
async def test_closing_the_client_with_calls_in_flight_fails_them_at_once_and_leaves_nothing(
    http_server: HttpServer, tmp_path: Path, transport: str
) -> None:
    target: Any = http_server.url if transport == "http" else serve_command(SAMPLE_SERVER)
    markers = [tmp_path / f"sleepy{n}" for n in range(5)]
    async with leak_free("a client closed with calls in flight"):
        client = Client(target, mode=MODERN, timeout=PATIENT)
        await within(client.connect(), "connect")
        calls = [asyncio.ensure_future(client.call_tool("sleepy", {"seconds": 60, "marker": str(m)})) for m in markers]
        for marker in markers:
            await within(until_exists(Path(f"{marker}.started")), "the tools to start")
        await within(client.close(), "close")
        for call in calls:
            await fails_within(call, ConnectionClosed, "a call in flight to fail")
    for marker in markers:  # the server saw each call end: closed stream (HTTP), or its shutdown (stdio)
        await within(until_exists(marker), "the tool to see its cancellation")


@contextlib.contextmanager
def frozen(server: HttpServer) -> Iterator[None]:
    """SIGSTOP: the kernel still accepts connections to the server; nobody reads them."""
    server.process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        server.process.send_signal(signal.SIGCONT)


@pytest.mark.parametrize("mode", [MODERN, "handshake"])
@run_long
async def test_http_a_frozen_server_is_a_request_timeout_at_the_callers_deadline(
    http_sample: HttpServer, mode: str
) -> None:
    # The cancellation (a closed stream; in the handshake era also a POST the frozen
    # server never reads) must not hold the caller's error back.
    async with leak_free("calls to a frozen server"):
        async with Client(http_sample.url, mode=mode, timeout=PATIENT) as client:
            with frozen(http_sample):
                for _ in range(2):
                    await within(
                        fails_within(client.call_tool("echo", timeout=0.5), RequestTimeout, "the deadline"),
                        "the timeout to reach the caller",
                        seconds=3.0,
                    )


@pytest.mark.parametrize("mode", [MODERN, "handshake"])
@run_long
async def test_http_closing_a_client_of_a_frozen_server_is_bounded(http_sample: HttpServer, mode: str) -> None:
    async with leak_free("a client of a frozen server, closed"):
        client = Client(http_sample.url, mode=mode, timeout=PATIENT)
        await within(client.connect(), "connect")
        with frozen(http_sample):  # close ends a handshake session with a DELETE nobody reads
            await within(client.close(), "close", seconds=5.0)


@run_long
async def test_stdio_a_frozen_server_is_a_request_timeout_and_close_still_ends_it() -> None:
    async with leak_free("a frozen stdio server"):  # no process left: SIGKILL ends a stopped one
        client = Client(serve_command(SAMPLE_SERVER), mode=MODERN, timeout=PATIENT)
        await within(client.connect(), "connect")
        assert isinstance(client.transport, StdioClientTransport) and client.transport.pid is not None
        os.kill(client.transport.pid, signal.SIGSTOP)
        for _ in range(2):
            await within(
                fails_within(client.call_tool("echo", timeout=0.5), RequestTimeout, "the deadline"),
                "the timeout to reach the caller",
                seconds=3.0,
            )
        await within(client.close(), "close")  # stdin, SIGTERM (held while stopped), SIGKILL


# A handshake-era stdio server that answers initialize, then floods the client with
# pings and never reads another byte: every answer meets a full pipe.
PING_FLOOD = r"""
import json, sys, time

out = sys.stdout.buffer
request = json.loads(sys.stdin.buffer.readline())
info = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "flood", "version": "0"}}
out.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": info}).encode() + b"\n")
out.flush()
sys.stdin.buffer.readline()  # notifications/initialized
sys.stdin.buffer.readline()  # the call that starts the flood
for n in range(100_000):
    out.write(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % n)
out.flush()
print("flood: all written", file=sys.stderr, flush=True)
time.sleep(600)
"""


def resident_mb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))


@run_long
async def test_stdio_a_server_that_floods_requests_and_never_reads_the_answers_cannot_grow_the_client(
    tmp_path: Path,
) -> None:
    path = tmp_path / "flood.py"
    path.write_text(PING_FLOOD)
    before = resident_mb()
    async with leak_free("a ping flood") as log:
        async with Client([sys.executable, str(path)], mode="handshake", timeout=PATIENT) as client:
            call = asyncio.ensure_future(client.call_tool("flood"))
            transport = client.transport
            assert isinstance(transport, StdioClientTransport)
            await within(until_true(lambda: "all written" in transport.diagnostics()), "the flood", seconds=60)
            tasks, grown = len(asyncio.all_tasks()), resident_mb() - before
            call.cancel()
    assert tasks < 5_000, f"{tasks} tasks for 100,000 pings"
    assert grown < 100, f"the client grew by {grown} MB for 100,000 pings it could not answer"
    assert "dropped unanswered" in log.text


async def until_true(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.05)


# A stdio server that answers a call with 100,000 progress notifications, then the result.
PROGRESS_FLOOD = r"""
import json, sys

out = sys.stdout.buffer
for line in sys.stdin.buffer:
    request = json.loads(line)
    if "id" not in request:
        continue
    token = json.dumps(request["params"]["_meta"]["progressToken"]).encode()
    for n in range(1, 100_001):
        out.write(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d}}\n' % (token, n))
    result = {"content": [{"type": "text", "text": "done"}], "resultType": "complete"}
    out.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode() + b"\n")
    out.flush()
"""


@run_long
async def test_stdio_a_flood_of_progress_to_a_slow_async_callback_stays_bounded_and_ends_at_the_latest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "progress_flood.py"
    path.write_text(PROGRESS_FLOOD)
    seen: list[float] = []
    most_tasks = 0

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        nonlocal most_tasks
        seen.append(progress)
        most_tasks = max(most_tasks, len(asyncio.all_tasks()))
        await asyncio.sleep(0.001)

    async with leak_free("a progress flood"):
        async with Client([sys.executable, str(path)], mode=MODERN, timeout=PATIENT) as client:
            result = await within(client.call_tool("flood", progress=on_progress), "the result", seconds=60)
            await within(until_true(lambda: bool(seen) and seen[-1] == 100_000), "the latest progress")
    assert text_of(result) == "done"
    assert seen == sorted(seen)  # one update at a time, in order
    assert most_tasks < 100, f"{most_tasks} tasks for 100,000 progress notifications"


# -- peers that never answer ---------------------------------------------------------------------------
@run_long
async def test_http_a_server_that_reads_the_request_and_never_answers_is_a_request_timeout(raw_http: str) -> None:
    async with leak_free("calls to a silent server"):
        async with Client(raw_http, mode=MODERN, timeout=PATIENT) as client:
            for _ in range(3):
                error = await fails_within(client.call_tool("silent", timeout=0.5), RequestTimeout, "the deadline")
                assert "tools/call" in str(error)
            assert text_of(await within(client.call_tool("echo", {"text": "still"}), "the next call")) == "still"


@run_long
async def test_http_a_reply_that_stalls_mid_event_is_a_request_timeout_and_its_connection_not_reused(
    raw_http: str,
) -> None:
    async with leak_free("replies stalled mid-event"):
        async with Client(raw_http, mode=MODERN, timeout=PATIENT) as client:
            for round in range(3):
                await fails_within(client.call_tool("stall_sse", timeout=0.5), RequestTimeout, "the deadline")
                after = await within(client.call_tool("echo", {"text": f"after {round}"}), "the next call")
                assert text_of(after) == f"after {round}"


@run_long
async def test_http_bytes_after_a_whole_reply_do_not_poison_the_next_call(raw_http: str) -> None:
    async with leak_free("a reply longer than its length"):
        async with Client(raw_http, mode=MODERN, timeout=DEADLINE) as client:
            for round in range(3):
                whole = await within(client.call_tool("overlong_json"), "the reply")
                assert text_of(whole) == "whole"
                after = await within(client.call_tool("echo", {"text": f"after {round}"}), "the next call")
                assert text_of(after) == f"after {round}"


@run_long
async def test_http_a_stream_of_keep_alives_that_never_answers_is_a_request_timeout(raw_http: str) -> None:
    async with leak_free("calls answered by keep-alives only"):
        async with Client(raw_http, mode=MODERN, timeout=0.5) as client:
            for round in range(3):
                await fails_within(client.call_tool("chatter"), RequestTimeout, "the deadline")
                after = await within(client.call_tool("echo", {"text": f"after {round}"}), "the next call")
                assert text_of(after) == f"after {round}"


@run_long
async def test_http_a_server_that_accepts_and_never_reads_is_a_request_timeout() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # the kernel completes the connection; nobody ever accepts it
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        async with leak_free("calls to a server that never reads"):
            async with Client(url, mode=MODERN, timeout=0.5) as client:  # the client's own timeout
                for _ in range(3):
                    error = await fails_within(client.call_tool("anything"), RequestTimeout, "the deadline")
                    assert url in str(error) and "tools/call" in str(error)


# -- the leak check itself -------------------------------------------------------------------------------
@pytest.mark.parametrize("leak", ["task", "descriptor", "child", "unretrieved exception"])
@run_long
async def test_the_leak_check_catches_each_kind_of_leftover(leak: str) -> None:
    kept: list[Any] = []

    async def fail() -> None:
        raise RuntimeError("nobody looks at me")

    with pytest.raises(pytest.fail.Exception) as caught:
        async with leak_free(f"a planted {leak}", seconds=0.5):
            if leak == "task":
                kept.append(asyncio.ensure_future(asyncio.sleep(60)))
            elif leak == "descriptor":
                kept.append(socket.socket())
            elif leak == "child":
                kept.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))
            else:
                task = asyncio.ensure_future(fail())
                await asyncio.wait({task})
                del task  # collected with its exception never retrieved
    expected = {
        "task": "tasks still running",
        "descriptor": "file descriptors still open",
        "child": "child processes left",
        "unretrieved exception": "exception was never retrieved",
    }[leak]
    assert expected in str(caught.value)
    for thing in kept:
        if isinstance(thing, asyncio.Task):
            thing.cancel()
        elif isinstance(thing, socket.socket):
            thing.close()
        else:
            thing.kill()
            thing.wait(DEADLINE)
