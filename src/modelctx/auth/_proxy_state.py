"""What the OAuth proxy keeps between a browser's requests (security_best_practices.mdx,
Confused Deputy, Required Protections):

* ``Approvals``: which MCP clients (``client_id`` and redirect URI) this browser has
  approved at the proxy, in a cookie the proxy signs (HMAC-SHA256 with a key of its
  own), so a client the user never approved cannot ride the user's session at the
  upstream identity provider: the consent page comes first, whatever the upstream
  remembers.
* ``Transactions``: each authorization forwarded upstream, under the random ``state``
  sent there, created only once the user approved (or had approved) the client, bound
  to the browser by a secret of its own in a cookie set with the redirect upstream
  (the callback must carry it), used once, ten minutes at most, at most ``MAX_TRANSACTIONS`` at once (the oldest goes).

* ``UpstreamSessions``: the upstream's tokens of each sign-in, under the ``sid`` the
  proxy's tokens of that sign-in carry, for the server's own calls to the upstream's API
  (``OAuthProxy.upstream_token``); never sent to an MCP client. At most
  ``MAX_SESSIONS``, the least recently used dropped (its user signs in again).
* ``Revocations``: the sign-ins revoked because one of their credentials was used twice,
  until their access tokens expire, so those tokens are refused at once.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["Approvals", "Revocations", "Transaction", "Transactions", "UpstreamSession", "UpstreamSessions", "sid_of"]

TRANSACTION_LIFETIME = 600.0  # seconds, as a code's (OAuth 2.1 section 4.1.2)
MAX_TRANSACTIONS = 1000
APPROVAL_LIFETIME = 30 * 24 * 3600.0
_SECRET = re.compile(r"[A-Za-z0-9_-]{43}")  # token_urlsafe(32)
MAX_SESSIONS = 10_000  # each a few KB at most: an upstream token response
SESSION_LIFETIME = 30 * 24 * 3600.0  # the proxy's refresh tokens live as long
MAX_REVOKED = 10_000  # past it the oldest go: their tokens are the nearest to expiry
MAX_APPROVALS = 20  # clients one browser's cookie remembers (the oldest goes): a cookie is at most 4 KB


@dataclass(frozen=True)
class Transaction:
    """An authorization forwarded upstream: the MCP client's request (its query pairs,
    checked when it came) and the PKCE verifier of the upstream leg."""

    pairs: tuple[tuple[str, str], ...]
    verifier: str
    browser_digest: bytes
    expires_at: float


class Transactions:
    """Authorizations waiting for the upstream's answer, by their upstream ``state``."""

    def __init__(self) -> None:
        self._pending: OrderedDict[str, Transaction] = OrderedDict()

    def open(self, pairs: list[tuple[str, str]], verifier: str, browser: str | None) -> tuple[str, str]:
        """Hold the request ``pairs`` and ``verifier`` for the browser whose secret is
        ``browser`` (its cookie; a new secret when None); returns (state, browser secret).
        One secret per browser, not per transaction: two sign-ins at once in one browser
        (two MCP clients) each complete."""
        now = time.time()
        while self._pending and next(iter(self._pending.values())).expires_at <= now:
            self._pending.popitem(last=False)
        while len(self._pending) >= MAX_TRANSACTIONS:
            self._pending.popitem(last=False)
        if browser is None or not _SECRET.fullmatch(browser):
            browser = secrets.token_urlsafe(32)
        state = secrets.token_urlsafe(32)
        self._pending[state] = Transaction(tuple(pairs), verifier, _digest(browser), now + TRANSACTION_LIFETIME)
        return state, browser

    def take(self, state: str, browser: str) -> Transaction | None:
        """The transaction ``state`` names if ``browser`` is the secret it was bound to and
        it has not expired; the state is spent either way (single use)."""
        pending = self._pending.pop(state, None)
        if pending is None or pending.expires_at <= time.time():
            return None
        if not hmac.compare_digest(pending.browser_digest, _digest(browser)):
            return None
        return pending

    def __len__(self) -> int:
        return len(self._pending)


@dataclass
class UpstreamSession:
    """The upstream's tokens of one sign-in; ``expires_at`` of the access token (None: not said)."""

    access_token: str
    refresh_token: str | None
    expires_at: float | None
    forget_at: float


class UpstreamSessions:
    """Each sign-in's upstream tokens by ``sid``, least recently used first."""

    def __init__(self) -> None:
        self._held: OrderedDict[str, UpstreamSession] = OrderedDict()

    def put(self, sid: str, session: UpstreamSession) -> None:
        self._held[sid] = session
        self._held.move_to_end(sid)
        while len(self._held) > MAX_SESSIONS:
            self._held.popitem(last=False)

    def get(self, sid: str) -> UpstreamSession | None:
        session = self._held.get(sid)
        if session is None:
            return None
        if session.forget_at <= time.time():
            del self._held[sid]
            return None
        self._held.move_to_end(sid)
        return session

    def drop(self, sid: str) -> None:
        self._held.pop(sid, None)

    def __len__(self) -> int:
        return len(self._held)


class Revocations:
    """Revoked sign-ins (``sid``), each until its last access token expires."""

    def __init__(self) -> None:
        self._until: OrderedDict[str, float] = OrderedDict()

    def add(self, sid: str, until: float) -> None:
        now = time.time()
        while self._until and next(iter(self._until.values())) <= now:
            self._until.popitem(last=False)
        self._until[sid] = until
        self._until.move_to_end(sid)
        while len(self._until) > MAX_REVOKED:
            self._until.popitem(last=False)

    def __contains__(self, sid: object) -> bool:
        return isinstance(sid, str) and self._until.get(sid, 0.0) > time.time()


class Approvals:
    """The signed cookie of (client_id, redirect URI) pairs a browser approved."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    def approved(self, cookie: str | None, client_id: str, redirect_uri: str) -> bool:
        """Whether ``cookie`` (as the browser sent it) says ``client_id`` was approved to
        receive codes at ``redirect_uri``."""
        return [client_id, redirect_uri] in self._read(cookie)

    def add(self, cookie: str | None, client_id: str, redirect_uri: str) -> str:
        """The cookie value after approving ``client_id`` for ``redirect_uri``."""
        entries = [e for e in self._read(cookie) if e != [client_id, redirect_uri]]
        entries = [*entries, [client_id, redirect_uri]][-MAX_APPROVALS:]
        payload = json.dumps({"a": entries, "exp": int(time.time() + APPROVAL_LIFETIME)}, separators=(",", ":"))
        body = base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")
        return f"{body}.{self._sign(body)}"

    def _read(self, cookie: str | None) -> list[list[str]]:
        body, _, signature = (cookie or "").partition(".")
        if not body or not hmac.compare_digest(signature, self._sign(body)):
            return []
        try:
            data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except ValueError:
            return []
        if not isinstance(data, dict) or not isinstance(data.get("exp"), int) or data["exp"] <= time.time():
            return []
        entries = data.get("a")
        if not isinstance(entries, list):
            return []
        return [e for e in entries if isinstance(e, list) and len(e) == 2 and all(isinstance(x, str) for x in e)]

    def _sign(self, body: str) -> str:
        return base64.urlsafe_b64encode(hmac.new(self._key, body.encode(), hashlib.sha256).digest()).decode().rstrip("=")


def sid_of(family: str) -> str:
    """The ``sid`` claim of a sign-in's tokens: named after its code, without revealing it."""
    return hashlib.sha256(f"modelctx-proxy-sid:{family}".encode()).hexdigest()[:32]


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()
