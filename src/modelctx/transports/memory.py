"""An in-process transport: a client talks to a ``Server`` object with no sockets or pipes.

Messages still go through JSON encoding and decoding, so what the client sees is
exactly what a real transport would deliver; only the bytes never leave the process.
The server side is the same ``DuplexServer`` that serves stdio. Meant for tests and for
embedding a server in the same program as its client.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..errors import ConnectionClosed
from ..protocol import decode, encode, notification
from ._duplex import DuplexServer
from .client_seam import ClientTransport, Outgoing, TransportEvents
from .server_seam import ServerApp

__all__ = ["MemoryTransport"]

_GRACE_SECONDS = 2.0


class MemoryTransport(ClientTransport):
    kind = "stdio"  # one duplex connection, like a pipe

    def __init__(self, server: ServerApp, principal: Any = None) -> None:
        self.server = server
        self.name = f"in-process server {server.name!r}"
        self._events: TransportEvents | None = None
        self._served: DuplexServer | None = None
        self._running: contextlib.AsyncExitStack | None = None
        self._closed = False
        self._principal = principal

    async def connect(self, events: TransportEvents) -> None:
        self._events = events
        self._running = contextlib.AsyncExitStack()
        await self._running.enter_async_context(self.server.running())
        self._served = DuplexServer(self.server, self._to_client, self._principal)

    async def _to_client(self, message: dict[str, Any]) -> None:
        if not self._closed and self._events is not None:
            self._events.message(decode(encode(message)))

    async def send(self, outgoing: Outgoing) -> None:
        if self._closed or self._served is None:
            raise ConnectionClosed(f"{self.name}: the connection is closed")
        self._served.receive_data(encode(outgoing.message))

    async def cancel(self, request_id: str | int, reason: str | None = None) -> None:
        if self._served is not None and not self._closed:
            params: dict[str, Any] = {"requestId": request_id}
            if reason:
                params["reason"] = reason
            self._served.receive_data(encode(notification("notifications/cancelled", params)))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._served is not None:
            await self._served.shutdown(_GRACE_SECONDS)
        if self._running is not None:
            await self._running.aclose()
