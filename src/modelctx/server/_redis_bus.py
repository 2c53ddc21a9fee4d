"""A subscription bus that processes and replicas share through Redis pub/sub.

Theory of operation. Each process holds one ``RedisBus`` (one per server it serves). Its
subscribers are those of a ``LocalBus``: listen streams and handshake sessions subscribe
to it exactly as they do without Redis. ``publish`` delivers an event to the local
subscribers at once, then (for the kinds that concern other processes) queues it for
a *sender* task, which ``PUBLISH``es it on one channel; a *reader* task holds one
pub/sub connection subscribed to that channel and hands every event published by
*another* process to the local subscribers. Each bus has an origin id, carried in every
message, so a process never delivers its own events twice.

What crosses: list changes ("tools", "prompts", "resources"), resource updates
("resource") and task changes ("task": a task changed on replica A reaches listeners on
B, each stream still filtering by owner). "closing" does not: it is one process's
shutdown, ending that process's streams only.

When Redis goes away nothing that calls the bus waits for it: ``publish`` only appends
to a bounded queue (the oldest event is dropped and counted when it is full), the
reader reconnects with backoff, and each outage is logged once when it starts and once
when it ends. Pub/sub keeps nothing for a subscriber that is away, so after an outage
the local subscribers are told that every list may have changed (a spurious
``list_changed`` only costs a client one list request; a missed one leaves it stale).

The connections are made by ``start`` (the server calls it inside its running
lifespan), never at import or construction; ``start`` raises ``StartupError`` naming
the URL when Redis cannot be reached.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import deque
from typing import Any

import msgspec

from ._bus import Event, LocalBus, _LocalSubscription
from ._lifespan import StartupError
from .redis import client_for, redacted

__all__ = ["CROSSING_KINDS", "RedisBus", "shared_request_state_key"]

log = logging.getLogger("modelctx.server")

#: The event kinds that reach other processes; the others ("closing") stay in this one.
CROSSING_KINDS = frozenset({"tools", "prompts", "resources", "resource", "task"})

#: What a subscriber is told after an outage: every list may have changed meanwhile.
_RESYNC = (Event("tools"), Event("prompts"), Event("resources"))

_FIRST_BACKOFF = 0.05
_MAX_BACKOFF = 2.0


class _Wire(msgspec.Struct, array_like=True, frozen=True):
    """One event on the channel: who published it and the event itself."""

    origin: str
    kind: str
    uri: str | None = None
    data: Any = None


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(_Wire).decode


def _unreachable(url: str, what: str, exc: BaseException) -> StartupError:
    reason = str(exc) or type(exc).__name__
    return StartupError(
        f"cannot reach Redis at {redacted(url)} for {what} ({reason}); start Redis there or "
        "correct the URL (ServerConfig.redis_url, $MODELCTX_REDIS_URL or --redis), or leave it "
        "unset to keep everything in this process"
    )


class RedisBus:
    """A ``SubscriptionBus`` shared through Redis pub/sub (see the module docstring).

    ``url``: the Redis (``redis://``, ``rediss://``, ``unix://``). ``channel``: the
    pub/sub channel; servers sharing one Redis use one channel per server (the server
    wires ``<redis_prefix>bus``). ``local``: the in-process fan-out (a new ``LocalBus``
    by default). ``outbox_size``: events waiting to be sent while Redis is slow or away;
    past it the oldest is dropped and counted in ``dropped``. ``timeout``: seconds a
    connect or a command may take.

    ``start``/``stop`` run on the event loop that serves; ``publish`` and ``subscribe``
    are called on that loop's thread, as with ``LocalBus``.
    """

    def __init__(
        self,
        url: str,
        *,
        channel: str = "modelctx:bus",
        local: LocalBus | None = None,
        outbox_size: int = 10_000,
        timeout: float = 5.0,
    ) -> None:
        if outbox_size < 1:
            raise ValueError("outbox_size must be at least 1")
        self.url = url
        self.channel = channel
        self.local = local if local is not None else LocalBus()
        self.origin = secrets.token_hex(8)
        self.timeout = timeout
        self.dropped = 0  # events never sent: the outbox was full, or they could not be encoded
        self.sent = 0
        self.received = 0
        self._outbox: deque[bytes] = deque(maxlen=outbox_size)
        self._wake: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._client: Any = None
        self._down_since: float | None = None

    # -- SubscriptionBus ------------------------------------------------------------------
    def publish(self, event: Event) -> None:
        """Deliver ``event`` here at once; queue it for the other processes (never blocks).

        Before ``start`` and after ``stop`` it reaches this process only."""
        self.local.publish(event)
        if event.kind not in CROSSING_KINDS or self._wake is None:
            return
        try:
            payload = _encode(_Wire(self.origin, event.kind, event.uri, event.data))
        except (TypeError, msgspec.EncodeError) as exc:
            self.dropped += 1
            log.warning("modelctx: a %r event was not sent to other replicas: its data is not JSON (%s)",
                        event.kind, exc)
            return
        if len(self._outbox) == self._outbox.maxlen:
            self.dropped += 1  # the deque drops the oldest as the new one goes in
        self._outbox.append(payload)
        self._wake.set()

    def subscribe(self) -> _LocalSubscription:
        return self.local.subscribe()

    @property
    def connected(self) -> bool:
        """Is the reader subscribed on Redis now (False before start and during outages)?"""
        return bool(self._tasks) and self._down_since is None

    @property
    def pending(self) -> int:
        """Events queued for the other processes, not yet sent."""
        return len(self._outbox)

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect and subscribe; from its return every event another process publishes
        reaches this process's subscribers. Raises ``StartupError`` (naming the URL) when
        Redis cannot be reached within ``timeout``."""
        if self._tasks:
            raise RuntimeError(f"the Redis bus on {self.channel!r} is already started")
        # A new origin for each start: a bus built before --workers forks is one object
        # copied into every worker, and with one origin each would drop the others'
        # events as its own echo. Before start nothing crosses, so nothing is lost.
        self.origin = secrets.token_hex(8)
        client = client_for(self.url, self.timeout)  # StartupError without the redis package
        try:
            pubsub = await self._subscribed(client)
        except Exception as exc:
            await _close(client)
            raise _unreachable(self.url, "the subscription bus", exc) from exc
        self._client = client
        self._wake = asyncio.Event()
        self._down_since = None
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._read(pubsub), name=f"redis bus reader {self.channel}"),
            loop.create_task(self._send(), name=f"redis bus sender {self.channel}"),
        ]

    async def stop(self) -> None:
        """Stop reading and sending and close the connections (bounded by ``timeout``).
        Events still queued get up to a second to go out (the last changes of a replica
        that is shutting down); what is left after it is not sent."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + min(self.timeout, 1.0)
        while self._outbox and self.connected and loop.time() < give_up:
            await asyncio.sleep(0.01)
        tasks, self._tasks = self._tasks, []
        self._wake = None
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=self.timeout)
        client, self._client = self._client, None
        if client is not None:
            await _close(client)
        self._outbox.clear()

    # -- the reader: Redis to this process ---------------------------------------------------
    async def _subscribed(self, client: Any) -> Any:
        """A pub/sub connection whose SUBSCRIBE Redis has confirmed."""
        pubsub = client.pubsub()
        try:
            async with asyncio.timeout(self.timeout):
                await pubsub.subscribe(self.channel)
                while True:  # the confirmation: from here on, nothing published is missed
                    message = await pubsub.get_message(timeout=self.timeout)
                    if message is not None and message["type"] == "subscribe":
                        return pubsub
        except BaseException:
            await _close(pubsub)
            raise

    async def _read(self, pubsub: Any) -> None:
        from redis.exceptions import RedisError

        backoff = _FIRST_BACKOFF
        while True:
            try:
                if pubsub is None:
                    pubsub = await self._subscribed(self._client)
                    self._back_up()
                    backoff = _FIRST_BACKOFF
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=None)
                if message is not None and message["type"] == "message":
                    self._deliver(message["data"])
            except (RedisError, OSError, TimeoutError) as exc:
                self._went_down("reading", exc)
                if pubsub is not None:
                    await _close(pubsub)
                    pubsub = None
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
            except asyncio.CancelledError:
                if pubsub is not None:
                    await _close(pubsub)
                raise

    def _deliver(self, payload: bytes) -> None:
        try:
            wire = _decode(payload)
        except msgspec.DecodeError:
            log.debug("ignored a message on %s that is not a bus event: %r", self.channel, payload[:200])
            return
        if wire.origin == self.origin or wire.kind not in CROSSING_KINDS:
            return  # our own (delivered when published), or a kind that never crosses
        self.received += 1
        self.local.publish(Event(wire.kind, wire.uri, wire.data))

    def _went_down(self, doing: str, exc: BaseException) -> None:
        if self._down_since is not None:
            log.debug("Redis bus still unreachable (%s): %s", doing, exc)
            return
        self._down_since = time.monotonic()
        log.warning(
            "modelctx: lost the Redis bus at %s while %s (%s); events from other replicas are "
            "held up until it is back; reconnecting with backoff",
            redacted(self.url), doing, exc or type(exc).__name__,
        )

    def _back_up(self) -> None:
        if self._down_since is None:
            return
        gap = time.monotonic() - self._down_since
        self._down_since = None
        log.warning("modelctx: the Redis bus at %s is back after %.1f s", redacted(self.url), gap)
        for event in _RESYNC:  # what other replicas published meanwhile is lost
            self.local.publish(event)
        if self._wake is not None and self._outbox:
            self._wake.set()

    # -- the sender: this process to Redis -----------------------------------------------------
    async def _send(self) -> None:
        from redis.exceptions import RedisError

        backoff = _FIRST_BACKOFF
        failing = False
        while True:
            wake = self._wake
            if wake is None:
                return
            await wake.wait()
            wake.clear()
            while self._outbox:
                payload = self._outbox.popleft()
                try:
                    async with asyncio.timeout(self.timeout):
                        await self._client.publish(self.channel, payload)
                except (RedisError, OSError, TimeoutError) as exc:
                    if not failing and self._down_since is None:  # else the reader said it
                        log.warning("modelctx: could not publish on the Redis bus at %s (%s); retrying "
                                    "with backoff", redacted(self.url), exc or type(exc).__name__)
                    failing = True
                    if len(self._outbox) < (self._outbox.maxlen or 0):
                        self._outbox.appendleft(payload)  # sent again once Redis answers
                    else:
                        self.dropped += 1
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, _MAX_BACKOFF)
                    continue
                self.sent += 1
                failing, backoff = False, _FIRST_BACKOFF


async def _close(closeable: Any) -> None:
    """Close a client or pub/sub, never raising nor waiting long: Redis may be gone."""
    try:
        async with asyncio.timeout(2.0):
            await closeable.aclose()
    except Exception as exc:  # noqa: BLE001 - closing a dead connection; nothing to do
        log.debug("closing a Redis connection: %s", exc)


async def shared_request_state_key(url: str, key: str, *, timeout: float = 5.0) -> bytes:
    """The ``requestState`` sealing key all replicas share, kept in Redis at ``key``.

    The first replica to start creates it (32 random bytes, ``SET NX``: one wins, however
    many start at once); every replica reads it. Raises ``StartupError`` naming the URL
    when Redis cannot be reached within ``timeout``."""
    client = client_for(url, timeout)  # StartupError without the redis package
    try:
        async with asyncio.timeout(timeout):
            await client.set(key, secrets.token_bytes(32), nx=True)
            value = await client.get(key)
    except Exception as exc:
        raise _unreachable(url, "the requestState key", exc) from exc
    finally:
        await _close(client)
    if not isinstance(value, bytes) or len(value) < 16:
        raise StartupError(
            f"the requestState key at {key!r} in Redis {redacted(url)} is not a key of at least 16 "
            "bytes; delete it (the next replica to start makes a new one) or set "
            "MODELCTX_REQUEST_STATE_SECRET"
        )
    return value
