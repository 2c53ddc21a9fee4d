"""The tasks extension (io.modelcontextprotocol/tasks, SEP-2663) on the client side.

``Client.call_tool_as_task`` sends ``tools/call`` with the extension declared and gets a
``TaskHandle`` back at once: for a ``resultType: "task"`` answer the handle names the
task; for a plain result (a tool that does not run as a task) it is already completed.
``handle.result()`` polls ``tasks/get`` until the task is terminal: never faster than
the server's ``pollIntervalMs``, backing off (bounded by ``MAX_POLL_SECONDS``) while
nothing changes; ``inputRequests`` of an ``input_required`` task are answered with the
client's own handlers through ``tasks/update``, each key once. A task id outlives the
connection: ``client.task(task_id)`` resumes it from any client of the same principal.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from ..errors import LocalError, MalformedResponse, RequestTimeout, error_from_wire

if TYPE_CHECKING:
    from ..protocol.types import v2026_07_28 as wire
    from ._client import Client

__all__ = ["EXTENSION", "TERMINAL", "TaskCancelled", "TaskHandle"]

EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")
#: Polling never waits longer than this between two tasks/get, however long a task runs.
MAX_POLL_SECONDS = 5.0
#: Used when a server leaves out pollIntervalMs (it is required; be gentle anyway).
DEFAULT_POLL_SECONDS = 1.0
BACKOFF = 1.5


class TaskCancelled(LocalError):
    """The task was cancelled (by this client, another one, or the server): it has no result."""


class TaskHandle:
    """One task on one server: ``task_id``, and ``task`` (the last ``DetailedTask`` seen,
    a dict as the server sent it: ``status``, ``pollIntervalMs``, ``result``, ...)."""

    def __init__(self, client: Client, task: dict[str, Any], *, tool: str | None = None) -> None:
        task_id = task.get("taskId")
        if not isinstance(task_id, str):
            raise MalformedResponse(f"{client.transport.name}: a task without a taskId: {task!r}")
        self.client = client
        #: The task's id; "" for a call the server answered without a task.
        self.task_id = task_id
        self.task = task
        self.tool = tool  # known when this handle started the call: its output is checked
        self._answered: set[str] = set()  # input keys sent already: never asked twice

    @classmethod
    def completed(cls, client: Client, result: dict[str, Any]) -> TaskHandle:
        """A handle for a call the server answered with its result, not a task."""
        return cls(client, {"taskId": "", "status": "completed", "result": result})

    def __repr__(self) -> str:
        return f"TaskHandle({self.task_id!r}, status={self.status!r})"

    @property
    def status(self) -> str:
        """The status last seen (``refresh()`` asks the server again)."""
        return str(self.task.get("status", "working"))

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    async def refresh(self, *, timeout: float | None = None) -> dict[str, Any]:
        """``tasks/get``: the task as the server has it now (also kept in ``task``)."""
        if self.task_id and not self.done:
            self.task = await self.client.get_task(self.task_id, timeout=timeout)
        return self.task

    async def cancel(self, *, timeout: float | None = None) -> None:
        """``tasks/cancel``: the server stops the work; a terminal task stays as it is."""
        if self.task_id:
            await self.client.cancel_task(self.task_id, timeout=timeout)
            self.task = await self.client.get_task(self.task_id, timeout=timeout)

    async def result(self, *, timeout: float | None = None) -> wire.CallToolResult:
        """Wait for the task's ``CallToolResult``, answering its input requests on the way.

        Raises the task's JSON-RPC error when it failed, ``TaskCancelled`` when it was
        cancelled, and ``RequestTimeout`` when it is not done ``timeout`` seconds from
        now (default: the client's request timeout); the task goes on running then.
        """
        # Imported here: _client imports this module, and the wire types load on first use.
        from ..protocol.types.v2026_07_28 import CallToolResult
        from ._client import _convert

        return _convert(await self.final(timeout=timeout), CallToolResult)

    async def final(self, *, timeout: float | None = None) -> dict[str, Any]:
        """``result()``, as the JSON object the server sent."""
        limit = self.client.session.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        interval = self._interval()
        last_seen: tuple[Any, ...] = ()
        while not self.done:
            if self.status == "input_required":
                await self._answer(deadline)
            seen = (self.status, self.task.get("lastUpdatedAt"), self.task.get("statusMessage"))
            # Back off while nothing changes; start again from the server's interval when it does.
            interval = self._interval() if seen != last_seen else min(interval * BACKOFF, self._ceiling())
            last_seen = seen
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._late(limit)
            await asyncio.sleep(min(interval, left))
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._late(limit)
            self.task = await self.client.get_task(self.task_id, timeout=left)
        result = self._outcome()
        if self.tool is not None:
            await self.client._validate_tool_result(self.tool, result)
        return result

    def _interval(self) -> float:
        poll_ms = self.task.get("pollIntervalMs")
        if isinstance(poll_ms, int | float) and poll_ms > 0:
            return float(poll_ms) / 1000
        return DEFAULT_POLL_SECONDS

    def _ceiling(self) -> float:
        return max(self._interval(), MAX_POLL_SECONDS)

    def _late(self, limit: float) -> RequestTimeout:
        return RequestTimeout(
            f"{self.client.transport.name}: task {self.task_id} was still {self.status} after "
            f"{limit:g}s; it goes on running: wait again with result(timeout=...), or cancel() it"
        )

    async def _answer(self, deadline: float) -> None:
        """Answer the open input requests not answered yet, with the client's handlers."""
        requests = self.task.get("inputRequests")
        if not isinstance(requests, dict):
            return
        fresh = {key: value for key, value in requests.items() if key not in self._answered}
        if not fresh:
            return
        left = max(deadline - time.monotonic(), 0.001)
        try:
            answers = await asyncio.wait_for(self.client._answer_all(fresh), left)
        except TimeoutError:
            raise RequestTimeout(
                f"{self.client.transport.name}: task {self.task_id}: the input handlers did not "
                "answer before the deadline"
            ) from None
        await self.client.session.request(
            "tasks/update",
            {"taskId": self.task_id, "inputResponses": answers},
            timeout=max(deadline - time.monotonic(), 0.001),
        )
        self._answered.update(fresh)

    def _outcome(self) -> dict[str, Any]:
        status = self.status
        if status == "completed":
            result = self.task.get("result")
            return result if isinstance(result, dict) else {}
        if status == "failed":
            error = self.task.get("error")
            raise error_from_wire(error if isinstance(error, dict) else {"message": "the task failed"})
        message = self.task.get("statusMessage") or "no reason given"
        raise TaskCancelled(f"{self.client.transport.name}: task {self.task_id} was cancelled ({message})")
