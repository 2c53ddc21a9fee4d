"""What the development authorization server remembers, in memory: clients, the
codes it issued and the refresh tokens still valid.

The records implement Authlib's model mixins (``ClientMixin``, ``AuthorizationCodeMixin``,
``TokenMixin``), so Authlib's grants read them directly.
"""

from __future__ import annotations

import hmac
import ipaddress
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from authlib.oauth2.rfc6749 import AuthorizationCodeMixin, ClientMixin, TokenMixin

__all__ = ["AuthorizationCode", "DevClient", "RefreshToken", "Store", "is_loopback_http"]

CODE_LIFETIME = 600.0  # seconds; OAuth 2.1 section 4.1.2 recommends at most 10 minutes
REFRESH_LIFETIME = 30 * 24 * 3600.0
SPENT_MEMORY = 3600.0  # how long a used code or a rotated refresh token is remembered


def is_loopback_http(uri: str) -> bool:
    """Whether ``uri`` is an ``http`` URL on a loopback host (RFC 8252 section 7.3)."""
    try:
        parts = urlsplit(uri)
        host = parts.hostname
    except ValueError:
        return False
    if parts.scheme != "http" or not host or parts.fragment:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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


@dataclass
class Store:
    """Every record, in memory; a restart forgets clients, codes and refresh tokens
    (access tokens are JWTs and outlive it when the signing key is kept in a file)."""

    clients: dict[str, DevClient] = field(default_factory=dict)
    codes: dict[str, AuthorizationCode] = field(default_factory=dict)
    refresh_tokens: dict[str, RefreshToken] = field(default_factory=dict)
    assertion_ids: dict[str, float] = field(default_factory=dict)  # private_key_jwt jti -> expiry
    # A used code or a rotated-out refresh token -> (its grant family, when to forget it).
    spent: dict[str, tuple[str, float]] = field(default_factory=dict)

    def client(self, client_id: str) -> DevClient | None:
        client = self.clients.get(client_id)
        if client is not None and client.expires_at is not None and client.expires_at <= time.time():
            del self.clients[client_id]
            return None
        return client

    def save_code(self, record: AuthorizationCode) -> None:
        now = time.time()
        for code, old in list(self.codes.items()):
            if old.expires_at <= now:
                del self.codes[code]
        self.codes[record.code] = record

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
        for old, (_, forget_at) in list(self.spent.items()):
            if forget_at <= now:
                del self.spent[old]
        self.codes.pop(credential, None)
        self.refresh_tokens.pop(credential, None)
        self.spent[credential] = (family, now + SPENT_MEMORY)

    def _replayed(self, credential: str) -> bool:
        spent = self.spent.get(credential)
        if spent is None:
            return False
        family = spent[0]
        for token, record in list(self.refresh_tokens.items()):
            if record.family == family:
                del self.refresh_tokens[token]
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

    def first_use_of_assertion(self, jti: str, expires_at: float) -> bool:
        """Record a client assertion's ``jti``; False if it was seen before (a replay)."""
        now = time.time()
        for seen, expiry in list(self.assertion_ids.items()):
            if expiry < now:
                del self.assertion_ids[seen]
        if jti in self.assertion_ids:
            return False
        self.assertion_ids[jti] = expires_at
        return True
