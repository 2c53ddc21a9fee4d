"""Handshake-era sessions kept in Redis, so that any replica serves any session.

A 2025-11-25 (or older) client opens a session with ``initialize`` on one replica and
sends its later requests wherever the load balancer puts them. With a Redis configured
(``ServerConfig.redis_url``), ``HttpApp`` writes each session here and keeps its own
``SessionTable`` as a cache of live ``HandshakeSession`` objects: a replica that does not
hold a session reads it from Redis and builds it again.

What a session record holds (one Redis hash, ``<prefix>session:<id>``): the negotiated
version, the client's capabilities and info, a SHA-256 digest of the principal that
opened it (so only that principal can use it, on any replica), ``initialized``, the
logging level and the ``resources/subscribe`` URIs. Nothing else: requests in flight,
server-to-client requests waiting for their answer and GET streams live in the process
that runs them. The record has an idle TTL (the app's ``session_idle_seconds``), renewed
by use at most once per ``refresh_seconds`` and, for sessions in use, by a sweep.

The caps hold where the sessions live, in Redis, whatever the number of processes
(``limit``; before, each process counted only the sessions it held, and 30,000
``initialize`` through two workers left 30,001 records). A sorted set
(``<prefix>sessions-by-use``) holds every session's id by its last use, and with a
per-principal quota one set per principal (``<prefix>sessions-of:<digest>``); a Lua
script creates a session and makes room for it atomically, as ``SessionTable`` does in
one process: at the principal's quota it evicts that principal's least recently used
idle session, at the cap anybody's, and when the least recently used one may be in use
it refuses (``SessionTable.QUOTA``, ``FULL``: 429, 503). In use, for a store shared by
processes, is "used in the last ``3 * refresh_seconds``" (15 s by default): a session in
use is renewed at least every ``refresh_seconds`` by the sweep of the process running
it, so it is never evicted; an idle one used that recently is not evicted either. An
evicted session's record is deleted and every process told, as by DELETE. The scripts
name keys they compute (records of evicted sessions, principals' sets): a single Redis
or a primary with replicas, not Redis Cluster.

One pub/sub channel (``<prefix>sessions``) carries what must reach the replica holding
something: a client's response to a server-to-client request, or its
``notifications/cancelled`` for a request running elsewhere; a change of a session
(write-through, so cached copies follow); a session's end (DELETE). Each replica
listens on it and acts on what names a session it holds; the others drop it. Every
replica sees every such message, which is cheap because they are rare (the hot path,
a request that its own replica can answer, publishes nothing).

Every Redis call has a deadline: past it, or when Redis refuses the connection, the
call raises ``SessionStoreUnavailable``, which the app answers with 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..protocol.connection import ServerConnection
from .identity import principal_key
from .session import HandshakeSession, SessionTable

__all__ = [
    "RedisSessionStore",
    "SessionRecord",
    "SessionStoreUnavailable",
    "principal_digest",
]

log = logging.getLogger("modelctx.http")

#: Seconds a Redis call may take before the session store counts as unreachable.
STORE_DEADLINE = 2.0
#: The fields of a session that change after ``initialize`` (written through).
MUTABLE_FIELDS = ("initialized", "log_rank", "subscriptions")

# Every script below sees the same clock (Redis's, in ms: replicas' clocks may differ)
# and renews a session the same way: its record's TTL, its place in the set of sessions
# by last use and, with a quota (ARGV[2] the prefix of the principals' sets, else
# empty), in its principal's set. KEYS[1] is always the set of sessions by last use.
_RENEW = """
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local ttl = tonumber(ARGV[1])
local function renew(record, id)
  if redis.call('pexpire', record, ttl) == 0 then return false end
  redis.call('zadd', KEYS[1], now, id)
  if ARGV[2] ~= '' then
    local owner = redis.call('hget', record, 'principal')
    if owner then
      redis.call('zadd', ARGV[2] .. owner, now, id)
      redis.call('pexpire', ARGV[2] .. owner, ttl)
    end
  end
  return true
end
"""

# Renews sessions in use. KEYS[2..] their records; ARGV[1] the TTL in ms, ARGV[2] as
# above, ARGV[3..] their ids. Returns how many still exist.
_TOUCH = _RENEW + """
local alive = 0
for i = 2, #KEYS do
  if renew(KEYS[i], ARGV[i + 1]) then alive = alive + 1 end
end
return alive
"""

# A session's record (a flat field, value list; empty when there is none), renewed.
# KEYS[2] the record; ARGV[3] its id.
_READ = _RENEW + """
local found = redis.call('hgetall', KEYS[2])
if #found > 0 then renew(KEYS[2], ARGV[3]) end
return found
"""

# Writes the given fields of a session only while its record exists (a session deleted or
# expired meanwhile must not come back as a partial record), renews it, and tells the
# other replicas. KEYS[2] the record; ARGV[3] its id, ARGV[4] the channel, ARGV[5] the
# announcement, then field, value pairs.
_WRITE_THROUGH = _RENEW + """
if redis.call('exists', KEYS[2]) == 0 then return 0 end
redis.call('hset', KEYS[2], unpack(ARGV, 6))
renew(KEYS[2], ARGV[3])
redis.call('publish', ARGV[4], ARGV[5])
return 1
"""

# Creates a session once there is room for it (module docstring). KEYS[2] its record,
# KEYS[3] its principal's set; ARGV[3] its id, ARGV[4] the cap, ARGV[5] the quota (0:
# none), ARGV[6] ms a session counts as in use after its last use, ARGV[7] the prefix of
# records, ARGV[8] the channel, then field, value pairs. Returns 'ok', 'quota' or 'full'.
_CREATE = _RENEW + """
local busy = tonumber(ARGV[6])
local function make_room(set, limit)
  redis.call('zremrangebyscore', set, '-inf', now - ttl)  -- expired: only their entries were left
  for _ = 1, 32 do
    if redis.call('zcard', set) < limit then return true end
    local oldest = redis.call('zrange', set, 0, 0, 'WITHSCORES')
    local id, used = oldest[1], tonumber(oldest[2])
    local record = ARGV[7] .. id
    local owner = redis.call('hget', record, 'principal')
    if not owner then
      redis.call('zrem', set, id)  -- deleted meanwhile
    elseif used > now - busy then
      return false  -- the least recently used may be in use, and so every other one
    else
      redis.call('del', record)
      redis.call('zrem', KEYS[1], id)
      if ARGV[2] ~= '' then redis.call('zrem', ARGV[2] .. owner, id) end
      redis.call('publish', ARGV[8], cjson.encode({from = 'store', kind = 'deleted', session = id}))
    end
  end
  return redis.call('zcard', set) < limit
end
local quota = tonumber(ARGV[5])
if quota > 0 and not make_room(KEYS[3], quota) then return 'quota' end
if not make_room(KEYS[1], tonumber(ARGV[4])) then return 'full' end
redis.call('hset', KEYS[2], unpack(ARGV, 9))
renew(KEYS[2], ARGV[3])
return 'ok'
"""

# Removes a session's record and its entries, and tells every replica. KEYS[2] the
# record; ARGV[3] its id, ARGV[4] the channel, ARGV[5] the announcement.
_DELETE = _RENEW + """
local owner = redis.call('hget', KEYS[2], 'principal')
redis.call('del', KEYS[2])
redis.call('zrem', KEYS[1], ARGV[3])
if owner and ARGV[2] ~= '' then redis.call('zrem', ARGV[2] .. owner, ARGV[3]) end
redis.call('publish', ARGV[4], ARGV[5])
return 1
"""


class SessionStoreUnavailable(Exception):
    """Redis, where handshake-era sessions are kept, did not answer in time."""


def principal_digest(principal: Any) -> str:
    """What a record keeps of the principal that opened a session: a SHA-256 digest of
    its ``principal_key`` (never the principal itself, never a token), the same on every
    replica for the same subject and issuer."""
    return hashlib.sha256(repr(principal_key(principal)).encode()).hexdigest()


@dataclass
class SessionRecord:
    """A handshake-era session as Redis keeps it (what a replica needs to serve it)."""

    id: str
    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    principal: str  # principal_digest of who opened it
    initialized: bool = False
    log_rank: int | None = 0
    subscriptions: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, session: HandshakeSession) -> SessionRecord:
        return cls(
            session.id,
            session.version,
            session.capabilities,
            session.client_info,
            principal_digest(session.principal),
            session.initialized,
            session.log_rank,
            sorted(session.subscriptions),
        )

    def to_hash(self) -> dict[str, str]:
        return {
            "version": self.version,
            "capabilities": json.dumps(self.capabilities),
            "client_info": json.dumps(self.client_info),
            "principal": self.principal,
            **mutable_fields(self.initialized, self.log_rank, self.subscriptions),
        }

    @classmethod
    def from_hash(cls, session_id: str, stored: dict[str, str]) -> SessionRecord:
        return cls(
            session_id,
            stored["version"],
            json.loads(stored["capabilities"]),
            json.loads(stored["client_info"]),
            stored["principal"],
            stored.get("initialized") == "1",
            json.loads(stored.get("log_rank", "0")),
            json.loads(stored.get("subscriptions", "[]")),
        )

    def build(self, principal: Any, process_id: str) -> HandshakeSession:
        """A live session from this record, for ``principal`` (already checked)."""
        session = HandshakeSession(self.id, self.version, self.capabilities, self.client_info)
        session.connection = ServerConnection(id_prefix=process_id)
        session.principal = principal
        session.initialized = self.initialized
        session.log_rank = self.log_rank
        session.subscriptions = set(self.subscriptions)
        return session


def mutable_fields(initialized: bool, log_rank: int | None, subscriptions: Iterable[str]) -> dict[str, str]:
    return {
        "initialized": "1" if initialized else "0",
        "log_rank": json.dumps(log_rank),
        "subscriptions": json.dumps(sorted(subscriptions)),
    }


def apply_fields(session: HandshakeSession, fields: dict[str, str]) -> None:
    """Bring a cached session up to what another replica wrote through."""
    if "initialized" in fields:
        session.initialized = session.initialized or fields["initialized"] == "1"
    if "log_rank" in fields:
        session.log_rank = json.loads(fields["log_rank"])
    if "subscriptions" in fields:
        session.subscriptions = set(json.loads(fields["subscriptions"]))


Listener = Callable[[dict[str, Any]], Awaitable[None] | None]


class RedisSessionStore:
    """Handshake-era sessions in the Redis at ``url`` (``redis.asyncio``).

    ``idle_seconds``: a record not used for that long expires. ``refresh_seconds``: a
    session's TTL is renewed by use at most this often (default: a quarter of
    ``idle_seconds``, at most 5 s), so a busy session costs no Redis call per request.
    ``deadline``: seconds any Redis call may take (then ``SessionStoreUnavailable``).
    ``prefix``: of every key and of the channel, for replicas of different servers that
    share one Redis.
    """

    def __init__(
        self,
        url: str,
        *,
        idle_seconds: float,
        refresh_seconds: float | None = None,
        deadline: float = STORE_DEADLINE,
        prefix: str = "modelctx:",
    ) -> None:
        import redis.asyncio as aioredis  # only a server with a Redis loads it

        self.url = url
        self.idle_seconds = idle_seconds
        self.refresh_seconds = refresh_seconds if refresh_seconds is not None else min(5.0, idle_seconds / 4)
        self.deadline = deadline
        self.prefix = prefix
        self.channel = f"{prefix}sessions"
        self._process: tuple[int, str] | None = None
        self._ttl_ms = max(1, int(idle_seconds * 1000))
        self._redis = aioredis.Redis.from_url(
            url, socket_connect_timeout=deadline, socket_timeout=deadline, decode_responses=True
        )
        self._by_use = f"{prefix}sessions-by-use"
        self._of_principal = f"{prefix}sessions-of:"
        #: The caps ``limit`` set (None: no cap, no quota).
        self.max_sessions: int | None = None
        self.per_principal: int | None = None
        self._write = self._redis.register_script(_WRITE_THROUGH)
        self._create = self._redis.register_script(_CREATE)
        self._read = self._redis.register_script(_READ)
        self._touch = self._redis.register_script(_TOUCH)
        self._delete = self._redis.register_script(_DELETE)
        self._listening: asyncio.Task[None] | None = None

    def limit(self, max_sessions: int | None, per_principal: int | None) -> None:
        """Cap the sessions kept here, all together and per principal (None: no bound),
        for every process that shares this Redis (module docstring)."""
        self.max_sessions = max_sessions
        self.per_principal = per_principal

    @property
    def busy_ms(self) -> int:
        """How long after its last use a session counts as in use (never evicted)."""
        return max(1, int(3 * self.refresh_seconds * 1000))

    def _renewing(self, *extra: Any) -> list[Any]:
        """The arguments every script starts with (``_RENEW``), then ``extra``."""
        return [self._ttl_ms, self._of_principal if self.per_principal is not None else "", *extra]

    @property
    def process_id(self) -> str:
        """Names this process on the channel and in its server-to-client request ids.

        Made anew in each process: a store built before ``--workers`` forks is copied
        into every worker, and workers sharing one id took each other's forwarded
        answers for their own and dropped them (0 of 6 elicitations answered)."""
        pid = os.getpid()
        if self._process is None or self._process[0] != pid:
            self._process = (pid, uuid.uuid4().hex[:12])
        return self._process[1]

    def key(self, session_id: str) -> str:
        return f"{self.prefix}session:{session_id}"

    async def _call(self, what: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """Run one Redis call within the deadline; unreachable Redis raises
        ``SessionStoreUnavailable`` saying what failed and what to do."""
        from redis.exceptions import RedisError

        try:
            async with asyncio.timeout(self.deadline):
                return await call()
        except (TimeoutError, RedisError, OSError) as exc:
            reason = "did not answer in time" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
            raise SessionStoreUnavailable(
                f"The session store (Redis) is unreachable: {what} failed ({reason}); "
                f"retry shortly, or use the 2026-07-28 protocol (no session)"
            ) from None

    # -- records -------------------------------------------------------------------------
    async def save(self, session: HandshakeSession) -> str | None:
        """Write a new session's record, with its idle TTL, once there is room for it
        under the caps (``limit``); None when written, else ``SessionTable.QUOTA`` or
        ``FULL`` (nothing written: the least recently used session may be in use)."""
        record = SessionRecord.of(session)
        fields: list[Any] = []
        for name, value in record.to_hash().items():
            fields += [name, value]
        cap = self.max_sessions if self.max_sessions is not None else 2**53
        keys = [self._by_use, self.key(session.id), self._of_principal + record.principal]
        args = self._renewing(session.id, cap, self.per_principal or 0, self.busy_ms, self.key(""), self.channel,
                              *fields)  # fmt: skip
        outcome = await self._call("saving the session", lambda: self._create(keys=keys, args=args))
        if outcome == "quota":
            return SessionTable.QUOTA
        if outcome == "full":
            return SessionTable.FULL
        session.stored_at = time.monotonic()
        return None

    async def load(self, session_id: str) -> SessionRecord | None:
        """The record of ``session_id``, its TTL renewed; None when there is none (never
        was, expired, deleted) or it is unreadable."""
        if len(session_id) > 128:
            return None  # no id we mint is this long: not worth a round trip
        key = self.key(session_id)

        async def read() -> dict[str, str]:
            # A read is a use: the same round trip renews it.
            found = await self._read(keys=[self._by_use, key], args=self._renewing(session_id))
            return dict(zip(found[::2], found[1::2], strict=True))

        stored = await self._call("reading the session", read)
        if not stored:
            return None
        try:
            return SessionRecord.from_hash(session_id, stored)
        except (KeyError, ValueError, TypeError):
            log.warning("session %s: unreadable record in Redis; treated as expired", session_id)
            return None

    async def write_through(self, session: HandshakeSession) -> bool:
        """Write the session's changeable fields and tell the replicas that cache it;
        False when the record is gone (expired or deleted elsewhere)."""
        fields = mutable_fields(session.initialized, session.log_rank, session.subscriptions)
        note = json.dumps({"from": self.process_id, "kind": "changed", "session": session.id, "fields": fields})
        args = self._renewing(session.id, self.channel, note)
        for name, value in fields.items():
            args += [name, value]
        keys = [self._by_use, self.key(session.id)]
        written = await self._call("writing the session", lambda: self._write(keys=keys, args=args))
        session.stored_at = time.monotonic()
        return bool(written)

    def due(self, session: HandshakeSession) -> bool:
        """True when ``session``'s TTL should be renewed now (``refresh_seconds`` passed)."""
        stored = session.stored_at
        return stored is None or time.monotonic() - stored >= self.refresh_seconds

    async def touch(self, session: HandshakeSession) -> bool:
        """Renew the session's idle TTL; False when its record is gone."""
        keys, args = [self._by_use, self.key(session.id)], self._renewing(session.id)
        alive = await self._call("renewing the session", lambda: self._touch(keys=keys, args=args))
        session.stored_at = time.monotonic()
        return bool(alive)

    async def touch_many(self, sessions: list[HandshakeSession]) -> None:
        """Renew the TTLs of sessions in use (a running call, a GET stream), whose
        clients may send nothing for longer than ``idle_seconds``."""
        if not sessions:
            return

        keys = [self._by_use, *(self.key(session.id) for session in sessions)]
        args = self._renewing(*(session.id for session in sessions))
        await self._call("renewing sessions in use", lambda: self._touch(keys=keys, args=args))
        now = time.monotonic()
        for session in sessions:
            session.stored_at = now

    async def delete(self, session_id: str) -> None:
        """Remove the session's record and tell every replica to close its copy."""
        note = json.dumps({"from": self.process_id, "kind": "deleted", "session": session_id})
        keys, args = [self._by_use, self.key(session_id)], self._renewing(session_id, self.channel, note)
        await self._call("deleting the session", lambda: self._delete(keys=keys, args=args))

    async def forward(self, session_id: str, body: bytes) -> None:
        """Hand a client message (a response, a cancellation) this process cannot act
        on to the replica that can. Each replica acts on it only if it holds the request
        named; the others drop it (logged at debug), as this one logs it when no other
        replica listens at all."""
        note = json.dumps(
            {"from": self.process_id, "kind": "message", "session": session_id, "message": body.decode()}
        )
        listeners = await self._call("forwarding the message", lambda: self._redis.publish(self.channel, note))
        if isinstance(listeners, int) and listeners <= 1:  # this process alone listens
            log.warning("session %s: no other replica listens for a forwarded message; dropped", session_id)

    # -- HTTP+SSE sessions (_legacy_sse) ---------------------------------------------------
    # One string per open event stream, ``<prefix>sse:<id>``: the digest of its principal.
    # It lives as long as its stream, renewed by the replica holding it every
    # ``ttl_seconds / 3`` (so a dead replica's streams are forgotten within ``ttl_seconds``);
    # a POST reaching another replica is checked against it and forwarded on the channel.
    def sse_key(self, session_id: str) -> str:
        return f"{self.prefix}sse:{session_id}"

    async def hold_sse(self, session_id: str, principal: Any, ttl_seconds: float) -> None:
        """Write (or renew) the record of an event stream held here."""
        key, digest, ttl = self.sse_key(session_id), principal_digest(principal), max(1, int(ttl_seconds * 1000))
        await self._call("recording the event stream", lambda: self._redis.set(key, digest, px=ttl))

    async def sse_principal(self, session_id: str) -> str | None:
        """The principal digest of an event stream some replica holds; None when none does."""
        if len(session_id) > 128:
            return None  # no id we mint is this long: not worth a round trip
        key = self.sse_key(session_id)
        found = await self._call("reading the event stream's record", lambda: self._redis.get(key))
        return found if isinstance(found, str) else None

    async def release_sse(self, session_id: str) -> None:
        """Remove the record of an event stream that ended here."""
        key = self.sse_key(session_id)
        await self._call("removing the event stream's record", lambda: self._redis.delete(key))

    async def forward_sse(self, session_id: str, body: bytes) -> None:
        """Hand a POST body to the replica holding the event stream ``session_id``."""
        note = json.dumps({"from": self.process_id, "kind": "sse", "session": session_id, "message": body.decode(errors="replace")})
        await self._call("forwarding the message", lambda: self._redis.publish(self.channel, note))

    # -- resumable SSE streams (_sse_resume, _redis_streams) ---------------------------------
    # One list per stream, ``<prefix>stream:<session>:<stream>``: entries ``"<n>\n<event>"``
    # in order, then ``"end"`` once the request is over; trimmed to its newest
    # ``keep`` entries and expiring ``idle_seconds`` after its last write.
    def stream_key(self, session_id: str, stream_id: str) -> str:
        return f"{self.prefix}stream:{session_id}:{stream_id}"

    async def append_stream(
        self, session_id: str, stream_id: str, entries: list[str], keep: int, *, replace: bool = False
    ) -> None:
        """Append ``entries`` to a stream's list (``replace``: instead of what it holds),
        then keep its newest ``keep`` entries."""
        key = self.stream_key(session_id, stream_id)

        async def write() -> None:
            async with self._redis.pipeline(transaction=True) as pipe:
                if replace:
                    pipe.delete(key)
                if entries:
                    pipe.rpush(key, *entries)
                pipe.ltrim(key, -keep, -1)
                pipe.pexpire(key, self._ttl_ms)
                await pipe.execute()

        await self._call("keeping the SSE stream", write)

    async def stream_events(self, session_id: str, stream_id: str, follow_ms: int) -> list[tuple[int, bytes]]:
        """What Redis keeps of a stream: ``(n, event)`` in order, ``(-1, b"")`` for its
        end; empty when there is no such stream (never was, dropped, expired). A stream
        found is marked followed for ``follow_ms`` (``stream_followed``); an id that names
        none leaves nothing behind."""
        key = self.stream_key(session_id, stream_id)
        stored = await self._call("reading the SSE stream", lambda: self._redis.lrange(key, 0, -1))
        if stored:
            await self._call(
                "reading the SSE stream", lambda: self._redis.set(f"{key}:followed", "1", px=follow_ms)
            )
        entries: list[tuple[int, bytes]] = []
        for entry in stored or []:
            n, _, event = str(entry).partition("\n")
            if n == "end":
                entries.append((-1, b""))
            elif n.isdigit():
                entries.append((int(n), event.encode()))
        return entries

    async def stream_followed(self, session_id: str, stream_id: str) -> bool:
        """Whether a client followed the stream through another replica lately."""
        key = f"{self.stream_key(session_id, stream_id)}:followed"
        return bool(await self._call("reading the SSE stream", lambda: self._redis.exists(key)))

    async def drop_stream(self, session_id: str, stream_id: str) -> None:
        key = self.stream_key(session_id, stream_id)
        await self._call("dropping the SSE stream", lambda: self._redis.delete(key, f"{key}:followed"))

    # -- the channel ---------------------------------------------------------------------
    def listen(self, on_note: Listener, sweep: Callable[[], list[HandshakeSession]]) -> None:
        """Start following the channel (idempotent): each note from another process goes to
        ``on_note``; every ``refresh_seconds`` the sessions ``sweep`` returns (those in use)
        get their TTLs renewed. Redis going away is logged and retried, never raised."""
        if self._listening is None or self._listening.done():
            self._listening = asyncio.get_running_loop().create_task(self._follow(on_note, sweep))

    async def _follow(self, on_note: Listener, sweep: Callable[[], list[HandshakeSession]]) -> None:
        from redis.exceptions import RedisError

        pause = 0.1
        while True:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                async with asyncio.timeout(self.deadline):
                    await pubsub.subscribe(self.channel)
                pause = 0.1
                swept = time.monotonic()
                while True:
                    message = await pubsub.get_message(timeout=min(1.0, self.refresh_seconds))
                    if message is not None and message.get("type") == "message":
                        await self._deliver(on_note, message.get("data"))
                    if time.monotonic() - swept >= self.refresh_seconds:
                        swept = time.monotonic()
                        with contextlib.suppress(SessionStoreUnavailable):
                            await self.touch_many(sweep())
            except asyncio.CancelledError:
                raise
            except (TimeoutError, RedisError, OSError) as exc:
                log.warning("session store: lost the Redis channel (%s); retrying in %.1fs", exc, pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 5.0)
            finally:
                closing: Any = pubsub.aclose  # untyped in redis-py
                with contextlib.suppress(Exception):
                    await closing()

    async def _deliver(self, on_note: Listener, data: Any) -> None:
        try:
            note = json.loads(data)
        except (TypeError, ValueError):
            return
        if not isinstance(note, dict) or note.get("from") == self.process_id:
            return  # our own: already acted on here
        try:
            done = on_note(note)
            if done is not None:
                await done
        except Exception:  # noqa: BLE001 - one bad note must not end the channel
            log.exception("session store: acting on a note from another replica failed")

    async def close(self) -> None:
        if self._listening is not None:
            self._listening.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listening
            self._listening = None
        with contextlib.suppress(Exception):
            await self._redis.aclose()
