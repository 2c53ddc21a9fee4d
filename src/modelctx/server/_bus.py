"""The subscription bus: how change events reach ``subscriptions/listen`` streams.

A server publishes an ``Event`` when its tools, prompts or resources change or when a
resource is updated; every open listen stream (and every handshake session) consumes
the bus and forwards what its filter asks for. ``LocalBus`` fans out inside one
process. A bus shared between processes (Redis, for many workers and replicas) only
has to implement the same two methods.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Event", "Subscription", "SubscriptionBus", "LocalBus"]


@dataclass(frozen=True)
class Event:
    """``kind`` is "tools", "prompts", "resources" (list changed) or "resource" (updated)."""

    kind: str
    uri: str | None = None


class Subscription(Protocol):
    """Registered from the moment it is made, so no event after that is missed."""

    def __aiter__(self) -> AsyncIterator[Event]: ...

    async def __anext__(self) -> Event: ...

    def close(self) -> None: ...


class SubscriptionBus(Protocol):
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
