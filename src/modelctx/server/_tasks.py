"""The tasks extension (io.modelcontextprotocol/tasks, SEP-2663) on the server side.

Theory of operation. A tool registered with ``task="optional"`` or ``"required"`` may
answer ``tools/call`` with a task instead of its result, but only to a request whose
client capabilities declare the extension (never to any other: a ``"required"`` tool
refuses such a call with -32021, an ``"optional"`` one runs as a plain call). The task
is written to the ``TaskStore`` first, then the ``CreateTaskResult`` goes back and the
handler runs on as an asyncio task of its own, which the ``TaskManager`` tracks only
while it runs (``_running``): its outcome is written to the store when it ends.

* ``task_start="call"`` (the default): the task exists before the handler starts.
* ``task_start="handler"``: the handler runs inside the request (its questions are
  multi round-trip rounds, ``input_required``) until it calls ``ctx.start_task()``;
  from there on it is a task (tasks.md: resolve MRTR exchanges before the task).

Inside a task, ``ctx.ask`` (``elicit``, ``sample``, ...) opens ``inputRequests`` on
the task (``input_required``) and waits for ``tasks/update`` to bring the answers;
progress and log notifications are not sent (tasks.md: not supported on tasks).

Era choice (DIGEST §15 style): the handshake era has no per-request capabilities, so
there the extension counts as declared when the session's ``initialize`` capabilities
carry ``extensions["io.modelcontextprotocol/tasks"]``; the methods are the same.

Cancellation (``tasks/cancel``) marks the task cancelled in the store at once and
cancels the handler's asyncio task if it runs in this process; a store shared by
replicas (``RedisTaskStore``) tells the replica running it (``TaskStore.watch``), which
cancels it there. A handler that finishes anyway cannot change a terminal task. A task that was running when its
process died is failed, with a reason, the first time the next process touches the
store. Expired tasks (``ttlMs`` after creation) are gone for every method and purged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    MissingRequiredClientCapability,
    ProtocolError,
    RateLimited,
)
from ..transports.identity import identity, identity_key
from ._context import Call, InputRequired
from ._task_store import TaskRecord, TaskStore

if TYPE_CHECKING:
    from ._server import Server

__all__ = ["EXTENSION", "TASK_SUPPORT", "TaskManager", "declared", "detailed", "task_methods"]

log = logging.getLogger("modelctx.server")

EXTENSION = "io.modelcontextprotocol/tasks"
TASK_SUPPORT = ("forbidden", "optional", "required")
TASK_START = ("call", "handler")

# How often a handler waiting for input re-reads the store besides being woken by a
# tasks/update in this process (answers that reached another replica), and how often
# expired tasks are purged at most.
ANSWER_POLL_SECONDS = 1.0
PURGE_EVERY_SECONDS = 1.0

LOST_MESSAGE = "The server stopped while this task was running; its work was lost. Call the tool again."
LOST_ERROR: dict[str, Any] = {"code": InternalError.code, "message": LOST_MESSAGE}

# A principal that names neither a subject nor a client could not be told apart from the
# next such caller, so it owns no task (it would read and cancel every other's). The
# extension names no code for this; -32600 (Invalid Request: this request, as
# authenticated, cannot be served as a task) is the closest JSON-RPC has. An "optional"
# tool answers such a caller in place instead, as a plain call.
NO_OWNER_MESSAGE = (
    "a task needs an owner, and this request's principal names neither a subject (sub) nor a "
    "client (client_id), so no later request could be told to be the same caller; "
    "authenticate with a token that carries sub or client_id"
)


class _Refused(Exception):
    """A call that cannot be a task now; ``error`` says why (a ``"required"`` tool's answer)."""

    def __init__(self, error: ProtocolError) -> None:
        super().__init__(error.message)
        self.error = error


def declared(call: Call) -> bool:
    """Did the request's client declare the tasks extension (per request, or in the
    handshake era at initialize)?"""
    extensions = call.capabilities.get("extensions")
    return isinstance(extensions, dict) and EXTENSION in extensions


def require_declared(call: Call, what: str) -> None:
    if not declared(call):
        raise MissingRequiredClientCapability(
            f"Missing required client capability: {what} needs the {EXTENSION} extension; "
            f'declare "extensions": {{"{EXTENSION}": {{}}}} in clientCapabilities',
            {"extensions": {EXTENSION: {}}},
        )


# The stored owner of a task: the principal's identity (``transports.identity``, the one
# rule sessions, requestState and rate limits key by too): a JSON object of its issuer,
# subject and client id, each a string or null (never a stringified None), keys sorted.
# Records written before (``[iss, sub]`` or the bare subject) are still read: see ``owns``.
def owner_of(principal: Any) -> str | None:
    """The owner a task of ``principal`` is stored with: None without authentication
    (the unguessable task id is then the only handle), else its identity as a JSON
    object. Raises ``InvalidRequest`` for a principal with no stable identity."""
    if principal is None:
        return None
    key = identity_key(principal)
    if key is None:
        raise InvalidRequest(f"Invalid request: {NO_OWNER_MESSAGE}")
    return key


def can_own(principal: Any) -> bool:
    """Whether ``principal`` may own tasks (it is None, or has a stable identity)."""
    return principal is None or identity(principal) is not None


def owns(stored: str | None, principal: Any) -> bool:
    """Is ``stored`` (a record's owner) the owner ``principal`` would be stored with? A
    principal with no stable identity owns nothing. An owner written before identities
    were JSON objects (``[iss, sub]``, or the bare subject) is still its subject's, unless
    it is the ambiguous ``"None"`` every token without ``sub`` was stored with."""
    if principal is None:
        return stored is None
    named = identity(principal)
    if named is None or stored is None:
        return False
    if stored.startswith("{"):
        return stored == identity_key(principal)
    subject = named["sub"]
    if subject is None or subject == "None":
        return False
    issuer = named["iss"]
    return stored == (str(subject) if issuer is None else json.dumps([str(issuer), str(subject)]))


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _task_fields(record: TaskRecord) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "taskId": record.task_id,
        "status": record.status,
        "createdAt": _iso(record.created_at),
        "lastUpdatedAt": _iso(record.updated_at),
        "ttlMs": record.ttl_ms,
        "pollIntervalMs": record.poll_interval_ms,
    }
    if record.status_message:
        fields["statusMessage"] = record.status_message
    return fields


def detailed(record: TaskRecord) -> dict[str, Any]:
    """The ``DetailedTask`` of ``record``: what tasks/get and notifications/tasks carry."""
    fields = _task_fields(record)
    if record.status == "input_required":
        fields["inputRequests"] = record.input_requests
    elif record.status == "completed":
        fields["result"] = record.result or {}
    elif record.status == "failed":
        fields["error"] = record.error or dict(LOST_ERROR)
    return fields


def _stop_if_cancelled() -> None:
    """Raise the cancellation of the current task if a store call swallowed it (redis-py
    can: redis/redis-py#2028), so a cancelled handler waiting for input stops."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _error_object(exc: ProtocolError) -> dict[str, Any]:
    error: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        error["data"] = exc.data
    return error


class TaskManager:
    """The tasks of one server: their store, and the handlers running in this process.

    Bounds (each past it: an ``"optional"`` tool answers in place, a ``"required"`` one
    is refused with ``RateLimited``, -31429, with ``data.retryAfterMs``):
    ``ServerConfig.max_running_tasks`` handlers in this process, and
    ``max_running_tasks_per_principal`` unfinished tasks of one authenticated principal:
    counted in the store when it is shared by processes and offers ``create_within``
    (``RedisTaskStore``: every replica and worker together), else in this process.
    Unauthenticated callers have no principal to count by: only the process's cap holds.
    """

    def __init__(self, server: Server, store: TaskStore) -> None:
        self.server = server
        self.store = store
        self._running: dict[str, asyncio.Future[Any]] = {}
        self._wake: dict[str, asyncio.Event] = {}
        self._writes: set[asyncio.Task[None]] = set()
        # Slots taken by tasks being created or running here, in all and per owner
        # (authenticated principals only); given back when the handler ends.
        self._starting = 0
        self._by_owner: dict[str, int] = {}
        self._owner_of: dict[str, str] = {}  # task id -> owner, for tasks counted per owner
        self._recovered = False
        self._recovering: asyncio.Lock | None = None
        #: Put before every new task id: a worker of ``--workers`` whose store is its own
        #: (``per_process``) names itself there (``w1-``), so a request for the task that
        #: reaches a sibling is relayed here (``transports._siblings``).
        self.id_prefix = ""
        self._last_purge = 0.0
        # Optional for a store of one process (a store written before ``watch`` existed).
        watch = getattr(store, "watch", None)
        if watch is not None:
            watch(self._ended_elsewhere)
        # A store shared by processes may count each owner's tasks across all of them.
        self._create_within: Callable[[TaskRecord, int], Awaitable[bool]] | None = getattr(
            store, "create_within", None
        )

    @property
    def running(self) -> int:
        """Handlers of tasks running in this process now."""
        return len(self._running)

    @property
    def held(self) -> int:
        """Every per-task object this process holds (runners, wake-ups, pending writes, counts)."""
        return len(self._running) + len(self._wake) + len(self._writes) + len(self._by_owner) + self._starting

    def full(self) -> bool:
        """Whether this process runs ``max_running_tasks`` task handlers already."""
        return len(self._running) + self._starting >= self.server.config.max_running_tasks

    def _refusal(self, call: Call) -> ProtocolError | None:
        """Why ``call`` cannot be a task now (checked in this process), or None."""
        config = self.server.config
        if not can_own(call.principal):
            return InvalidRequest(f"Invalid request: {NO_OWNER_MESSAGE}")
        retry = {"retryAfterMs": config.task_poll_interval_ms}
        if self.full():
            return RateLimited(
                f"this server is at its limit of running tasks ({config.max_running_tasks}, "
                "ServerConfig.max_running_tasks); call again once some have ended",
                retry,
            )
        owner = owner_of(call.principal)
        if owner is not None and self._create_within is None:
            if self._by_owner.get(owner, 0) >= config.max_running_tasks_per_principal:
                return self._principal_full()
        return None

    def _principal_full(self) -> RateLimited:
        config = self.server.config
        return RateLimited(
            f"this principal is at its limit of running tasks ({config.max_running_tasks_per_principal}, "
            "ServerConfig.max_running_tasks_per_principal); call again once some of its tasks have ended",
            {"retryAfterMs": config.task_poll_interval_ms},
        )

    async def ready(self) -> None:
        """Before every use of the store: once per process, fail the tasks a previous
        process left running (their handlers died with it); at most once a second,
        purge the expired tasks (so expired rows go on the next use of the methods)."""
        if self._recovered:
            await self._purge()
            return
        if self._recovering is None:
            self._recovering = asyncio.Lock()
        async with self._recovering:
            if not self._recovered:
                lost = await self.store.fail_unfinished(dict(LOST_ERROR), LOST_MESSAGE)
                if lost:
                    log.warning("marked %d task(s) failed: the process running them stopped", lost)
                self._recovered = True
        await self._purge()

    def _ended_elsewhere(self, task_id: str, record: TaskRecord | None) -> None:
        """A task of this process ended by another hand (cancelled on another replica, or
        failed because its runner's lease expired): stop its handler; announce a
        failure the store made (``record``), since no replica announced it yet."""
        runner = self._running.get(task_id)
        if runner is not None:
            runner.cancel()
        self._publish(record)

    async def _purge(self) -> None:
        now = time.monotonic()
        if now - self._last_purge >= PURGE_EVERY_SECONDS:
            self._last_purge = now
            await self.store.purge_expired()

    # -- creating and running -------------------------------------------------------
    async def call_as_task(
        self, call: Call, support: str, start: str, work: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """Answer ``call`` with a task running ``work`` (or, for ``start="handler"``,
        with whatever ``work`` answers before its handler calls ``ctx.start_task()``).
        When it cannot be a task (``_refusal``; its owner at its limit in a shared store)
        a ``support="optional"`` tool answers in place with ``work()``, and a
        ``"required"`` one raises why (``RateLimited``, ``InvalidRequest``)."""
        refused = self._refusal(call)
        if refused is not None:
            if support == "required":
                raise refused
            return await work()
        await self.ready()
        if start == "call":
            try:
                created = await self._begin(call)
            except _Refused as refusal:
                if support == "required":
                    raise refusal.error from None
                return await work()
            self._adopt(call, asyncio.ensure_future(work()))
            return created
        return await self._task_from_handler(call, support, work)

    async def _task_from_handler(
        self, call: Call, support: str, work: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """``start="handler"``: run ``work`` in the request until its handler calls
        ``ctx.start_task()`` (then answer the task) or answers without one."""
        begun: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

        async def begin() -> None:
            if begun.done():
                return
            try:
                begun.set_result(await self._begin(call))
            except _Refused as refusal:
                if support == "required":
                    raise refusal.error from None
                call.begin_task = None  # no task: the handler goes on in the request

        call.begin_task = begin
        runner = asyncio.ensure_future(work())
        try:
            await asyncio.wait({runner, begun}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            runner.cancel()
            if begun.done() and not begun.cancelled() and begun.exception() is None and call.task is not None:
                self._give_back(call.task.task_id)  # created, never adopted: its slot is free again
            begun.cancel()
            raise
        if begun.done() and not begun.cancelled() and begun.exception() is None:
            self._adopt(call, runner)
            return begun.result()
        begun.cancel()
        call.begin_task = None
        return runner.result()  # the plain answer, or its exception (InputRequired…)

    async def _begin(self, call: Call) -> dict[str, Any]:
        """Create the task durably; from now on the handler's questions go to it. Its
        slot is taken before the store is asked (so concurrent calls cannot overshoot a
        cap) and given back when its handler ends (``_settle``) or the store refuses.
        Raises ``_Refused`` at a limit."""
        refused = self._refusal(call)  # again: the store may have been slow to be ready
        if refused is not None:
            raise _Refused(refused)
        config = self.server.config
        now = time.time()
        record = TaskRecord(
            task_id=self.id_prefix + secrets.token_urlsafe(24),  # unguessable: the id is a bearer handle
            status="working",
            created_at=now,
            updated_at=now,
            ttl_ms=config.task_ttl_ms,
            poll_interval_ms=config.task_poll_interval_ms,
            owner=owner_of(call.principal),
        )
        self._take(record.task_id, record.owner)
        try:
            if record.owner is not None and self._create_within is not None:
                if not await self._create_within(record, config.max_running_tasks_per_principal):
                    raise _Refused(self._principal_full())
            else:
                await self.store.create(record)
        except BaseException:
            self._give_back(record.task_id)
            raise
        call.task = TaskHandle(self, record.task_id)
        # Progress and logs are not sent for tasks (tasks.md, Task Status Notifications).
        call.progress_token = None
        call.log_rank = None
        return {"resultType": "task", **_task_fields(record)}

    def _take(self, task_id: str, owner: str | None) -> None:
        self._starting += 1
        if owner is not None:
            self._owner_of[task_id] = owner
            self._by_owner[owner] = self._by_owner.get(owner, 0) + 1

    def _give_back(self, task_id: str, *, started: bool = False) -> None:
        """Give back the slot of a task that never ran (or, ``started``, whose handler
        ran, when it ends)."""
        if not started:
            self._starting -= 1
        owner = self._owner_of.pop(task_id, None)
        if owner is not None:
            left = self._by_owner[owner] - 1
            if left:
                self._by_owner[owner] = left
            else:
                del self._by_owner[owner]

    def _adopt(self, call: Call, runner: asyncio.Future[dict[str, Any]]) -> None:
        assert call.task is not None
        task_id = call.task.task_id
        self._starting -= 1  # from a slot being created to a running one
        self._running[task_id] = runner
        runner.add_done_callback(lambda done: self._settle(task_id, done))

    def _settle(self, task_id: str, runner: asyncio.Future[dict[str, Any]]) -> None:
        """Write the outcome of a handler that ended (a loop callback: the write is a task)."""
        self._running.pop(task_id, None)
        self._give_back(task_id, started=True)
        self._wake.pop(task_id, None)
        if runner.cancelled():
            # tasks/cancel wrote "cancelled" already; any other cancellation is the process
            # stopping, and the next start fails the task with a reason.
            return
        exc = runner.exception()
        if exc is None:
            write = self._finish(task_id, "completed", result=runner.result())
        elif isinstance(exc, ProtocolError):
            write = self._finish(task_id, "failed", error=_error_object(exc), message=exc.message)
        elif isinstance(exc, InputRequired):
            error = InternalError("the handler asked to be retried, which a task cannot do")
            write = self._finish(task_id, "failed", error=_error_object(error), message=error.message)
        else:
            log.error("task %s: the handler raised", task_id, exc_info=exc)
            error = InternalError("Internal error")
            write = self._finish(task_id, "failed", error=_error_object(error), message="the tool failed")
        pending = asyncio.ensure_future(write)
        self._writes.add(pending)
        pending.add_done_callback(self._writes.discard)

    async def _finish(self, task_id: str, status: str, **outcome: Any) -> None:
        try:
            record = await self.store.set_status(task_id, status, **outcome)
        except Exception:
            log.exception("task %s: could not store its outcome", task_id)
            return
        self._publish(record)

    def _publish(self, record: TaskRecord | None) -> None:
        if record is not None:
            self.server.publish_task(record.task_id, {"owner": record.owner, "task": detailed(record)})

    # -- input from the client ---------------------------------------------------------
    async def ask(self, task_id: str, requests: dict[str, Any]) -> dict[str, Any]:
        """Open ``requests`` on the task and wait until every one is answered."""
        record = await self.store.ask(task_id, requests)
        if record is None:
            raise InternalError("the task ended while it was waiting for input")
        self._publish(record)
        pending = list(requests)
        answers: dict[str, Any] = {}
        while True:
            woken = self._wake.setdefault(task_id, asyncio.Event())
            taken = await self.store.take_answers(task_id, pending)
            _stop_if_cancelled()
            answers.update(taken)
            pending = [key for key in pending if key not in taken]
            if not pending:
                return answers
            try:
                await asyncio.wait_for(woken.wait(), ANSWER_POLL_SECONDS)
            except TimeoutError:
                # Bounded by the task itself: an expired or ended task stops the wait.
                current = await self.store.get(task_id)
                _stop_if_cancelled()
                if current is None or current.terminal:
                    raise InternalError("the task ended while it was waiting for input") from None

    # -- the methods -----------------------------------------------------------------------
    async def find(self, call: Call) -> TaskRecord:
        """The caller's task named by ``params.taskId``; -32602 when there is none (also
        for another principal's task: its existence is not revealed)."""
        require_declared(call, call.method)
        task_id = call.params.get("taskId")
        if not isinstance(task_id, str):
            raise InvalidParams(f"Invalid params: {call.method} needs taskId (a string)")
        await self.ready()
        record = await self.store.get(task_id)
        if record is None or not owns(record.owner, call.principal):
            raise InvalidParams(
                f"Invalid params: no task {task_id!r} (it may have expired: tasks are kept "
                "for their ttlMs after creation)"
            )
        return record

    async def get(self, call: Call) -> dict[str, Any]:
        return detailed(await self.find(call))

    async def update(self, call: Call) -> dict[str, Any]:
        responses = call.params.get("inputResponses")
        if not isinstance(responses, dict):
            raise InvalidParams("Invalid params: tasks/update needs inputResponses (an object)")
        record = await self.find(call)
        if responses and not record.terminal:
            changed = await self.store.answer(record.task_id, responses)
            woken = self._wake.pop(record.task_id, None)
            if woken is not None:
                woken.set()
            if changed is not None and changed.updated_at != record.updated_at:
                self._publish(changed)
        return {}

    async def cancel(self, call: Call) -> dict[str, Any]:
        record = await self.find(call)
        if not record.terminal:
            cancelled = await self.store.set_status(
                record.task_id, "cancelled", message="Cancelled at the client's request"
            )
            runner = self._running.get(record.task_id)
            if runner is not None:
                runner.cancel()
            self._publish(cancelled)
        return {}


class TaskHandle:
    """What a handler's ``Call`` holds once it runs as a task."""

    __slots__ = ("manager", "task_id")

    def __init__(self, manager: TaskManager, task_id: str) -> None:
        self.manager = manager
        self.task_id = task_id

    async def ask(self, requests: dict[str, Any]) -> dict[str, Any]:
        return await self.manager.ask(self.task_id, requests)


def _manager(call: Call) -> TaskManager:
    tasks = call.server.tasks
    if tasks is None:  # the dispatcher's serves() keeps these methods away then
        raise InternalError("this server has no tasks")
    manager: TaskManager = tasks
    return manager


async def tasks_get(call: Call) -> dict[str, Any]:
    return await _manager(call).get(call)


async def tasks_update(call: Call) -> dict[str, Any]:
    return await _manager(call).update(call)


async def tasks_cancel(call: Call) -> dict[str, Any]:
    return await _manager(call).cancel(call)


def task_methods() -> dict[str, Callable[[Call], Awaitable[dict[str, Any]]]]:
    return {"tasks/get": tasks_get, "tasks/update": tasks_update, "tasks/cancel": tasks_cancel}
