"""The tasks extension (io.modelcontextprotocol/tasks, SEP-2663) on the client side.

``Client.call_tool_as_task`` sends ``tools/call`` with the extension declared and gets a
``TaskHandle`` back at once: for a ``resultType: "task"`` answer the handle names the
task; for a plain result (a tool that does not run as a task) it is already completed.
``handle.result()`` polls ``tasks/get`` until the task is terminal: never faster than
the server's ``pollIntervalMs``, backing off (bounded by ``MAX_POLL_SECONDS``) while
nothing changes; ``inputRequests`` of an ``input_required`` task are answered with the
handlers of the call that started it (``call_tool(..., handlers=)``), else the client's, through ``tasks/update``, each key once. A task id outlives the
connection: ``client.task(task_id)`` resumes it from any client of the same principal.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import LocalError, MalformedResponse, MCPError, RequestTimeout, error_from_wire
from ..protocol.jsonrpc import Notification
from ._convert import convert
from ._input import answer_all
from ._options import ClientHandlers
from ._session import ClientSession

if TYPE_CHECKING:
    from ..protocol.types import v2026_07_28 as wire

__all__ = ["EXTENSION", "TERMINAL", "TaskCancelled", "TaskHandle"]

EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")
#: Polling never waits longer than this between two tasks/get, however long a task runs.
MAX_POLL_SECONDS = 5.0
#: Used when a server leaves out pollIntervalMs (it is required; be gentle anyway).
DEFAULT_POLL_SECONDS = 1.0
BACKOFF = 1.5


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class TaskClient(Protocol):
    """What a ``TaskHandle`` needs of the client it came from (``Client`` is one)."""

    handlers: ClientHandlers
    session: ClientSession

    @property
    def transport(self) -> _Named: ...

    async def get_task(self, task_id: str, *, timeout: float | None = None) -> dict[str, Any]: ...

    async def cancel_task(self, task_id: str, *, timeout: float | None = None) -> None: ...


#: Checks a tool's result against its ``outputSchema``: ``(tool name, result)``.
Validator = Callable[[str, dict[str, Any]], Awaitable[None]]


class TaskCancelled(LocalError):
    """The task was cancelled (by this client, another one, or the server): it has no result."""


class TaskHandle:
    """One task on one server: ``task_id``, and ``task`` (the last ``DetailedTask`` seen,
    a dict as the server sent it: ``status``, ``pollIntervalMs``, ``result``, ...)."""

    def __init__(
        self,
        client: TaskClient,
        task: dict[str, Any],
        *,
        tool: str | None = None,
        validate: Validator | None = None,
        handlers: ClientHandlers | None = None,
    ) -> None:
        task_id = task.get("taskId")
        if not isinstance(task_id, str):
            raise MalformedResponse(f"{client.transport.name}: a task without a taskId: {task!r}")
        self.client = client
        #: The task's id; "" for a call the server answered without a task.
        self.task_id = task_id
        self.task = task
        self.tool = tool  # known when this handle started the call: its output is checked
        self._validate = validate
        #: What answers the task's input requests: the call's handlers, else the client's.
        self.handlers = handlers
        self._answered: set[str] = set()  # input keys sent already: never asked twice

    @classmethod
    def completed(cls, client: TaskClient, result: dict[str, Any]) -> TaskHandle:
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

    async def result(self, *, timeout: float | None = None, follow: bool = False) -> wire.CallToolResult:
        """Wait for the task's ``CallToolResult``, answering its input requests on the way.

        Raises the task's JSON-RPC error when it failed, ``TaskCancelled`` when it was
        cancelled, and ``RequestTimeout`` when it is not done ``timeout`` seconds from
        now (default: the client's request timeout); the task goes on running then.

        ``follow=True``: hear of changes on a ``subscriptions/listen`` stream
        (``notifications/tasks``) instead of polling, checking with ``tasks/get`` only
        after ``MAX_POLL_SECONDS`` of quiet; polling when the server does not offer them.
        """
        # Imported here: the wire types load on first use.
        from ..protocol.types.v2026_07_28 import CallToolResult

        return convert(await self.final(timeout=timeout, follow=follow), CallToolResult)

    async def final(self, *, timeout: float | None = None, follow: bool = False) -> dict[str, Any]:
        """``result()``, as the JSON object the server sent."""
        limit = self.client.session.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        if follow and self.task_id and not self.done and self.client.session.modern:
            await self._follow(deadline, limit)
        await self._poll(deadline, limit)
        result = self._outcome()
        if self.tool is not None and self._validate is not None:
            await self._validate(self.tool, result)
        return result

    async def _poll(self, deadline: float, limit: float) -> None:
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
            self.task = await self._get_by(deadline, limit)

    async def _get_by(self, deadline: float, limit: float) -> dict[str, Any]:
        """``tasks/get`` with what is left of the caller's deadline. A ``tasks/get`` cut off
        by that deadline is the task still running at it, and says so (not "no answer to
        tasks/get within 0.0s", which blames the server for the caller's budget)."""
        try:
            return await self.client.get_task(self.task_id, timeout=max(deadline - time.monotonic(), 0.001))
        except RequestTimeout:
            if deadline - time.monotonic() < 0.05:  # the loop's timers may fire a hair early
                raise self._late(limit) from None
            raise

    async def _follow(self, deadline: float, limit: float) -> None:
        """Follow the task on a listen stream until it ends, or the stream does (polling
        goes on from there), or the server turns out not to offer task notifications."""
        session = self.client.session
        request_id = session.next_id()
        queue = session.subscribe_queue(request_id)
        stream = asyncio.ensure_future(
            session.request(
                "subscriptions/listen",
                {"notifications": {"taskIds": [self.task_id]}},
                request_id=request_id,
                timeout=limit,
            )
        )
        try:
            while not self.done:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._late(limit)
                item = await _next_event(queue, stream, min(left, MAX_POLL_SECONDS))
                if item is _ENDED:
                    return
                if item is None or _acknowledged_ours(item, self.task_id):
                    # Quiet for a while (a notification may be lost), or just subscribed
                    # (a change before that was not heard): ask.
                    self.task = await self._get_by(deadline, limit)
                elif isinstance(item, Notification) and item.method == "notifications/subscriptions/acknowledged":
                    return  # the server does not offer task notifications: poll
                elif isinstance(item, Notification) and item.method == "notifications/tasks":
                    if item.params.get("taskId") == self.task_id:
                        self.task = {key: value for key, value in item.params.items() if key != "_meta"}
                if self.status == "input_required":
                    await self._answer(deadline)
        finally:
            session.unsubscribe_queue(request_id)
            stream.cancel()
            try:
                await stream
            except (asyncio.CancelledError, MCPError):
                pass

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
        """Answer the open input requests not answered yet, with the call's handlers (else the client's)."""
        requests = self.task.get("inputRequests")
        if not isinstance(requests, dict):
            return
        fresh = {key: value for key, value in requests.items() if key not in self._answered}
        if not fresh:
            return
        left = max(deadline - time.monotonic(), 0.001)
        try:
            handlers = self.handlers or self.client.handlers
            answers = await asyncio.wait_for(answer_all(handlers, fresh, self.client.transport.name), left)
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
        if not self.done:
            raise MalformedResponse(f"{self.client.transport.name}: task {self.task_id} is still {self.status}")
        status = self.status
        if status == "completed":
            result = self.task.get("result")
            return result if isinstance(result, dict) else {}
        if status == "failed":
            error = self.task.get("error")
            raise error_from_wire(error if isinstance(error, dict) else {"message": "the task failed"})
        message = self.task.get("statusMessage") or "no reason given"
        raise TaskCancelled(f"{self.client.transport.name}: task {self.task_id} was cancelled ({message})")


_ENDED = object()


async def _next_event(queue: asyncio.Queue[Any], stream: asyncio.Future[Any], wait: float) -> Any:
    """The next notification of the stream; ``None`` after ``wait`` seconds of quiet;
    ``_ENDED`` when the stream ended (or failed: polling takes over)."""
    getting = asyncio.ensure_future(queue.get())
    done, _ = await asyncio.wait({getting, stream}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
    if getting not in done:
        getting.cancel()
        return _ENDED if stream in done else None
    item = getting.result()
    if isinstance(item, BaseException | asyncio.Future):
        return _ENDED
    return item


def _acknowledged_ours(item: Any, task_id: str) -> bool:
    if not isinstance(item, Notification) or item.method != "notifications/subscriptions/acknowledged":
        return False
    agreed = item.params.get("notifications")
    return isinstance(agreed, dict) and task_id in (agreed.get("taskIds") or ())
