"""The server's lifespan: startup and shutdown code around everything that serves it.

An author passes ``Server(name, lifespan=fn)``, where ``fn(server)`` returns an async
context manager (Starlette's and FastMCP's shape). What it yields is the lifespan context
handlers read as ``ctx.lifespan_context``: a database pool, an HTTP client, a model.

Several things may serve one server in one process at once: the HTTP app's ASGI lifespan,
an in-process ``Client(server)`` opened inside a handler or a test, a worker. The lifespan
must run once for all of them, so ``LifespanHolds`` counts holders: the first ``acquire``
enters the lifespan, the last ``release`` leaves it, and those in between only wait for the
startup to finish.

The lifespan runs in a task of its own, entered and left in that one task, so a lifespan
that opens a task group or a cancel scope (anyio, ``asyncio.TaskGroup``) works even when
the holder that started it is not the one that ends it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from ..errors import MCPError

__all__ = ["Lifespan", "LifespanHolds", "StartupError"]

log = logging.getLogger("modelctx.server")

#: ``fn(server)`` returning an async context manager; what it yields is the lifespan context.
Lifespan = Callable[[Any], AbstractAsyncContextManager[Any]]


class StartupError(MCPError):
    """The server's lifespan raised while starting; ``__cause__`` is what it raised.

    Nothing was served. stdio exits with status 1 and this message on stderr; HTTP answers
    the ASGI ``lifespan.startup.failed`` (uvicorn then exits); an in-process client's
    ``async with Client(server)`` raises it.
    """


class LifespanHolds:
    """A reference-counted hold on one server's lifespan (see the module docstring)."""

    def __init__(self, server: Any, lifespan: Lifespan | None) -> None:
        self._server = server
        self._lifespan = lifespan
        self._holders = 0
        self._task: asyncio.Task[None] | None = None
        self._started: asyncio.Future[None] | None = None
        self._stop: asyncio.Event | None = None
        self.context: Any = None
        self._up = False

    @property
    def configured(self) -> bool:
        """Was the server given a lifespan at all?"""
        return self._lifespan is not None

    @property
    def running(self) -> bool:
        """Has the lifespan finished starting, and not begun stopping?"""
        return self._up

    async def acquire(self) -> None:
        """Hold the lifespan; start it if this is the first hold.

        Raises ``StartupError`` if the lifespan fails to start (this hold is then
        released), or ``RuntimeError`` when called from another event loop than the one the
        lifespan runs on.
        """
        loop = asyncio.get_running_loop()
        if self._task is not None and (self._task.done() or self._task.get_loop().is_closed()):
            # Holds left behind by an event loop that has ended (a client never closed
            # before asyncio.run returned): nothing runs any more, start afresh.
            self._task, self._holders, self._up, self.context = None, 0, False, None
        if self._task is not None and self._task.get_loop() is not loop:
            raise RuntimeError(
                f"server {self._server.name!r} is already running on another event loop; "
                "serve it from one loop (or one process per loop)"
            )
        self._holders += 1
        try:
            if self._task is None:
                self._started = loop.create_future()
                self._stop = asyncio.Event()
                self._task = loop.create_task(
                    self._hold(self._started, self._stop), name=f"lifespan of {self._server.name!r}"
                )
            assert self._started is not None
            # shield: a holder cancelled while waiting must not cancel the shared startup.
            await asyncio.shield(self._started)
        except BaseException:
            await self.release()
            raise

    async def release(self) -> None:
        """Let go of one hold; the last one runs the lifespan's shutdown and waits for it.

        An exception raised by the shutdown code reaches the caller of the last release.
        """
        if self._holders <= 0:
            raise RuntimeError(f"server {self._server.name!r}: stop() without a matching start()")
        self._holders -= 1
        if self._holders > 0 or self._task is None:
            return
        task, stop = self._task, self._stop
        self._task = None
        assert stop is not None
        stop.set()
        try:
            await task
        finally:
            self.context = None

    async def _hold(self, started: asyncio.Future[None], stop: asyncio.Event) -> None:
        try:
            manager = await self._enter(started)
            if manager is None:
                return
            self._up = True
            try:
                await stop.wait()
            finally:  # released, or cancelled because the loop is closing: shut down either way
                self._up = False
                await manager.__aexit__(None, None, None)
        finally:
            if not started.done():  # cancelled while starting: the holders stop waiting
                started.cancel()

    async def _enter(self, started: asyncio.Future[None]) -> AbstractAsyncContextManager[Any] | None:
        """Run the startup; the entered manager, or ``None`` when it failed (``started``
        then holds the ``StartupError``)."""
        manager: AbstractAsyncContextManager[Any] = _Nothing()
        try:
            if self._lifespan is not None:
                manager = self._lifespan(self._server)
                if not isinstance(manager, AbstractAsyncContextManager):
                    raise TypeError(
                        f"lifespan {self._lifespan!r} returned {type(manager).__name__}, not an async "
                        "context manager; decorate the async generator with "
                        "@contextlib.asynccontextmanager"
                    )
            self.context = await manager.__aenter__()
        except Exception as exc:
            error = StartupError(
                f"server {self._server.name!r} failed to start: its lifespan raised "
                f"{type(exc).__name__}: {exc}"
            )
            ours = isinstance(exc, StartupError)  # says what failed (Redis unreachable): no traceback
            if ours:
                error = StartupError(f"server {self._server.name!r} failed to start: {exc}")
            error.__cause__ = exc
            log.error("%s", error, exc_info=None if ours else exc)
            started.set_exception(error)
            started.exception()  # marked retrieved: holders raise it, none has to
            return None
        started.set_result(None)
        return manager


class _Nothing(AbstractAsyncContextManager[None]):
    """The lifespan of a server that has none: its context is ``None``."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc_info: object) -> None:
        return None
