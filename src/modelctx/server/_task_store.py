"""Where tasks live: the ``TaskStore`` interface and its records (the SQLite default,
``SqliteTaskStore``, is in ``_sqlite_tasks.py``, loaded when a server first makes one).

A store keeps plain JSON-able ``TaskRecord``s keyed by ``task_id`` (random, not bound
to a process), so a store shared by several replicas (Redis) can implement the same
interface: every method is a coroutine and each one is a single atomic step on one
record, so no caller needs a lock around it. Status changes are guarded in the store:
a terminal task (completed, failed, cancelled) never changes again, whoever writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import msgspec

__all__ = ["TERMINAL", "TaskRecord", "TaskStore"]

TERMINAL = frozenset({"completed", "failed", "cancelled"})


@dataclass
class TaskRecord:
    """One task, as stored. Times are seconds since the epoch; ``ttl_ms`` None is
    unlimited. ``input_requests`` are the questions still open (key to the
    server-to-client request); ``responses`` the answers that arrived and the running
    handler has not taken yet. ``owner`` is the principal that created it (None for
    no authentication): only it may read or change the task. ``runner``: the process
    (replica) running its handler, for a store shared by several (None: this one)."""

    task_id: str
    status: str
    created_at: float
    updated_at: float
    ttl_ms: int | None
    poll_interval_ms: int
    owner: str | None = None
    status_message: str | None = None
    input_requests: dict[str, Any] = field(default_factory=dict)
    responses: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    runner: str | None = None

    @property
    def expires_at(self) -> float | None:
        return None if self.ttl_ms is None else self.created_at + self.ttl_ms / 1000

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def to_json(self) -> bytes:
        return msgspec.json.encode(asdict(self))

    @classmethod
    def from_json(cls, data: bytes | str) -> TaskRecord:
        return cls(**msgspec.json.decode(data))


class TaskStore(Protocol):
    """What the tasks extension needs from storage. Every method is atomic on its
    record; a record whose TTL has passed is treated as absent by every method."""

    async def create(self, record: TaskRecord) -> None:
        """Store a new task; returns once a ``get`` anywhere would find it."""

    async def get(self, task_id: str) -> TaskRecord | None: ...

    async def set_status(
        self,
        task_id: str,
        status: str,
        *,
        message: str | None = None,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> TaskRecord | None:
        """Move a task that is not terminal to ``status``; None when the task is
        missing or already terminal (the change is not made)."""

    async def ask(self, task_id: str, requests: dict[str, Any]) -> TaskRecord | None:
        """Open ``requests`` (key to request) and make the task ``input_required``."""

    async def answer(self, task_id: str, responses: dict[str, Any]) -> TaskRecord | None:
        """Keep the responses whose key is open (others are ignored), close those
        keys; with none left open the task is ``working`` again. None: no such task."""

    async def take_answers(self, task_id: str, keys: list[str]) -> dict[str, Any]:
        """Remove and return the kept responses for ``keys`` (those that arrived)."""

    async def purge_expired(self, now: float | None = None) -> int:
        """Delete every task whose TTL has passed; returns how many."""

    async def fail_unfinished(self, error: dict[str, Any], message: str) -> int:
        """Fail every task that is not terminal and whose runner is gone; how many.
        Called once per process (per server run), before its first use of the store.
        Only tasks whose runner stopped are failed, never a live sibling's: the
        processes of one host sharing a SQLite file (``--workers``), or replicas sharing
        Redis (see ``RedisTaskStore``)."""

    def watch(self, ended: Callable[[str, TaskRecord | None], None]) -> None:
        """Call ``ended(task_id, record)`` (on the event loop) when a task of this
        process ended by another hand: cancelled on another replica (``record`` None:
        that replica told the listeners already), or failed by this store because its
        runner stopped (``record``: the failed task, to announce). A store of one
        process has no other hand and never calls it (it may leave the method out)."""

    async def count(self) -> int: ...

    async def close(self) -> None: ...

    # Optional: ``per_process`` (a bool attribute), True for a store only this process
    # sees (``SqliteTaskStore(":memory:")``); with ``--workers`` its task ids then name
    # their worker and requests for them are relayed there. Absent: shared.
    #
    # Optional, for a store shared by processes (``RedisTaskStore``):
    #     async def create_within(self, record: TaskRecord, limit: int) -> bool
    # creates the task unless its owner has ``limit`` unfinished tasks in the store (False
    # then, nothing stored), so the per-principal cap holds across processes. Without it
    # the ``TaskManager`` counts each owner's tasks in its own process.
