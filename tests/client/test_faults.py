"""What ``modelctx.Client`` does when the server misbehaves: every failure is a clear error
within the deadline, and nothing hangs or outlives the client.

The servers here are small scripts written to a temporary directory (a modelctx server
that crashes on request, raw scripts that write garbage or nothing at all, a process
tree that ignores signals) and, for HTTP, a raw asyncio socket server that breaks its
responses on purpose. Each client gets a long default timeout (60 s) where the test
expects a prompt failure, so only the failure detection can pass the test in time.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from modelctx.client import Client, ClientOptions, ClientTransport, ListChanged, RequestTimeout
from modelctx.errors import ConnectionClosed
from modelctx.transports.http_client import HttpClientTransport
from modelctx.transports.stdio_client import ServerNotStarted, StdioClientTransport
from tests.support.wire import SAMPLE_SERVER, HttpServer, async_test, free_port, serve_command, until

DEADLINE = 10.0  # seconds any single wait may take
TEST_DEADLINE = 30.0
PATIENT = 60.0  # the clients' own timeout where a failure must come sooner
MODERN = "2026-07-28"


run = async_test(TEST_DEADLINE)  # a fresh loop and a deadline for each test


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


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped counts as ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


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
