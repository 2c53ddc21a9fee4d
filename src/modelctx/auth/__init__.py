"""OAuth 2.1 authorization for MCP over HTTP (basic/authorization, 2026-07-28).

Client side: ``OAuthClientProvider`` (authorization code flow with PKCE, for a user)
and ``ClientCredentialsProvider`` (a service's own credentials), each given to
``Client(url, auth=...)``; tokens kept in a ``TokenStore`` (``MemoryTokenStore``,
``FileTokenStore``). What cannot be authorized raises ``AuthorizationError`` (also in
``modelctx.errors``), saying what failed and what to do.
"""

from ..errors import AuthorizationError
from ._client import CallbackHandler, OAuthClientProvider, RedirectHandler
from ._client_credentials import ClientCredentialsProvider
from ._redirect import AuthorizationResponse, LoopbackReceiver, open_in_browser
from ._registration import ClientMetadata
from ._tokens import FileTokenStore, MemoryTokenStore, StoredCredentials, TokenStore

__all__ = [
    "AuthorizationError",
    "AuthorizationResponse",
    "CallbackHandler",
    "ClientCredentialsProvider",
    "ClientMetadata",
    "FileTokenStore",
    "LoopbackReceiver",
    "MemoryTokenStore",
    "OAuthClientProvider",
    "RedirectHandler",
    "StoredCredentials",
    "TokenStore",
    "open_in_browser",
]
