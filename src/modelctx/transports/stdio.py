"""The stdio transport, server side: newline-delimited JSON on stdin and stdout.

basic/transports/stdio.mdx: one message per line; logs go to stderr, never stdout.
The conversation's rules (ids, cancellation, answers) are ``ServerConnection``'s; this
module only moves bytes: lines from stdin into a ``DuplexServer``, messages out to
stdout. A malformed line is answered with the JSON-RPC error it deserves and the
connection goes on.

Stopping is bounded. When stdin closes, or on SIGTERM/SIGINT, listen streams end with
their final response, running requests get ``_GRACE_SECONDS`` to answer (stdin closed)
or are cancelled at once (a signal), and whatever ignores its cancellation for another
``_GRACE_SECONDS`` is left behind: ``serve_stdio`` then exits the process anyway.

The stdio process is one connection: after ``initialize`` it carries a handshake
session, and modern requests on the same pipe are still served statelessly.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import stat
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, cast

from ..errors import InvalidRequest
from ..protocol.framing import LineBuffer, LineTooLong, request_id
from ..protocol.jsonrpc import encode, error_response
from ._duplex import DuplexServer
from ._tuning import settle_heap
from .server_seam import ServerApp

__all__ = ["serve_stdio", "serve_stdio_async"]

log = logging.getLogger("modelctx.stdio")

_NEWLINE = b"\n"
_HIGH_WATER = 1 << 20
_CHUNK = 1 << 18  # a line longer than this is handed to the pipe in pieces of it
_GRACE_SECONDS = 2.0
_FLUSH_SECONDS = 30.0  # the most a peer reading slowly keeps a stopping server
_READ_CHUNK = 1 << 16
_THREAD_PREFIX = "modelctx-stdio-worker"
# Requests served at once; past it stdin is not read until one ends. With the write
# back-pressure below, this bounds what a peer can make the server hold: a peer that
# sends without reading the answers, or floods slow requests, waits instead.
MAX_INFLIGHT = 1024


class _Writer:
    """Writes whole lines to stdout; waits for the pipe only when it backs up.

    A line up to ``_CHUNK`` goes to the transport in one write (with its newline). A
    longer one is not copied whole into the transport's buffer: it is queued, encoded
    once, and a flusher task hands it over a ``_CHUNK`` at a time as the pipe takes it,
    then its newline; lines sent meanwhile queue behind it, so two never interleave.
    A 10 MB reply then peaks at the encoder's buffer (1.5x while it grows) instead of
    about 2.6x (the encoded bytes, a copy with the newline, the transport's copy).

    A stdout that is a regular file (output redirected to disk) gets plain writes.
    """

    def __init__(self, writer: asyncio.StreamWriter | None, file: BinaryIO) -> None:
        self._writer = writer
        self._transport = writer.transport if writer is not None else None
        self._file = file
        self.broken = False
        # Lines waiting behind a long one, each with the future its sender awaits
        # (None: from ``send_now``); None when nothing is queued.
        self._queue: deque[tuple[bytes, asyncio.Future[None] | None]] | None = None
        self._queued = 0  # bytes in the queue
        self._handed = 0  # bytes the flusher has handed to the transport, in all
        self._flusher: asyncio.Task[None] | None = None

    async def send(self, message: dict[str, Any]) -> None:
        if self.broken:
            return
        data = encode(message)
        try:
            if self._transport is None or self._writer is None:
                self._file.write(data)
                self._file.write(_NEWLINE)
                self._file.flush()
                return
            if self._queue is None and len(data) <= _CHUNK:
                self._transport.write(data + _NEWLINE)
                if self._transport.get_write_buffer_size() > _HIGH_WATER:
                    await self._writer.drain()
                return
        except (ConnectionError, RuntimeError, OSError, ValueError):
            self.broken = True
            return
        written: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._enqueue(data, written)
        # Shielded: a sender cancelled meanwhile leaves its line queued, written whole.
        await asyncio.shield(written)

    def send_now(self, message: dict[str, Any]) -> bool:
        """``send`` from a callback: True when the line was written or queued (or stdout
        is broken, the message lost as ``send`` loses it); False when ``send`` must wait."""
        if self.broken:
            return True
        if self._transport is None or self._queue is not None or self.backed_up():
            return False
        data = encode(message)
        if len(data) > _CHUNK:
            self._enqueue(data, None)
            return True
        try:
            self._transport.write(data + _NEWLINE)
        except (ConnectionError, RuntimeError, OSError, ValueError):
            self.broken = True
        return True

    def _enqueue(self, data: bytes, written: asyncio.Future[None] | None) -> None:
        if self._queue is None:
            self._queue = deque()
            self._flusher = asyncio.get_running_loop().create_task(self._flush(self._queue))
        self._queue.append((data, written))
        self._queued += len(data)

    async def _flush(self, queue: deque[tuple[bytes, asyncio.Future[None] | None]]) -> None:
        """Write the queued lines in order, a chunk at a time, waiting for the pipe
        between chunks; then leave the queue (the next long line starts another)."""
        transport, writer = self._transport, self._writer
        assert transport is not None and writer is not None
        try:
            while queue:
                data, written = queue[0]
                if not self.broken:
                    try:
                        await self._write_in_chunks(transport, writer, memoryview(data))
                    except (ConnectionError, RuntimeError, OSError, ValueError):
                        self.broken = True
                queue.popleft()
                self._queued -= len(data)
                del data  # the queue held the only other reference: freed now
                if written is not None and not written.done():
                    written.set_result(None)
        finally:
            for _, written in queue:  # cancelled (the loop is closing): nobody writes these
                if written is not None and not written.done():
                    written.set_result(None)
            self._queue, self._queued, self._flusher = None, 0, None

    async def _write_in_chunks(
        self, transport: asyncio.WriteTransport, writer: asyncio.StreamWriter, view: memoryview
    ) -> None:
        for start in range(0, len(view), _CHUNK):
            chunk = view[start : start + _CHUNK]
            transport.write(chunk)
            self._handed += len(chunk)
            if transport.get_write_buffer_size() > _CHUNK:
                await writer.drain()
        transport.write(_NEWLINE)
        self._handed += 1

    async def _flushed(self, flusher: asyncio.Task[None]) -> None:
        """Wait for the queued lines while the peer keeps reading them: TimeoutError
        after ``_GRACE_SECONDS`` in which nothing left, or ``_FLUSH_SECONDS`` in all."""
        assert self._transport is not None
        ceiling = time.monotonic() + _FLUSH_SECONDS
        gone = self._handed - self._transport.get_write_buffer_size()
        while not flusher.done():
            if time.monotonic() > ceiling:
                raise TimeoutError
            await asyncio.wait({flusher}, timeout=_GRACE_SECONDS)
            now = self._handed - self._transport.get_write_buffer_size()
            if not flusher.done() and now <= gone:
                raise TimeoutError
            gone = now

    def backed_up(self) -> bool:
        """Whether stdout holds more than the high-water mark the peer has not read."""
        return self._transport is not None and (
            self._queued > _HIGH_WATER or self._transport.get_write_buffer_size() > _HIGH_WATER
        )

    async def writable(self) -> None:
        """Wait while stdout is backed up past the high-water mark (the peer is not
        reading): until then no more of its requests are read."""
        if self._transport is None or self._writer is None or self.broken:
            return
        flusher = self._flusher
        if flusher is not None and self._queued > _HIGH_WATER:
            await asyncio.wait({flusher})
        if self._transport.get_write_buffer_size() > _HIGH_WATER:
            try:
                await self._writer.drain()
            except (ConnectionError, RuntimeError, OSError):
                self.broken = True

    async def close(self) -> None:
        """Flush every byte still buffered, then close stdout.

        ``drain`` alone returns once the buffer is under the transport's low-water mark,
        and the loop closing after it dropped the rest: the last answer reached a peer
        that read it late cut at 64 KB. So the limits go to zero (``drain`` now waits
        for an empty buffer), and the wait goes on while the peer keeps reading: it
        gives up after ``_GRACE_SECONDS`` in which nothing left, or after
        ``_FLUSH_SECONDS`` in all."""
        if self._writer is None or self._transport is None:
            return
        transport = self._transport
        try:
            if self._flusher is not None:  # the long lines still queued go first
                await self._flushed(self._flusher)
            transport.set_write_buffer_limits(high=0, low=0)
            left = transport.get_write_buffer_size()
            ceiling = time.monotonic() + _FLUSH_SECONDS
            while left:
                if time.monotonic() > ceiling:
                    raise TimeoutError
                try:
                    await asyncio.wait_for(self._writer.drain(), _GRACE_SECONDS)
                except TimeoutError:
                    if transport.get_write_buffer_size() >= left:
                        raise
                left = transport.get_write_buffer_size()
            self._writer.close()
            await asyncio.wait_for(self._writer.wait_closed(), _GRACE_SECONDS)
        except TimeoutError:
            left = transport.get_write_buffer_size() + self._queued
            log.warning("stdout: %d byte(s) the peer did not read in time are dropped", left)
            if self._flusher is not None:
                self._flusher.cancel()
            transport.abort()
        except (ConnectionError, RuntimeError, OSError):
            pass


def _pollable(file: BinaryIO) -> bool:
    """Can the event loop wait on ``file``? A pipe, a socket or a terminal can; a
    character device such as /dev/null is accepted by ``connect_read_pipe`` but then
    refused by epoll (EPERM) in a callback, and the server would wait forever."""
    try:
        fd = file.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


class _StdinLines(asyncio.Protocol):
    """A pipe stdin's lines handed to ``served`` in the loop's own callback, as they
    arrive: no task wakes to read them (one loop pass less per request). Back-pressure
    as ``_read``'s: reading pauses while ``served`` runs ``MAX_INFLIGHT`` requests or
    stdout is backed up, until there is room again. ``done`` is set when stdin ends."""

    def __init__(self, served: DuplexServer, writer: _Writer) -> None:
        self._served = served
        self._writer = writer
        self._lines = LineBuffer()
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.ReadTransport | None = None
        self._waking: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        self._stopped = False
        self.done: asyncio.Future[None] = self._loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.ReadTransport, transport)  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        if self._stopped:
            return
        too_long: LineTooLong | None = None
        try:
            complete = self._lines.feed(data)
        except LineTooLong as exc:  # the lines before it are served; it is answered
            complete, too_long = exc.lines, exc
        served = self._served
        for line in complete:
            if line.strip():
                served.receive_data(line)
        if too_long is not None:
            # Answered with the request's own id when its head names one, so its sender
            # stops waiting at once instead of at its deadline; else with id null.
            reply = error_response(request_id(too_long.head), InvalidRequest(f"Invalid Request: {too_long}"))
            sending = self._loop.create_task(self._writer.send(reply))
            self._sends.add(sending)
            sending.add_done_callback(self._sends.discard)
        if self._waking is None and (served.busy(MAX_INFLIGHT) or self._writer.backed_up()):
            assert self._transport is not None
            self._transport.pause_reading()
            self._waking = self._loop.create_task(self._resume_when_room())

    async def _resume_when_room(self) -> None:
        await self._writer.writable()
        await self._served.room(MAX_INFLIGHT)
        self._waking = None
        if not self._stopped and self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()

    def eof_received(self) -> bool:
        if not self._stopped:
            tail = self._lines.tail()
            if tail.strip():
                self._served.receive_data(tail)
        self._finish()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish()

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def stop(self) -> None:
        """Read no more (the server is stopping)."""
        self._stopped = True
        if self._waking is not None:
            self._waking.cancel()
        if self._transport is not None:
            self._transport.close()


async def _open_stdout(stdout: BinaryIO) -> _Writer:
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, stdout
        )
    except ValueError:
        return _Writer(None, stdout)
    return _Writer(asyncio.StreamWriter(transport, protocol, None, loop), stdout)


async def _connect_stdin(stdin: BinaryIO, served: DuplexServer, writer: _Writer) -> _StdinLines | None:
    """A pipe, socket or terminal stdin connected to a ``_StdinLines``; None when it
    cannot be polled (then ``_pump_stdin``)."""
    if not _pollable(stdin):
        return None
    loop = asyncio.get_running_loop()
    lines = _StdinLines(served, writer)
    try:
        await loop.connect_read_pipe(lambda: lines, stdin)
    except ValueError:
        return None
    return lines


def _pump_stdin(stdin: BinaryIO) -> asyncio.StreamReader:
    """A regular file (``< requests.jsonl``) or /dev/null (a background job's stdin)
    cannot be polled: a thread reads it into the returned reader."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_READ_CHUNK)

    def pump() -> None:
        read = getattr(stdin, "read1", stdin.read)
        while chunk := read(_READ_CHUNK):
            loop.call_soon_threadsafe(reader.feed_data, chunk)
        loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="modelctx-stdin", daemon=True).start()
    return reader


async def _read(reader: asyncio.StreamReader, served: DuplexServer, writer: _Writer) -> None:
    """Feed stdin's lines to ``served`` until stdin closes."""
    lines = LineBuffer()
    while True:
        await writer.writable()
        await served.room(MAX_INFLIGHT)
        chunk = await reader.read(_READ_CHUNK)
        if not chunk:
            tail = lines.tail()
            if tail.strip():
                served.receive_data(tail)
            return
        too_long: LineTooLong | None = None
        try:
            complete = lines.feed(chunk)
        except LineTooLong as exc:  # the lines before it are served; it is answered
            complete, too_long = exc.lines, exc
        for line in complete:
            if line.strip():
                served.receive_data(line)
        if too_long is not None:
            await writer.send(error_response(None, InvalidRequest(f"Invalid Request: {too_long}")))


async def serve_stdio_async(
    server: ServerApp, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> bool:
    """Serve ``server`` on the given pipes (default: this process's stdin and stdout).

    Returns False when some request ignored its cancellation and is still running.
    """
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    loop = asyncio.get_running_loop()
    async with server.running():
        writer = await _open_stdout(stdout)
        served = DuplexServer(server, writer.send, send_now=writer.send_now)
        lines = await _connect_stdin(stdin, served, writer)
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(signum, stop.set)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        reading: asyncio.Future[Any] = (
            lines.done if lines is not None else loop.create_task(_read(_pump_stdin(stdin), served, writer))
        )
        stopping = loop.create_task(stop.wait())
        try:
            await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if lines is not None:
                lines.stop()
            reading.cancel()
            # Listen streams end with their final response (subscriptions.mdx, Ending);
            # after stdin closed, running requests may still answer, until a signal
            # ends the grace. The handlers stay until the end: a client SIGTERMs a
            # server that has not exited once its own grace is over (stdio.mdx,
            # Shutdown), and without them that signal killed the process mid-grace,
            # its handlers never told.
            server.close_subscriptions()
            if stop.is_set():
                await served.drain(0.2)
            else:
                draining = loop.create_task(served.drain(_GRACE_SECONDS))
                await asyncio.wait({draining, stopping}, return_when=asyncio.FIRST_COMPLETED)
                draining.cancel()
            stopping.cancel()
            clean = await served.shutdown(_GRACE_SECONDS)
            for signum in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.remove_signal_handler(signum)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass
            await writer.close()
    return clean


def _threads_stopped(executor: ThreadPoolExecutor, grace: float) -> bool:
    """Stop the threads of the loop's default executor (``asyncio.to_thread`` in a
    handler); False if one is still busy after ``grace`` seconds (the interpreter would
    wait for it at exit, forever). Sync handlers themselves run on daemon workers
    (server/_threads.py), which never hold up the exit."""
    executor.shutdown(wait=False, cancel_futures=True)
    deadline = time.monotonic() + grace
    while True:
        busy = [t for t in threading.enumerate() if t.name.startswith(_THREAD_PREFIX) and t.is_alive()]
        if not busy:
            return True
        if time.monotonic() > deadline:
            log.warning("a handler's thread is still running; exiting without it")
            return False
        time.sleep(0.02)


def serve_stdio(server: ServerApp, loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None) -> None:
    """Run ``server`` on this process's stdin and stdout until stdin closes or SIGTERM.

    ``loop_factory``: the event loop to serve on (default: plain asyncio's).

    Returns when everything has stopped; when a handler will not stop (it swallows
    its cancellation, or a sync handler is stuck in its thread) the process exits
    here instead of waiting for it forever.
    """
    if not logging.getLogger().handlers:
        logging.basicConfig(
            stream=sys.stderr,
            level=os.environ.get("MODELCTX_LOG_LEVEL", "WARNING").upper(),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    settle_heap()
    # Plain asyncio by default: uvloop's pipe transports abort the process in some stdio
    # setups (stdout a regular file, for one); a caller that passes uvloop checks first.
    loop = (loop_factory or asyncio.new_event_loop)()
    executor = ThreadPoolExecutor(thread_name_prefix=_THREAD_PREFIX)
    loop.set_default_executor(executor)
    clean = False
    try:
        clean = loop.run_until_complete(serve_stdio_async(server))
        clean = _threads_stopped(executor, _GRACE_SECONDS) and clean
    finally:
        if clean:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
    if not clean:
        # Something will not stop (asyncio.run would wait for it forever, and so would
        # the interpreter for a worker thread): leave without it.
        logging.shutdown()
        sys.stderr.flush()
        os._exit(0)
