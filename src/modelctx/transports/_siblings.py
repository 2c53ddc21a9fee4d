"""Worker processes without Redis: a request for another worker's session is relayed there.

With ``--workers N`` and no Redis, a handshake-era session lives in the worker that ran
its ``initialize``, and the kernel hands each new connection to any worker. A client
whose answer to an elicitation (or a sampling or roots request) reached another worker
got 202 there and its tool waited for the answer until its deadline (0 of 6 calls of our
Client succeeded); any other request of the session got 404 and made the client start
over. So each worker is reachable by its siblings, and what belongs to a session goes to
the worker holding it:

- Before it forks, the parent makes a directory of its own (``mkdtemp``: mode 0700, so
  only this user reaches it) and binds one Unix socket in it per worker slot
  (``w0.sock``...). A worker serves its slot's socket beside the shared TCP socket (the
  same uvicorn, the same app); a worker restarted in the slot inherits the socket again,
  so a connection made while it restarts waits in the backlog instead of failing.
- A session's id names the slot of the worker that opened it (``w1-<32 hex digits>``).
- Tasks, when each worker keeps its own (a task store in memory, ``per_process``): a
  task's id names the worker that created it (``w1-...``), and a request outside a
  session for a task (``tasks/get``, ``tasks/update``, ``tasks/cancel`` of 2026-07-28,
  whose ``Mcp-Name`` header is its ``taskId``) goes to that worker like a session's.
  A task is lost with its worker; a task file or Redis keeps tasks for every worker.
- A request naming another slot's session (POST, GET, DELETE) is relayed whole to that
  worker's socket before this worker reads or checks anything of it but its body's size
  and arrival (``max_body``, ``body_timeout``), and the reply, JSON or SSE, is streamed
  back as it comes. The holder does everything it does for a request that reached it
  directly: authentication, the principal check, 202 once an answer is handed to the
  request waiting for it, 404 when the session is gone. The client leaving closes the
  relayed connection, which the holder sees as its client leaving (cancellation).

The choice: the other way, forwarding only a client's answers and cancellations as the
Redis store does (``RedisSessionStore.forward``), would leave every other request of the
session on the wrong worker with 404, and would need an acknowledgement of its own to
answer 202 only once the answer is handed over. A relay of the whole request carries
all of them, and the holder's own reply is that acknowledgement. The cost is one local
hop for the requests that land on the wrong worker (about half of those on a new
connection, with two workers); requests on a kept-alive connection stay where they are.

When the holder cannot be reached (its connection refused or cut before a reply), the
session ended with it: the caller answers 404 so the client opens a new one; a holder
not accepting within ``CONNECT_DEADLINE`` seconds gets 503 and Retry-After. With Redis
the workers share their sessions there instead and this module is not used.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import tempfile

from ._asgi import ASGISend, Receive, Scope, wait_disconnect
from ._http11 import ConnectTimeout, Http11Pool, HttpError

__all__ = ["GONE", "BUSY", "Siblings"]

#: Seconds a relayed request may wait for the holder to accept its connection.
CONNECT_DEADLINE = 2.0
#: Seconds the holder may take to read the relayed request (at most ``max_body`` bytes).
WRITE_DEADLINE = 10.0
GONE = "gone"  # relay(): the holder is not there (the session ended with it)
BUSY = "busy"  # relay(): the holder did not accept the connection in time

# Framing and connection headers belong to each hop; uvicorn writes its own date and
# server headers on the reply.
_HOP_REQUEST = frozenset({b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"te",
                          b"upgrade", b"proxy-connection", b"expect"})  # fmt: skip
_HOP_REPLY = frozenset({"connection", "keep-alive", "transfer-encoding", "date", "server"})


class Siblings:
    """The Unix sockets of the ``count`` workers of one server, bound by the parent.

    ``enter(slot)``, in a worker, makes that worker ``slot`` and returns its socket;
    ``name``, ``holder`` and ``relay`` are then what the worker's app uses. ``close()``
    in the parent removes the sockets and their directory.
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.slot: int | None = None
        self._creator = os.getpid()
        self.directory = tempfile.mkdtemp(prefix="modelctx-workers-")  # 0700
        self._sockets: list[socket.socket] = []
        self._pools: dict[int, Http11Pool] = {}
        try:
            for slot in range(count):
                listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self._sockets.append(listening)
                listening.bind(self.path(slot))
                listening.listen(2048)
        except OSError:
            self.close()
            raise

    def path(self, slot: int) -> str:
        return os.path.join(self.directory, f"w{slot}.sock")

    def enter(self, slot: int) -> socket.socket:
        """Make this process worker ``slot`` (in the forked child); its socket to serve."""
        self.slot = slot
        for other, listening in enumerate(self._sockets):
            if other != slot:
                listening.close()  # only the parent and the slot's worker hold a socket
        return self._sockets[slot]

    def name(self, session_id: str) -> str:
        """``session_id`` renamed to name this worker's slot."""
        return f"w{self.slot}-{session_id}"

    def holder(self, session_id: str) -> int | None:
        """The slot of the other worker that holds ``session_id``; None when it is this
        worker's, or names no worker (it is then unknown here, as any stranger's id)."""
        if not session_id.startswith("w"):
            return None
        slot, dash, _ = session_id[1:4].partition("-")
        if not dash or not slot.isdigit():
            return None
        number = int(slot)
        return number if number < self.count and number != self.slot else None

    async def relay(self, slot: int, scope: Scope, body: bytes, receive: Receive, send: ASGISend) -> str | None:
        """Send the request of ``scope`` with ``body`` to worker ``slot`` and stream its
        reply back on ``send``; None once that is done (or the client left), else
        ``GONE`` or ``BUSY`` with nothing sent, for the caller to answer."""
        exchange = asyncio.ensure_future(self._exchange(self._pool(slot), _request(scope, body), send))
        gone = asyncio.ensure_future(wait_disconnect(receive))
        try:
            await asyncio.wait({exchange, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not exchange.done():
                # The client left (or this worker stops): closing the relayed connection
                # tells the holder its client left.
                exchange.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait({exchange})
        if exchange.cancelled():
            return None
        return exchange.result()

    async def _exchange(self, pool: Http11Pool, data: bytes, send: ASGISend) -> str | None:
        try:
            response = await pool.request(
                data, connect_timeout=CONNECT_DEADLINE, read_timeout=None, write_timeout=WRITE_DEADLINE
            )
        except ConnectTimeout:
            return BUSY
        except HttpError:
            return GONE
        try:
            headers = [
                (name.encode("latin-1"), value.encode("latin-1"))
                for name, value in response.headers.items()
                if name not in _HOP_REPLY
            ]
            await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
            try:
                async for chunk in response.aiter_bytes():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except HttpError:
                # The holder went away mid-reply: return unfinished, so uvicorn closes the
                # connection and the client sees the reply cut, not ended.
                return None
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went first
        finally:
            response.release()
        return None

    def _pool(self, slot: int) -> Http11Pool:
        pool = self._pools.get(slot)
        if pool is None:
            pool = self._pools[slot] = Http11Pool("localhost", 0, tls=None, max_idle=16, unix=self.path(slot))
        return pool

    def disconnect(self) -> None:
        """Close the kept relay connections (the worker stops)."""
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            pool.close()

    def close(self) -> None:
        """Close the sockets; in the parent that made them, remove them and their directory."""
        for listening in self._sockets:
            listening.close()
        if os.getpid() == self._creator:
            shutil.rmtree(self.directory, ignore_errors=True)


def _request(scope: Scope, body: bytes) -> bytes:
    """The request of ``scope`` as HTTP/1.1 bytes, its headers as the client sent them
    (Host included, so the holder's DNS-rebinding guard sees what this worker saw)."""
    target = scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string")
    if query:
        target += b"?" + query
    lines = [b"%s %s HTTP/1.1\r\n" % (scope["method"].encode(), target)]
    lines += [name + b": " + value + b"\r\n" for name, value in scope["headers"] if name not in _HOP_REQUEST]
    lines.append(b"content-length: %d\r\n\r\n" % len(body))
    return b"".join(lines) + body
