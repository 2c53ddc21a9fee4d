"""An MCP server behind an ``OAuthProxy`` that keeps its state in Redis (the server's
``MODELCTX_REDIS_URL``, as ``--redis``). argv: upstream issuer, the public port (the
resource and issuer every replica names), the port this replica listens on, workers.
``whoami`` also says which process answered."""

from __future__ import annotations

import os
import sys

from modelctx import Context, Server
from modelctx.auth import OAuthProxy

upstream, public, port, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
resource = f"http://127.0.0.1:{public}/mcp"
server = Server("proxied-shared", version="1.0.0")


@server.tool
def whoami(ctx: Context) -> str:
    """The subject and issuer of the caller's token, and the answering process."""
    return f"{ctx.principal.subject} {ctx.principal.issuer} {os.getpid()}"


@server.tool
async def upstream_subject(ctx: Context) -> str:
    """Whether this process holds the upstream token of the caller's sign-in."""
    token = await proxy.upstream_token(ctx.principal)
    return f"held {len(token) > 0}"


proxy = OAuthProxy(
    resource,
    upstream_authorize=f"{upstream}/authorize",
    upstream_token=f"{upstream}/token",
    client_id="proxy",
    client_secret="proxy-secret",
    upstream_issuer=upstream,
    upstream_resource=f"{upstream}/userinfo",
    scopes=["notes:read"],
)
server.run("http", port=port, workers=workers, auth=proxy, ready_message=f"proxied replica ready on {port}")
