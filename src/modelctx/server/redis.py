"""How modelctx talks to Redis: the helpers the server's stores and rate limit, and
``auth``'s DPoP replay cache and OAuth proxy, share (a public module, so that ``auth``,
a layer above, uses them without reaching into the server's insides).

* ``client_for``: a ``redis.asyncio.Redis`` that fails fast (no retries of its own,
  bounded connects and commands, TCP keepalive);
* ``LoopRedis``: one such client per event loop, made on first use (a worker forked
  after the app was built makes its own);
* ``RedisCalls``: every call within a deadline, an outage logged once as it starts and
  once as it ends, and the caller's own error raised while it lasts (fail closed or
  open is the caller's choice: it decides what that error means);
* ``redacted``: a Redis URL without its password, for every message and log.

Nothing here imports ``redis`` at import time: a server without a Redis never loads it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ._lifespan import StartupError

__all__ = ["LoopRedis", "RedisCalls", "client_for", "redacted"]

_T = TypeVar("_T")


def redacted(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[-1]}"))


def client_for(url: str, timeout: float) -> Any:
    """A ``redis.asyncio.Redis`` for ``url`` that fails fast: no retries of its own (the
    callers have their backoff or their deadline), connects and commands bounded by
    ``timeout`` seconds, TCP keepalive to notice a vanished peer. Raises ``StartupError``
    when the redis package is not installed."""
    try:
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
    except ImportError as exc:
        raise StartupError(
            f"Redis ({redacted(url)}) is configured but the redis package is not installed: "
            "pip install 'modelctx[redis]'"
        ) from exc

    return Redis.from_url(
        url,
        socket_connect_timeout=timeout,
        socket_timeout=timeout,
        socket_keepalive=True,
        retry=Retry(NoBackoff(), 0),
    )


class LoopRedis:
    """A ``client_for(url, timeout)`` per event loop, made when first used.
    Raises ``ValueError`` when the redis package is missing."""

    def __init__(self, url: str, timeout: float) -> None:
        try:
            import redis.asyncio  # noqa: F401 - refused when configured, not at the first request
        except ImportError:
            raise ValueError(f"Redis ({redacted(url)}) is configured but the redis package is not installed: "
                             "pip install 'modelctx[redis]'") from None
        self.url = url
        self.timeout = timeout
        self._redis: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._redis is None or self._loop is not loop:
            self._redis, self._loop = client_for(self.url, self.timeout), loop
        return self._redis

    async def close(self) -> None:
        if self._redis is not None:
            redis, self._redis = self._redis, None
            await redis.aclose()


class RedisCalls:
    """Calls to the Redis at ``url``, each within ``timeout`` seconds.

    ``call(work)`` runs ``work(client)``; when Redis does not answer in time, refuses the
    connection or fails the command, it raises ``unavailable(reason)`` (the caller's own
    error). An outage is logged once on ``log`` as it starts (``down``, a format given the
    redacted URL and the reason) and once as it ends (``up``, given the redacted URL).
    Raises ``ValueError`` (at construction) when the redis package is missing."""

    def __init__(
        self,
        url: str,
        timeout: float,
        *,
        log: logging.Logger,
        down: str,
        up: str,
        unavailable: Callable[[str], Exception],
    ) -> None:
        self.redis = LoopRedis(url, timeout)
        self.url = url
        self.timeout = timeout
        self.down = False  # logged once per outage
        self._log = log
        self._down_note = down
        self._up_note = up
        self._unavailable = unavailable

    async def call(self, work: Callable[[Any], Awaitable[_T]]) -> _T:
        from redis.exceptions import RedisError

        try:
            async with asyncio.timeout(self.timeout):
                result = await work(self.redis.get())
        except (TimeoutError, RedisError, OSError) as exc:
            raise self.failed(exc) from None
        self.answered()
        return result

    def failed(self, exc: BaseException) -> Exception:
        """The caller's error for a call that failed with ``exc`` (logged if Redis was up)."""
        reason = "no answer in time" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
        if not self.down:
            self.down = True
            self._log.warning(self._down_note, redacted(self.url), reason)
        return self._unavailable(reason)

    def answered(self) -> None:
        """Redis answered: an outage, if there was one, is over (logged)."""
        if self.down:
            self.down = False
            self._log.warning(self._up_note, redacted(self.url))

    async def close(self) -> None:
        """Close the connections (they are made again if used again)."""
        await self.redis.close()
