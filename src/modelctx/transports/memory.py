"""An in-process transport: a client talks to a ``Server`` object with no sockets or pipes.

Messages still go through JSON encoding and decoding, so what the client sees is
exactly what a real transport would deliver; only the bytes never leave the process.
Meant for tests and for embedding a server in the same program as its client.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ._base import ClientTransport, Outgoing, TransportEvents
from ..errors import ConnectionClosed
from ..protocol._jsonrpc import Notification, Request, Response, decode, encode

__all__ = ["MemoryTransport"]


class _Peer:
    def __init__(self, deliver) -> None:
        self.session = None
        self.principal = None
        self.inflight: dict[Any, asyncio.Task] = {}
        self._deliver = deliver

    def open_session(self, session) -> None:
        self.session = session
        session.outbound = self._deliver


class MemoryTransport(ClientTransport):
    kind = "stdio"  # one duplex connection, like a pipe

    def __init__(self, server: Any, principal: Any = None) -> None:
        self.server = server
        self.name = f"in-process server {server.name!r}"
        self._events: TransportEvents | None = None
        self._peer: _Peer | None = None
        self._closed = False
        self._principal = principal

    async def connect(self, events: TransportEvents) -> None:
        await self.server.start()  # the server's lifespan (and loop); close() stops it
        self._events = events
        self._peer = _Peer(self._to_client)
        self._peer.principal = self._principal

    async def _to_client(self, message: dict[str, Any]) -> None:
        if not self._closed and self._events is not None:
            self._events.message(decode(encode(message)))

    async def send(self, outgoing: Outgoing) -> None:
        if self._closed or self._peer is None:
            raise ConnectionClosed(f"{self.name}: the connection is closed")
        message = decode(encode(outgoing.message))
        peer = self._peer
        dispatcher = self.server.dispatcher
        if type(message) is Request:
            peer.inflight[message.id] = asyncio.get_running_loop().create_task(self._run(message))
        elif type(message) is Notification:
            dispatcher.notification(message.method, message.params, peer)
        elif type(message) is Response and peer.session is not None:
            peer.session.deliver(message)

    async def _run(self, request: Request) -> None:
        assert self._peer is not None
        try:
            response = await self.server.dispatcher.handle(request, self._peer, self._to_client)
        except asyncio.CancelledError:
            return
        finally:
            self._peer.inflight.pop(request.id, None)
        if response is not None:
            await self._to_client(response)

    async def cancel(self, request_id: str | int, reason: str | None = None) -> None:
        if self._peer is not None:
            task = self._peer.inflight.get(request_id)
            if task is not None:
                task.cancel()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._peer is not None:
            for task in list(self._peer.inflight.values()):
                task.cancel()
            if self._peer.session is not None:
                self._peer.session.close()
            await self.server.stop()
