"""What the development authorization server remembers, in memory: clients, the
codes it issued and the refresh tokens still valid.

The records implement Authlib's model mixins (``ClientMixin``, ``AuthorizationCodeMixin``,
``TokenMixin``), so Authlib's grants read them directly.
"""

from __future__ import annotations

import hmac
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

from authlib.oauth2.rfc6749 import AuthorizationCodeMixin, ClientMixin, TokenMixin

from .._loopback import is_loopback_host

__all__ = ["AuthorizationCode", "DevClient", "RefreshToken", "Store", "is_loopback_http"]

CODE_LIFETIME = 600.0  # seconds; OAuth 2.1 section 4.1.2 recommends at most 10 minutes
REFRESH_LIFETIME = 30 * 24 * 3600.0
SPENT_MEMORY = 3600.0  # how long a used code or a rotated refresh token is remembered

_V = TypeVar("_V")


def is_loopback_http(uri: str) -> bool:
    """Whether ``uri`` is an ``http`` URL on a loopback host (RFC 8252 section 7.3)."""
    try:
        parts = urlsplit(uri)
        host = parts.hostname
    except ValueError:
        return False
    if parts.scheme != "http" or not host or parts.fragment:
        return False
    return is_loopback_host(host)


@dataclass
class DevClient(ClientMixin):  # type: ignore[misc]  # Authlib is untyped
    """A registered client.

    ``secret`` is None for a public client. ``redirect_uris`` are matched exactly; a
    client made with ``any_loopback_redirect`` (pre-registered from the command line,
    with no URIs named) also accepts any ``http`` loopback URI. ``auth_methods`` are the
    token endpoint authentication methods it may use.
    """

    client_id: str
    secret: str | None = None
    redirect_uris: tuple[str, ...] = ()
    grant_types: tuple[str, ...] = ("authorization_code", "refresh_token")
    auth_methods: frozenset[str] = frozenset({"none"})
    scope: str | None = None
    jwks: dict[str, Any] | None = None
    any_loopback_redirect: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    expires_at: float | None = None  # a cached Client ID Metadata Document goes stale

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        # Only an unambiguous choice: with several registered URIs the request must name one.
        return self.redirect_uris[0] if len(self.redirect_uris) == 1 else None

    def get_allowed_scope(self, scope: str | None) -> str:
        requested = (scope or "").split()
        if self.scope is None:
            return " ".join(requested)
        allowed = set(self.scope.split())
        return " ".join(s for s in requested if s in allowed)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        if redirect_uri in self.redirect_uris:
            return True
        return self.any_loopback_redirect and is_loopback_http(redirect_uri)

    def check_client_secret(self, client_secret: str) -> bool:
        return self.secret is not None and hmac.compare_digest(self.secret.encode(), client_secret.encode())

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in self.auth_methods

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code" and "authorization_code" in self.grant_types

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.grant_types

    @property
    def is_public(self) -> bool:
        return self.auth_methods == {"none"}


@dataclass
class AuthorizationCode(AuthorizationCodeMixin):  # type: ignore[misc]
    """A code issued at the authorization endpoint, bound to its client, redirect URI,
    PKCE challenge and resource; it is deleted when exchanged (single use)."""

    code: str
    client_id: str
    redirect_uri: str
    scope: str
    subject: str
    resource: str
    code_challenge: str
    code_challenge_method: str
    expires_at: float = field(default_factory=lambda: time.time() + CODE_LIFETIME)

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


@dataclass
class RefreshToken(TokenMixin):  # type: ignore[misc]
    """A refresh token: who it was issued to, for which resource and scope. ``family``
    names the grant it descends from (the code, through every rotation)."""

    token: str
    client_id: str
    subject: str
    scope: str
    resource: str
    family: str
    expires_at: float = field(default_factory=lambda: time.time() + REFRESH_LIFETIME)
    jkt: str | None = None  # a public client's DPoP key, which each refresh must prove (RFC 9449 5)

    def check_client(self, client: DevClient) -> bool:
        return bool(self.client_id == client.client_id)

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return max(0, int(self.expires_at - time.time()))

    def is_expired(self) -> bool:
        return time.time() >= self.expires_at

    def is_revoked(self) -> bool:
        return False  # a revoked token is removed from the store

    def get_user(self) -> str:
        return self.subject

    def get_client(self) -> Any:
        raise NotImplementedError("the development server looks clients up by client_id")


# What the store holds at most. Each table is bounded by a count (and each record by
# the field limits of ``_metadata`` and the 8 KB authorization request), so memory
# stays bounded whatever is sent. Past a cap the least recently used record goes
# (clients and documents: one used since is kept; codes, tokens: the oldest), except
# client assertion ids, where forgetting one would accept its replay: there the new
# assertion is refused until old ones expire.
MAX_REGISTERED = 1000  # dynamically registered clients (pre-registered ones are never dropped)
MAX_DOCUMENTS = 1000  # clients from Client ID Metadata Documents, each kept CACHE_SECONDS at most
MAX_CODES = 1000  # unexchanged codes (each lives CODE_LIFETIME)
MAX_REFRESH_TOKENS = 1000  # live ones; each holds at most an 8 KB request's scope and resource
MAX_SPENT = 10_000  # used codes and rotated-out refresh tokens remembered for replay detection
MAX_ASSERTIONS = 10_000  # private_key_jwt jti values until their exp
MAX_ASSERTION_LIFETIME = 3600.0  # an assertion whose exp is further ahead is refused (RFC 7523 section 3)


def _put(table: OrderedDict[str, _V], key: str, value: _V, limit: int) -> None:
    """Store ``value`` as the newest entry of ``table``, dropping the oldest past ``limit``."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > limit:
        table.popitem(last=False)


@dataclass
class Store:
    """Every record, in memory; a restart forgets clients, codes and refresh tokens
    (access tokens are JWTs and outlive it when the signing key is kept in a file).

    ``clients`` are the pre-registered ones (the operator's, unbounded); ``registered``
    (RFC 7591) and ``documents`` (Client ID Metadata Documents) are kept in use order,
    at most ``MAX_REGISTERED`` and ``MAX_DOCUMENTS``; codes, refresh tokens and spent
    credentials in issue order (so also expiry order), at most their caps."""

    clients: dict[str, DevClient] = field(default_factory=dict)
    registered: OrderedDict[str, DevClient] = field(default_factory=OrderedDict)
    documents: OrderedDict[str, DevClient] = field(default_factory=OrderedDict)
    codes: OrderedDict[str, AuthorizationCode] = field(default_factory=OrderedDict)
    refresh_tokens: OrderedDict[str, RefreshToken] = field(default_factory=OrderedDict)
    assertion_ids: dict[str, float] = field(default_factory=dict)  # private_key_jwt jti -> expiry
    # A used code or a rotated-out refresh token -> (its grant family, when to forget it).
    spent: OrderedDict[str, tuple[str, float]] = field(default_factory=OrderedDict)
    # Told each grant family a replay revoked (the OAuth proxy drops its upstream tokens).
    on_revoked: Callable[[str], None] | None = None

    def client(self, client_id: str) -> DevClient | None:
        """The client ``client_id`` (pre-registered, registered, or a metadata document
        still fresh); a registered or document client becomes the most recently used."""
        client = self.clients.get(client_id)
        if client is not None:
            return client
        for table in (self.registered, self.documents):
            client = table.get(client_id)
            if client is None:
                continue
            if client.expires_at is not None and client.expires_at <= time.time():
                del table[client_id]
                return None
            table.move_to_end(client_id)
            return client
        return None

    def add_registered(self, client: DevClient) -> None:
        _put(self.registered, client.client_id, client, MAX_REGISTERED)

    def add_document(self, client: DevClient) -> None:
        _put(self.documents, client.client_id, client, MAX_DOCUMENTS)

    def save_code(self, record: AuthorizationCode) -> None:
        _drop_expired(self.codes, lambda old: old.expires_at)
        _put(self.codes, record.code, record, MAX_CODES)

    def save_refresh_token(self, record: RefreshToken) -> None:
        _drop_expired(self.refresh_tokens, lambda old: old.expires_at)
        _put(self.refresh_tokens, record.token, record, MAX_REFRESH_TOKENS)

    def take_code(self, code: str, client_id: str) -> AuthorizationCode | None:
        """The unexpired code issued to ``client_id``; None for any other. A code used
        before also revokes the refresh tokens issued for it (OAuth 2.1 section 4.1.2:
        someone holds a copy)."""
        if self._replayed(code):
            return None
        record = self.codes.get(code)
        if record is None or record.client_id != client_id or record.expires_at <= time.time():
            return None
        return record

    def spend(self, credential: str, family: str) -> None:
        """Retire a used code or a rotated-out refresh token; a later use of it is a replay."""
        now = time.time()
        _drop_expired(self.spent, lambda old: old[1])
        self.codes.pop(credential, None)
        self.refresh_tokens.pop(credential, None)
        _put(self.spent, credential, (family, now + SPENT_MEMORY), MAX_SPENT)

    def _replayed(self, credential: str) -> bool:
        spent = self.spent.get(credential)
        if spent is None:
            return False
        family = spent[0]
        for token, record in list(self.refresh_tokens.items()):
            if record.family == family:
                del self.refresh_tokens[token]
        if self.on_revoked is not None:
            self.on_revoked(family)
        return True

    def refresh(self, token: str) -> RefreshToken | None:
        """The live refresh token ``token``; None for any other. A rotated-out token
        presented again revokes its whole family (OAuth 2.1 section 4.3.1)."""
        if self._replayed(token):
            return None
        record = self.refresh_tokens.get(token)
        if record is None or record.is_expired():
            self.refresh_tokens.pop(token, None)
            return None
        return record

    def first_use_of_assertion(self, jti: str, expires_at: float) -> bool | None:
        """Record a client assertion's ``jti`` until ``expires_at``; False if it was seen
        before (a replay), None if ``MAX_ASSERTIONS`` unexpired ones are held already."""
        now = time.time()
        for seen, expiry in list(self.assertion_ids.items()):
            if expiry < now:
                del self.assertion_ids[seen]
        if jti in self.assertion_ids:
            return False
        if len(self.assertion_ids) >= MAX_ASSERTIONS:
            return None
        self.assertion_ids[jti] = expires_at
        return True


def _drop_expired(table: OrderedDict[str, _V], expiry: Callable[[_V], float]) -> None:
    """Drop the expired entries at the front of ``table`` (kept in expiry order)."""
    now = time.time()
    while table:
        key, value = next(iter(table.items()))
        if expiry(value) > now:
            return
        del table[key]
