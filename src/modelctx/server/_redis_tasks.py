"""``RedisTaskStore``: the tasks of several server replicas in one shared Redis.

Layout. Every key starts with ``prefix`` (default ``modelctx:<server name>:tasks:``), so
several servers share one Redis without seeing each other's tasks. A task is a hash
``<prefix>task:{<id>}`` (its fields as plain strings, results and errors as JSON), with
two side hashes ``...:asks`` (the open input requests) and ``...:answers`` (answers the
handler has not taken yet). A task with a TTL gets ``PEXPIREAT`` at creation, and each
side hash the same moment when first written: Redis itself removes the task and its
result when the TTL ends, and every method finds an expired task absent.
``purge_expired`` has nothing to do.

Atomicity: each method that changes a task is one Lua script (``EVALSHA``) over that
task's keys. A script runs alone on the server, so the check ("not terminal yet") and
the change are one step: a terminal task never changes again, whoever writes, and no
client retries. WATCH/MULTI would need three round trips per change and retries under
contention (the handler finishing while a client cancels is exactly that case); the
scripts never decode JSON (results pass through as opaque strings), so Redis's Lua JSON
quirks (empty arrays, number precision) cannot touch a result. The scripts also touch a
replica's keys (its lease and its running set) besides the task's, so this store needs a
single Redis (or a primary with replicas, Sentinel), not Redis Cluster.

Ownership. ``fail_unfinished`` cannot mean "every unfinished task" when other replicas
are still running theirs. Each process using a store has a random ``replica_id`` of its
own (made again in a forked worker: ``--workers`` copies the store made before the fork
into every worker, and one id shared by all would let a live worker renew a dead one's
lease, so the dead one's tasks stayed "working" for their TTL) and keeps a lease key ``<prefix>lease:<replica_id>`` alive (``PX``
``lease_seconds``, renewed every ``lease_seconds / 5`` on a connection of its own) from
its first use on. A task records the replica that runs it (``runner``), and the
replica's running set
``<prefix>running:<replica_id>`` holds its unfinished tasks. When a runner's lease has
expired (its process died, or lost Redis for longer than the lease), its unfinished
tasks are failed with ``RUNNER_LOST_MESSAGE`` (-32603): by any replica that reads one
(``get``), and by every replica's periodic sweep of the replicas it knows
(``<prefix>replicas``), which announces the failure to listeners. A replica stopped
gracefully (``close``) gives its lease back at once and fails its own unfinished tasks.

Tasks per owner. ``create_within`` counts an owner's unfinished tasks across every
replica: a set ``<prefix>owner:<hash of the owner>`` of their ids, which the creating
script checks and adds to in one step, and which a task leaves when it ends (the same
``finish`` that takes it out of its runner's running set).

Cancel across replicas. ``tasks/cancel`` on replica B writes ``cancelled`` (the script
guards it). Replica A checks the status of the tasks it runs every ``check_interval``
seconds (one pipelined read for all of them) and tells the ``TaskManager`` (``watch``)
of every one that ended by another hand, which cancels its handler. A check, rather than
a pub/sub message, so a cancel is never lost to a reconnect; the cost is one round trip
per interval, and a cancel reaches the handler within ``check_interval``.

Connections are made lazily on the first call (on the running event loop, never at
import or construction); ``redis`` is imported only then. Every command has a deadline
(``timeout``), and the connections are a bounded pool (``max_connections``): thousands
of concurrent tasks queue for a connection rather than open thousands.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import InternalError
from ._task_store import TERMINAL, TaskRecord
from .redis import redacted

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

__all__ = ["RUNNER_LOST_MESSAGE", "RedisTaskStore"]

log = logging.getLogger("modelctx.server")

RUNNER_LOST_MESSAGE = (
    "The server process running this task stopped (its lease in Redis expired before the "
    "task ended); its work was lost. Call the tool again."
)
RUNNER_LOST_ERROR: dict[str, Any] = {"code": -32603, "message": RUNNER_LOST_MESSAGE}

_PRELUDE = """
local TERMINAL = {completed=true, failed=true, cancelled=true}
local function load(main, asks, answers)
  return {redis.call('HGETALL', main), redis.call('HGETALL', asks), redis.call('HGETALL', answers)}
end
local function expire_like(main, key)
  local at = redis.call('HGET', main, 'expires')
  if at and at ~= '' then redis.call('PEXPIREAT', key, at) end
end
local function finish(main, asks, answers, running, status, now, message, result, err)
  redis.call('HSET', main, 'status', status, 'updated_at', now, 'message', message,
             'result', result, 'error', err)
  redis.call('DEL', asks, answers)
  local id = redis.call('HGET', main, 'task_id')
  local runner = redis.call('HGET', main, 'runner')
  if runner then redis.call('SREM', running .. runner, id) end
  local owned = redis.call('HGET', main, 'owner_key')
  if owned and owned ~= '' then redis.call('SREM', owned, id) end
end
"""

# KEYS: task, the runner's running set, the owner's set. ARGV: limit ('-1': not counted,
# no owner), task key prefix, expiry ms ('' none), task id, now ms, then field pairs.
# At the limit, members of the owner's set whose task is gone or terminal (their runner
# died and the task expired before a sweep read it) are dropped first. Returns 1 when
# created, 0 when the owner has ``limit`` unfinished tasks already.
_CREATE = (
    _PRELUDE
    + """
local limit = tonumber(ARGV[1])
if limit >= 0 and redis.call('SCARD', KEYS[3]) >= limit then
  for _, id in ipairs(redis.call('SMEMBERS', KEYS[3])) do
    local status = redis.call('HGET', ARGV[2] .. 'task:{' .. id .. '}', 'status')
    if not status or TERMINAL[status] then redis.call('SREM', KEYS[3], id) end
  end
  if redis.call('SCARD', KEYS[3]) >= limit then return 0 end
end
for i = 6, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
if ARGV[3] ~= '' then redis.call('PEXPIREAT', KEYS[1], ARGV[3]) end
if TERMINAL[redis.call('HGET', KEYS[1], 'status')] then return 1 end
redis.call('SADD', KEYS[2], ARGV[4])
if limit >= 0 then
  local fresh = redis.call('EXISTS', KEYS[3]) == 0
  redis.call('SADD', KEYS[3], ARGV[4])
  if ARGV[3] == '' then
    redis.call('PERSIST', KEYS[3])
  else
    -- The set lives as long as its longest-lived task could.
    local want = tonumber(ARGV[3]) - tonumber(ARGV[5])
    local left = redis.call('PTTL', KEYS[3])
    if want > 0 and (fresh or (left >= 0 and left < want)) then redis.call('PEXPIRE', KEYS[3], want) end
  end
end
return 1
"""
)

# KEYS: task, asks, answers. ARGV: status, now, message, result, error, running prefix, terminal?
_SET_STATUS = (
    _PRELUDE
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if not status or TERMINAL[status] then return false end
if ARGV[7] == '1' then
  finish(KEYS[1], KEYS[2], KEYS[3], ARGV[6], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
else
  redis.call('HSET', KEYS[1], 'status', ARGV[1], 'updated_at', ARGV[2], 'message', ARGV[3],
             'result', ARGV[4], 'error', ARGV[5])
end
return load(KEYS[1], KEYS[2], KEYS[3])
"""
)

# KEYS: task, asks, answers. ARGV: now, then key, request pairs.
_ASK = (
    _PRELUDE
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if not status or TERMINAL[status] then return false end
for i = 2, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
expire_like(KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], 'status', 'input_required', 'updated_at', ARGV[1])
return load(KEYS[1], KEYS[2], KEYS[3])
"""
)

# KEYS: task, asks, answers. ARGV: now, then key, response pairs.
_ANSWER = (
    _PRELUDE
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return false end
if TERMINAL[status] then return load(KEYS[1], KEYS[2], KEYS[3]) end
local taken = 0
for i = 2, #ARGV, 2 do
  if redis.call('HDEL', KEYS[2], ARGV[i]) == 1 then
    redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
    taken = taken + 1
  end
end
if taken > 0 then
  expire_like(KEYS[1], KEYS[3])
  if redis.call('HLEN', KEYS[2]) == 0 then redis.call('HSET', KEYS[1], 'status', 'working') end
  redis.call('HSET', KEYS[1], 'updated_at', ARGV[1])
end
return load(KEYS[1], KEYS[2], KEYS[3])
"""
)

# KEYS: answers. ARGV: the keys to take.
_TAKE = """
local out = {}
for i = 1, #ARGV do
  local value = redis.call('HGET', KEYS[1], ARGV[i])
  if value then
    redis.call('HDEL', KEYS[1], ARGV[i])
    out[#out + 1] = ARGV[i]
    out[#out + 1] = value
  end
end
return out
"""

# KEYS: task, asks, answers. ARGV: now, lease prefix, running prefix, message, error.
# Reads the task; fails it first when its runner's lease is gone. Returns {failed now?, task}.
_GET = (
    _PRELUDE
    + """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return false end
local lost = 0
if not TERMINAL[status] then
  local runner = redis.call('HGET', KEYS[1], 'runner')
  if runner and redis.call('EXISTS', ARGV[2] .. runner) == 0 then
    finish(KEYS[1], KEYS[2], KEYS[3], ARGV[3], 'failed', ARGV[1], ARGV[4], 'null', ARGV[5])
    lost = 1
  end
end
return {lost, load(KEYS[1], KEYS[2], KEYS[3])}
"""
)

_SCRIPTS = {
    "create": _CREATE,
    "set_status": _SET_STATUS,
    "ask": _ASK,
    "answer": _ANSWER,
    "take": _TAKE,
    "get": _GET,
}


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _cancel_requested() -> bool:
    """Was the current task cancelled? redis-py may swallow the cancellation of a command
    (or turn it into a connection error), so the upkeep loops ask, rather than trust the
    ``CancelledError`` to reach them."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _stop_if_cancelled(exc: Exception) -> None:
    """An upkeep loop being cancelled stops, rather than take an error for Redis being away."""
    if _cancel_requested():
        raise asyncio.CancelledError from exc


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _pairs(flat: list[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _record(loaded: list[list[str]]) -> TaskRecord:
    """A ``TaskRecord`` from the three hashes a script returned (flat field, value lists)."""
    main, asks, answers = (_pairs(part) for part in loaded)
    return TaskRecord(
        task_id=main["task_id"],
        status=main["status"],
        created_at=float(main["created_at"]),
        updated_at=float(main["updated_at"]),
        ttl_ms=msgspec.json.decode(main["ttl_ms"]),
        poll_interval_ms=int(main["poll_interval_ms"]),
        owner=msgspec.json.decode(main["owner"]),
        status_message=msgspec.json.decode(main.get("message", "null")),
        input_requests={key: msgspec.json.decode(value) for key, value in asks.items()},
        responses={key: msgspec.json.decode(value) for key, value in answers.items()},
        result=msgspec.json.decode(main.get("result", "null")),
        error=msgspec.json.decode(main.get("error", "null")),
        runner=main.get("runner") or None,
    )


class RedisTaskStore:
    """A ``TaskStore`` in Redis, shared by every replica of a server (module docstring).

    ``url``: ``redis://``, ``rediss://`` or ``unix://``. ``prefix``: the start of every
    key (replicas of one server share it; other servers use their own).
    ``lease_seconds``: how long a replica may go silent before its unfinished tasks are
    failed. ``check_interval``: how often a replica looks for its tasks cancelled on
    another. ``timeout``: the deadline of every Redis command and of waiting for one of
    the ``max_connections`` connections."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "modelctx:tasks:",
        lease_seconds: float = 10.0,
        check_interval: float = 0.5,
        timeout: float = 10.0,
        max_connections: int = 32,
    ) -> None:
        if lease_seconds <= 0 or check_interval <= 0 or timeout <= 0:
            raise ValueError("lease_seconds, check_interval and timeout must be positive")
        self.url = url
        self.where = redacted(url)  # for logs: never the password
        self.prefix = prefix
        self._pid = os.getpid()
        self._replica_id = secrets.token_hex(8)
        self.lease_seconds = lease_seconds
        self.check_interval = check_interval
        self.timeout = timeout
        self.max_connections = max_connections
        self._redis: Redis | None = None
        self._scripts: dict[str, AsyncScript] = {}
        self._start: asyncio.Task[Redis] | None = None
        self._lease_client: Redis | None = None
        self._upkeep: list[asyncio.Task[None]] = []
        self._mine: set[str] = set()  # unfinished tasks whose handler runs in this process
        self._watchers: list[Callable[[str, TaskRecord | None], None]] = []

    # -- this process ---------------------------------------------------------------------
    @property
    def replica_id(self) -> str:
        """This process's id as a runner of tasks (its lease, its running set). A store
        made before ``--workers`` forks is copied into every worker: each gets an id of
        its own here, so no worker renews the lease of another that died (20 tasks on
        two workers, one SIGKILLed: 8 stayed "working" for their whole TTL)."""
        self._own_process()
        return self._replica_id

    def _own_process(self) -> None:
        """In a forked child, forget what the parent's copy held: its id, its connections
        (their sockets belong to the parent; never closed from here) and its tasks."""
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._replica_id = secrets.token_hex(8)
        self._redis = self._lease_client = self._start = None
        self._scripts = {}
        self._upkeep = []
        self._mine = set()

    # -- keys ---------------------------------------------------------------------------
    def _task_keys(self, task_id: str) -> list[str]:
        main = f"{self.prefix}task:{{{task_id}}}"  # hash tag: a task's keys share a slot
        return [main, f"{main}:asks", f"{main}:answers"]

    @property
    def _lease_prefix(self) -> str:
        return f"{self.prefix}lease:"

    @property
    def _running_prefix(self) -> str:
        return f"{self.prefix}running:"

    @property
    def _replicas(self) -> str:
        return f"{self.prefix}replicas"

    # -- connection and upkeep ------------------------------------------------------------
    async def _client(self) -> Redis:
        """The connection pool, made on first use on this loop; the lease is taken before
        any task of this replica exists, and the upkeep task starts."""
        self._own_process()
        loop = asyncio.get_running_loop()
        if self._start is None or self._start.get_loop() is not loop:
            self._start = loop.create_task(self._connect())
        try:
            return await asyncio.shield(self._start)
        except Exception as exc:
            if self._start is not None and self._start.done():
                self._start = None  # Redis was unreachable: the next call tries again
            log.error("the task store could not reach Redis at %s: %s", self.where, exc)
            raise InternalError(
                "The server's task store is unreachable (its operator is told why in the server's log); try again later"
            ) from exc

    async def _connect(self) -> Redis:
        import redis.asyncio as aioredis

        def pool(size: int) -> aioredis.BlockingConnectionPool:
            return aioredis.BlockingConnectionPool.from_url(
                self.url,
                max_connections=size,
                timeout=self.timeout,
                socket_timeout=self.timeout,
                socket_connect_timeout=self.timeout,
                decode_responses=True,
            )

        client = aioredis.Redis(connection_pool=pool(self.max_connections))
        # The lease has a connection of its own: under load the shared pool has a queue,
        # and a renewal waiting in it could let a live replica's lease run out.
        lease_client = aioredis.Redis(connection_pool=pool(1))
        self._scripts = {name: client.register_script(source) for name, source in _SCRIPTS.items()}
        await self._renew_lease(lease_client)
        self._redis, self._lease_client = client, lease_client
        loop = asyncio.get_running_loop()
        self._upkeep = [loop.create_task(self._keep_lease(lease_client)), loop.create_task(self._maintain(client))]
        return client

    async def _renew_lease(self, client: Redis) -> None:
        async with client.pipeline(transaction=True) as pipe:
            pipe.set(self._lease_prefix + self.replica_id, str(time.time()), px=int(self.lease_seconds * 1000))
            pipe.sadd(self._replicas, self.replica_id)
            await pipe.execute()

    async def _keep_lease(self, client: Redis) -> None:
        while not _cancel_requested():
            await asyncio.sleep(self.lease_seconds / 5)
            try:
                await self._renew_lease(client)
            except Exception as exc:  # noqa: BLE001 - Redis away for a while: keep trying
                _stop_if_cancelled(exc)
                log.warning("could not renew this replica's task lease (Redis at %s): %s; retrying", self.where, exc)

    async def _maintain(self, client: Redis) -> None:
        """Find tasks of ours ended elsewhere; sweep replicas gone silent."""
        last_sweep = time.monotonic()
        while not _cancel_requested():
            await asyncio.sleep(self.check_interval)
            try:
                await self._check_mine(client)
                if time.monotonic() - last_sweep >= self.lease_seconds / 2:
                    last_sweep = time.monotonic()
                    await self._sweep(client)
            except Exception as exc:  # noqa: BLE001 - Redis away for a while: keep trying
                _stop_if_cancelled(exc)
                log.warning("task store upkeep failed (Redis at %s): %s; retrying", self.where, exc)

    async def _check_mine(self, client: Redis) -> None:
        ids = list(self._mine)
        if not ids:
            return
        async with client.pipeline(transaction=False) as pipe:
            for task_id in ids:
                pipe.hget(self._task_keys(task_id)[0], "status")
            statuses = await pipe.execute()
        for task_id, status in zip(ids, statuses, strict=True):
            if (status is None or status in TERMINAL) and task_id in self._mine:
                self._mine.discard(task_id)
                self._tell(task_id, None)

    async def _sweep(self, client: Redis) -> int:
        """Fail the unfinished tasks of every replica whose lease expired; how many."""
        replicas = sorted(map(_text, await client.smembers(self._replicas)))
        if not replicas:
            return 0
        async with client.pipeline(transaction=False) as pipe:
            for replica in replicas:
                pipe.exists(self._lease_prefix + replica)
            alive = await pipe.execute()
        failed = 0
        for replica, live in zip(replicas, alive, strict=True):
            if not live:
                failed += await self._fail_runner(client, replica)
        return failed

    async def _fail_runner(self, client: Redis, replica: str) -> int:
        running = self._running_prefix + replica
        task_ids = [_text(task_id) for task_id in await client.smembers(running)]
        failed = 0
        for start in range(0, len(task_ids), 100):
            batch = task_ids[start : start + 100]
            for task_id, (lost, record) in zip(batch, await asyncio.gather(*map(self._read, batch)), strict=True):
                if lost and record is not None:
                    failed += 1
                    self._tell(task_id, record)
            if batch:
                await client.srem(running, *batch)
        if not await client.scard(running):
            await client.srem(self._replicas, replica)
        return failed

    def _tell(self, task_id: str, record: TaskRecord | None) -> None:
        for ended in self._watchers:
            try:
                ended(task_id, record)
            except Exception:
                log.exception("task %s: a watcher of the task store failed", task_id)

    async def _read(self, task_id: str) -> tuple[bool, TaskRecord | None]:
        """The task (failed first if its runner is gone), and whether this read failed it."""
        await self._client()
        answer = await self._scripts["get"](
            keys=self._task_keys(task_id),
            args=[
                _json(time.time()),
                self._lease_prefix,
                self._running_prefix,
                _json(RUNNER_LOST_MESSAGE),
                _json(RUNNER_LOST_ERROR),
            ],
        )
        if answer is None:
            return False, None
        lost, loaded = answer
        return bool(lost), _record(loaded)

    # -- TaskStore --------------------------------------------------------------------------
    def watch(self, ended: Callable[[str, TaskRecord | None], None]) -> None:
        self._watchers.append(ended)

    async def create(self, record: TaskRecord) -> None:
        await self._create(record, None)

    async def create_within(self, record: TaskRecord, limit: int) -> bool:
        """Store a new task unless its owner has ``limit`` unfinished tasks already,
        counted across every replica and worker sharing this Redis (a set per owner,
        ``<prefix>owner:<hash of the owner>``, which a task leaves when it ends); False
        then, and nothing is stored. A task without an owner is not counted."""
        return await self._create(record, None if record.owner is None else limit)

    async def _create(self, record: TaskRecord, limit: int | None) -> bool:
        await self._client()
        replica = self.replica_id
        record.runner = replica
        keys = self._task_keys(record.task_id)
        expires = record.expires_at
        owned = "" if record.owner is None else self._owner_key(record.owner)
        fields = {
            "task_id": record.task_id,
            "status": record.status,
            "created_at": repr(record.created_at),
            "updated_at": repr(record.updated_at),
            "ttl_ms": _json(record.ttl_ms),
            "poll_interval_ms": str(record.poll_interval_ms),
            "owner": _json(record.owner),
            "owner_key": owned,
            "message": _json(record.status_message),
            "result": _json(record.result),
            "error": _json(record.error),
            "runner": replica,
            "expires": "" if expires is None else str(int(expires * 1000)),
        }
        args = [
            "-1" if limit is None or not owned else str(limit),
            self.prefix,
            fields["expires"],
            record.task_id,
            str(int(time.time() * 1000)),
        ]
        for pair in fields.items():
            args += pair
        running = self._running_prefix + replica
        created = await self._scripts["create"](keys=[keys[0], running, owned or running], args=args)
        if not created:
            return False
        if record.status not in TERMINAL:
            self._mine.add(record.task_id)
        if record.input_requests:
            await self.ask(record.task_id, record.input_requests)
        return True

    def _owner_key(self, owner: str) -> str:
        # Hashed: an owner (a JSON identity) may be long; the key only has to be one per owner.
        return f"{self.prefix}owner:{hashlib.sha256(owner.encode()).hexdigest()[:32]}"

    async def get(self, task_id: str) -> TaskRecord | None:
        lost, record = await self._read(task_id)
        if lost and record is not None:
            self._tell(task_id, record)
        return record

    async def set_status(
        self,
        task_id: str,
        status: str,
        *,
        message: str | None = None,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> TaskRecord | None:
        client = await self._client()
        terminal = status in TERMINAL
        loaded = await self._scripts["set_status"](
            keys=self._task_keys(task_id),
            args=[
                status,
                repr(time.time()),
                _json(message),
                _json(result),
                _json(error),
                self._running_prefix,
                "1" if terminal else "0",
            ],
        )
        if terminal and task_id in self._mine:
            self._mine.discard(task_id)
            if loaded is None:  # expired (or ended) before the handler: drop our claim too
                await client.srem(self._running_prefix + self.replica_id, task_id)
        return None if loaded is None else _record(loaded)

    async def ask(self, task_id: str, requests: dict[str, Any]) -> TaskRecord | None:
        await self._client()
        args = [repr(time.time())]
        for key, value in requests.items():
            args += [key, _json(value)]
        loaded = await self._scripts["ask"](keys=self._task_keys(task_id), args=args)
        return None if loaded is None else _record(loaded)

    async def answer(self, task_id: str, responses: dict[str, Any]) -> TaskRecord | None:
        await self._client()
        args = [repr(time.time())]
        for key, value in responses.items():
            args += [str(key), _json(value)]
        loaded = await self._scripts["answer"](keys=self._task_keys(task_id), args=args)
        return None if loaded is None else _record(loaded)

    async def take_answers(self, task_id: str, keys: list[str]) -> dict[str, Any]:
        await self._client()
        flat = await self._scripts["take"](keys=[self._task_keys(task_id)[2]], args=list(keys))
        return {key: msgspec.json.decode(value) for key, value in _pairs(flat).items()}

    async def purge_expired(self, now: float | None = None) -> int:
        """Nothing to do: Redis removes a task's keys when its TTL ends."""
        return 0

    async def fail_unfinished(self, error: dict[str, Any], message: str) -> int:
        """Fail the unfinished tasks of the replicas whose lease expired (never those of a
        live replica), with ``RUNNER_LOST_MESSAGE``: the reason is always that the
        process running the task stopped."""
        return await self._sweep(await self._client())

    async def count(self) -> int:
        """Tasks stored under this prefix (a SCAN: for tests and operators, not hot paths)."""
        client = await self._client()
        found = 0
        async for key in client.scan_iter(match=f"{self.prefix}task:{{*}}", count=1000):
            found += key.endswith("}")
        return found

    async def close(self) -> None:
        """Stop this replica: give the lease back, fail its own unfinished tasks (their
        handlers stop with the process), close the connections."""
        if self._start is None or self._start.get_loop() is not asyncio.get_running_loop():
            return
        for task in self._upkeep:
            task.cancel()
        if self._upkeep:
            await asyncio.wait(self._upkeep, timeout=self.timeout)
        client = self._redis
        if client is not None:
            try:
                await client.delete(self._lease_prefix + self.replica_id)
                await self._fail_runner(client, self.replica_id)
            finally:
                for each in (client, self._lease_client):
                    if each is not None:
                        await each.aclose()
                        await each.connection_pool.disconnect()
        self._redis = self._lease_client = self._start = None
        self._upkeep = []
        self._mine.clear()
