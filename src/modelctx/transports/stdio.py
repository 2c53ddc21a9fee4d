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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO

from ..errors import InvalidRequest
from ..protocol._framing import LineBuffer, LineTooLong
from ..protocol._jsonrpc import encode, error_response
from ._duplex import DuplexServer
from ._seam import ServerApp
from ._tuning import settle_heap

__all__ = ["serve_stdio", "serve_stdio_async"]

log = logging.getLogger("modelctx.stdio")

_NEWLINE = b"\n"
_HIGH_WATER = 1 << 20
_GRACE_SECONDS = 2.0
_READ_CHUNK = 1 << 16
_THREAD_PREFIX = "modelctx-stdio-worker"
# Requests served at once; past it stdin is not read until one ends. With the write
# back-pressure below, this bounds what a peer can make the server hold: a peer that
# sends without reading the answers, or floods slow requests, waits instead.
MAX_INFLIGHT = 1024


class _Writer:
    """Writes whole lines to stdout; waits for the pipe only when it backs up.

    A stdout that is a regular file (output redirected to disk) gets plain writes.
    """

    def __init__(self, writer: asyncio.StreamWriter | None, file: BinaryIO) -> None:
        self._writer = writer
        self._transport = writer.transport if writer is not None else None
        self._file = file
        self.broken = False

    async def send(self, message: dict[str, Any]) -> None:
        if self.broken:
            return
        data = encode(message) + _NEWLINE
        try:
            if self._transport is None or self._writer is None:
                self._file.write(data)
                self._file.flush()
                return
            self._transport.write(data)
            if self._transport.get_write_buffer_size() > _HIGH_WATER:
                await self._writer.drain()
        except (ConnectionError, RuntimeError, OSError, ValueError):
            self.broken = True

    async def writable(self) -> None:
        """Wait while stdout is backed up past the high-water mark (the peer is not
        reading): until then no more of its requests are read."""
        if self._transport is None or self._writer is None or self.broken:
            return
        if self._transport.get_write_buffer_size() > _HIGH_WATER:
            try:
                await self._writer.drain()
            except (ConnectionError, RuntimeError, OSError):
                self.broken = True

    async def close(self) -> None:
        if self._writer is None:
            return
        try:
            await asyncio.wait_for(self._writer.drain(), _GRACE_SECONDS)
            self._writer.close()
        except (TimeoutError, ConnectionError, RuntimeError, OSError):
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


async def _open_pipes(stdin: BinaryIO, stdout: BinaryIO) -> tuple[asyncio.StreamReader, _Writer]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_READ_CHUNK)
    try:
        if not _pollable(stdin):
            raise ValueError("not a pipe")
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    except ValueError:
        # A regular file (``< requests.jsonl``) or /dev/null (a background job's stdin)
        # cannot be polled: read it on a thread.
        def pump() -> None:
            read = getattr(stdin, "read1", stdin.read)
            while chunk := read(_READ_CHUNK):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
            loop.call_soon_threadsafe(reader.feed_eof)

        threading.Thread(target=pump, name="modelctx-stdin", daemon=True).start()
    try:
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, stdout
        )
    except ValueError:
        return reader, _Writer(None, stdout)
    return reader, _Writer(asyncio.StreamWriter(transport, protocol, None, loop), stdout)


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
        reader, writer = await _open_pipes(stdin, stdout)
        served = DuplexServer(server, writer.send)
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(signum, stop.set)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        reading = loop.create_task(_read(reader, served, writer))
        stopping = loop.create_task(stop.wait())
        try:
            await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
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
