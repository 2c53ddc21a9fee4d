"""The client side of stdio (basic/transports/stdio.mdx): a server run as a subprocess.

Every test starts a real process: a few lines of Python written to ``tmp_path``.
``Recorder`` stands in for the session and keeps what the transport reports, in order.
Every wait has a deadline, so a broken transport fails a test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from modelctx.errors import ConnectionClosed
from modelctx.protocol.jsonrpc import Notification, Response
from modelctx.transports import stdio_client
from modelctx.transports.client_seam import Outgoing
from modelctx.transports.stdio_client import ServerNotStarted, StdioClientTransport

DEADLINE = 10.0  # seconds any single wait may take

# Answers each request with {"received": <the request>}; any other line it reads comes
# back as a notifications/message carrying it. Exits when stdin closes.
ECHO = """
import json, sys

def write(message):
    sys.stdout.write(json.dumps(message) + "\\n")
    sys.stdout.flush()

def echo(message):
    if "id" in message:
        write({"jsonrpc": "2.0", "id": message["id"], "result": {"received": message}})
    else:
        write({"jsonrpc": "2.0", "method": "notifications/message", "params": {"received": message}})
"""
ECHO_LOOP = """
for line in sys.stdin:
    echo(json.loads(line))
"""


class Recorder:
    """A ``TransportEvents`` that keeps everything it is told, in order."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []

    def message(self, message: Any) -> None:
        self.log.append(("message", message))

    def request_failed(self, request_id: str | int, exc: BaseException) -> None:
        self.log.append(("request_failed", (request_id, exc)))

    def closed(self, exc: BaseException) -> None:
        self.log.append(("closed", exc))

    @property
    def messages(self) -> list[Any]:
        return [value for kind, value in self.log if kind == "message"]

    @property
    def closes(self) -> list[BaseException]:
        return [value for kind, value in self.log if kind == "closed"]

    async def until(self, condition: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
        deadline = time.monotonic() + timeout
        while not (value := condition()):
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout:g}s waiting for {what}; got {self.log}")
            await asyncio.sleep(0.01)
        return value

    async def response(self, id: int) -> Response:
        def find() -> Response | None:
            return next((m for m in self.messages if type(m) is Response and m.id == id), None)

        return await self.until(find, f"the response to request {id}")

    async def notification(self) -> Notification:
        def find() -> Notification | None:
            return next((m for m in self.messages if type(m) is Notification), None)

        return await self.until(find, "a notification")

    async def closed_error(self, timeout: float = DEADLINE) -> BaseException:
        return (await self.until(lambda: self.closes, "closed", timeout))[0]


def run(scenario: Coroutine[Any, Any, Any], timeout: float = 30.0) -> Any:
    return asyncio.run(asyncio.wait_for(scenario, timeout))


def server(tmp_path: Path, source: str, name: str = "server.py") -> list[str]:
    """The argv that runs ``source`` as a Python script."""
    path = tmp_path / name
    path.write_text(source)
    return [sys.executable, str(path)]


@contextlib.asynccontextmanager
async def connected(
    argv: list[str], **options: Any
) -> AsyncIterator[tuple[StdioClientTransport, Recorder]]:
    transport = StdioClientTransport(argv, **options)
    events = Recorder()
    await transport.connect(events)
    try:
        yield transport, events
    finally:
        await transport.close()


def request(id: int, method: str = "tools/list", params: dict[str, Any] | None = None) -> Outgoing:
    message = {"jsonrpc": "2.0", "id": id, "method": method, "params": params or {}}
    return Outgoing(message, request_id=id)


def running(pid: int) -> bool:
    """Whether ``pid`` is alive; a zombie (ended, not yet reaped) counts as ended."""
    if Path("/proc/self/stat").exists():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except FileNotFoundError:
            return False
        return fields[0] != "Z"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- messages --------------------------------------------------------------------------------
def test_a_request_and_its_response_round_trip(tmp_path):
    async def scenario():
        async with connected(server(tmp_path, ECHO + ECHO_LOOP)) as (transport, events):
            sent = request(1, "tools/call", {"name": "echo", "arguments": {"text": "two\nlines"}})
            await transport.send(sent)

            response = await events.response(1)

            assert response.result == {"received": sent.message}
            assert isinstance(transport.pid, int) and transport.returncode is None
            assert events.closes == []

    run(scenario())


def test_lines_that_are_not_json_rpc_are_logged_and_skipped(tmp_path, caplog):
    """stdio.mdx: the server MUST NOT write anything else to stdout; if it does, the
    connection survives and the valid messages around the junk still arrive."""
    source = ECHO + """
print("Server v1.2 starting...", flush=True)
print("{not json", flush=True)
print("[1, 2, 3]", flush=True)
print("", flush=True)
""" + ECHO_LOOP

    async def scenario():
        async with connected(server(tmp_path, source)) as (transport, events):
            await transport.send(request(1))

            response = await events.response(1)

            assert response.result["received"]["id"] == 1
            assert events.closes == []
            assert "Server v1.2 starting..." in transport.diagnostics()
            assert "{not json" in transport.diagnostics()

    with caplog.at_level(logging.WARNING, logger="modelctx.stdio_client"):
        run(scenario())
    warnings = [r.getMessage() for r in caplog.records if r.name == "modelctx.stdio_client"]
    assert len(warnings) == 3  # the banner, the broken JSON, the batch; not the blank line
    assert "Server v1.2 starting..." in warnings[0] and "not a JSON-RPC message" in warnings[0]


def test_concurrent_sends_are_written_as_whole_lines(tmp_path):
    """Messages far bigger than the pipe buffer, sent at once, each arrive intact."""

    async def scenario():
        async with connected(server(tmp_path, ECHO + ECHO_LOOP)) as (transport, events):
            texts = {id: str(id) * 50_000 for id in range(1, 41)}

            await asyncio.gather(
                *(transport.send(request(id, "echo", {"text": text})) for id, text in texts.items())
            )

            for id, text in texts.items():
                assert (await events.response(id)).result["received"]["params"]["text"] == text

    run(scenario())


def test_cancel_writes_notifications_cancelled(tmp_path):
    """stdio.mdx, Cancellation: the client MUST send notifications/cancelled naming the id."""

    async def scenario():
        async with connected(server(tmp_path, ECHO + ECHO_LOOP)) as (transport, events):
            await transport.cancel(7, "the user pressed stop")
            await transport.cancel("abc")

            await events.until(lambda: len(events.messages) == 2, "both cancellations echoed")

            received = [m.params["received"] for m in events.messages]
            assert all(m["jsonrpc"] == "2.0" and m["method"] == "notifications/cancelled" for m in received)
            assert [m["params"] for m in received] == [
                {"requestId": 7, "reason": "the user pressed stop"},
                {"requestId": "abc"},
            ]

    run(scenario())


def test_env_is_merged_over_the_inherited_environment_and_cwd_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv("MODELCTX_INHERITED", "from the parent")
    workdir = tmp_path / "work"
    workdir.mkdir()
    source = ECHO + """
import os
echo({"jsonrpc": "2.0", "method": "env", "params": {
    "added": os.environ.get("MODELCTX_ADDED"),
    "inherited": os.environ.get("MODELCTX_INHERITED"),
    "cwd": os.getcwd(),
}})
""" + ECHO_LOOP

    async def scenario():
        argv = server(tmp_path, source)
        async with connected(argv, env={"MODELCTX_ADDED": "given"}, cwd=workdir) as (_, events):
            note = await events.notification()

            assert note.params["received"]["params"] == {
                "added": "given",
                "inherited": "from the parent",
                "cwd": str(workdir.resolve()),
            }

    run(scenario())


# -- the server going away -------------------------------------------------------------------
def test_a_server_killed_mid_conversation_is_reported_with_its_stderr_tail(tmp_path):
    source = ECHO + """
print("loading tools", file=sys.stderr, flush=True)
print("warning: the cache is cold", file=sys.stderr, flush=True)
""" + ECHO_LOOP

    async def scenario():
        async with connected(server(tmp_path, source)) as (transport, events):
            await transport.send(request(1))
            await events.response(1)
            await events.until(lambda: "cache is cold" in transport.diagnostics(), "the stderr lines")

            os.kill(transport.pid, signal.SIGKILL)
            started = time.monotonic()
            exc = await events.closed_error()

            assert time.monotonic() - started < 2.0
            assert isinstance(exc, ConnectionClosed)
            assert "was killed by signal SIGKILL" in str(exc)
            assert "\n    loading tools\n    warning: the cache is cold" in str(exc)
            assert transport.returncode == -signal.SIGKILL
            with pytest.raises(ConnectionClosed) as sent:
                await transport.send(request(2))
            assert str(sent.value) == str(exc)

        assert len(events.closes) == 1  # close() did not report a second time

    run(scenario())


def test_a_response_written_just_before_exiting_arrives_before_closed(tmp_path):
    source = ECHO + """
for n in range(100):
    print(f"log line {n}", file=sys.stderr)
sys.stderr.flush()
echo(json.loads(sys.stdin.readline()))
sys.exit(3)
"""

    async def scenario():
        async with connected(server(tmp_path, source), stderr_lines=5) as (transport, events):
            await transport.send(request(1))

            exc = await events.closed_error()

            assert [kind for kind, _ in events.log] == ["message", "closed"]
            assert str(exc).startswith(f"{transport.name} exited with code 3\n")
            assert "    log line 99" in str(exc) and "log line 95" in str(exc)
            assert "log line 94" not in str(exc)

    run(scenario())


def test_a_server_that_closes_its_stdout_is_reported(tmp_path):
    """stdio.mdx, Shutdown: the server MAY close its output stream to end the connection."""
    source = "import os, sys\nos.close(1)\nsys.stdin.read()\n"

    async def scenario():
        async with connected(server(tmp_path, source)) as (transport, events):
            exc = await events.closed_error()

            assert "closed its stdout" in str(exc)
            assert transport.returncode is None

        assert transport.returncode == 0  # it exited when close() closed its stdin

    run(scenario())


def test_an_exit_is_reported_even_while_a_child_holds_the_servers_stdout(tmp_path):
    """The server's own exit is the signal, not the end of its pipes: a child that
    inherited them can keep them open for a long time."""
    source = ECHO + """
import subprocess
child = subprocess.Popen(["sleep", "60"])
echo({"jsonrpc": "2.0", "method": "child", "params": {"pid": child.pid}})
print("bye", file=sys.stderr, flush=True)
sys.exit(2)
"""

    async def scenario():
        async with connected(server(tmp_path, source)) as (transport, events):
            child = (await events.notification()).params["received"]["params"]["pid"]

            exc = await events.closed_error(timeout=3.0)

            assert "exited with code 2" in str(exc) and "    bye" in str(exc)
            assert running(child)
        # close() ended what the server left behind.
        await events.until(lambda: not running(child), "the child to end", 1.0)

    run(scenario())


# -- closing ---------------------------------------------------------------------------------
def test_close_closes_stdin_and_a_well_behaved_server_exits_on_its_own(tmp_path):
    """stdio.mdx, Shutdown: closing stdin comes first; a server that exits on EOF is
    never signalled. ``closed`` says the client closed it: it is no crash."""

    async def scenario():
        transport = StdioClientTransport(server(tmp_path, ECHO + ECHO_LOOP))
        events = Recorder()
        await transport.connect(events)
        await transport.send(request(1))
        await events.response(1)

        started = time.monotonic()
        await transport.close()

        assert time.monotonic() - started < 1.5
        assert transport.returncode == 0
        (exc,) = events.closes
        assert isinstance(exc, ConnectionClosed)
        assert str(exc) == f"{transport.name} was closed by the client"
        await transport.close()  # a second close is a no-op
        assert len(events.closes) == 1
        with pytest.raises(ConnectionClosed, match="closed by the client"):
            await transport.send(request(2))

    run(scenario())


def test_close_ends_a_server_that_ignores_sigterm_and_its_children(tmp_path):
    """stdio.mdx, Shutdown: if the server does not exit, escalate to SIGTERM, then
    SIGKILL; the signals reach every process the server started."""
    source = ECHO + """
import signal, subprocess, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by both children
children = [
    subprocess.Popen(["sleep", "60"]),
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]),
]
echo({"jsonrpc": "2.0", "method": "children", "params": {"pids": [c.pid for c in children]}})
while True:
    time.sleep(1)  # never reads stdin, never answers
"""

    async def scenario():
        transport = StdioClientTransport(server(tmp_path, source))
        events = Recorder()
        await transport.connect(events)
        children = (await events.notification()).params["received"]["params"]["pids"]
        await transport.send(request(1))

        started = time.monotonic()
        await transport.close()

        assert transport.returncode == -signal.SIGKILL
        # SIGKILL is sent to the group by now; the children die a moment later.
        await events.until(lambda: not any(map(running, children)), "the children to end", 1.0)
        assert time.monotonic() - started < 6.5
        assert "closed by the client" in str(events.closes[0])

    run(scenario())


def test_close_while_a_send_waits_on_a_full_pipe_does_not_hang(tmp_path):
    source = "import time\nwhile True:\n    time.sleep(1)\n"  # never reads stdin

    async def scenario():
        transport = StdioClientTransport(server(tmp_path, source))
        await transport.connect(Recorder())
        blocked = asyncio.ensure_future(transport.send(request(1, "echo", {"text": "x" * 3_000_000})))
        await asyncio.sleep(0.2)
        assert not blocked.done()  # waiting for the server to read

        await transport.close()

        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(blocked, DEADLINE)

    run(scenario())


def test_a_server_that_reads_nothing_fails_a_send_instead_of_blocking_it(tmp_path, monkeypatch):
    monkeypatch.setattr(stdio_client, "_DRAIN_TIMEOUT", 0.5)
    source = "import time\nwhile True:\n    time.sleep(1)\n"  # never reads stdin

    async def scenario():
        async with connected(server(tmp_path, source)) as (transport, _):
            with pytest.raises(ConnectionClosed, match="read nothing from its stdin for 0.5s"):
                await transport.send(request(1, "echo", {"text": "x" * 3_000_000}))

    run(scenario())


# -- starting --------------------------------------------------------------------------------
def test_a_missing_executable_is_a_clear_error(tmp_path):
    missing = tmp_path / "no-such-server"
    transport = StdioClientTransport(str(missing), ["--flag"])

    with pytest.raises(ServerNotStarted) as raised:
        run(transport.connect(Recorder()))

    assert isinstance(raised.value, ConnectionClosed)
    message = str(raised.value)
    assert message.startswith("could not start stdio server 'no-such-server --flag': ")
    assert "No such file or directory" in message and str(missing) in message


def test_a_file_that_is_not_executable_is_a_clear_error(tmp_path):
    script = tmp_path / "server.py"
    script.write_text("print('hi')\n")
    script.chmod(0o644)

    with pytest.raises(ServerNotStarted, match="Permission denied"):
        run(StdioClientTransport(str(script)).connect(Recorder()))


def test_send_before_connect_raises_connection_closed():
    transport = StdioClientTransport("python")

    with pytest.raises(ConnectionClosed, match="connect"):
        run(transport.send(request(1)))


def test_the_name_shows_the_command_without_its_directory_and_shortens_it():
    def name(*argv: Any) -> str:
        return StdioClientTransport(*argv).name

    assert name("/usr/bin/python3", ["weather.py"]) == "stdio server 'python3 weather.py'"
    assert name(["npx", "-y", "pkg"]) == "stdio server 'npx -y pkg'"
    long = name("python", ["-m", "modelctx", "serve", "/" + "deep/" * 40 + "weather.py"])
    assert len(long) < 80 and "..." in long
    assert long.startswith("stdio server 'python -m modelc") and long.endswith("/deep/weather.py'")
    assert StdioClientTransport("python").kind == "stdio"
