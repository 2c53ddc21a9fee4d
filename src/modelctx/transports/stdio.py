"""The stdio transport, server side: newline-delimited JSON on stdin and stdout.

basic/transports/stdio.mdx: one message per line; logs go to stderr, never stdout.
Every request runs as its own task, so requests are handled concurrently and
``notifications/cancelled`` cancels the task of the request it names. A malformed line
is answered with the JSON-RPC error it deserves and the connection goes on. The server
stops when stdin closes (after a short grace for requests still running) or on
SIGTERM/SIGINT.

The stdio process is one connection: after ``initialize`` it carries a handshake
session, and modern requests on the same pipe are still served statelessly.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import Any, BinaryIO

from ..errors import InvalidRequest, ProtocolError
from ..protocol._framing import LineBuffer
from ._tuning import settle_heap
from ..protocol._jsonrpc import Notification, Request, Response, decode, encode, error_response

__all__ = ["serve_stdio", "serve_stdio_async", "StdioPeer"]

log = logging.getLogger("modelctx.stdio")

_NEWLINE = b"\n"
_HIGH_WATER = 1 << 20
_GRACE_SECONDS = 2.0


class StdioPeer:
    """The client at the other end of the pipes."""

    def __init__(self, write) -> None:
        self.session = None
        self.principal = None
        self.inflight: dict[Any, asyncio.Task] = {}
        self._write = write

    def open_session(self, session) -> None:
        self.session = session
        session.outbound = self._write


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
            if self._transport is None:
                self._file.write(data)
                self._file.flush()
                return
            self._transport.write(data)
            if self._transport.get_write_buffer_size() > _HIGH_WATER:
                await self._writer.drain()
        except (ConnectionError, RuntimeError, OSError, ValueError):
            self.broken = True

    async def close(self) -> None:
        if self._writer is None:
            return
        try:
            await self._writer.drain()
            self._writer.close()
        except (ConnectionError, RuntimeError):
            pass


async def _open_pipes(stdin: BinaryIO, stdout: BinaryIO) -> tuple[asyncio.StreamReader, _Writer]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 16)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    except ValueError:
        # A regular file (``< requests.jsonl``) is no pipe: read it on a thread.
        def pump() -> None:
            read = getattr(stdin, "read1", stdin.read)
            while chunk := read(1 << 16):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
            loop.call_soon_threadsafe(reader.feed_eof)

        loop.run_in_executor(None, pump)
    try:
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, stdout
        )
    except ValueError:
        return reader, _Writer(None, stdout)
    return reader, _Writer(asyncio.StreamWriter(transport, protocol, None, loop), stdout)


async def serve_stdio_async(
    server: Any, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> None:
    """Serve ``server`` on the given pipes (default: this process's stdin and stdout)."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    await server.start()  # the server's lifespan (and loop); stopped at the end of the finally
    reader, writer = await _open_pipes(stdin, stdout)
    send = writer.send
    peer = StdioPeer(send)
    dispatcher = server.dispatcher
    inflight = peer.inflight
    lines = LineBuffer()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(signum, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):
            pass

    async def run(request: Request) -> None:
        try:
            response = await dispatcher.handle(request, peer, send)
        except asyncio.CancelledError:
            return  # cancelled: nothing more is sent for this request
        finally:
            if inflight.get(request.id) is asyncio.current_task():
                del inflight[request.id]
        # A handler may swallow its CancelledError and return; the request was still
        # cancelled, so its response must not be sent (basic/transports/stdio.mdx).
        if response is not None and not asyncio.current_task().cancelling():
            await send(response)

    def on_line(line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = decode(line)
        except ProtocolError as exc:
            loop.create_task(send(error_response(exc.request_id, exc)))
            return
        if type(message) is Request:
            if message.id in inflight:
                # Answering with that id would look like the answer to the request still
                # running, so the error names the id in its text only.
                error = InvalidRequest(f"Invalid Request: id {message.id!r} is already in use")
                loop.create_task(send(error_response(None, error)))
                return
            inflight[message.id] = loop.create_task(run(message))
        elif type(message) is Notification:
            dispatcher.notification(message.method, message.params, peer)
        elif type(message) is Response:
            session = peer.session
            if session is None or not session.deliver(message):
                log.debug("ignored a response to an unknown request id %r", message.id)

    async def read_loop() -> None:
        while True:
            chunk = await reader.read(1 << 16)
            if not chunk:
                tail = lines.tail()
                if tail:
                    on_line(tail)
                return
            try:
                for line in lines.feed(chunk):
                    on_line(line)
            except ValueError as exc:  # a line too long to hold: answer and go on
                await send(error_response(None, InvalidRequest(f"Invalid Request: {exc}")))

    reading = loop.create_task(read_loop())
    stopping = loop.create_task(stop.wait())
    try:
        await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if inflight and not stop.is_set():
            # stdin closed: give running requests a moment to answer, then stop.
            await asyncio.wait(list(inflight.values()), timeout=_GRACE_SECONDS)
    finally:
        reading.cancel()
        stopping.cancel()
        if peer.session is not None:
            peer.session.close()
        server.close_subscriptions()
        for task in list(inflight.values()):
            task.cancel()
        if inflight:
            await asyncio.wait(list(inflight.values()), timeout=1.0)
        await writer.close()
        await server.stop()


def serve_stdio(server: Any) -> None:
    """Run ``server`` on this process's stdin and stdout until stdin closes or SIGTERM."""
    if not logging.getLogger().handlers:
        logging.basicConfig(
            stream=sys.stderr,
            level=os.environ.get("MODELCTX_LOG_LEVEL", "WARNING").upper(),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    settle_heap()
    # Plain asyncio: uvloop's pipe transports abort the process when stdio closes.
    asyncio.run(serve_stdio_async(server))
