"""OAuth 2.1 for MCP over HTTP (basic/authorization/*.mdx).

Client side: ``OAuthClientProvider`` (authorization code flow with PKCE, for a user)
and ``ClientCredentialsProvider`` (a service's own credentials),
``WorkloadIdentityProvider`` (a workload's platform-issued JWT, the JWT bearer grant) and
``EnterpriseAuthorizationProvider`` (the user's enterprise identity exchanged for an
ID-JAG, then an access token), each given to
``Client(url, auth=...)``; tokens kept in a ``TokenStore`` (``MemoryTokenStore``,
``FileTokenStore``). What cannot be authorized raises ``AuthorizationError`` (also in
``modelctx.errors``), saying what failed and what to do.

Resource server side: ``ProtectedResource`` declares an MCP endpoint's authorization
(issuers, scopes, how tokens are checked) and plugs into the HTTP app
(``HttpApp(server, auth=...)``, ``serve_http(..., auth=...)``); ``JwtVerifier`` and
``IntrospectionVerifier`` check tokens; handlers see an ``AccessToken`` as
``ctx.principal`` and check scopes with ``ctx.require_scopes``, or a server declares
them per tool, prompt or resource with the ``RequiredScopes`` middleware.

DPoP (RFC 9449, sender-constrained tokens): ``dpop=True`` on either client provider,
``dpop="allowed"`` or ``"required"`` on ``ProtectedResource``; ``DPoPKey`` (a client's
key and its proofs) and ``DPoPVerifier`` (the checks) for those who need them;
``RedisReplays``: spent proofs shared by every worker and replica (wired by the HTTP
app when the server has a ``redis_url``).

``DevAuthorizationServer`` is a development authorization server (``modelctx
auth-server``). ``OAuthProxy`` is an MCP server's own authorization server in front of
an identity provider without dynamic client registration (``HttpApp(server, auth=proxy)``).

Nothing below this package imports it, and its names load on first use: importing
``modelctx.auth`` loads neither joserfc nor Authlib nor Starlette (``modelctx[auth]``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..errors import AuthorizationError

if TYPE_CHECKING:  # the names as the type checker sees them; at run time, __getattr__
    from ._client import CallbackHandler, OAuthClientProvider, RedirectHandler
    from ._client_credentials import ClientCredentialsProvider
    from ._dev_server import DevAuthorizationServer
    from ._dpop import DPoPKey, DPoPNonces, DPoPVerifier, InvalidDPoPProof
    from ._enterprise import EnterpriseAuthorizationProvider
    from ._introspection import IntrospectionVerifier
    from ._jwt import JwtVerifier
    from ._proxy import OAuthProxy
    from ._redirect import AuthorizationResponse, LoopbackReceiver, open_in_browser
    from ._registration import ClientMetadata
    from ._replays import RedisReplays
    from ._resource import AccessToken, ProtectedResource, TokenVerifier
    from ._scopes import RequiredScopes
    from ._tokens import FileTokenStore, MemoryTokenStore, StoredCredentials, TokenStore
    from ._workload import WorkloadIdentityProvider

# name -> the module (in this package) that defines it
_WHERE = {
    "CallbackHandler": "._client",
    "OAuthClientProvider": "._client",
    "RedirectHandler": "._client",
    "ClientCredentialsProvider": "._client_credentials",
    "AuthorizationResponse": "._redirect",
    "LoopbackReceiver": "._redirect",
    "open_in_browser": "._redirect",
    "ClientMetadata": "._registration",
    "FileTokenStore": "._tokens",
    "MemoryTokenStore": "._tokens",
    "StoredCredentials": "._tokens",
    "TokenStore": "._tokens",
    "AccessToken": "._resource",
    "ProtectedResource": "._resource",
    "TokenVerifier": "._resource",
    "IntrospectionVerifier": "._introspection",
    "JwtVerifier": "._jwt",
    "OAuthProxy": "._proxy",
    "RequiredScopes": "._scopes",
    "DevAuthorizationServer": "._dev_server",
    "DPoPKey": "._dpop",
    "DPoPNonces": "._dpop",
    "DPoPVerifier": "._dpop",
    "InvalidDPoPProof": "._dpop",
    "RedisReplays": "._replays",
    "WorkloadIdentityProvider": "._workload",
    "EnterpriseAuthorizationProvider": "._enterprise",
}

__all__ = [
    "AccessToken",
    "AuthorizationError",
    "AuthorizationResponse",
    "CallbackHandler",
    "ClientCredentialsProvider",
    "ClientMetadata",
    "FileTokenStore",
    "LoopbackReceiver",
    "MemoryTokenStore",
    "OAuthClientProvider",
    "OAuthProxy",
    "RedirectHandler",
    "StoredCredentials",
    "TokenStore",
    "open_in_browser",
    "DevAuthorizationServer",
    "DPoPKey",
    "DPoPNonces",
    "DPoPVerifier",
    "InvalidDPoPProof",
    "IntrospectionVerifier",
    "RedisReplays",
    "JwtVerifier",
    "ProtectedResource",
    "RequiredScopes",
    "TokenVerifier",
    "EnterpriseAuthorizationProvider",
    "WorkloadIdentityProvider",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'modelctx.auth' has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
