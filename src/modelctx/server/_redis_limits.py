"""Guards that every worker and replica share through Redis: ``RateLimit``'s buckets.

Theory of operation. A bucket is one key, ``<redis_prefix>ratelimit:<limit>:<who>``,
holding the GCRA "theoretical arrival time" (a generic cell rate algorithm: the token
bucket of ``RateLimit`` written as one timestamp). One Lua script reads it, decides and
writes it back: atomic and one round trip, on Redis's own clock (``TIME``), so the
processes' clocks do not matter. The key expires when the bucket would be full again,
so an idle client costs no memory.

``SharedBuckets.take`` raises ``BucketsUnavailable`` when Redis does not answer within
``timeout``; the caller decides what then (``RateLimit`` counts in its own process, so
the limit still holds per process). After a failure Redis is not asked again for
``retry_after`` seconds, so an outage costs each request nothing, not one deadline.

``LoopRedis`` is the client both this and ``auth``'s DPoP replay cache use: made on
first use, on the event loop that uses it (a worker forked after the app was built makes
its own), through the bus's helper (no retries of its own, bounded connects and commands).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from typing import Any

from ._redis_bus import _client, redacted

__all__ = ["BucketsUnavailable", "LoopRedis", "SharedBuckets"]

log = logging.getLogger("modelctx.server")

# KEYS[1]: the bucket; ARGV[1]: microseconds per request (1/rate); ARGV[2]: the burst.
# Returns 0 when admitted, else the microseconds until a request would be.
_GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then tat = now end
local next_tat = tat + interval
local admitted_at = next_tat - burst * interval
if admitted_at > now then
  return math.max(1, math.ceil(admitted_at - now))
end
redis.call('SET', KEYS[1], string.format('%.0f', next_tat), 'PX', math.ceil((next_tat - now) / 1000) + 1)
return 0
"""


class BucketsUnavailable(Exception):
    """Redis did not answer a bucket's question in time (or at all)."""


class LoopRedis:
    """A ``redis.asyncio`` client for ``url`` per event loop, made when first used.
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
            self._redis, self._loop = _client(self.url, self.timeout), loop
        return self._redis

    async def close(self) -> None:
        if self._redis is not None:
            redis, self._redis = self._redis, None
            await redis.aclose()


class SharedBuckets:
    """``RateLimit``'s buckets in the Redis at ``url``: ``rate`` a second, bursts of
    ``burst``, keys under ``prefix`` (``<redis_prefix>ratelimit:<name>:``)."""

    def __init__(
        self, url: str, prefix: str, rate: float, burst: int, *, timeout: float = 0.25, retry_after: float = 1.0
    ) -> None:
        self.redis = LoopRedis(url, timeout)
        self.prefix = prefix
        self.interval_us = 1_000_000 / rate
        self.burst = burst
        self.timeout = timeout
        self.retry_after = retry_after
        self._down_until = 0.0
        self._down = False  # logged once per outage
        self._script: Any = None
        self._script_of: Any = None

    async def take(self, key: Any) -> float | None:
        """None when ``key`` may make a request now, else the seconds until it may.
        ``key`` is counted by a digest of its ``repr`` (the same in every process for
        strings, numbers and tuples of them). Raises ``BucketsUnavailable``."""
        if time.monotonic() < self._down_until:
            raise BucketsUnavailable("Redis did not answer a moment ago")
        name = self.prefix + hashlib.sha256(repr(key).encode()).hexdigest()[:32]
        from redis.exceptions import RedisError

        try:
            async with asyncio.timeout(self.timeout):
                wait_us = await self._gcra()(keys=[name], args=[repr(self.interval_us), self.burst])
        except (TimeoutError, RedisError, OSError) as exc:
            self._down_until = time.monotonic() + self.retry_after
            reason = "no answer in time" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
            if not self._down:
                self._down = True
                log.warning("RateLimit: Redis at %s unreachable (%s); each process counts on its own until it answers",
                            redacted(self.redis.url), reason)
            raise BucketsUnavailable(reason) from None
        if self._down:
            self._down = False
            log.warning("RateLimit: Redis at %s answers again; buckets are shared", redacted(self.redis.url))
        return None if not wait_us else int(wait_us) / 1_000_000

    def _gcra(self) -> Any:
        client = self.redis.get()
        if self._script is None or self._script_of is not client:
            self._script, self._script_of = client.register_script(_GCRA), client
        return self._script
