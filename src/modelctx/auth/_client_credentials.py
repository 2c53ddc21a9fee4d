"""``ClientCredentialsProvider``: the OAuth client credentials grant, for a client acting
on its own behalf (a service, no user): the extension ``io.modelcontextprotocol/
oauth-client-credentials`` (SEP-1046).

The client authenticates at the token endpoint with ``client_secret_basic``,
``client_secret_post``, or ``private_key_jwt`` (RFC 7523 §2.2: a JWT signed with the
client's private key, ``iss`` = ``sub`` = client_id, ``aud`` = the authorization server's
issuer, built with joserfc).
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING

from ..errors import AuthorizationError
from ..transports.fetch import UrlPolicy
from ._client_base import OAuthProviderBase
from ._discovery import AuthServerMetadata, ResourceMetadata
from ._registration import Registration, choose_auth_method
from ._tokens import StoredCredentials, TokenStore

if TYPE_CHECKING:
    from joserfc.jwk import Key

    from ._dpop import DPoPKey

__all__ = ["ClientCredentialsProvider"]

_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
_ASSERTION_LIFETIME = 300  # seconds
_KEY_TYPES = {"ES": "EC", "RS": "RSA", "PS": "RSA", "Ed": "OKP"}


class ClientCredentialsProvider(OAuthProviderBase):
    """Authorizes with the client credentials grant: ``client_id`` and either
    ``client_secret`` (``client_secret_basic``, or ``client_secret_post`` when the
    server lists only that; ``auth_method`` forces one) or ``private_key`` (a PEM, for
    ``private_key_jwt``, signed with ``signing_algorithm``). ``scopes``: what to ask for
    when the server's challenge and metadata name nothing. Tokens are kept in ``store``.
    ``dpop``: True (a new ES256 key) or a ``DPoPKey``: DPoP-bound tokens (RFC 9449).
    """

    def __init__(
        self,
        client_id: str,
        *,
        client_secret: str | None = None,
        private_key: str | bytes | None = None,
        signing_algorithm: str = "ES256",
        auth_method: str | None = None,
        scopes: tuple[str, ...] = (),
        store: TokenStore | None = None,
        timeout: float = 10.0,
        url_policy: UrlPolicy | None = None,
        dpop: bool | DPoPKey = False,
    ) -> None:
        super().__init__(store=store, url_policy=url_policy, timeout=timeout, refresh=False, dpop=dpop, scopes=scopes)
        if (client_secret is None) == (private_key is None):
            raise ValueError("give ClientCredentialsProvider a client_secret or a private_key (not both)")
        self._client_id = client_id
        self._client_secret = client_secret
        self._algorithm = signing_algorithm
        self._auth_method = auth_method
        self._key: Key | None = None
        if private_key is not None:
            from joserfc.jwk import JWKRegistry  # the auth extra; only private_key_jwt needs it

            key_type = _KEY_TYPES.get(signing_algorithm[:2])
            if key_type is None:
                raise ValueError(f"unsupported signing_algorithm {signing_algorithm!r}; use ES256, RS256, PS256 or EdDSA")
            try:
                self._key = JWKRegistry.import_key(private_key, key_type)
            except Exception as exc:  # noqa: BLE001 - joserfc raises several kinds for a bad key
                raise ValueError(f"private_key is not a {key_type} private key in PEM: {type(exc).__name__}") from None

    async def _obtain(
        self,
        server: AuthServerMetadata,
        resource_metadata: ResourceMetadata,
        resource: str,
        stored: StoredCredentials | None,
        scope: str | None,
        policy: UrlPolicy,
    ) -> StoredCredentials:
        scope = self._scope_for(scope)
        form = {"grant_type": "client_credentials"}
        if scope:
            form["scope"] = scope
        if self._key is not None:
            supported = server.listed("token_endpoint_auth_methods_supported")
            if supported is not None and "private_key_jwt" not in supported:
                raise AuthorizationError(
                    f"the authorization server {server.issuer} does not accept private_key_jwt "
                    f"(it lists {', '.join(supported)}); use a client_secret instead"
                )
            form["client_id"] = self._client_id
            form["client_assertion_type"] = _ASSERTION_TYPE
            form["client_assertion"] = self._assertion(server.issuer)
            registration = Registration(self._client_id, None, "private_key_jwt")
        else:
            method = self._auth_method or choose_auth_method(server, True)
            registration = Registration(self._client_id, self._client_secret, method)
        return await self._token_request(
            server, form, registration, resource, policy, scope, resource_indicator=resource_metadata.resource
        )

    def _assertion(self, audience: str) -> str:
        """A fresh RFC 7523 client assertion for the authorization server ``audience``."""
        from joserfc import jwt

        assert self._key is not None
        now = int(time.time())
        claims = {
            "iss": self._client_id,
            "sub": self._client_id,
            "aud": audience,
            "iat": now,
            "exp": now + _ASSERTION_LIFETIME,
            "jti": secrets.token_urlsafe(16),
        }
        return jwt.encode({"alg": self._algorithm}, claims, self._key, algorithms=[self._algorithm])
