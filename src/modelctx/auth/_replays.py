"""``RedisReplays``: spent DPoP proofs in the Redis every worker and replica shares.

One atomic ``SET <prefix><key> 1 NX PX <ttl>`` per proof (RFC 9449 11.1): the first
process to spend a proof creates the key, any later one (another worker, another
replica, the same process again) finds it and refuses the proof. The key expires when
the proof's ``iat`` refuses it anyway, so Redis holds only the proofs of the last
minute or so. The server nonces' key lives beside them (``<prefix>nonce-key``, made by
the first process to need it), so every process hands out and accepts the same nonces.

Every call has a deadline (``timeout``). When Redis does not answer in time, or at
all, the proof is refused with ``InvalidDPoPProof(unavailable=True)``, which the
resource answers 503 with ``Retry-After``: a proof that cannot be shown fresh is never
accepted (fail closed), and no request waits longer than the deadline.

Its calls go through ``server.redis.RedisCalls`` (as the OAuth proxy's and
``RateLimit``'s do): a client per event loop, made on first use (a worker forked after
the app was built makes its own), no retries of its own, bounded connects and commands,
each outage logged once as it starts and once as it ends.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from ..server.redis import RedisCalls, redacted
from ._dpop import InvalidDPoPProof

__all__ = ["RedisReplays"]

log = logging.getLogger("modelctx.auth")


def _unavailable(reason: str) -> InvalidDPoPProof:
    return InvalidDPoPProof(
        "The DPoP proof cannot be checked for replay now (the shared replay cache is unreachable); "
        "retry shortly with a fresh proof",
        unavailable=True,
    )


class RedisReplays:
    """A DPoP replay cache (``ReplayCache``) in the Redis at ``url``, under ``prefix``
    (the server wires ``<redis_prefix>dpop:``). ``timeout``: seconds a spend may take."""

    shared = True

    def __init__(self, url: str, *, prefix: str = "modelctx:dpop:", timeout: float = 2.0) -> None:
        self.redis = RedisCalls(  # ValueError without the redis package
            url, timeout, log=log, unavailable=_unavailable,
            down="DPoP replay cache at %s unreachable (%s): proofs are refused until it answers",
            up="DPoP replay cache at %s answers again",
        )
        self.url = url
        self.prefix = prefix
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"RedisReplays({redacted(self.url)!r}, prefix={self.prefix!r})"

    async def spend(self, key: str, seconds: float) -> bool:
        async def work(client: Any) -> Any:
            return await client.set(self.prefix + key, b"1", nx=True, px=max(1, int(seconds * 1000)))

        return await self.redis.call(work) is True

    async def shared_key(self, name: str) -> bytes:
        """The key at ``<prefix><name>``: the first process to ask makes it (32 random
        bytes, ``SET NX``: one wins however many ask at once), every one reads it."""

        async def work(client: Any) -> Any:
            await client.set(self.prefix + name, secrets.token_bytes(32), nx=True)
            return await client.get(self.prefix + name)

        value = await self.redis.call(work)
        if not isinstance(value, bytes) or len(value) < 16:
            log.warning("DPoP: the key %s%s in Redis %s is not 16 bytes or more; delete it to make a new one",
                        self.prefix, name, redacted(self.url))
            raise self.redis.failed(ValueError("unusable key"))
        return value

    async def close(self) -> None:
        """Close the connections (the cache reconnects if used again)."""
        await self.redis.close()
