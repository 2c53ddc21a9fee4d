"""What every OAuth client provider shares: the ``HttpAuth`` seam, discovery on a
challenge, scope selection, token requests and refresh, credentials kept per issuer.

A subclass says how a token is first obtained (``_obtain``): the authorization code
flow (``OAuthClientProvider``) or the client credentials grant
(``ClientCredentialsProvider``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import AuthorizationError
from ..transports.fetch import PostReply, UrlPolicy, Zone, post_form, trust_of
from ._discovery import (
    AuthServerMetadata,
    Challenge,
    ResourceMetadata,
    canonical_resource,
    discover_authorization_server,
    discover_resource,
    parse_challenge,
)
from ._registration import Registration, _oauth_error, apply_client_auth
from ._tokens import MemoryTokenStore, StoredCredentials, TokenStore

if TYPE_CHECKING:
    from ._dpop import DPoPKey

__all__ = ["OAuthProviderBase"]

log = logging.getLogger("modelctx.auth")

# At most _SAME_SCOPES_LIMIT flows for the same scopes in _SAME_SCOPES_WINDOW seconds: a
# server that keeps refusing what it asked for must not loop the client (scope-retry-limit).
_SAME_SCOPES_WINDOW = 60.0
_SAME_SCOPES_LIMIT = 3
_DEFAULT_PORTS = {"http": 80, "https": 443}


class OAuthProviderBase:
    """The ``HttpAuth`` half of an OAuth client; see ``OAuthClientProvider``."""

    def __init__(
        self,
        *,
        store: TokenStore | None,
        url_policy: UrlPolicy | None,
        timeout: float,
        refresh: bool = True,
        dpop: bool | DPoPKey = False,
        scopes: Iterable[str] = (),
    ) -> None:
        self.store: TokenStore = store if store is not None else MemoryTokenStore()
        self._scopes = tuple(scopes)
        self._dpop = _dpop_key(dpop)
        # The latest DPoP-Nonce each server handed out (RFC 9449 8, 9): per token
        # endpoint, and per MCP server (its canonical resource URL).
        self._dpop_nonces: dict[str, str] = {}
        self._url_policy = url_policy
        self._timeout = timeout
        self._refresh_wanted = refresh
        self._lock = asyncio.Lock()
        # What is held per resource (None: the store had nothing), so the store is read
        # once per resource, not on every request.
        self._held: dict[str, StoredCredentials | None] = {}
        self._requested: dict[str, list[str]] = {}  # per resource: scopes asked for (the union on step-up)
        self._recent: dict[tuple[str, frozenset[str]], list[float]] = {}  # when flows ran

    def __repr__(self) -> str:
        return f"{type(self).__name__}(store={self.store!r})"

    # -- HttpAuth ---------------------------------------------------------------------------
    async def headers(self, method: str, url: str) -> dict[str, str]:
        """``Authorization: Bearer ...`` once a token is held (refreshed first when it
        has expired and a refresh token is at hand); no header before that."""
        resource = canonical_resource(url)
        credentials = await self._current(resource)
        if credentials is not None and credentials.expired() and credentials.refresh_token:
            async with self._lock:
                credentials = await self._current(resource)
                if credentials is not None and credentials.expired() and credentials.refresh_token:
                    await self._refresh_quietly(credentials, url)
                credentials = await self._current(resource)
        if credentials is None or not credentials.access_token:
            return {}
        if self._dpop is not None and credentials.token_type.lower() == "dpop":
            # RFC 9449 7.1: the DPoP scheme and a fresh proof naming this request and token.
            proof = self._dpop.proof(
                method, url, access_token=credentials.access_token, nonce=self._dpop_nonces.get(resource)
            )
            return {"authorization": f"DPoP {credentials.access_token}", "dpop": proof}
        return {"authorization": f"Bearer {credentials.access_token}"}

    async def challenged(self, status: int, headers: Mapping[str, str], method: str, url: str) -> bool:
        """A 401 (no token, or one refused) or a 403 ``insufficient_scope`` (step-up):
        discover, then refresh or authorize. True when a new token is held."""
        challenge = parse_challenge(headers)
        if self._dpop is not None and status == 401 and parse_challenge(headers, "dpop").error == "use_dpop_nonce":
            # RFC 9449 9: the MCP server wants its nonce in the proof; retry with it,
            # unless it is the nonce just sent (then a retry would not change a thing).
            nonce = _header(headers, "dpop-nonce")
            resource = canonical_resource(url)
            if nonce and nonce != self._dpop_nonces.get(resource):
                self._dpop_nonces[resource] = nonce
                return True
            return False
        if status == 403 and challenge.error != "insufficient_scope":
            return False  # forbidden for a reason more scopes will not fix
        before = await self._current(canonical_resource(url))
        sent = before.access_token if before is not None else None
        async with self._lock:
            current = await self._current(canonical_resource(url))
            if status == 401 and current is not None and current.access_token and current.access_token != sent:
                return True  # another request authorized while this one waited: try its token
            return await self._authorize(challenge, status, url)

    # -- the flow ----------------------------------------------------------------------------
    async def _authorize(self, challenge: Challenge, status: int, url: str) -> bool:
        policy = await self._policy(url)
        resource_metadata = await discover_resource(url, challenge.resource_metadata, policy, timeout=self._timeout)
        issuer = resource_metadata.authorization_servers[0]
        server = await discover_authorization_server(issuer, policy, timeout=self._timeout)
        resource = canonical_resource(url)
        previous = await self._current(resource)
        stored = await self.store.get(resource, issuer)  # credentials are per issuer (SEP-2352)
        if previous is not None and previous.issuer != issuer:
            log.info("%s: the authorization server changed to %s; not reusing %s's credentials",
                     resource, issuer, previous.issuer)
        if status == 401 and stored is not None and stored.refresh_token:
            refreshed = await self._refresh_quietly(stored, url, server, policy)
            if refreshed:
                return True
        scope = self._select_scope(challenge, resource_metadata, server, stored, resource)
        if not self._may_try((resource, frozenset(scope.split()) if scope else frozenset())):
            log.warning("%s: authorization for the same scopes was already tried %d times; giving up",
                        resource, _SAME_SCOPES_LIMIT)
            return False
        log.info("%s: authorizing with %s", resource, issuer)
        credentials = await self._obtain(server, resource_metadata, resource, stored, scope, policy)
        await self._keep(credentials)
        return True

    def _select_scope(
        self,
        challenge: Challenge,
        resource_metadata: ResourceMetadata,
        server: AuthServerMetadata,
        stored: StoredCredentials | None,
        resource: str,
    ) -> str | None:
        """The challenge's scopes, else the PRM's ``scopes_supported``, else none; on
        re-authorization the union with what was asked for before (SEP-2350); plus
        ``offline_access`` when the authorization server lists it (refresh tokens)."""
        if challenge.scopes:
            wanted = list(challenge.scopes)
        elif resource_metadata.scopes_supported:
            wanted = list(resource_metadata.scopes_supported)
        else:
            wanted = []
        before = list(self._requested.get(resource, ()))
        if stored is not None and stored.scope:
            before += stored.scope.split()
        before = [s for s in before if s != "offline_access"]  # only when the server lists it
        scopes = list(dict.fromkeys(before + wanted)) if before else wanted
        supported = server.listed("scopes_supported") or ()
        grants = server.listed("grant_types_supported")
        if (
            self._refresh_wanted
            and "offline_access" in supported
            and (grants is None or "refresh_token" in grants)
            and "offline_access" not in scopes
        ):
            scopes.append("offline_access")
        self._requested[resource] = [s for s in scopes if s != "offline_access"]
        return " ".join(scopes) if scopes else None

    def _may_try(self, key: tuple[str, frozenset[str]]) -> bool:
        """Whether another flow for these (resource, scopes) may run now; counts it."""
        now = time.monotonic()
        recent = [t for t in self._recent.get(key, []) if now - t < _SAME_SCOPES_WINDOW]
        if len(recent) >= _SAME_SCOPES_LIMIT:
            return False
        self._recent[key] = [*recent, now]
        return True

    def _scope_for(self, scope: str | None) -> str | None:
        """The scope to ask for: the one discovery chose (the challenge's, else the
        metadata's), else the ``scopes`` this provider was given, else none."""
        return scope or (" ".join(self._scopes) if self._scopes else None)

    async def _obtain(
        self,
        server: AuthServerMetadata,
        resource_metadata: ResourceMetadata,
        resource: str,
        stored: StoredCredentials | None,
        scope: str | None,
        policy: UrlPolicy,
    ) -> StoredCredentials:
        raise NotImplementedError

    # -- tokens ------------------------------------------------------------------------------
    async def _token_request(
        self,
        server: AuthServerMetadata,
        form: dict[str, str],
        registration: Registration,
        resource: str,
        policy: UrlPolicy,
        requested_scope: str | None,
        previous: StoredCredentials | None = None,
        extra_headers: Mapping[str, str] | None = None,
        resource_indicator: str | None = None,
    ) -> StoredCredentials:
        """POST ``form`` (plus ``resource`` and the client's authentication) to the token
        endpoint; the credentials it grants. ``AuthorizationError`` when it refuses."""
        endpoint = server.token_endpoint
        if endpoint is None:
            raise AuthorizationError(f"the authorization server {server.issuer} names no token_endpoint")
        indicator = resource_indicator or resource
        form = {**form, "resource": indicator}
        headers = dict(extra_headers or {})
        if "client_assertion" not in form:
            apply_client_auth(registration, form, headers)
        reply = await self._post_token(endpoint, form, headers, policy)
        data = reply.data if isinstance(reply.data, dict) else {}
        token = data.get("access_token")
        if reply.status != 200 or not isinstance(token, str) or not token:
            reason = _oauth_error(data) or f"HTTP {reply.status}"
            raise AuthorizationError(
                f"the token request ({form.get('grant_type')}) to {endpoint} failed: {reason}; "
                "check the client's registration and credentials, then authorize again"
            )
        self._check_token_type(data.get("token_type", "Bearer"))
        expires_in = data.get("expires_in")
        refresh_token = data.get("refresh_token")
        scope = data.get("scope")
        return StoredCredentials(
            resource=resource,
            issuer=server.issuer,
            client_id=registration.client_id,
            client_secret=registration.client_secret,
            token_endpoint_auth_method=registration.auth_method,
            access_token=token,
            refresh_token=refresh_token if isinstance(refresh_token, str) else (previous.refresh_token if previous else None),
            expires_at=time.time() + expires_in if isinstance(expires_in, (int, float)) and expires_in > 0 else None,
            scope=scope if isinstance(scope, str) else requested_scope,
            resource_indicator=indicator,
            token_type="DPoP" if self._dpop is not None else "Bearer",
        )

    def _check_token_type(self, token_type: object) -> None:
        """``AuthorizationError`` unless the token is of the type this client sends (DPoP or Bearer)."""
        wanted = "dpop" if self._dpop is not None else "bearer"
        if not isinstance(token_type, str) or token_type.lower() != wanted:
            if self._dpop is not None:
                raise AuthorizationError(
                    f"the authorization server issued a {token_type!r} token, not the DPoP-bound one this "
                    "client asked for (RFC 9449 5); use a server that supports DPoP, or a provider without dpop"
                )
            raise AuthorizationError(
                f"the authorization server issued a {token_type!r} token; this client sends Bearer tokens only"
            )

    async def _post_token(
        self, endpoint: str, form: dict[str, str], headers: dict[str, str], policy: UrlPolicy
    ) -> PostReply:
        """POST to the token endpoint; with DPoP, a fresh proof on each attempt and one
        more attempt when the server answers ``use_dpop_nonce`` (RFC 9449 8)."""
        if self._dpop is None:
            return await post_form(endpoint, form, policy, timeout=self._timeout, headers=headers)
        for _attempt in range(2):
            proof = self._dpop.proof("POST", endpoint, nonce=self._dpop_nonces.get(endpoint))
            reply = await post_form(endpoint, form, policy, timeout=self._timeout, headers={**headers, "dpop": proof})
            nonce = _header(reply.headers, "dpop-nonce")
            asked = reply.status == 400 and isinstance(reply.data, dict) and reply.data.get("error") == "use_dpop_nonce"
            fresh = nonce is not None and nonce != self._dpop_nonces.get(endpoint)
            if nonce:
                self._dpop_nonces[endpoint] = nonce
            if not (asked and fresh):
                return reply
        return reply

    async def _refresh_quietly(
        self,
        credentials: StoredCredentials,
        url: str,
        server: AuthServerMetadata | None = None,
        policy: UrlPolicy | None = None,
    ) -> bool:
        """Refresh ``credentials``; False (the refresh token dropped) when that fails."""
        assert credentials.refresh_token is not None
        try:
            policy = policy or await self._policy(url)
            server = server or await discover_authorization_server(credentials.issuer, policy, timeout=self._timeout)
            registration = Registration(
                credentials.client_id or "", credentials.client_secret, credentials.token_endpoint_auth_method or "none"
            )
            form = {"grant_type": "refresh_token", "refresh_token": credentials.refresh_token}
            fresh = await self._token_request(
                server, form, registration, credentials.resource, policy, credentials.scope, credentials,
                resource_indicator=credentials.resource_indicator,
            )
        except AuthorizationError as exc:
            log.info("%s: refreshing the token failed (%s); authorizing again", credentials.resource, exc)
            await self._keep(replace(credentials, refresh_token=None, access_token=None))
            return False
        await self._keep(fresh)
        return True

    # -- credentials -------------------------------------------------------------------------
    async def _current(self, resource: str) -> StoredCredentials | None:
        if resource not in self._held:
            self._held[resource] = await self.store.latest(resource)
        return self._held[resource]

    async def _keep(self, credentials: StoredCredentials) -> None:
        self._held[credentials.resource] = credentials
        await self.store.put(credentials)

    async def _policy(self, url: str) -> UrlPolicy:
        """The SSRF guard for what discovery fetches: the user's, or one admitting the
        zones of the MCP server's own addresses (a loopback server, loopback endpoints)."""
        if self._url_policy is not None:
            return self._url_policy
        parts = urllib.parse.urlsplit(url)
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme, 443)
        trust = await trust_of(parts.scheme, parts.hostname or "", port, UrlPolicy().resolve_timeout)
        return UrlPolicy(allow_loopback=Zone.LOOPBACK in trust.zones, allow_private=Zone.PRIVATE in trust.zones)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == name), None)


def _dpop_key(dpop: bool | DPoPKey) -> DPoPKey | None:
    """The provider's DPoP key: a new ES256 one for ``True``, the one given, or none."""
    if dpop is False:
        return None
    from ._dpop import DPoPKey  # joserfc (the auth extra) only when DPoP is used

    return DPoPKey() if dpop is True else dpop
