"""A handshake-era session: the state ``initialize`` creates (2025-11-25 lifecycle.mdx).

On stdio the session is the process's one connection; on Streamable HTTP it is named
by ``Mcp-Session-Id``. It remembers the negotiated version and the client's
capabilities, the ``logging/setLevel`` threshold and ``resources/subscribe`` URIs, and
carries the server-to-client requests of that era (elicitation, sampling, roots),
matching their responses by id. Modern requests never touch a session.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import ConnectionClosed, error_from_wire
from ..protocol._jsonrpc import Response

__all__ = ["HandshakeSession"]

Send = Callable[[dict[str, Any]], Awaitable[None]]


class HandshakeSession:
    def __init__(
        self,
        session_id: str | None,
        version: str,
        capabilities: dict[str, Any],
        client_info: dict[str, Any] | None,
    ) -> None:
        self.id = session_id
        self.version = version
        self.capabilities = capabilities
        self.client_info = client_info
        self.initialized = False
        self.log_rank: int | None = 0  # every level until logging/setLevel says otherwise
        self.subscriptions: set[str] = set()
        self.last_seen = time.monotonic()
        self.closed = False
        # Where messages unrelated to any request go (stdout, or the HTTP GET stream).
        self.outbound: Send | None = None
        self.inflight: dict[str | int, asyncio.Task] = {}
        self._pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self.listener: asyncio.Task | None = None
        self.http_stream_open = False  # an HTTP GET stream is attached
        # Responses ended early that the client may resume with GET and Last-Event-ID,
        # by stream id, oldest first (transports/http.py keeps and bounds them).
        self.streams: dict[str, Any] = {}

    def touch(self) -> None:
        self.last_seen = time.monotonic()

    async def request(self, method: str, params: dict[str, Any], send: Send, timeout: float) -> Any:
        """Send a server-to-client request on ``send`` and wait for its result."""
        if self.closed:
            raise ConnectionClosed(f"the session closed before {method} could be sent")
        request_id = next(self._ids)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(
                f"the client did not answer {method} within {timeout:g}s"
            ) from None
        finally:
            self._pending.pop(request_id, None)

    def deliver(self, response: Response) -> bool:
        """Hand a client's response to the request waiting for it; False if none is."""
        future = self._pending.get(response.id) if isinstance(response.id, int) else None
        if future is None or future.done():
            return False
        if response.error is not None:
            future.set_exception(error_from_wire(response.error))
        else:
            future.set_result(response.result)
        return True

    def close(self) -> None:
        self.closed = True
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionClosed("the session was closed"))
        self._pending.clear()
        for task in list(self.inflight.values()):
            task.cancel()
        if self.listener is not None:
            self.listener.cancel()
        for stream in self.streams.values():
            stream.end()  # a client resuming it gets what is kept, then the end
        self.streams.clear()
