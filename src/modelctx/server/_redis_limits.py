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

Its calls go through ``redis.RedisCalls``, as those of ``auth``'s DPoP replay cache and
OAuth proxy do: a client per event loop, made on first use, every call within the
deadline, each outage logged once as it starts and once as it ends.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

from .redis import RedisCalls

__all__ = ["BucketsUnavailable", "SharedBuckets"]

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


class SharedBuckets:
    """``RateLimit``'s buckets in the Redis at ``url``: ``rate`` a second, bursts of
    ``burst``, keys under ``prefix`` (``<redis_prefix>ratelimit:<name>:``)."""

    def __init__(
        self, url: str, prefix: str, rate: float, burst: int, *, timeout: float = 0.25, retry_after: float = 1.0
    ) -> None:
        self.redis = RedisCalls(
            url, timeout, log=log, unavailable=BucketsUnavailable,
            down="RateLimit: Redis at %s unreachable (%s); each process counts on its own until it answers",
            up="RateLimit: Redis at %s answers again; buckets are shared",
        )
        self.prefix = prefix
        self.interval_us = 1_000_000 / rate
        self.burst = burst
        self.timeout = timeout
        self.retry_after = retry_after
        self._down_until = 0.0
        self._script: Any = None
        self._script_of: Any = None

    async def take(self, key: Any) -> float | None:
        """None when ``key`` may make a request now, else the seconds until it may.
        ``key`` is counted by a digest of its ``repr`` (the same in every process for
        strings, numbers and tuples of them). Raises ``BucketsUnavailable``."""
        if time.monotonic() < self._down_until:
            raise BucketsUnavailable("Redis did not answer a moment ago")
        name = self.prefix + hashlib.sha256(repr(key).encode()).hexdigest()[:32]
        try:
            wait_us = await self.redis.call(
                lambda client: self._gcra(client)(keys=[name], args=[repr(self.interval_us), self.burst])
            )
        except BucketsUnavailable:
            self._down_until = time.monotonic() + self.retry_after  # not asked again meanwhile
            raise
        return None if not wait_us else int(wait_us) / 1_000_000

    def _gcra(self, client: Any) -> Any:
        if self._script is None or self._script_of is not client:
            self._script, self._script_of = client.register_script(_GCRA), client
        return self._script
