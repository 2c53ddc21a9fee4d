"""Authlib's ``AuthorizationServer`` for the development server: framework glue (its
requests built from parsed ASGI input, its responses as plain ``Reply`` values), JWT
access tokens, dynamic client registration and the RFC 8414 metadata document.

Authlib runs synchronously; every call into it is CPU work on in-memory state (no I/O:
a Client ID Metadata Document is fetched before Authlib is asked about its client).
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from authlib.oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import JsonPayload, JsonRequest, OAuth2Payload, OAuth2Request
from authlib.oauth2.rfc7591 import ClientMetadataClaims, ClientRegistrationEndpoint, InvalidClientMetadataError
from authlib.oauth2.rfc9207 import IssuerParameter
from joserfc import jwt
from joserfc.errors import InvalidClaimError

from .._dpop import DPoPVerifier
from ._grants import (
    ASSERTION_ALGORITHMS,
    AuthorizationCodeGrant,
    ClientCredentialsGrant,
    InvalidTargetError,
    PrivateKeyJwt,
    RefreshTokenGrant,
    RequireResource,
    RequireS256,
)
from ._keys import SigningKey
from ._models import DevClient, RefreshToken, Store

__all__ = ["OAuthServer", "Reply", "form_request", "json_request"]

GRANT_TYPES = ["authorization_code", "refresh_token", "client_credentials"]
AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"]


@dataclass
class Reply:
    """An HTTP response from Authlib: status, body (a dict for JSON, else text), headers."""

    status: int
    body: Any
    headers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def location(self) -> str | None:
        return next((v for k, v in self.headers if k.lower() == "location"), None)

    @location.setter
    def location(self, value: str) -> None:  # RFC 9207's extension rewrites it to add ``iss``
        self.headers = [(k, v) for k, v in self.headers if k.lower() != "location"] + [("Location", value)]


class _Payload(OAuth2Payload):  # type: ignore[misc]
    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._datalist: dict[str, list[str]] = defaultdict(list)
        for key, value in pairs:
            self._datalist[key].append(value)
        # The first value of each name, as Authlib's Flask glue reads one; repeats are
        # refused where they matter (Authlib checks the authorization parameters).
        self._data = {key: values[0] for key, values in self._datalist.items()}

    @property
    def data(self) -> dict[str, str]:
        return self._data

    @property
    def datalist(self) -> dict[str, list[str]]:
        return self._datalist


class _FormRequest(OAuth2Request):  # type: ignore[misc]
    def __init__(self, method: str, uri: str, headers: Mapping[str, str], pairs: list[tuple[str, str]]) -> None:
        super().__init__(method, uri, headers=headers)
        self.payload = _Payload(pairs)
        self.resource: str | None = None
        self.dpop_jkt: str | None = None  # the key a valid DPoP proof came with (RFC 9449 5)

    @property
    def args(self) -> dict[str, str]:
        return dict(self.payload.data) if self.method == "GET" else {}

    @property
    def form(self) -> dict[str, str]:
        return dict(self.payload.data) if self.method == "POST" else {}


def form_request(method: str, uri: str, headers: Mapping[str, str], pairs: list[tuple[str, str]]) -> OAuth2Request:
    """An Authlib request from a parsed query string or form body."""
    return _FormRequest(method, uri, headers, pairs)


class _JsonPayload(JsonPayload):  # type: ignore[misc]
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    @property
    def data(self) -> dict[str, Any]:
        return self._data


def json_request(method: str, uri: str, headers: Mapping[str, str], data: dict[str, Any]) -> JsonRequest:
    """An Authlib request from a parsed JSON body."""
    request = JsonRequest(method, uri, headers)
    request.payload = _JsonPayload(data)
    return request


class _Issuer(IssuerParameter):  # type: ignore[misc]
    def __init__(self, issuer: str) -> None:
        self._issuer = issuer

    def get_issuer(self) -> str:
        return self._issuer


class _McpClientMetadata(ClientMetadataClaims):  # type: ignore[misc]
    """RFC 7591 metadata plus ``application_type`` (OIDC registration), which MCP clients
    send. The request reaches it checked by ``check_metadata``, the rule a metadata
    document is held to as well."""

    REGISTERED_CLAIMS = [*ClientMetadataClaims.REGISTERED_CLAIMS, "application_type"]

    def validate(self, now: Any = None, leeway: int = 0) -> None:
        # The types, sizes and redirect URIs were checked before (_metadata.check_metadata).
        super().validate(now, leeway)
        if self.get("application_type", "web") not in ("web", "native"):
            raise InvalidClaimError("application_type")


class _Registration(ClientRegistrationEndpoint):  # type: ignore[misc]
    """Open dynamic client registration (RFC 7591): anyone may register, as on a
    development machine; a client asking for ``none`` gets no secret."""

    def __init__(self, server: OAuthServer) -> None:
        super().__init__(server, claims_classes=[_McpClientMetadata])

    def authenticate_token(self, request: Any) -> bool:
        return True

    def get_server_metadata(self) -> dict[str, Any]:
        return dict(self.server.metadata)

    def generate_client_info(self, request: Any) -> dict[str, Any]:
        info = dict(super().generate_client_info(request))
        if request.payload.data.get("token_endpoint_auth_method") in ("none", "private_key_jwt"):
            del info["client_secret"], info["client_secret_expires_at"]
        return info

    def save_client(self, client_info: dict[str, Any], client_metadata: dict[str, Any], request: Any) -> DevClient:
        method = client_metadata.get("token_endpoint_auth_method", "client_secret_basic")
        grant_types = tuple(client_metadata.get("grant_types") or ["authorization_code"])
        if "authorization_code" in grant_types and not client_metadata.get("redirect_uris"):
            raise InvalidClientMetadataError("redirect_uris are required for the authorization_code grant")
        if method == "private_key_jwt" and not client_metadata.get("jwks"):
            raise InvalidClientMetadataError("private_key_jwt needs the public keys in 'jwks'")
        if method == "none" and "client_credentials" in grant_types:
            raise InvalidClientMetadataError("client_credentials needs a confidential client, not 'none'")
        client = DevClient(
            client_id=client_info["client_id"],
            secret=client_info.get("client_secret"),
            redirect_uris=tuple(client_metadata.get("redirect_uris") or ()),
            grant_types=grant_types,
            auth_methods=frozenset({method}),
            scope=client_metadata.get("scope"),
            jwks=client_metadata.get("jwks"),
            metadata=dict(client_metadata),
        )
        self.server.store.add_registered(client)
        return client


class OAuthServer(AuthorizationServer):  # type: ignore[misc]
    """Authlib's authorization server over a ``Store``, signing access tokens with ``key``."""

    def __init__(
        self,
        issuer: str,
        key: SigningKey,
        *,
        scopes_supported: list[str] | None = None,
        resources: frozenset[str] | None = None,
        access_token_ttl: int = 3600,
        grant_types: Sequence[str] = GRANT_TYPES,
        registration: bool = True,
        client_documents: bool = True,
    ) -> None:
        super().__init__(scopes_supported=scopes_supported)
        unknown = set(grant_types) - set(GRANT_TYPES)
        if unknown:
            raise ValueError(f"grant types {sorted(unknown)} are not served; choose from {GRANT_TYPES}")
        self.grant_types = list(grant_types)
        self.registration = registration
        self.client_documents = registration and client_documents
        self.resources = resources
        self.issuer = issuer
        self.key = key
        self.store = Store()
        self.access_token_ttl = access_token_ttl
        self.dpop = DPoPVerifier()  # proofs at the token endpoint
        #: More claims for the access tokens of a grant family (the OAuth proxy's ``sid``);
        #: they never replace the registered ones.
        self.family_claims: Callable[[str], Mapping[str, Any]] | None = None
        self.metadata = self._metadata()
        self.register_grant(AuthorizationCodeGrant, [RequireS256(), RequireResource()])
        self.register_grant(RefreshTokenGrant)
        if "client_credentials" in self.grant_types:
            self.register_grant(ClientCredentialsGrant)
        self.register_client_auth_method("private_key_jwt", PrivateKeyJwt(self))
        self.register_extension(_Issuer(issuer))
        if registration:
            self.register_endpoint(_Registration(self))

    def endpoint(self, name: str) -> str:
        """The URL of one of this server's endpoints (``authorize``, ``token``, ``register``, ``jwks``)."""
        return f"{self.issuer.rstrip('/')}/{name}"

    def _metadata(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "issuer": self.issuer,
            "authorization_endpoint": self.endpoint("authorize"),
            "token_endpoint": self.endpoint("token"),
            "jwks_uri": self.endpoint("jwks"),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": list(self.grant_types),
            "token_endpoint_auth_methods_supported": AUTH_METHODS,
            "token_endpoint_auth_signing_alg_values_supported": ASSERTION_ALGORITHMS,
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": True,
            "dpop_signing_alg_values_supported": list(self.dpop.algorithms),  # RFC 9449 5.1
        }
        if self.registration:  # RFC 7591
            metadata["registration_endpoint"] = self.endpoint("register")
        if self.client_documents:
            metadata["client_id_metadata_document_supported"] = True
        if self.scopes_supported:
            metadata["scopes_supported"] = list(self.scopes_supported)
        return metadata

    def check_resource(self, resource: str) -> None:
        """Raises ``InvalidTargetError`` for a resource this server does not issue tokens for."""
        if self.resources is not None and resource not in self.resources:
            raise InvalidTargetError(
                f"This server issues no tokens for {resource}; it knows {', '.join(sorted(self.resources))}"
            )

    # Authlib's framework seam.

    def query_client(self, client_id: str) -> DevClient | None:
        return self.store.client(client_id)

    def save_token(self, token: dict[str, Any], request: Any) -> None:
        pass  # issue_tokens records the refresh token; access tokens are self-contained JWTs

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        pass

    def create_oauth2_request(self, request: Any) -> OAuth2Request:
        return request  # always built by form_request

    def create_json_request(self, request: Any) -> JsonRequest:
        return request  # always built by json_request

    def handle_response(self, status: int, body: Any, headers: Any) -> Reply:
        return Reply(status, body, list(headers or []))

    # Tokens.

    def issue_tokens(
        self,
        *,
        client: DevClient,
        subject: str,
        scope: str,
        resource: str,
        include_refresh_token: bool,
        family: str,
        jkt: str | None = None,
    ) -> dict[str, Any]:
        """A token response: a signed JWT access token for ``resource`` (its ``aud``) and,
        when asked, a new refresh token bound to the same client, subject, scope and resource.
        With ``jkt`` (the request came with a valid DPoP proof) the access token is bound
        to that key: ``cnf.jkt`` and ``token_type`` DPoP (RFC 9449 5, 6.1)."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": subject,
            "aud": resource,
            "client_id": client.client_id,
            "iat": now,
            "exp": now + self.access_token_ttl,
            "jti": uuid.uuid4().hex,
        }
        if scope:
            claims["scope"] = scope
        if jkt is not None:
            claims["cnf"] = {"jkt": jkt}
        if self.family_claims is not None:
            claims = {**self.family_claims(family), **claims}
        header = {"alg": self.key.algorithm, "kid": self.key.kid, "typ": "at+jwt"}  # RFC 9068 section 2.1
        token: dict[str, Any] = {
            "access_token": jwt.encode(header, claims, self.key.key, algorithms=[self.key.algorithm]),
            "token_type": "DPoP" if jkt is not None else "Bearer",
            "expires_in": self.access_token_ttl,
        }
        if scope:
            token["scope"] = scope
        if include_refresh_token:
            refresh = secrets.token_urlsafe(32)
            # A public client's refresh token is bound to its DPoP key too (RFC 9449 5).
            bound = jkt if client.auth_methods == frozenset({"none"}) else None
            self.store.save_refresh_token(
                RefreshToken(refresh, client.client_id, subject, scope, resource, family, jkt=bound)
            )
            token["refresh_token"] = refresh
        return token
