"""The stdio transport, client side: the server is a subprocess we start and stop.

basic/transports/stdio.mdx: the client launches the server, writes one JSON-RPC
message per line to its stdin and reads one per line from its stdout; stderr is the
server's log, kept here (the last lines) only to explain failures.

Theory of operation. ``connect`` starts the process in a new session, so the server
and every process it starts form one process group that ``close`` can signal. Three
tasks run while it lives: a stdout reader that decodes lines and hands messages to the
session (a line that is not JSON-RPC is logged and remembered, never fatal; one that
answers a request but cannot be read, nested too deeply or too long, fails that
request with ``ParseError``, and the lines after it are read as usual), a stderr
reader that keeps the tail, and a watcher. The watcher wakes when the process exits
or its stdout ends, lets the readers catch up for a moment (so a response written just
before exiting still arrives first), then reports ``closed`` once, naming the cause and
quoting the stderr tail.

``close`` follows the spec's shutdown order: close stdin, wait, SIGTERM the group,
wait, SIGKILL the group. It reports ``closed`` with "closed by the client" (never as a
crash) so pending requests fail at once instead of at their deadlines. Every wait has
a deadline, so neither ``send`` nor ``close`` can hang on a stuck server.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import shlex
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from ..errors import ConnectionClosed, ParseError
from ..protocol import decode, encode, notification
from ..protocol.framing import LineBuffer, LineTooLong, response_id
from .client_seam import ClientTransport, Outgoing, TransportEvents

__all__ = ["ServerNotStarted", "StdioClientTransport"]

log = logging.getLogger("modelctx.stdio_client")

_NEWLINE = b"\n"
_CHUNK = 1 << 16
_HIGH_WATER = 1 << 20  # wait for the pipe only when this much is queued
_DRAIN_TIMEOUT = 30.0  # a server that reads nothing for this long is treated as gone
_LINGER = 0.5  # how long the watcher lets readers catch up after an exit or EOF
_GRACE = 2.0  # each step of the shutdown: after closing stdin, after SIGTERM, after SIGKILL
_POLL = 0.05
_NAME_MAX = 60
_STDERR_LINE_MAX = 64 * 1024  # a longer stderr "line" (a progress bar without \n) is dropped
_QUOTE_MAX = 500  # characters of one stderr or stdout line kept for error messages
_GARBAGE_KEPT = 5
_SIGKILL = getattr(signal, "SIGKILL", signal.SIGTERM)  # Windows has no SIGKILL


class ServerNotStarted(ConnectionClosed):
    """The server's executable could not be started (not found, not executable...)."""


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """The usual subprocess stream protocol, plus an event set the moment the process exits.

    ``Process.wait()`` also waits for every pipe to close, which a grandchild that
    inherited stdout can put off forever; the watcher and ``close`` must not.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, on_stdout: Callable[[bytes], None]) -> None:
        super().__init__(limit=_CHUNK, loop=loop)
        self.exited = asyncio.Event()
        self._on_stdout = on_stdout

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        # Stdout's data is taken in this callback, not by a task woken to read it: an
        # answer reaches its caller one loop pass sooner. Its end still reaches the
        # stream reader (``_read_stdout``).
        if fd == 1 and isinstance(data, bytes):
            self._on_stdout(data)
        else:
            super().pipe_data_received(fd, data)

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


class StdioClientTransport(ClientTransport):
    """A server run as a subprocess, spoken to over its stdin and stdout.

    ``command`` is one program (a path or a name looked up on ``PATH``), or a whole argv
    list; ``args`` are appended. A string is never split: ``"python server.py"`` names a
    program with a space in its name. ``env`` is merged over this process's environment.
    """

    kind = "stdio"
    sends_headers = False  # a line on a pipe has no headers

    def __init__(
        self,
        command: str | Sequence[str],
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        connect_timeout: float = 10.0,
        stderr_lines: int = 40,
    ) -> None:
        argv = [command] if isinstance(command, str) else list(command)
        argv += args
        if not argv or not argv[0]:
            raise ValueError("StdioClientTransport needs a command to run")
        self.argv = [os.fspath(part) for part in argv]
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.connect_timeout = connect_timeout
        self.name = f"stdio server {_shorten(self.argv)!r}"
        self._stderr: collections.deque[str] = collections.deque(maxlen=max(stderr_lines, 0))
        self._garbage: collections.deque[str] = collections.deque(maxlen=_GARBAGE_KEPT)
        self._events: TransportEvents | None = None
        self._transport: asyncio.SubprocessTransport | None = None
        self._protocol: _Protocol | None = None
        self._readers: tuple[asyncio.Task[None], asyncio.Task[None]] | None = None  # stdout, stderr
        self._stdout_lines = LineBuffer()
        self._watcher: asyncio.Task[None] | None = None
        self._closing = False
        self._shutdown: asyncio.Task[None] | None = None
        self._closed_exc: ConnectionClosed | None = None

    # -- public state ----------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The server's process id (also its process group id); None before ``connect``."""
        return self._transport.get_pid() if self._transport is not None else None

    @property
    def returncode(self) -> int | None:
        """The exit code (negative: killed by that signal); None while it runs."""
        return self._transport.get_returncode() if self._transport is not None else None

    def diagnostics(self) -> str:
        """The server's last stderr lines and stdout lines that were not JSON-RPC,
        indented, for the end of an error message; "" when there are none."""
        parts = []
        if count := len(self._stderr):
            parts.append(f"stderr (last {count} line{'s' * (count > 1)}):\n" + _indent(self._stderr))
        if self._garbage:
            parts.append("stdout lines that were not JSON-RPC messages:\n" + _indent(self._garbage))
        return "\n".join(parts)

    @property
    def configuration(self) -> tuple[Any, ...]:
        """The command, its environment and its folder: what starts this server."""
        env = tuple(sorted(self.env.items())) if self.env is not None else None
        return ("stdio", tuple(self.argv), env, os.fspath(self.cwd) if self.cwd is not None else None)

    def relaunch(self) -> StdioClientTransport:
        """A new transport that starts the same command (this one is left as it is)."""
        return StdioClientTransport(
            self.argv,
            env=self.env,
            cwd=self.cwd,
            connect_timeout=self.connect_timeout,
            stderr_lines=self._stderr.maxlen or 0,
        )

    # -- connect -------------------------------------------------------------------------
    async def connect(self, events: TransportEvents) -> None:
        """Start the server. Raises ``ServerNotStarted`` if the program cannot be run."""
        if self._transport is not None or self._closing:
            raise RuntimeError(f"{self.name}: connect() may be called once, before close()")
        self._events = events
        loop = asyncio.get_running_loop()
        try:
            self._transport, self._protocol = await asyncio.wait_for(
                loop.subprocess_exec(
                    lambda: _Protocol(loop, self._stdout_data),
                    *self.argv,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env={**os.environ, **self.env} if self.env is not None else None,
                    cwd=self.cwd,
                    start_new_session=True,  # one process group: the server and its children
                ),
                self.connect_timeout,
            )
        except OSError as exc:
            raise ServerNotStarted(self._start_failure(exc)) from exc
        except TimeoutError:
            raise ServerNotStarted(
                f"could not start {self.name}: no process after {self.connect_timeout:g}s"
            ) from None
        if self._closing:  # close() ran while the process was starting
            self._signal_group(_SIGKILL)
            self._transport.close()
            raise ConnectionClosed(str(self._closed_exc))
        self._readers = (loop.create_task(self._read_stdout()), loop.create_task(self._read_stderr()))
        self._watcher = loop.create_task(self._watch())

    def _start_failure(self, exc: OSError) -> str:
        reason = exc.strerror or str(exc)
        text = f"could not start {self.name}: {reason}: {self.argv[0]!r}"
        if isinstance(exc, FileNotFoundError) and " " in self.argv[0] and len(self.argv) == 1:
            text += " (the command is one program name; pass its arguments separately)"
        if self.cwd is not None and not os.path.isdir(self.cwd):
            text += f" (the working directory {os.fspath(self.cwd)!r} does not exist)"
        return text

    # -- reading -------------------------------------------------------------------------
    def _stdout_data(self, chunk: bytes) -> None:
        try:
            complete = self._stdout_lines.feed(chunk)
        except LineTooLong as exc:  # dropped up to its newline; the lines after it go on
            complete = exc.lines
            too_long: LineTooLong | None = exc
        else:
            too_long = None
        for line in complete:
            self._on_line(line)
        if too_long is not None:
            self._unreadable(too_long.head, str(too_long), quote=False)

    async def _read_stdout(self) -> None:
        """Wait for stdout's end (its data went to ``_stdout_data``); take its last line."""
        assert self._protocol is not None and self._protocol.stdout is not None
        reader = self._protocol.stdout
        while True:
            try:
                chunk = await reader.read(_CHUNK)
            except OSError as exc:
                log.debug("%s: reading stdout failed: %s", self.name, exc)
                chunk = b""
            if not chunk:
                if tail := self._stdout_lines.tail():
                    self._on_last_line(tail)
                return
            self._stdout_data(chunk)

    def _on_line(self, line: bytes) -> None:
        if not line.strip() or self._closed_exc is not None:
            return  # nothing reaches the session after ``closed``
        try:
            message = decode(line)
        except Exception as exc:  # noqa: BLE001 - whatever a peer's frame provokes, never fatal
            self._unreadable(line, getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}")
            return
        assert self._events is not None
        try:
            self._events.message(message)
        except Exception:
            log.exception("%s: the session failed to take %r", self.name, message)

    def _on_last_line(self, line: bytes) -> None:
        """Stdout ended without a newline after ``line``. A whole message is taken (a
        server may leave out the last newline); anything else was cut off by the end of
        the stream (the server died while writing it), which is the connection closing,
        not an unreadable answer: the request it began to answer fails with the closed
        connection's cause, and the fragment is kept for the diagnostics."""
        try:
            decode(line)
        except Exception as exc:  # noqa: BLE001 - whatever a peer's frame provokes
            why = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            self._not_jsonrpc(line, f"cut off by the end of stdout: {why}")
            return
        self._on_line(line)

    def _unreadable(self, frame: bytes, why: str, *, quote: bool = True) -> None:
        """A line that could not be decoded: fail the request it answers, if its id
        can be read; otherwise report it as not JSON-RPC."""
        request_id = response_id(frame) if self._closed_exc is None else None
        if request_id is None:
            self._not_jsonrpc(frame if quote else b"", why)
            return
        log.warning("%s: the response to request %r could not be read: %s", self.name, request_id, why)
        assert self._events is not None
        failure = ParseError(
            f"{self.name} sent a response to request {request_id!r} that could not be read ({why}); "
            "the messages after it are still read"
        )
        try:
            self._events.request_failed(request_id, failure)
        except Exception:
            log.exception("%s: the session failed to take a failed request", self.name)

    def _not_jsonrpc(self, line: bytes, why: str) -> None:
        # stdio.mdx: the server MUST NOT write anything else to stdout. It happens
        # (print() debugging, chatty libraries), so it is reported, never fatal.
        text = _quote(line) if line else f"[{why}]"
        self._garbage.append(text)
        log.warning("%s wrote a line that is not a JSON-RPC message (%s): %s", self.name, why, text)

    async def _read_stderr(self) -> None:
        assert self._protocol is not None and self._protocol.stderr is not None
        reader = self._protocol.stderr
        lines = LineBuffer(max_line=_STDERR_LINE_MAX)
        while True:
            try:
                chunk = await reader.read(_CHUNK)
            except OSError:
                chunk = b""
            if not chunk:
                if tail := lines.tail():
                    self._on_stderr(tail)
                return
            try:
                complete = lines.feed(chunk)
            except LineTooLong as exc:
                complete = [*exc.lines, b"[a stderr line too long to keep was dropped]"]
            for line in complete:
                self._on_stderr(line)

    def _on_stderr(self, line: bytes) -> None:
        text = _quote(line)
        self._stderr.append(text)
        log.debug("%s stderr: %s", self.name, text)

    # -- watching ------------------------------------------------------------------------
    async def _watch(self) -> None:
        assert self._protocol is not None and self._readers is not None
        stdout, stderr = self._readers
        exited = asyncio.get_running_loop().create_task(self._protocol.exited.wait())
        try:
            await asyncio.wait({exited, stdout}, return_when=asyncio.FIRST_COMPLETED)
            # Whichever came first, give the other a moment: messages written just
            # before exiting are delivered before ``closed``, and the exit code beats
            # "closed its stdout" as a cause.
            await asyncio.wait({exited, stdout}, timeout=_LINGER)
            await asyncio.wait({stderr}, timeout=_LINGER)
        finally:
            exited.cancel()
        if not self._closing:
            self._report(ConnectionClosed(self._describe_end()))

    def _describe_end(self) -> str:
        code = self.returncode
        if code is None:
            cause = "closed its stdout (the process is still running)"
        elif code < 0:
            try:
                cause = f"was killed by signal {signal.Signals(-code).name}"
            except ValueError:
                cause = f"was killed by signal {-code}"
        else:
            cause = f"exited with code {code}"
        details = self.diagnostics()
        return f"{self.name} {cause}" + (f"\n{details}" if details else "")

    def _report(self, exc: ConnectionClosed) -> None:
        """Tell the session the connection is gone: once, whatever the cause."""
        if self._closed_exc is not None:
            return
        self._closed_exc = exc
        if self._events is not None:
            try:
                self._events.closed(exc)
            except Exception:
                log.exception("%s: the session failed to take the closed connection", self.name)

    # -- sending -------------------------------------------------------------------------
    async def send(self, outgoing: Outgoing) -> None:
        """Write one message as one line. Raises ``ConnectionClosed`` if the server is
        gone, or has read nothing for ``_DRAIN_TIMEOUT`` seconds while we wait to write."""
        stdin = await self._stdin()
        data = encode(outgoing.message) + _NEWLINE
        try:
            # One write() call per message: the transport queues the whole line, so
            # concurrent senders never interleave, and no lock is needed.
            stdin.write(data)
            if stdin.transport.get_write_buffer_size() > _HIGH_WATER:
                await asyncio.wait_for(stdin.drain(), _DRAIN_TIMEOUT)
        except TimeoutError:
            raise ConnectionClosed(
                f"{self.name} read nothing from its stdin for {_DRAIN_TIMEOUT:g}s "
                f"({stdin.transport.get_write_buffer_size()} bytes waiting)"
            ) from None
        except OSError as exc:  # BrokenPipeError, ConnectionResetError
            raise await self._gone() from exc

    def send_nowait(self, outgoing: Outgoing) -> bool:
        """``send`` without a coroutine when the server is running and its stdin is not
        backed up (one line written, or nothing); False otherwise: then ``send``, which
        waits for the pipe or says why the server is gone."""
        protocol = self._protocol
        stdin = protocol.stdin if protocol is not None else None
        if (
            stdin is None
            or self._closed_exc is not None
            or protocol is None
            or protocol.exited.is_set()
            or stdin.transport.is_closing()
            or stdin.transport.get_write_buffer_size() > _HIGH_WATER
        ):
            return False
        try:
            stdin.write(encode(outgoing.message) + _NEWLINE)
        except OSError:
            return False
        return True

    async def _stdin(self) -> asyncio.StreamWriter:
        protocol = self._protocol
        if protocol is None and self._closed_exc is None:
            raise ConnectionClosed(f"{self.name} is not running: connect() was not called")
        if (
            protocol is None
            or protocol.stdin is None
            or self._closed_exc is not None
            or protocol.exited.is_set()
            or protocol.stdin.transport.is_closing()  # asyncio would drop the write silently
        ):
            raise await self._gone()
        return protocol.stdin

    async def _gone(self) -> ConnectionClosed:
        """The error for a send to a server that is gone: the one ``closed`` reported,
        waiting briefly for the watcher to find the cause."""
        if self._closed_exc is None and self._watcher is not None:
            await asyncio.wait({self._watcher}, timeout=3 * _LINGER)
        if self._closed_exc is not None:
            return ConnectionClosed(str(self._closed_exc))
        details = self.diagnostics()
        return ConnectionClosed(
            f"{self.name} stopped reading its stdin" + (f"\n{details}" if details else "")
        )

    async def cancel(self, request_id: str | int, reason: str | None = None) -> None:
        """Send ``notifications/cancelled`` for ``request_id`` (stdio.mdx, Cancellation)."""
        params: dict[str, Any] = {"requestId": request_id}
        if reason is not None:
            params["reason"] = reason
        await self.send(Outgoing(notification("notifications/cancelled", params)))

    # -- closing -------------------------------------------------------------------------
    async def close(self) -> None:
        """Stop the server and its children; reports ``closed`` with "closed by the
        client" unless a crash was reported first. Safe to call twice; returns within
        about ``3 * _GRACE`` seconds whatever the server does."""
        if self._shutdown is None:
            self._closing = True
            self._report(ConnectionClosed(f"{self.name} was closed by the client"))
            self._shutdown = asyncio.get_running_loop().create_task(self._shut_down())
        # Shielded: a caller cancelled mid-close must not leave the process half-stopped.
        await asyncio.shield(self._shutdown)

    async def _shut_down(self) -> None:
        if self._transport is None or self._protocol is None:
            return
        try:
            await self._stop_process()
        finally:
            assert self._readers is not None and self._watcher is not None  # made with _transport
            tasks = [*self._readers, self._watcher]
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=_GRACE)
            stdin_pipe = cast("asyncio.WriteTransport | None", self._transport.get_pipe_transport(0))
            if stdin_pipe is not None and stdin_pipe.get_write_buffer_size():
                stdin_pipe.abort()  # drop what the server never read, or the pipe stays open
            self._transport.close()

    async def _stop_process(self) -> None:
        # stdio.mdx, Shutdown: close stdin, wait for the server to exit, then terminate
        # it by force. The signals go to the whole group, so processes the server
        # started end with it, even those it left behind after exiting on its own.
        assert self._protocol is not None and self._protocol.stdin is not None
        self._protocol.stdin.close()
        await self._exits_within(_GRACE)
        if not self._group_alive():
            return
        self._signal_group(signal.SIGTERM)
        if await self._group_ends_within(_GRACE):
            return
        self._signal_group(_SIGKILL)
        await self._exits_within(_GRACE)

    async def _exits_within(self, seconds: float) -> bool:
        assert self._protocol is not None
        try:
            await asyncio.wait_for(self._protocol.exited.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def _group_ends_within(self, seconds: float) -> bool:
        # The server's children are not ours, so there is nothing to wait on: poll.
        # (Where nothing reaps orphans, their zombies count as alive until the deadline.)
        deadline = asyncio.get_running_loop().time() + seconds
        while self._group_alive():
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(_POLL)
        return True

    def _group_alive(self) -> bool:
        if not hasattr(os, "killpg"):
            return self.returncode is None
        try:
            os.killpg(self._pgid(), 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def _signal_group(self, signum: signal.Signals) -> None:
        log.debug("%s: sending %s to its process group", self.name, signum.name)
        assert self._transport is not None
        try:
            if hasattr(os, "killpg"):
                os.killpg(self._pgid(), signum)
            else:
                self._transport.send_signal(signum)
        except (ProcessLookupError, PermissionError):
            pass

    def _pgid(self) -> int:
        # start_new_session made the server a session and group leader: pgid == pid.
        pid = self.pid
        assert pid is not None
        return pid


def _shorten(argv: list[str]) -> str:
    """The command for messages: the program without its directory, cut in the middle
    if long (the end usually names the script, the most telling part)."""
    shown = shlex.join([os.path.basename(argv[0]) or argv[0], *argv[1:]])
    if len(shown) <= _NAME_MAX:
        return shown
    head = _NAME_MAX // 3
    return shown[:head] + "..." + shown[len(shown) - (_NAME_MAX - head - 3) :]


def _quote(line: bytes) -> str:
    text = line.decode("utf-8", errors="replace").rstrip("\r\n")
    return text if len(text) <= _QUOTE_MAX else text[:_QUOTE_MAX] + "..."


def _indent(lines: Iterable[str]) -> str:
    return "\n".join("    " + line for line in lines)
