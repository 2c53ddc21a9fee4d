"""An ASGI app called in this process: its lifespan run around the server's, its state shared.

``Server.from_asgi`` calls the app through ``httpx.ASGITransport``, which sends HTTP scopes
only. An app that opens a database pool at startup (FastAPI's ``lifespan=``, Starlette's
``on_startup``) needs its ASGI lifespan run too, so the server's lifespan runs it: a
``lifespan.startup`` message before the first call, ``lifespan.shutdown`` after the last
(the ASGI lifespan protocol). What the app's lifespan yields as state is given to every
request, as an ASGI server does (``scope["state"]``, a shallow copy each time). An app that
does not speak the lifespan protocol (it raises on the scope) is served without one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

from .._lifespan import StartupError

__all__ = ["InProcessApp"]

log = logging.getLogger("modelctx.server.openapi")

SHUTDOWN_SECONDS = 10.0


class InProcessApp:
    """``app`` as the ASGI callable a transport calls, with its lifespan's state in scope."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.state: dict[str, Any] = {}

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            scope = {**scope, "state": dict(self.state)}
        await self.app(scope, receive, send)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the app's lifespan around the block. Raises ``StartupError`` if its startup fails."""
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        started: asyncio.Future[None] = loop.create_future()
        stopped: asyncio.Future[None] = loop.create_future()

        async def send(message: dict[str, Any]) -> None:
            kind = message.get("type")
            target = started if kind in ("lifespan.startup.complete", "lifespan.startup.failed") else stopped
            if target.done():
                return
            if kind is not None and kind.endswith(".failed"):
                target.set_exception(StartupError(f"the ASGI app's lifespan failed: {message.get('message', '')}"))
            else:
                target.set_result(None)

        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.state}
        task = asyncio.create_task(self.app(scope, inbox.get, send))
        await inbox.put({"type": "lifespan.startup"})
        await asyncio.wait({task, started}, return_when=asyncio.FIRST_COMPLETED)
        if not started.done():  # the app returned or raised: it has no lifespan to run
            if not task.cancelled() and task.exception() is not None:
                log.debug("the ASGI app does not support the lifespan protocol: %r", task.exception())
            yield
            return
        if started.exception() is not None:
            # Starlette raises the failure again after reporting it: collect it, it is logged.
            await asyncio.wait({task}, timeout=SHUTDOWN_SECONDS)
            if task.done() and not task.cancelled() and task.exception() is not None:
                log.error("the ASGI app's lifespan raised", exc_info=task.exception())
            started.result()  # raises the StartupError
        try:
            yield
        finally:
            await inbox.put({"type": "lifespan.shutdown"})
            done, _ = await asyncio.wait({task, stopped}, timeout=SHUTDOWN_SECONDS, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                log.warning("the ASGI app's lifespan did not shut down within %g s", SHUTDOWN_SECONDS)
                task.cancel()
            elif stopped.done() and stopped.exception() is not None:
                log.warning("%s", stopped.exception())
