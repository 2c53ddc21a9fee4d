"""OAuth 2.1 for MCP over HTTP (basic/authorization/*.mdx).

Resource server side: ``ProtectedResource`` declares an MCP endpoint's authorization
(issuers, scopes, how tokens are checked) and plugs into the HTTP app
(``HttpApp(server, auth=...)``, ``serve_http(..., auth=...)``); ``JwtVerifier`` and
``IntrospectionVerifier`` check tokens; handlers see an ``AccessToken`` as
``ctx.principal`` and check scopes with ``ctx.require_scopes``, or a server declares
them per tool, prompt or resource with the ``RequiredScopes`` middleware.

Nothing below this package imports it: it needs ``joserfc`` (``modelctx[auth]``).
"""

from ._introspection import IntrospectionVerifier
from ._jwt import JwtVerifier
from ._resource import AccessToken, ProtectedResource, TokenVerifier
from ._scopes import RequiredScopes

__all__ = [
    "AccessToken",
    "IntrospectionVerifier",
    "JwtVerifier",
    "ProtectedResource",
    "RequiredScopes",
    "TokenVerifier",
]
