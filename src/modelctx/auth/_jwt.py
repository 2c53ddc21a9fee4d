"""``JwtVerifier``: JWT access tokens checked against the issuer's published keys.

A token is accepted only when all of these hold (OAuth 2.1 5.2, RFC 9068, RFC 8707,
authorization/index.mdx Token Handling):

- its ``alg`` is in the allow-list, which never holds ``none`` or a symmetric
  ``HS*`` algorithm (a public key must never be usable as an HMAC secret);
- its signature verifies with the issuer's key named by ``kid``;
- ``iss`` is the issuer, exactly; ``aud`` (a string or a list) names this resource;
- ``exp`` is present and not past, ``nbf`` and ``iat`` not in the future, each
  within ``leeway`` seconds;
- it is an access token, not another JWT the same issuer signs (RFC 8725 3.11, RFC
  9068 4): its JOSE header ``typ`` is absent, ``JWT`` or ``at+jwt`` (compared without
  case, ``application/`` optional, RFC 7515 4.1.9), so a DPoP proof (``dpop+jwt``), a
  logout or security event token is refused; with ``require_at_jwt`` only ``at+jwt``
  (strict RFC 9068 2.1). An OpenID Connect ID token is refused by its claims: it
  carries ``nonce``, ``at_hash``, ``c_hash`` or ``s_hash`` (OpenID Connect Core 2, 3.3.2.11,
  FAPI), which no access token needs, or a Keycloak-style ``typ`` claim ``ID``; its
  ``aud``, the client's id, never names this resource anyway.

The issuer's JWKS comes from ``jwks_uri`` (default: the ``jwks_uri`` of the issuer's
RFC 8414 / OpenID metadata) through ``fetch_json`` behind the SSRF guard, with a
deadline. It is cached for ``max_age`` seconds; a token naming a ``kid`` the cache
lacks triggers one refetch (keys rotate), but at most one per
``refetch_interval`` seconds, so tokens with random ``kid`` values cannot make the
server fetch on every request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from ..errors import InvalidToken, MCPError
from ..transports.fetch import UrlPolicy, fetch_json
from ._loopback import is_loopback_host
from ._resource import AccessToken

__all__ = ["JwtVerifier"]

log = logging.getLogger("modelctx.auth")

ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
_MAX_TOKEN = 16 * 1024  # bytes; real access tokens are a few hundred
_OTHER_ISSUER = "The access token was issued by another authorization server"
_NO_KEYS = "The access token cannot be checked now: this resource could not fetch its issuer's keys"
#: The JOSE ``typ`` media types of access tokens (RFC 9068 2.1, and plain JWT), lower case.
_AT_JWT = "application/at+jwt"
_ACCESS_TOKEN_TYPES = frozenset({"application/jwt", _AT_JWT})
#: Types another JWT of an issuer says it is, named in the refusal.
_OTHER_TYPES = {
    "application/dpop+jwt": "a DPoP proof",
    "application/id+jwt": "an ID token",
    "application/id_token+jwt": "an ID token",
    "application/logout+jwt": "a logout token",
    "application/secevent+jwt": "a security event token",
    "application/oauth-authz-req+jwt": "an authorization request",
    "application/token-introspection+jwt": "an introspection response",
}
_STRICT = "This resource accepts RFC 9068 access tokens only: their typ header must be at+jwt"
#: Claims only OpenID Connect ID tokens carry (OIDC Core 2, 3.1.3.6, 3.3.2.11; FAPI s_hash).
_ID_TOKEN_CLAIMS = ("nonce", "at_hash", "c_hash", "s_hash")


class JwtVerifier:
    """Checks JWT access tokens issued by ``issuer`` for ``audience`` (the resource URL).

    ``issuer``: one issuer URL, or several (a resource listing several authorization
    servers): a token is checked with the keys of the issuer its ``iss`` names, and
    one naming none of them is refused. Keys: ``jwks`` (a JWKS dict, for tests and
    fixed keys), or fetched from ``jwks_uri``, or from each issuer's metadata
    (``jwks`` and ``jwks_uri`` only with a single issuer). ``algorithms``: the
    allow-list (asymmetric only; ``ValueError`` for ``none`` or ``HS*``). ``leeway``:
    seconds of clock skew tolerated. ``url_policy``: the SSRF guard for the fetches
    (default: https to public addresses, and loopback as well for a loopback issuer).
    ``fetch_timeout``, ``max_age``, ``refetch_interval``: seconds (see the module doc).
    ``require_at_jwt``: accept only RFC 9068 access tokens (header ``typ`` ``at+jwt``);
    by default ``JWT`` or no ``typ`` is accepted too, as many issuers write them.
    """

    def __init__(
        self,
        issuer: str | Sequence[str],
        audience: str,
        *,
        jwks_uri: str | None = None,
        jwks: Mapping[str, Any] | None = None,
        algorithms: Iterable[str] = ("RS256", "ES256", "PS256", "EdDSA"),
        leeway: float = 30.0,
        url_policy: UrlPolicy | None = None,
        fetch_timeout: float = 10.0,
        max_age: float = 3600.0,
        refetch_interval: float = 60.0,
        require_at_jwt: bool = False,
    ) -> None:
        self.require_at_jwt = require_at_jwt
        self.algorithms = tuple(algorithms)
        unsafe = [a for a in self.algorithms if a not in ASYMMETRIC_ALGORITHMS]
        if unsafe or not self.algorithms:
            raise ValueError(
                f"algorithms {unsafe or '()'} refused: use asymmetric ones from {ASYMMETRIC_ALGORITHMS} "
                "(never 'none', never HS* with a public key)"
            )
        issuers = (issuer,) if isinstance(issuer, str) else tuple(issuer)
        if not issuers:
            raise ValueError("issuer is an issuer URL or a list of them")
        if len(issuers) > 1 and (jwks_uri is not None or jwks is not None):
            raise ValueError("jwks_uri and jwks name one issuer's keys: give them with a single issuer")
        self.issuers = issuers
        self.audience = audience
        self.leeway = leeway
        self._keys = {
            name: _Jwks(
                name, jwks_uri, jwks, url_policy or default_policy(name), fetch_timeout, max_age, refetch_interval
            )
            for name in issuers
        }

    async def verify(self, token: str) -> AccessToken:
        """The token's ``AccessToken``; ``InvalidToken`` saying what failed otherwise."""
        if len(token) > _MAX_TOKEN:
            raise InvalidToken("The access token is too large")
        header = _header(token)
        _check_type(header.get("typ"), self.require_at_jwt)
        alg = header.get("alg")
        if alg not in self.algorithms:
            raise InvalidToken(f"The access token's algorithm {alg!r} is not accepted; use one of {', '.join(self.algorithms)}")
        # The keys of the issuer the token names; the signature then vouches for the name.
        named = _unverified_issuer(token)
        keys = self._keys.get(named) if named is not None else None
        if keys is None:
            raise InvalidToken(_OTHER_ISSUER)
        key = await keys.key_for(header.get("kid"), alg)
        try:
            decoded = jwt.decode(token, key, algorithms=[alg])
        except JoseError:
            raise InvalidToken("The access token's signature does not verify") from None
        claims = decoded.claims
        self._check_claims(claims)
        return _access_token(claims)

    def _check_claims(self, claims: dict[str, Any]) -> None:
        _not_an_id_token(claims)
        issuer = claims.get("iss")
        if not isinstance(issuer, str) or issuer not in self._keys:
            raise InvalidToken(_OTHER_ISSUER)
        audience = claims.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
        if self.audience not in audiences:
            # RFC 8707 2 and authorization/index.mdx: never accept a token meant for another resource.
            raise InvalidToken("The access token was not issued for this resource (aud)")
        registry = jwt.JWTClaimsRegistry(leeway=int(self.leeway), exp={"essential": True})
        try:
            registry.validate(claims)
        except JoseError as exc:
            raise InvalidToken(_claim_problem(exc)) from None


def default_policy(url: str) -> UrlPolicy:
    """The SSRF guard for fetches from the issuer at ``url``: https to public addresses,
    or loopback too when the operator named a loopback issuer (a development setup on
    one machine; the client side follows the same rule for loopback MCP servers)."""
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    return UrlPolicy(allow_loopback=is_loopback_host(host))


def _unverified_issuer(token: str) -> str | None:
    """The ``iss`` a compact JWS's payload names, before any check (to pick its keys)."""
    try:
        payload = json.loads(jws.extract_compact(token.encode("ascii")).payload)
    except (JoseError, ValueError, UnicodeError):
        raise InvalidToken("The access token is not a signed JWT") from None
    issuer = payload.get("iss") if isinstance(payload, dict) else None
    return issuer if isinstance(issuer, str) else None


def _header(token: str) -> dict[str, Any]:
    try:
        return dict(jws.extract_compact(token.encode("ascii")).protected)
    except (JoseError, ValueError, UnicodeError):
        raise InvalidToken("The access token is not a signed JWT") from None


def _check_type(typ: Any, require_at_jwt: bool) -> None:
    """Refuse a token whose JOSE ``typ`` says it is not an access token (module doc)."""
    if typ is None:
        if require_at_jwt:
            raise InvalidToken(_STRICT)
        return
    if not isinstance(typ, str):
        raise InvalidToken("The access token's typ header is not a string")
    media = typ.strip().lower()
    if "/" not in media:  # RFC 7515 4.1.9: "application/" may be left out
        media = "application/" + media
    if media == _AT_JWT or (media in _ACCESS_TOKEN_TYPES and not require_at_jwt):
        return
    kind = _OTHER_TYPES.get(media)
    if kind is not None:
        # Its type is one of a known list: safe to name (never arbitrary header text).
        raise InvalidToken(f"The token is {kind} ({media.removeprefix('application/')}), not an access token")
    if require_at_jwt:
        raise InvalidToken(_STRICT)
    raise InvalidToken("The token's typ header says it is not an access token (at+jwt or JWT)")


def _not_an_id_token(claims: Mapping[str, Any]) -> None:
    """Refuse an OpenID Connect ID token by the claims only ID tokens carry (module doc)."""
    found = [name for name in _ID_TOKEN_CLAIMS if name in claims]
    marked = isinstance(claims.get("typ"), str) and claims["typ"].lower() == "id"
    if found or marked:
        why = f"it carries {', '.join(found)}" if found else "its typ claim is ID"
        raise InvalidToken(f"The token is an OpenID Connect ID token ({why}), not an access token")


def _claim_problem(exc: JoseError) -> str:
    name = type(exc).__name__
    if name == "ExpiredTokenError":
        return "The access token has expired; refresh it or authorize again"
    if name == "InvalidTokenError":
        return "The access token is not valid yet (nbf or iat in the future)"
    if name == "MissingClaimError":
        return "The access token lacks a required claim (exp)"
    return "The access token's claims are invalid"


def _access_token(claims: dict[str, Any]) -> AccessToken:
    audience = claims.get("aud")
    cnf = claims.get("cnf")
    return AccessToken(
        subject=_text(claims.get("sub")),
        issuer=_text(claims.get("iss")),
        scopes=scopes_of(claims),
        client_id=_text(claims.get("client_id") or claims.get("azp")),
        audience=(audience,) if isinstance(audience, str) else tuple(str(a) for a in audience or ()),
        expires_at=float(claims["exp"]) if isinstance(claims.get("exp"), (int, float)) else None,
        claims=MappingProxyType(dict(claims)),
        jkt=_text(cnf.get("jkt")) if isinstance(cnf, dict) else None,
    )


def scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """The scopes a token grants: ``scope`` (space separated, RFC 9068 / RFC 7662), or a
    ``scp`` list as some issuers write it."""
    scope = claims.get("scope", claims.get("scp"))
    if isinstance(scope, str):
        return frozenset(scope.split())
    if isinstance(scope, list):
        return frozenset(s for s in scope if isinstance(s, str))
    return frozenset()


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class _Jwks:
    """The issuer's key set, fetched when first needed and cached (module doc)."""

    def __init__(
        self,
        issuer: str,
        jwks_uri: str | None,
        jwks: Mapping[str, Any] | None,
        policy: UrlPolicy,
        timeout: float,
        max_age: float,
        refetch_interval: float,
    ) -> None:
        self.issuer = issuer
        self.jwks_uri = jwks_uri
        self.policy = policy
        self.timeout = timeout
        self.max_age = max_age
        self.refetch_interval = refetch_interval
        self.fixed = jwks is not None
        self.keys = _key_set(jwks) if jwks is not None else None
        self.fetched_at = -float("inf")  # when the cache was last filled
        self.tried_at = -float("inf")  # when a fetch was last attempted, even one that failed
        self._lock = asyncio.Lock()

    async def key_for(self, kid: Any, alg: str) -> Any:
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("The access token's kid is not a string")
        now = time.monotonic()
        if not self.fixed and (self.keys is None or now - self.fetched_at > self.max_age):
            await self._refresh(now)
        key = self._find(kid, alg)
        if key is None and not self.fixed and kid is not None:
            await self._refresh(now)  # perhaps the issuer rotated its keys
            key = self._find(kid, alg)
        if key is None:
            raise InvalidToken("The access token is signed with a key this resource does not know")
        return key

    def _find(self, kid: str | None, alg: str) -> Any:
        if self.keys is None:
            return None
        usable = self.keys.algorithm_keys.get(alg, [])
        keys = [k for k in self.keys.keys if k.key_type in usable and (kid is None or k.kid == kid)]
        # Without a kid only an unambiguous key will do.
        return keys[0] if len(keys) == 1 or (kid is not None and keys) else None

    async def _refresh(self, now: float) -> None:
        async with self._lock:
            if self.tried_at > now:
                return  # another request fetched while this one waited for the lock
            if now - self.tried_at < self.refetch_interval:
                # Fetched (or tried) recently: an unknown kid does not fetch again.
                if self.keys is None:
                    raise InvalidToken(_NO_KEYS)
                return
            self.tried_at = time.monotonic()
            try:
                uri = self.jwks_uri or await self._discover_jwks_uri()
                self.keys = _key_set(await fetch_json(uri, self.policy, timeout=self.timeout))
                self.jwks_uri = uri
                self.fetched_at = time.monotonic()
            except (MCPError, ValueError, JoseError) as exc:
                log.warning("cannot fetch the signing keys of %s: %s", self.issuer, exc)
                if self.keys is None:
                    raise InvalidToken(_NO_KEYS) from None

    async def _discover_jwks_uri(self) -> str:
        for url in _metadata_urls(self.issuer):
            try:
                document = await fetch_json(url, self.policy, timeout=self.timeout)
            except MCPError:
                continue
            if isinstance(document, dict) and document.get("issuer") == self.issuer:
                uri = document.get("jwks_uri")
                if isinstance(uri, str):
                    return uri
        raise ValueError(f"no metadata of issuer {self.issuer} names a jwks_uri; pass jwks_uri")


def _metadata_urls(issuer: str) -> list[str]:
    """RFC 8414 3.1 (path inserted) then OpenID Discovery, as authorization-server-discovery.mdx orders them."""
    parts = urllib.parse.urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    urls = [f"{origin}/.well-known/oauth-authorization-server{path}", f"{origin}/.well-known/openid-configuration{path}"]
    if path:
        urls.append(f"{origin}{path}/.well-known/openid-configuration")
    return urls


def _key_set(document: Any) -> KeySet:
    """The public signing keys of a JWKS document; symmetric keys are dropped (an
    issuer's JWKS is public, so a secret in it would be no secret)."""
    if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
        raise ValueError("the JWKS is not an object with a 'keys' list")
    public = [k for k in document["keys"] if isinstance(k, dict) and k.get("kty") != "oct"]
    try:
        return KeySet.import_key_set({"keys": public})
    except JoseError as exc:  # a configuration mistake when given, a bad document when fetched
        raise ValueError(f"the JWKS holds no usable public key ({exc})") from None
