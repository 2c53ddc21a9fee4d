"""The faults the soak run injects, one every few seconds, in turn.

Each fault does something a broken or hostile peer does, then checks that the server
answered as the spec says (or stopped as it should) and still serves. What the fault
provokes is counted as an ``expected`` error under its name; anything else (a 5xx, a
wrong status, a process that does not stop, a server that no longer answers) is
``unexpected``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from modelctx import Client
from modelctx.errors import ConnectionClosed
from modelctx.transports.stdio_client import StdioClientTransport

from . import wire
from .procs import SOAK, child_env, stdio_command, wait_gone
from .tally import Tally

#: How long a stdio server may take to exit once its client is gone.
EXIT_WAIT = 15.0
#: The HTTP server's default ``max_body``; the oversized POST claims one byte more.
MAX_BODY = 4 * 1024 * 1024


class Faults:
    """The faults, against the HTTP server on ``port`` and stdio servers of their own."""

    def __init__(self, port: int, tally: Tally, stderr_dir: Path) -> None:
        self.http = wire.Http(port)
        self.tally = tally
        self.stderr_dir = stderr_dir
        self.round = 0
        self.all: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("http_drop_mid_call", self.http_drop_mid_call),
            ("http_malformed", self.http_malformed),
            ("stdio_raw", self.stdio_raw),
            ("http_sessions", self.http_sessions),
            ("stdio_server_killed", self.stdio_server_killed),
            ("listen_cut", self.listen_cut),
            ("stdio_client_killed", self.stdio_client_killed),
        ]

    async def run(self, stop: asyncio.Event, every: float) -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), every)
                return
            except TimeoutError:
                pass
            name, fault = self.all[self.round % len(self.all)]
            self.round += 1
            try:
                await asyncio.wait_for(fault(), 60)
            except Exception as exc:  # noqa: BLE001 - whatever it is, it is counted unexpected
                self.tally.bad(f"fault:{name}", f"{type(exc).__name__}: {exc}")
            else:
                self.tally.good(f"fault:{name}")

    def _check(self, condition: bool, what: str, detail: object) -> None:
        if condition:
            self.tally.provoked(what)
        else:
            self.tally.bad(f"fault:{what}", detail)

    # -- HTTP ---------------------------------------------------------------------------
    async def http_drop_mid_call(self) -> None:
        """A client that drops its connection while its tool runs (and streams progress)."""
        message = wire.request(1, "tools/call", {"name": "work", "arguments": {"steps": 100, "delay": 0.05},
                                                 "_meta": {"progressToken": "p"}})  # fmt: skip
        body = json.dumps(message).encode()
        reader, writer = await self.http.open()
        writer.write(self.http.head("POST", wire.modern_headers("tools/call", "work"), len(body)) + body)
        await writer.drain()
        head = await wire.read_head(reader)
        await asyncio.wait_for(reader.readuntil(b"\n\n"), wire.IO_TIMEOUT)  # the first SSE event
        await wire.close(writer)
        self._check(head.status == 200 and "event-stream" in head.headers.get("content-type", ""),
                    "http_client_dropped_mid_call", head)  # fmt: skip
        await self._http_still_serves()

    async def http_malformed(self) -> None:
        """Bad JSON, a message that is not JSON-RPC, a wrong Content-Type, a body too large."""
        reply = await self.http.exchange(
            "POST", b'{"jsonrpc": "2.0", "id": 1, "meth', wire.modern_headers("tools/call")
        )
        self._check(reply.status == 400 and reply.json()["error"]["code"] == -32700, "http_bad_json_400", reply)
        reply = await self.http.post([1, 2, 3], wire.modern_headers("tools/call"))
        self._check(reply.status == 400 and "error" in reply.body.decode(), "http_not_jsonrpc_400", reply)
        reply = await self.http.exchange("POST", b"{}", {"Content-Type": "text/plain"})
        self._check(reply.status == 415, "http_wrong_content_type_415", reply)
        reader, writer = await self.http.open()
        try:  # claim one byte over the limit; send only the first KB: refused on the header
            writer.write(self.http.head("POST", wire.modern_headers("tools/call"), MAX_BODY + 1) + b"{" * 1024)
            await writer.drain()
            reply = wire.parse(await asyncio.wait_for(reader.read(), wire.IO_TIMEOUT))
        finally:
            await wire.close(writer)
        self._check(reply.status == 413, "http_oversized_body_413", reply)
        await self._http_still_serves()

    async def http_sessions(self) -> None:
        """Unknown and ended handshake session ids get 404 (streamable-http.mdx, Session
        Management); a modern request naming a session id is served or refused, never 5xx."""
        headers = {"MCP-Protocol-Version": wire.HANDSHAKE, "Mcp-Session-Id": "no-such-session-0000"}
        reply = await self.http.post(wire.request(2, "tools/list", modern=False), headers)
        self._check(reply.status == 404, "http_unknown_session_404", reply)
        session = await self._initialize()
        headers["Mcp-Session-Id"] = session
        reply = await self.http.exchange("DELETE", None, headers)
        self._check(reply.status in (200, 204), "http_session_deleted", reply)
        reply = await self.http.post(wire.request(3, "tools/list", modern=False), headers)
        self._check(reply.status == 404, "http_ended_session_404", reply)

    async def listen_cut(self) -> None:
        """A subscriptions/listen stream and a handshake GET stream, each cut after it opened."""
        message = wire.request(1, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
        body = json.dumps(message).encode()
        reader, writer = await self.http.open()
        writer.write(self.http.head("POST", wire.modern_headers("subscriptions/listen"), len(body)) + body)
        await writer.drain()
        head = await wire.read_head(reader)
        event = await asyncio.wait_for(reader.readuntil(b"\n\n"), wire.IO_TIMEOUT)
        await wire.close(writer)
        self._check(head.status == 200 and b"subscriptions/acknowledged" in event, "listen_stream_cut", (head, event))
        session = await self._initialize()
        headers = {"MCP-Protocol-Version": wire.HANDSHAKE, "Mcp-Session-Id": session, "Accept": "text/event-stream"}
        reader, writer = await self.http.open()
        writer.write(self.http.head("GET", headers, None))
        await writer.drain()
        head = await wire.read_head(reader)
        await wire.close(writer)
        self._check(head.status == 200, "get_stream_cut", head)
        reply = await self.http.exchange("DELETE", None, headers)
        self._check(reply.status in (200, 204), "http_session_deleted", reply)
        await self._http_still_serves()

    async def _initialize(self) -> str:
        reply = await self.http.post(wire.initialize(), {"MCP-Protocol-Version": wire.HANDSHAKE})
        session = reply.headers.get("mcp-session-id")
        if reply.status != 200 or not session:
            raise AssertionError(f"initialize gave {reply}")
        notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self.http.post(notice, {"MCP-Protocol-Version": wire.HANDSHAKE, "Mcp-Session-Id": session})
        return session

    async def _http_still_serves(self) -> None:
        reply = await self.http.post(wire.request(9, "tools/call", {"name": "echo", "arguments": {"text": "still"}}),
                                     wire.modern_headers("tools/call", "echo"))  # fmt: skip
        result = reply.json().get("result", {}) if reply.status == 200 else {}
        if result.get("content", [{}])[0].get("text") != "still":
            raise AssertionError(f"the HTTP server no longer answers echo after a fault: {reply}")

    # -- stdio --------------------------------------------------------------------------
    def _stderr(self, name: str) -> Path:
        return self.stderr_dir / f"stdio-{name}-{self.round}.stderr"

    async def stdio_raw(self) -> None:
        """A stdio server fed a line that is not JSON and one past the frame limit answers
        parse errors and goes on; then its client closes the pipe mid-call and it exits."""
        process = await asyncio.create_subprocess_exec(
            *stdio_command(), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env=child_env(self._stderr("raw")), start_new_session=True, limit=1 << 20,
        )  # fmt: skip
        try:
            lines = wire.Lines(process)
            await lines.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method"\n')
            reply = await lines.answer(None)
            self._check(reply.get("error", {}).get("code") == -32700, "stdio_bad_json_parse_error", reply)
            if self.round % 3 == 0:  # 16 MiB a time: not every round
                # In 1 MiB writes: a 16 MiB bytes object here would move this process's
                # allocator (glibc raises its mmap threshold) and blur the client's RSS.
                await lines.send_raw(b'{"x": "')
                chunk = b"a" * (1024 * 1024)
                for _ in range(16):
                    await lines.send_raw(chunk)
                await lines.send_raw(b'"}\n')
                reply = await lines.answer(None)
                self._check("error" in reply, "stdio_oversized_line_error", reply)
            await lines.send(wire.request(2, "tools/call", {"name": "echo", "arguments": {"text": "ok"}}))
            reply = await lines.answer(2)
            if reply.get("result", {}).get("content", [{}])[0].get("text") != "ok":
                raise AssertionError(f"echo after bad lines gave {reply}")
            call = {"name": "work", "arguments": {"steps": 100, "delay": 0.05}, "_meta": {"progressToken": 1}}
            await lines.send(wire.request(3, "tools/call", call))
            await lines.receive()  # its first progress: the tool runs
            lines.stdin.close()  # the client goes away mid-call
            # Our own child: wait for asyncio to reap it. (Seeing its zombie in /proc and
            # calling kill() would make Popen reap it under asyncio's child watcher.)
            try:
                await asyncio.wait_for(process.wait(), EXIT_WAIT)
            except TimeoutError:
                pass
            self._check(process.returncode is not None, "stdio_pipe_closed_mid_call", f"still runs {EXIT_WAIT} s later")
        finally:
            if process.returncode is None:
                process.kill()
                await asyncio.wait_for(process.wait(), 10)

    async def stdio_server_killed(self) -> None:
        """A stdio server killed mid-call: the call fails with ConnectionClosed; a new
        server (the restart) serves."""
        for attempt in ("killed", "restarted"):
            transport = StdioClientTransport(stdio_command(), env=child_env(self._stderr(attempt)))
            async with Client(transport, mode="2026-07-28", timeout=30) as client:
                if attempt == "restarted":
                    result = await client.call_tool("echo", {"text": "again"})
                    if result.content[0].text != "again":  # type: ignore[union-attr]
                        raise AssertionError(f"the restarted server gave {result}")
                    self.tally.provoked("stdio_server_restarted")
                    return
                call = asyncio.create_task(client.call_tool("work", {"steps": 100, "delay": 0.05}))
                await asyncio.sleep(0.3)
                assert transport.pid is not None
                os_kill(transport.pid, signal.SIGKILL)
                try:
                    await asyncio.wait_for(call, 20)
                except ConnectionClosed:
                    self.tally.provoked("stdio_server_killed_call_fails")
                else:
                    raise AssertionError("a call to a killed server completed")

    async def stdio_client_killed(self) -> None:
        """A client process killed mid-call: its stdio server sees the pipe close and exits."""
        child = await asyncio.create_subprocess_exec(
            sys.executable, str(SOAK / "victim_client.py"), *stdio_command(),
            stdout=asyncio.subprocess.PIPE, env=child_env(self._stderr("orphan")), start_new_session=True,
        )  # fmt: skip
        assert child.stdout is not None
        try:
            line = await asyncio.wait_for(child.stdout.readline(), 30)
            server_pid = int(line.split()[1])  # "calling PID"
            child.kill()
            await asyncio.wait_for(child.wait(), 10)
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()
        exited = await wait_gone(server_pid, EXIT_WAIT)
        if not exited:
            os_kill(server_pid, signal.SIGKILL)
        self._check(exited, "stdio_client_killed_server_exits", f"server {server_pid} still runs {EXIT_WAIT} s later")


def os_kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
