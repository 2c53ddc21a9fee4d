"""``EnterpriseAuthorizationProvider``: enterprise-managed authorization (SEP-990, the
extension ``io.modelcontextprotocol/enterprise-managed-authorization``).

A user signed in to the MCP client through the enterprise's identity provider (IdP)
holds an identity assertion (an OpenID Connect ID token, or a SAML assertion). With it
the client obtains an access token for an MCP server without the user's interaction:

1. Token exchange (RFC 8693) at the IdP's token endpoint: ``subject_token`` = the
   identity assertion, ``requested_token_type`` = ``...:token-type:id-jag``,
   ``audience`` = the issuer of the MCP server's authorization server, ``resource`` =
   the MCP server's resource identifier (RFC 9728), ``scope``. The IdP applies the
   enterprise's policy and answers with an Identity Assertion JWT Authorization Grant
   (ID-JAG) in ``access_token``, ``issued_token_type`` = ``...:token-type:id-jag``.
2. The JWT bearer grant (RFC 7523) at the MCP server's authorization server with the
   ID-JAG as ``assertion``, the client authenticated as it is pre-registered there.

Neither step is retried after a refusal (the same identity assertion or ID-JAG is not
sent again); errors say which party refused and what to do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from ..errors import AuthorizationError
from ..transports.fetch import UrlPolicy, post_form
from ._client_base import OAuthProviderBase
from ._discovery import AuthServerMetadata, ResourceMetadata, discover_authorization_server
from ._registration import Registration, _oauth_error, apply_client_auth, choose_auth_method
from ._tokens import StoredCredentials, TokenStore
from ._workload import AssertionGetter, AssertionSource, Refusals, grant_with_assertion, require_jwt_bearer

__all__ = ["EnterpriseAuthorizationProvider"]

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
SAML2 = "urn:ietf:params:oauth:token-type:saml2"


class EnterpriseAuthorizationProvider(OAuthProviderBase):
    """Authorizes with an Identity Assertion Authorization Grant: the user's identity
    assertion exchanged at the enterprise IdP for an ID-JAG, the ID-JAG exchanged at the
    MCP server's authorization server for an access token.

    ``client_id`` / ``client_secret``: the MCP client's pre-registered credentials at the
    MCP server's authorization server. ``id_token``: the user's identity assertion, or a
    callable returning a current one (sync or async); or ``id_token_file``.
    ``subject_token_type``: ``...:token-type:id_token`` (default) or ``...:saml2``.
    ``idp_issuer``: the IdP, whose token endpoint is discovered (RFC 8414 / OpenID), unless
    ``idp_token_endpoint`` names it. ``idp_client_id`` / ``idp_client_secret``: the
    client at the IdP, when the exchange must be authenticated. ``scopes``: what to ask
    for when the MCP server's challenge and metadata name nothing.
    """

    def __init__(
        self,
        client_id: str,
        *,
        client_secret: str | None = None,
        id_token: str | Callable[[], str | Awaitable[str]] | None = None,
        id_token_file: str | Path | None = None,
        subject_token_type: str = ID_TOKEN,
        idp_issuer: str | None = None,
        idp_token_endpoint: str | None = None,
        idp_client_id: str | None = None,
        idp_client_secret: str | None = None,
        scopes: tuple[str, ...] = (),
        store: TokenStore | None = None,
        timeout: float = 10.0,
        url_policy: UrlPolicy | None = None,
    ) -> None:
        super().__init__(store=store, url_policy=url_policy, timeout=timeout, refresh=False, scopes=scopes)
        if idp_issuer is None and idp_token_endpoint is None:
            raise ValueError("name the identity provider: idp_issuer (discovered) or idp_token_endpoint")
        if idp_client_secret is not None and idp_client_id is None:
            raise ValueError("an idp_client_secret needs its idp_client_id")
        getter: str | AssertionGetter | None = None
        if isinstance(id_token, str):
            getter = id_token
        elif id_token is not None:
            produce = id_token

            def getter(_idp: str) -> str | Awaitable[str]:  # the assertion is the IdP's own: no audience
                return produce()

        self.source = AssertionSource("identity assertion", value=getter, path=id_token_file)
        self._client_id = client_id
        self._client_secret = client_secret
        self._subject_token_type = subject_token_type
        self._idp_issuer = idp_issuer
        self._idp_token_endpoint = idp_token_endpoint
        self._idp_client_id = idp_client_id
        self._idp_client_secret = idp_client_secret
        self.refusals = Refusals()

    def __repr__(self) -> str:
        return (
            f"EnterpriseAuthorizationProvider(client_id={self._client_id!r}, "
            f"idp={self._idp_issuer or self._idp_token_endpoint!r}, store={self.store!r})"
        )

    async def _obtain(
        self,
        server: AuthServerMetadata,
        resource_metadata: ResourceMetadata,
        resource: str,
        stored: StoredCredentials | None,
        scope: str | None,
        policy: UrlPolicy,
    ) -> StoredCredentials:
        self.refusals.check_resource(resource)
        require_jwt_bearer(server)
        scope = self._scope_for(scope)
        id_jag = await self._exchange(server.issuer, resource, resource_metadata.resource, scope)
        method = choose_auth_method(server, self._client_secret is not None)
        registration = Registration(self._client_id, self._client_secret, method)
        return await grant_with_assertion(
            self, server, resource_metadata, resource, id_jag, scope, policy, registration, self.refusals, None,
            _server_hint,
        )

    async def _exchange(self, audience: str, server_url: str, resource: str, scope: str | None) -> str:
        """Step 1: the identity assertion for an ID-JAG, at the IdP (``resource``: the
        MCP server's resource identifier, from its metadata)."""
        subject = await self.source.get(self._idp_issuer or self._idp_token_endpoint or "")
        self.refusals.check_assertion(subject)
        endpoint, idp = await self._idp_endpoint()
        form = {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ID_JAG,
            "audience": audience,
            "resource": resource,
            "subject_token": subject,
            "subject_token_type": self._subject_token_type,
        }
        if scope:
            form["scope"] = scope
        headers: dict[str, str] = {}
        if self._idp_client_id is not None:
            has_secret = self._idp_client_secret is not None
            method = choose_auth_method(idp, has_secret) if idp is not None else ("client_secret_basic" if has_secret else "none")
            apply_client_auth(Registration(self._idp_client_id, self._idp_client_secret, method), form, headers)
        policy = await self._policy(endpoint)
        reply = await post_form(endpoint, form, policy, timeout=self._timeout, headers=headers)
        data = reply.data if isinstance(reply.data, dict) else {}
        token = data.get("access_token")
        if reply.status != 200 or not isinstance(token, str) or not token:
            raise self._refused(endpoint, server_url, resource, subject, reply.status, data)
        issued = data.get("issued_token_type")
        if issued != ID_JAG:
            raise AuthorizationError(
                f"the identity provider at {endpoint} issued a {issued or 'untyped'} token, not an ID-JAG "
                f"({ID_JAG}); it does not support enterprise-managed authorization for this client"
            )
        return token

    def _refused(
        self, endpoint: str, server_url: str, resource: str, subject: str, status: int, data: dict[str, object]
    ) -> AuthorizationError:
        """The error for a token exchange the IdP refused; a refusal (an OAuth error, not
        a failing server) is remembered so the same identity assertion is not sent again."""
        reason = _oauth_error(data) or f"HTTP {status}"
        for secret in (subject, self._idp_client_secret or ""):
            reason = reason.replace(secret, "[redacted]") if secret else reason
        message = (
            f"the identity provider's token exchange at {endpoint} refused to issue an ID-JAG for "
            f"{resource} ({reason}); {_idp_hint(str(data.get('error', '')))}"
        )
        if isinstance(data.get("error"), str):
            self.refusals.note(server_url, subject, message)
        self.source.forget(self._idp_issuer or self._idp_token_endpoint or "")
        return AuthorizationError(message)

    async def _idp_endpoint(self) -> tuple[str, AuthServerMetadata | None]:
        if self._idp_token_endpoint is not None:
            return self._idp_token_endpoint, None
        assert self._idp_issuer is not None
        policy = await self._policy(self._idp_issuer)
        idp = await discover_authorization_server(self._idp_issuer, policy, timeout=self._timeout)
        if idp.token_endpoint is None:
            raise AuthorizationError(
                f"the identity provider {self._idp_issuer} names no token_endpoint; give idp_token_endpoint"
            )
        return idp.token_endpoint, idp


def _idp_hint(code: str) -> str:
    if code == "invalid_grant":
        return "the user's identity assertion was not accepted (expired, or not issued to this client): sign the user in again"
    if code in ("access_denied", "unauthorized_client", "invalid_target", "invalid_scope"):
        return "the enterprise's policy does not allow this client that access; ask the identity provider's administrator"
    if code == "invalid_client":
        return "the client is not known to the identity provider as configured: check idp_client_id and idp_client_secret"
    return "check the identity provider's settings, then connect again"


def _server_hint(code: str | None, server: AuthServerMetadata, scope: str | None) -> str:
    if code == "invalid_client":
        return f"check client_id and client_secret: the client must be pre-registered at {server.issuer}"
    if code == "invalid_grant":
        return (
            f"{server.issuer} did not accept the ID-JAG (not trusting the identity provider, or the ID-JAG names "
            "another client, audience or resource); its administrator must configure the trust"
        )
    if code == "invalid_scope":
        return f"the scopes asked for ({scope or 'none'}) are not allowed; ask for fewer"
    return "fix the cause, then connect again"
