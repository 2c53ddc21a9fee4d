"""A loopback TCP proxy that cuts a connection in the middle of a reply, as a failing
network does, for the tests of resumable SSE streams (issue 20)."""

from __future__ import annotations

import asyncio

__all__ = ["CuttingProxy"]


class CuttingProxy:
    """``async with CuttingProxy(port) as proxy``: ``proxy.url`` relays to 127.0.0.1:``port``
    and cuts the first connection whose reply carries a notification, right after
    relaying the bytes that held it; later connections pass untouched. ``cuts`` counts
    the cuts made (0 or 1)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.cuts = 0
        self.url = ""
        self._armed = True
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> CuttingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/mcp"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.port)

        async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, replies: bool) -> None:
            try:
                while chunk := await reader.read(65536):
                    writer.write(chunk)
                    await writer.drain()
                    if replies and self._armed and b"notifications/" in chunk:
                        self._armed = False
                        self.cuts += 1
                        break
            except OSError:
                pass
            for each in (client_writer, upstream_writer):
                each.close()

        await asyncio.gather(pump(client_reader, upstream_writer, False), pump(upstream_reader, client_writer, True))
