"""An MCP server behind an ``OAuthProxy`` whose upstream is ``modelctx auth-server
--no-registration`` (argv: upstream issuer, port); the proxy's client there is
``proxy:proxy-secret``. ``whoami`` says who the proxy's token names; ``upstream_claims`` what the upstream's
token of that sign-in says (``OAuthProxy.upstream_token``)."""

from __future__ import annotations

import base64
import json
import sys

from modelctx import Context, Server
from modelctx.auth import OAuthProxy

upstream, port = sys.argv[1], int(sys.argv[2])
resource = f"http://127.0.0.1:{port}/mcp"

server = Server("proxied", version="1.0.0")


@server.tool
def whoami(ctx: Context) -> str:
    """The subject, issuer and client of the caller's token."""
    principal = ctx.principal
    return f"{principal.subject} {principal.issuer} {principal.client_id}"


@server.tool
async def upstream_claims(ctx: Context) -> str:
    """What the upstream's token of the caller's sign-in says (the token itself stays here)."""
    token = await proxy.upstream_token(ctx.principal)
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return json.dumps({key: claims[key] for key in ("iss", "aud", "sub", "jti")})


proxy = OAuthProxy(
    resource,
    upstream_authorize=f"{upstream}/authorize",
    upstream_token=f"{upstream}/token",
    client_id="proxy",
    client_secret="proxy-secret",
    upstream_issuer=upstream,  # its access tokens are JWTs: the sub is read from them
    upstream_resource=f"{upstream}/userinfo",  # the dev server wants a resource named
    scopes=["notes:read"],
)
server.run("http", port=port, auth=proxy, ready_message=f"proxied server ready at {resource}")
