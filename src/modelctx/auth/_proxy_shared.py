"""Where the OAuth proxy keeps its state: in this process (``MemoryProxyState``), or in
the Redis every worker and replica shares (``RedisProxyState``), so a sign-in whose
steps reach different processes completes, and a code spent in one is spent in all.

Both answer one async interface, so ``OAuthProxy`` has one path:

* consent tickets, upstream transactions (``state``): ``open_*`` and ``take_*``; a take
  is single use (``GETDEL`` in Redis: one process wins however many ask at once);
* upstream sessions by ``sid`` and revoked sign-ins;
* the authorization server's records (clients, codes, refresh tokens, spent
  credentials): Authlib's grants are synchronous, so each request runs them on a
  ``Store``: ``snapshot`` loads what the request names (its client, its code or refresh
  token and whether that was spent before), Authlib runs on it, and ``commit`` writes
  what it did. The commit claims a spent code or refresh token atomically (a Lua
  script deletes the live record and records it spent, or finds it gone): a process
  that loses the race answers ``invalid_grant`` and revokes the sign-in, as a replay.
  Only a committed answer is sent; in memory the snapshot is the store itself.

Redis keys live under ``<redis_prefix>proxy:``; credentials appear in key names only as
SHA-256 digests. Every record has a TTL (its lifetime), and each table keeps the in-memory
caps with a sorted-set index (past the cap the oldest go). Every call has a deadline;
when Redis is silent ``StateUnavailable`` is raised and the proxy answers 503 with
``Retry-After``: nothing is accepted on a failure (fail closed).
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import time
from dataclasses import asdict
from typing import Any

from ._proxy_state import (
    MAX_REVOKED,
    MAX_SESSIONS,
    MAX_TRANSACTIONS,
    TRANSACTION_LIFETIME,
    Revocations,
    Transaction,
    Transactions,
    UpstreamSession,
    UpstreamSessions,
    sid_of,
)
from .dev._consent import MAX_PENDING, TICKET_LIFETIME, Consents
from .dev._models import (
    MAX_CODES,
    MAX_REFRESH_TOKENS,
    MAX_REGISTERED,
    MAX_SPENT,
    REFRESH_LIFETIME,
    SPENT_MEMORY,
    AuthorizationCode,
    DevClient,
    RefreshToken,
    Store,
)

__all__ = ["MemoryProxyState", "RedisProxyState", "StateUnavailable"]

log = logging.getLogger("modelctx.auth")


class StateUnavailable(Exception):
    """The shared state did not answer in time: the request is answered 503, retry shortly."""


class MemoryProxyState:
    """This process's state (one worker only)."""

    shared = False

    def __init__(self, store: Store, access_token_ttl: int) -> None:
        self.store = store
        self.access_token_ttl = access_token_ttl
        self.consents = Consents()
        self.transactions = Transactions()
        self.sessions = UpstreamSessions()
        self.revocations = Revocations()
        # A replayed code or refresh token revokes its sign-in here too (someone holds a
        # copy): its upstream tokens are dropped and its access tokens refused from now on.
        store.on_revoked = self._revoke_family

    def _revoke_family(self, family: str) -> None:
        sid = sid_of(family)
        self.sessions.drop(sid)
        self.revocations.add(sid, until=time.time() + self.access_token_ttl)

    async def keys(self) -> tuple[dict[str, Any] | None, bytes | None]:
        return None, None  # the proxy's own

    async def open_consent(self, pairs: list[tuple[str, str]]) -> tuple[str, str]:
        return self.consents.open(pairs)

    async def take_consent(self, ticket: str, browser: str) -> list[tuple[str, str]] | None:
        return self.consents.take(ticket, browser)

    async def open_transaction(self, pairs: list[tuple[str, str]], verifier: str, browser: str | None) -> tuple[str, str]:
        return self.transactions.open(pairs, verifier, browser)

    async def take_transaction(self, state: str, browser: str) -> Transaction | None:
        return self.transactions.take(state, browser)

    async def put_session(self, sid: str, session: UpstreamSession) -> None:
        self.sessions.put(sid, session)

    async def get_session(self, sid: str) -> UpstreamSession | None:
        return self.sessions.get(sid)

    async def revoked(self, sid: str) -> bool:
        return sid in self.revocations

    async def lock_refresh(self, sid: str, seconds: float) -> bool:
        return True  # the proxy's own lock is enough in one process

    async def unlock_refresh(self, sid: str) -> None:
        pass

    async def snapshot(self, client_id: str | None, credential: str | None = None) -> Store:
        return self.store

    async def commit(self, store: Store) -> str | None:
        return None  # Authlib wrote to the store itself

    async def close(self) -> None:
        pass


class _Snapshot(Store):
    """The records one request needs, loaded from Redis; what Authlib does to them is
    recorded for ``RedisProxyState.commit``."""

    def __init__(self) -> None:
        super().__init__()
        self.new_clients: list[DevClient] = []
        self.new_codes: list[AuthorizationCode] = []
        self.new_refresh: list[RefreshToken] = []
        self.spends: list[tuple[str, str]] = []  # (credential, family)
        self.assertions: list[tuple[str, float]] = []
        self.revoked_families: list[str] = []

    def add_registered(self, client: DevClient) -> None:
        super().add_registered(client)
        self.new_clients.append(client)

    def save_code(self, record: AuthorizationCode) -> None:
        super().save_code(record)
        self.new_codes.append(record)

    def save_refresh_token(self, record: RefreshToken) -> None:
        super().save_refresh_token(record)
        self.new_refresh.append(record)

    def spend(self, credential: str, family: str) -> None:
        super().spend(credential, family)
        self.spends.append((credential, family))

    def first_use_of_assertion(self, jti: str, expires_at: float) -> bool | None:
        first = super().first_use_of_assertion(jti, expires_at)
        if first:
            self.assertions.append((jti, expires_at))
        return first


# put(record, value, ttl ms, index, score, cap): the record with its TTL, its place in
# its table's index; past the cap the lowest scores go (the oldest, or least recently used).
_INDEXED = """
local function put(record, value, ttl, index, score, cap)
  redis.call('SET', record, value, 'PX', ttl)
  redis.call('ZADD', index, score, record)
  local over = redis.call('ZCARD', index) - tonumber(cap)
  if over > 0 then
    local old = redis.call('ZPOPMIN', index, over)
    for i = 1, #old, 2 do redis.call('DEL', old[i]) end
  end
end
"""

# KEYS[1] the record, KEYS[2] its table's index; ARGV: value, ttl ms, score, cap.
_PUT = _INDEXED + """
put(KEYS[1], ARGV[1], ARGV[2], KEYS[2], ARGV[3], ARGV[4])
return 1
"""

# Single use: KEYS[1] the live code or refresh token, KEYS[2] its spent marker, KEYS[3]
# the spent index; ARGV: family, ttl ms, score, cap. 1: this caller spent it; 0: gone.
_CLAIM = _INDEXED + """
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
put(KEYS[2], ARGV[1], ARGV[2], KEYS[3], ARGV[3], ARGV[4])
return 1
"""

# A revoked family: KEYS[1] its set of refresh token keys; every one is deleted.
_DROP_FAMILY = """
local members = redis.call('SMEMBERS', KEYS[1])
for i = 1, #members do redis.call('DEL', members[i]) end
redis.call('DEL', KEYS[1])
return #members
"""


def _unavailable(reason: str) -> StateUnavailable:
    return StateUnavailable("The sign-in service cannot reach its shared state now; try again shortly")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


class RedisProxyState:
    """The proxy's state in the Redis at ``url`` under ``prefix`` (the server wires
    ``<redis_prefix>proxy:``); ``timeout`` seconds per call. ``access_token_ttl``: how
    long a revoked sign-in is remembered (its last access token's life)."""

    shared = True

    def __init__(self, url: str, *, prefix: str, access_token_ttl: int, timeout: float = 2.0) -> None:
        from ..server.redis import RedisCalls

        self.redis = RedisCalls(  # ValueError without the redis package
            url, timeout, log=log, unavailable=_unavailable,
            down="OAuth proxy: its state in Redis %s is unreachable (%s): sign-ins answer 503 until it answers",
            up="OAuth proxy: its state in Redis %s answers again",
        )
        self.url = url
        self.prefix = prefix
        self.access_token_ttl = access_token_ttl
        self.timeout = timeout

    def __repr__(self) -> str:
        from ..server.redis import redacted

        return f"RedisProxyState({redacted(self.url)!r}, prefix={self.prefix!r})"

    # -- plumbing (every call through ``self.redis.call``: within the deadline, else
    # ``StateUnavailable``) ---------------------------------------------------------------
    async def _put(self, client: Any, table: str, name: str, value: str, ttl: float, cap: int) -> None:
        await client.eval(_PUT, 2, self.prefix + name, f"{self.prefix}index:{table}", value, _ms(ttl), time.time(), cap)

    async def _take(self, name: str) -> bytes | None:
        async def work(client: Any) -> Any:
            return await client.getdel(self.prefix + name)

        value = await self.redis.call(work)
        return value if isinstance(value, bytes) else None

    # -- keys -------------------------------------------------------------------------------
    async def keys(self) -> tuple[dict[str, Any] | None, bytes | None]:
        """The signing key (a private JWK) and the cookie key every process uses: the
        first process to ask makes them (``SET NX``: one wins), every one reads them."""
        from .dev._keys import SigningKey

        made = SigningKey.generate("ES256").key.as_dict(private=True)

        async def work(client: Any) -> Any:
            await client.set(self.prefix + "signing-key", json.dumps(made), nx=True)
            await client.set(self.prefix + "cookie-key", secrets.token_bytes(32), nx=True)
            return await client.mget(self.prefix + "signing-key", self.prefix + "cookie-key")

        jwk, cookie_key = await self.redis.call(work)
        try:
            data = json.loads(jwk)
            if not isinstance(data, dict) or not isinstance(cookie_key, bytes) or len(cookie_key) < 16:
                raise ValueError("not a JWK and a key of 16 bytes or more")
        except (TypeError, ValueError):
            log.warning("OAuth proxy: the keys %ssigning-key and %scookie-key in Redis are unusable; delete them "
                        "to have new ones made", self.prefix, self.prefix)
            raise StateUnavailable("The sign-in service's keys are unusable; the operator must replace them") from None
        return data, cookie_key

    # -- consent tickets and transactions ---------------------------------------------------
    async def open_consent(self, pairs: list[tuple[str, str]]) -> tuple[str, str]:
        ticket, browser = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        value = json.dumps({"pairs": pairs, "browser": _digest(browser)})

        async def work(client: Any) -> None:
            await self._put(client, "consents", f"consent:{_digest(ticket)}", value, TICKET_LIFETIME, MAX_PENDING)

        await self.redis.call(work)
        return ticket, browser

    async def take_consent(self, ticket: str, browser: str) -> list[tuple[str, str]] | None:
        raw = await self._take(f"consent:{_digest(ticket)}")
        if raw is None:
            return None
        data = json.loads(raw)
        if not secrets.compare_digest(data["browser"], _digest(browser)):
            return None
        return [(str(k), str(v)) for k, v in data["pairs"]]

    async def open_transaction(self, pairs: list[tuple[str, str]], verifier: str, browser: str | None) -> tuple[str, str]:
        if browser is None or len(browser) != 43:
            browser = secrets.token_urlsafe(32)
        state = secrets.token_urlsafe(32)
        expires_at = time.time() + TRANSACTION_LIFETIME
        value = json.dumps({"pairs": pairs, "verifier": verifier, "browser": _digest(browser), "exp": expires_at})

        async def work(client: Any) -> None:
            await self._put(client, "flows", f"flow:{_digest(state)}", value, TRANSACTION_LIFETIME, MAX_TRANSACTIONS)

        await self.redis.call(work)
        return state, browser

    async def take_transaction(self, state: str, browser: str) -> Transaction | None:
        raw = await self._take(f"flow:{_digest(state)}")
        if raw is None:
            return None
        data = json.loads(raw)
        if not secrets.compare_digest(data["browser"], _digest(browser)) or data["exp"] <= time.time():
            return None
        pairs = tuple((str(k), str(v)) for k, v in data["pairs"])
        return Transaction(pairs, data["verifier"], bytes.fromhex(data["browser"]), data["exp"])

    # -- upstream sessions and revocations --------------------------------------------------
    async def put_session(self, sid: str, session: UpstreamSession) -> None:
        ttl = session.forget_at - time.time()
        if ttl <= 0:
            return

        async def work(client: Any) -> None:
            await self._put(client, "sessions", f"session:{sid}", json.dumps(asdict(session)), ttl, MAX_SESSIONS)

        await self.redis.call(work)

    async def get_session(self, sid: str) -> UpstreamSession | None:
        async def work(client: Any) -> Any:
            pipe = client.pipeline(transaction=False)
            pipe.get(self.prefix + f"session:{sid}")
            pipe.zadd(f"{self.prefix}index:sessions", {self.prefix + f"session:{sid}": time.time()}, xx=True)
            return (await pipe.execute())[0]  # the least recently used goes past the cap

        raw = await self.redis.call(work)
        if not isinstance(raw, bytes):
            return None
        return UpstreamSession(**json.loads(raw))

    async def revoked(self, sid: str) -> bool:
        async def work(client: Any) -> Any:
            return await client.exists(self.prefix + f"revoked:{sid}")

        return bool(await self.redis.call(work))

    async def lock_refresh(self, sid: str, seconds: float) -> bool:
        """Whether this process may refresh ``sid``'s upstream tokens now (one at a time
        across processes: a rotated upstream refresh token is used once)."""

        async def work(client: Any) -> Any:
            return await client.set(self.prefix + f"refreshing:{sid}", b"1", nx=True, px=_ms(seconds))

        return bool(await self.redis.call(work))

    async def unlock_refresh(self, sid: str) -> None:
        async def work(client: Any) -> None:
            await client.delete(self.prefix + f"refreshing:{sid}")

        await self.redis.call(work)

    # -- the authorization server's records -------------------------------------------------
    async def snapshot(self, client_id: str | None, credential: str | None = None) -> Store:
        """A store holding ``client_id``'s registration and the code or refresh token
        ``credential`` (with its spent marker), as Redis has them now."""
        store = _Snapshot()

        async def work(client: Any) -> Any:
            pipe = client.pipeline(transaction=False)
            pipe.get(self.prefix + f"client:{_digest(client_id or '')}")
            if client_id:
                pipe.pexpire(self.prefix + f"client:{_digest(client_id)}", _ms(REFRESH_LIFETIME))
                pipe.zadd(f"{self.prefix}index:clients", {self.prefix + f"client:{_digest(client_id)}": time.time()}, xx=True)
            if credential:
                name = _digest(credential)
                pipe.get(self.prefix + f"code:{name}")
                pipe.get(self.prefix + f"refresh:{name}")
                pipe.get(self.prefix + f"spent:{name}")
            return await pipe.execute()

        answers = await self.redis.call(work)
        if isinstance(answers[0], bytes):
            store.registered[str(client_id)] = _client(json.loads(answers[0]))
        if credential:
            code, refresh, spent = answers[-3:]
            now = time.time()
            if isinstance(code, bytes):
                store.codes[credential] = AuthorizationCode(**json.loads(code))
            if isinstance(refresh, bytes):
                store.refresh_tokens[credential] = RefreshToken(**json.loads(refresh))
            if isinstance(spent, bytes):
                store.spent[credential] = (spent.decode(), now + SPENT_MEMORY)
        store.on_revoked = store.revoked_families.append
        return store

    async def commit(self, store: Store) -> str | None:
        """Write what Authlib did on ``store`` (a ``snapshot``); None when done, else why
        the answer must not be sent (the credential was spent elsewhere meanwhile, or a
        client assertion replayed): the caller answers ``invalid_grant`` instead."""
        if not isinstance(store, _Snapshot):
            return None

        async def work(client: Any) -> str | None:
            for jti, expires_at in store.assertions:
                seen = await client.set(self.prefix + f"assertion:{_digest(jti)}", b"1", nx=True,
                                        px=_ms(expires_at - time.time()))
                if not seen:
                    return "The client assertion was used before"
            for credential, family in store.spends:
                name = _digest(credential)
                # A code's family is the code itself (AuthorizationCodeGrant.delete_authorization_code).
                live = f"code:{name}" if family == credential else f"refresh:{name}"
                won = await client.eval(_CLAIM, 3, self.prefix + live, self.prefix + f"spent:{name}",
                                        f"{self.prefix}index:spent", family, _ms(SPENT_MEMORY), time.time(), MAX_SPENT)
                if not won:  # another process spent it first: a replay, whoever was first
                    store.revoked_families.append(family)
                    await self._revoke_families(client, store.revoked_families)
                    return "The authorization grant was already used"
            for record in store.new_clients:
                await self._put(client, "clients", f"client:{_digest(record.client_id)}", json.dumps(_client_data(record)),
                                REFRESH_LIFETIME, MAX_REGISTERED)
            for code in store.new_codes:
                await self._put(client, "codes", f"code:{_digest(code.code)}", json.dumps(asdict(code)),
                                code.expires_at - time.time(), MAX_CODES)
            for token in store.new_refresh:
                key = self.prefix + f"refresh:{_digest(token.token)}"
                await self._put(client, "refresh", key.removeprefix(self.prefix), json.dumps(asdict(token)),
                                token.expires_at - time.time(), MAX_REFRESH_TOKENS)
                family = self.prefix + f"family:{_digest(token.family)}"
                await client.sadd(family, key)
                await client.pexpire(family, _ms(REFRESH_LIFETIME))
            await self._revoke_families(client, store.revoked_families)
            return None

        refusal: str | None = await self.redis.call(work)
        return refusal

    async def _revoke_families(self, client: Any, families: list[str]) -> None:
        for family in dict.fromkeys(families):
            await client.eval(_DROP_FAMILY, 1, self.prefix + f"family:{_digest(family)}")
            sid = sid_of(family)
            await client.delete(self.prefix + f"session:{sid}")
            await self._put(client, "revoked", f"revoked:{sid}", "1", self.access_token_ttl, MAX_REVOKED)

    async def close(self) -> None:
        await self.redis.close()


def _client_data(client: DevClient) -> dict[str, Any]:
    data = asdict(client)
    data["auth_methods"] = sorted(client.auth_methods)
    return data


def _client(data: dict[str, Any]) -> DevClient:
    data["auth_methods"] = frozenset(data["auth_methods"])
    data["redirect_uris"] = tuple(data["redirect_uris"])
    data["grant_types"] = tuple(data["grant_types"])
    return DevClient(**data)
