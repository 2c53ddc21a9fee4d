"""Authlib's grants, bound to the development server's store and made stricter where
MCP asks (2026-07-28 basic/authorization):

* PKCE is required on every authorization request, with ``S256`` only (``plain`` and
  a missing method are refused), and so a ``code_verifier`` on every code exchange;
* a ``resource`` (RFC 8707) is required on every authorization and client credentials
  request; it becomes the access token's ``aud``; a token request naming another
  resource than the code or refresh token was issued for is ``invalid_target``;
* refresh tokens rotate: each use returns a new one and retires the old.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from authlib.oauth2.rfc6749 import InvalidClientError, InvalidGrantError, InvalidRequestError, OAuth2Error, grants
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion
from authlib.oauth2.rfc7636 import CodeChallenge
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from ._models import MAX_ASSERTION_LIFETIME, AuthorizationCode, DevClient

if TYPE_CHECKING:
    from ._oauth import OAuthServer

__all__ = [
    "AuthorizationCodeGrant",
    "ClientCredentialsGrant",
    "InvalidTargetError",
    "PrivateKeyJwt",
    "RefreshTokenGrant",
    "RequireS256",
    "RequireResource",
]

ASSERTION_ALGORITHMS = ["ES256", "RS256", "PS256", "EdDSA"]
TOKEN_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "private_key_jwt", "none"]


class InvalidTargetError(OAuth2Error):  # type: ignore[misc]
    """RFC 8707 section 2: the ``resource`` is missing, malformed, or not the one the
    grant was issued for."""

    error = "invalid_target"


def required_resource(datalist: Any) -> str:
    """The one ``resource`` of a request; raises ``InvalidTargetError`` without one."""
    resource = requested_resource(datalist, required=True)
    assert resource is not None  # required: requested_resource raised
    return resource


def requested_resource(datalist: Any, required: bool) -> str | None:
    """The one ``resource`` of a request (an absolute URI without a fragment).

    Raises ``InvalidTargetError`` for several, a malformed one, or none when ``required``.
    """
    values = list(datalist.get("resource", []))
    if not values:
        if required:
            raise InvalidTargetError(
                "Missing 'resource': name the MCP server's canonical URL (RFC 8707), e.g. resource=https://mcp.example.com/mcp"
            )
        return None
    if len(values) > 1:
        raise InvalidTargetError("Several 'resource' values: this server issues a token for one resource at a time")
    resource = str(values[0])
    try:
        parts = urlsplit(resource)
    except ValueError:
        parts = None
    if parts is None or not parts.scheme or not parts.netloc or parts.fragment:
        raise InvalidTargetError("Invalid 'resource': it must be an absolute URI without a fragment")
    return resource


class RequireS256(CodeChallenge):  # type: ignore[misc]
    """PKCE on every authorization request, ``S256`` only."""

    DEFAULT_CODE_CHALLENGE_METHOD = "S256"
    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def __init__(self) -> None:
        super().__init__(required=True)

    def validate_code_challenge(self, grant: Any, redirect_uri: str) -> None:
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError("Missing 'code_challenge': PKCE with code_challenge_method=S256 is required")
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("Unsupported 'code_challenge_method': only S256 is supported")
        super().validate_code_challenge(grant, redirect_uri)


class RequireResource:
    """Authorization-request extension: a ``resource`` is required and kept on the request."""

    def __call__(self, grant: Any) -> None:
        grant.register_hook("after_validate_authorization_request_payload", self.validate)

    def validate(self, grant: Any, redirect_uri: str) -> None:
        resource = required_resource(grant.request.payload.datalist)
        grant.server.check_resource(resource)
        grant.request.resource = resource


class _IssuesJwt:
    """Tokens come from ``OAuthServer.issue_tokens``, which knows the resource (Authlib's
    token generators are not told the request)."""

    request: Any
    server: OAuthServer

    def token_subject(self) -> str:
        return str(self.request.user)

    def grant_family(self) -> str:
        """What a refresh token issued now descends from (revoked together on a replay)."""
        return str(self.request.client.client_id)

    def generate_token(
        self,
        user: Any = None,
        scope: str | None = None,
        grant_type: str | None = None,
        expires_in: int | None = None,
        include_refresh_token: bool = True,
    ) -> dict[str, Any]:
        return self.server.issue_tokens(
            client=self.request.client,
            subject=str(user) if user is not None else self.token_subject(),
            scope=scope or "",
            resource=self.request.resource,
            include_refresh_token=include_refresh_token,
            family=self.grant_family(),
            jkt=getattr(self.request, "dpop_jkt", None),
        )


class AuthorizationCodeGrant(_IssuesJwt, grants.AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = TOKEN_AUTH_METHODS

    def save_authorization_code(self, code: str, request: Any) -> None:
        data = request.payload.data
        self.server.store.save_code(
            AuthorizationCode(
                code=code,
                client_id=request.client.client_id,
                redirect_uri=request.payload.redirect_uri or request.client.get_default_redirect_uri(),
                scope=request.scope or "",
                subject=str(request.user),
                resource=request.resource,
                code_challenge=data["code_challenge"],
                code_challenge_method=data["code_challenge_method"],
            )
        )

    def query_authorization_code(self, code: str, client: DevClient) -> AuthorizationCode | None:
        return self.server.store.take_code(code, client.client_id)

    def delete_authorization_code(self, authorization_code: AuthorizationCode) -> None:
        self.server.store.spend(authorization_code.code, family=authorization_code.code)

    def grant_family(self) -> str:
        return str(self.request.authorization_code.code)

    def authenticate_user(self, authorization_code: AuthorizationCode) -> str:
        return authorization_code.subject

    def validate_token_request(self) -> None:
        super().validate_token_request()
        code: AuthorizationCode = self.request.authorization_code
        named = requested_resource(self.request.payload.datalist, required=False)
        if named is not None and named != code.resource:
            raise InvalidTargetError("The 'resource' differs from the one the code was issued for")
        self.request.resource = code.resource


class RefreshTokenGrant(_IssuesJwt, grants.RefreshTokenGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = TOKEN_AUTH_METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True  # rotation (OAuth 2.1 section 4.3.1 for public clients)

    def authenticate_refresh_token(self, refresh_token: str) -> Any:
        return self.server.store.refresh(refresh_token)

    def authenticate_user(self, refresh_token: Any) -> str:
        return str(refresh_token.subject)

    def revoke_old_credential(self, refresh_token: Any) -> None:
        self.server.store.spend(refresh_token.token, family=refresh_token.family)

    def grant_family(self) -> str:
        return str(self.request.refresh_token.family)

    def validate_token_request(self) -> None:
        super().validate_token_request()
        token = self.request.refresh_token
        named = requested_resource(self.request.payload.datalist, required=False)
        if named is not None and named != token.resource:
            raise InvalidTargetError("The 'resource' differs from the one the refresh token was issued for")
        if token.jkt is not None and getattr(self.request, "dpop_jkt", None) != token.jkt:
            raise InvalidGrantError("The refresh token is bound to a DPoP key: send a DPoP proof signed with it")
        self.request.resource = token.resource


class ClientCredentialsGrant(_IssuesJwt, grants.ClientCredentialsGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "private_key_jwt"]

    def token_subject(self) -> str:
        return str(self.request.client.client_id)  # the client acts for itself

    def validate_token_request(self) -> None:
        super().validate_token_request()
        resource = required_resource(self.request.payload.datalist)
        self.server.check_resource(resource)
        self.request.resource = resource


class PrivateKeyJwt(JWTBearerClientAssertion):  # type: ignore[misc]
    """``private_key_jwt`` client authentication (RFC 7523 section 2.2): a JWT signed
    with a key from the client's registered ``jwks``, each ``jti`` accepted once."""

    CLIENT_AUTH_METHOD = "private_key_jwt"

    def __init__(self, server: OAuthServer) -> None:
        super().__init__(validate_jti=True)
        self._server = server

    def process_assertion_claims(self, assertion: str, resolve_key: Any) -> Any:
        # Authlib would accept any algorithm joserfc recommends; name the asymmetric ones
        # the metadata advertises, so a client key only ever verifies what it can sign.
        try:
            token = jwt.decode(assertion, resolve_key, algorithms=ASSERTION_ALGORITHMS)
        except JoseError as exc:
            raise InvalidClientError(description=exc.description) from exc
        self.verify_claims(token.claims)
        return token.claims

    def get_audiences(self) -> list[str]:
        return [self._server.endpoint("token"), self._server.issuer]

    def extract_assertion(self, assertion: str) -> Any:
        try:
            return super().extract_assertion(assertion)
        except RecursionError:  # JSON nested deeper than the decoder goes
            raise InvalidClientError(description="Invalid JWT assertion: its JSON is nested too deeply") from None

    def validate_jti(self, claims: Any, jti: object) -> bool:
        # exp is there and a number: Authlib checked it before. Each jti is remembered
        # until its exp, so an exp far ahead would be remembered without end (RFC 7523
        # section 3: "MAY reject JWTs with an exp claim value that is unreasonably far
        # in the future").
        expires_at = claims["exp"]
        if expires_at > time.time() + MAX_ASSERTION_LIFETIME:
            raise InvalidClientError(
                description=f"The assertion's exp is more than {MAX_ASSERTION_LIFETIME:g}s ahead; make it shorter-lived"
            )
        if not isinstance(jti, str) or not jti or len(jti) > 256:
            raise InvalidClientError(description="The assertion's jti must be a string of at most 256 characters")
        first = self._server.store.first_use_of_assertion(f"{claims['sub']}:{jti}", float(expires_at))
        if first is None:
            raise InvalidClientError(
                description="Too many client assertions are live at once here; try again when some have expired"
            )
        return first

    def resolve_client_public_key(self, client: DevClient) -> KeySet:
        if not client.jwks:
            raise InvalidClientError(description="The client registered no 'jwks' to verify its assertion with")
        return KeySet.import_key_set(client.jwks)  # type: ignore[arg-type]  # a JSON object, checked by joserfc
