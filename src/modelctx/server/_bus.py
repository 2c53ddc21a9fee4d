"""The subscription bus: how change events reach ``subscriptions/listen`` streams.

A server publishes an ``Event`` when its tools, prompts or resources change or when a
resource is updated; every open listen stream (and every handshake session) consumes
the bus and forwards what its filter asks for. ``LocalBus`` fans out inside one
process. A bus shared between processes (``RedisBus``, ``_redis_bus.py``, for many
workers and replicas) implements the same two methods; one that holds connections also
has ``async start()`` and ``async stop()``, which the server calls inside its running
lifespan (so nothing connects at import or construction).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Event", "Subscription", "SubscriptionBus", "LocalBus", "ListenSlots"]


@dataclass(frozen=True)
class Event:
    """``kind`` is "tools", "prompts", "resources" (list changed), "resource" (updated,
    ``uri``) or "task" (a task changed: ``uri`` is its id, ``data`` its owner and state)."""

    kind: str
    uri: str | None = None
    data: Any = None


class Subscription(Protocol):
    """Registered from the moment it is made, so no event after that is missed."""

    def __aiter__(self) -> AsyncIterator[Event]: ...

    async def __anext__(self) -> Event: ...

    def close(self) -> None: ...


class SubscriptionBus(Protocol):
    """Where change events go. Kinds "tools", "prompts", "resources", "resource" and
    "task" concern every process serving the server; "closing" (this process is
    shutting down: end its listen streams) concerns this process only."""

    def publish(self, event: Event) -> None:
        """Deliver ``event`` to every subscriber; never blocks."""

    def subscribe(self) -> Subscription:
        """A subscription to every event from now on, until it is closed."""


class _LocalSubscription:
    def __init__(self, bus: LocalBus, size: int) -> None:
        self._bus = bus
        self.queue: asyncio.Queue[Event] = asyncio.Queue(size)
        bus._subs.add(self)

    def __aiter__(self) -> _LocalSubscription:
        return self

    async def __anext__(self) -> Event:
        return await self.queue.get()

    def close(self) -> None:
        self._bus._subs.discard(self)


class LocalBus:
    """In-process fan-out. A slow subscriber loses its oldest events, never memory."""

    def __init__(self, queue_size: int = 256) -> None:
        self._subs: set[_LocalSubscription] = set()
        self._size = queue_size

    @property
    def subscriber_count(self) -> int:
        return len(self._subs)

    def publish(self, event: Event) -> None:
        for sub in self._subs:
            queue = sub.queue
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(event)

    def subscribe(self) -> _LocalSubscription:
        return _LocalSubscription(self, self._size)


class ListenSlots:
    """Counts the ``subscriptions/listen`` streams open at once on one server.

    Each stream holds a bus subscription (a queue of up to 256 events) and a
    connection for as long as the client keeps it, so their number is bounded:
    ``per_principal`` streams for each authenticated principal (by key, see
    ``transports.identity.principal_key``; None is the unauthenticated caller, which
    only the total bounds) and ``total`` for the whole server.
    """

    __slots__ = ("per_principal", "total", "_open", "_by_principal")

    def __init__(self, per_principal: int, total: int) -> None:
        self.per_principal = per_principal
        self.total = total
        self._open = 0
        self._by_principal: dict[Any, int] = {}

    @property
    def open(self) -> int:
        return self._open

    def take(self, key: Any) -> str | None:
        """Count one more stream of principal ``key``; or, at a limit, count nothing
        and return what was reached, for the error that refuses the stream."""
        if self._open >= self.total:
            return f"the server has {self.total} listen streams open, its limit"
        held = self._by_principal.get(key, 0) if key is not None else 0
        if key is not None and held >= self.per_principal:
            return f"this principal has {self.per_principal} listen streams open, its limit"
        self._open += 1
        if key is not None:
            self._by_principal[key] = held + 1
        return None

    def give_back(self, key: Any) -> None:
        """The stream ``take`` counted for ``key`` has ended."""
        self._open -= 1
        if key is not None:
            held = self._by_principal[key] - 1
            if held:
                self._by_principal[key] = held
            else:
                del self._by_principal[key]
