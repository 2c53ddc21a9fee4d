"""``IntrospectionVerifier``: opaque tokens checked by asking the issuer (RFC 7662).

The resource POSTs the token to the authorization server's introspection endpoint,
authenticating as a client (``client_secret_basic`` or ``client_secret_post``), and
accepts the token only when the answer says ``active: true``, names this resource in
``aud`` (RFC 8707; an answer without ``aud`` is refused unless
``require_audience=False``), comes from the expected ``iss`` when one is given, and
has an ``exp`` not past, and does not say the token is another kind (a ``token_type``
of ``refresh_token`` or ``id_token``, or a Keycloak-style ``typ`` of ``Refresh``, ``Offline``
or ``ID``: the hint ``access_token`` is only a hint, RFC 7662 2.1).

Answers are cached for ``cache_seconds`` (never past the token's ``exp``) by a
SHA-256 digest of the token, so the cache holds no token text; it keeps at most
``cache_size`` entries, least recently used out first. Refusals are cached too, so a
client repeating a bad token does not make the server ask every time.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import time
import urllib.parse
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

from ..errors import InvalidToken, MCPError
from ..transports.fetch import UrlPolicy, check_scheme, post_form
from ._jwt import default_policy, scopes_of
from ._resource import AccessToken

__all__ = ["IntrospectionVerifier"]

log = logging.getLogger("modelctx.auth")

_MAX_ANSWER = 64 * 1024


class IntrospectionVerifier:
    """Checks tokens with the RFC 7662 ``endpoint`` of their issuer.

    ``audience``: this resource's URL. ``client_id``/``client_secret``: how this
    resource authenticates to the endpoint, sent as HTTP Basic (``auth_method=
    "client_secret_basic"``) or in the form (``"client_secret_post"``). ``issuer``:
    when given, the answer's ``iss`` must equal it. ``url_policy``: the SSRF guard
    (default https to public addresses, and loopback as well for a loopback endpoint). ``timeout``: seconds for one introspection.
    """

    def __init__(
        self,
        endpoint: str,
        audience: str,
        *,
        client_id: str,
        client_secret: str,
        auth_method: str = "client_secret_basic",
        issuer: str | None = None,
        require_audience: bool = True,
        url_policy: UrlPolicy | None = None,
        timeout: float = 10.0,
        cache_seconds: float = 30.0,
        cache_size: int = 4096,
    ) -> None:
        if auth_method not in ("client_secret_basic", "client_secret_post"):
            raise ValueError("auth_method is 'client_secret_basic' or 'client_secret_post'")
        check_scheme(endpoint)
        self.endpoint = endpoint
        self.audience = audience
        self.issuer = issuer
        self.require_audience = require_audience
        self.timeout = timeout
        self.cache_seconds = cache_seconds
        self.cache_size = cache_size
        self._client_id = client_id
        self._client_secret = client_secret
        self._auth_method = auth_method
        self._policy = url_policy or default_policy(endpoint)
        self._cache: OrderedDict[bytes, tuple[float, AccessToken | InvalidToken]] = OrderedDict()

    async def verify(self, token: str) -> AccessToken:
        """The token's ``AccessToken``; ``InvalidToken`` saying what failed otherwise."""
        digest = hashlib.sha256(token.encode()).digest()
        now = time.time()
        cached = self._cache.get(digest)
        if cached is not None and cached[0] > now:
            self._cache.move_to_end(digest)
            outcome = cached[1]
        else:
            outcome = await self._introspect(token)
            self._remember(digest, now, outcome)
        if isinstance(outcome, InvalidToken):
            raise InvalidToken(outcome.message)
        if outcome.expires_at is not None and outcome.expires_at <= now:
            raise InvalidToken("The access token has expired; refresh it or authorize again")
        return outcome

    def _remember(self, digest: bytes, now: float, outcome: AccessToken | InvalidToken) -> None:
        until = now + self.cache_seconds
        if isinstance(outcome, AccessToken) and outcome.expires_at is not None:
            until = min(until, outcome.expires_at)
        self._cache[digest] = (until, outcome)
        self._cache.move_to_end(digest)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    async def _introspect(self, token: str) -> AccessToken | InvalidToken:
        try:
            answer = await asyncio.wait_for(self._post(token), self.timeout)
        except (TimeoutError, OSError, ValueError, MCPError) as exc:
            # Not cached: the next request asks again.
            log.warning("token introspection at %s failed: %s", self.endpoint, type(exc).__name__)
            raise InvalidToken("The access token cannot be checked now: the introspection endpoint failed") from None
        return self._judge(answer)

    def _judge(self, answer: Any) -> AccessToken | InvalidToken:
        if not isinstance(answer, dict) or answer.get("active") is not True:
            return InvalidToken("The access token is not active (revoked, expired or unknown)")
        if _not_an_access_token(answer):
            return InvalidToken("The token is not an access token (the introspection answer says it is a refresh or ID token)")
        if self.issuer is not None and answer.get("iss") != self.issuer:
            return InvalidToken("The access token was issued by another authorization server")
        audience = answer.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
        if self.audience not in audiences and (self.require_audience or audience is not None):
            return InvalidToken("The access token was not issued for this resource (aud)")
        exp = answer.get("exp")
        return AccessToken(
            subject=answer.get("sub") if isinstance(answer.get("sub"), str) else None,
            issuer=answer.get("iss") if isinstance(answer.get("iss"), str) else self.issuer,
            scopes=scopes_of(answer),
            client_id=answer.get("client_id") if isinstance(answer.get("client_id"), str) else None,
            audience=tuple(str(a) for a in audiences),
            expires_at=float(exp) if isinstance(exp, (int, float)) else None,
            claims=MappingProxyType({k: v for k, v in answer.items() if k != "token"}),
            # RFC 9449 6.2: a DPoP-bound token's key thumbprint, so it is never taken as Bearer.
            jkt=cnf.get("jkt") if isinstance(cnf := answer.get("cnf"), dict) and isinstance(cnf.get("jkt"), str) else None,
        )

    async def _post(self, token: str) -> Any:
        form = {"token": token, "token_type_hint": "access_token"}
        headers: dict[str, str] = {}
        if self._auth_method == "client_secret_basic":
            # RFC 6749 2.3.1: each part form-encoded before the Basic encoding.
            pair = f"{urllib.parse.quote_plus(self._client_id)}:{urllib.parse.quote_plus(self._client_secret)}"
            headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form.update(client_id=self._client_id, client_secret=self._client_secret)
        reply = await post_form(self.endpoint, form, self._policy, timeout=self.timeout, max_bytes=_MAX_ANSWER, headers=headers)
        if not 200 <= reply.status < 300:
            raise ValueError(f"HTTP {reply.status}")
        if reply.data is None:
            raise ValueError("the answer is not JSON")
        return reply.data


#: What an answer's ``token_type`` or ``typ`` says of a token that is not an access token.
_OTHER_KINDS = frozenset({"refresh_token", "refresh", "offline", "id_token", "id", "logout"})


def _not_an_access_token(answer: dict[str, Any]) -> bool:
    kinds = (answer.get("token_type"), answer.get("typ"))
    return any(isinstance(kind, str) and kind.lower() in _OTHER_KINDS for kind in kinds)
