"""A blocking face for the async ``Client``, for tests without an async test runner.

One event loop runs on a background thread (``LoopThread``); ``SyncClient`` sends each
call of the wrapped ``Client`` to it and waits for the answer, with a deadline.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from ..client import Client

__all__ = ["LoopThread", "SyncClient"]

_T = TypeVar("_T")
_GRACE = 2.0  # seconds past a deadline before the loop thread's own bound cuts in


class LoopThread:
    """An event loop on a daemon thread; ``run`` waits for a coroutine on it.

    ``open(cm)`` enters an async context manager there and remembers it; ``close()``
    leaves every one, newest first, then stops the loop and joins the thread."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.loop = asyncio.new_event_loop()
        self._opened: list[AbstractAsyncContextManager[Any]] = []
        self._thread = threading.Thread(target=self._serve, name="modelctx-testing-loop", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coroutine: Coroutine[Any, Any, _T], timeout: float | None = None) -> _T:
        """The result of ``coroutine``, run on the loop; ``TimeoutError`` (the coroutine
        cancelled) when it runs past ``timeout`` (default: this loop's) and a short grace."""
        limit = self.timeout if timeout is None else timeout
        # The grace lets the client's own deadline (the same number) win, which also tells
        # the server to stop; wait_for catches a wait that has none, and result()'s bound
        # only a loop that hangs.
        future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coroutine, limit + _GRACE), self.loop)
        return future.result(limit + 2 * _GRACE)

    def open(self, context: AbstractAsyncContextManager[_T]) -> _T:
        value = self.run(context.__aenter__())
        self._opened.append(context)
        return value

    def close(self) -> None:
        errors: list[BaseException] = []
        while self._opened:
            try:
                self.run(self._opened.pop().__aexit__(None, None, None))
            except Exception as exc:  # noqa: BLE001 - keep closing the others, then raise the first
                errors.append(exc)
        # Not through run(): its wait_for would be one more task, and this one cancels all others.
        asyncio.run_coroutine_threadsafe(self._cancel_leftovers(), self.loop).result(self.timeout + 2 * _GRACE)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(self.timeout)
        if not self._thread.is_alive():
            self.loop.close()
        if errors:
            raise errors[0]

    async def _cancel_leftovers(self) -> None:
        leftovers = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in leftovers:
            task.cancel()
        if leftovers:
            await asyncio.wait(leftovers, timeout=self.timeout)
        await self.loop.shutdown_asyncgens()


class SyncClient:
    """A ``Client`` whose coroutine methods block and return their result:
    ``client.call_tool("add", {"a": 1, "b": 2})`` is the ``CallToolResult``.

    Every other attribute (``server_info``, ``server_capabilities``, ...) is the wrapped
    client's. ``client.aio`` is the async ``Client`` itself; ``url`` the HTTP endpoint
    for an HTTP client, else None. ``listen`` (an async iterator) is async only."""

    def __init__(self, client: Client, loop: LoopThread, url: str | None = None) -> None:
        self.aio = client
        self.url = url
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.aio, name)
        if inspect.isasyncgenfunction(value) or name == "listen":
            raise AttributeError(
                f"{name} is an async iterator; use it from async code on client.aio, or test it with "
                "modelctx.testing.connected() in an async test"
            )
        if inspect.iscoroutinefunction(value):
            return self._blocking(value)
        return value

    def _blocking(self, method: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._loop.run(method(*args, **kwargs))

        call.__name__ = method.__name__
        call.__doc__ = method.__doc__
        return call

    def __repr__(self) -> str:
        return f"<SyncClient for {self.aio.name}>"
