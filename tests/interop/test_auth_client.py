"""Our OAuth client against an MCP server protected with the official SDK (mcp==2.3.0):
its RFC 9728 metadata, its ``WWW-Authenticate`` challenges and its bearer middleware,
with the authorization server of ``test_auth_client`` issuing the tokens. Both run on
127.0.0.1 in the test's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
import uvicorn

from modelctx.client import Client
from tests.auth.test_client import DEADLINE, Browser, Peers, free_port, provider, run, serving

mcp_auth = pytest.importorskip("mcp.server.auth.settings")
from mcp.server.auth.provider import AccessToken  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402


class PeersVerifier:
    """The official SDK's TokenVerifier, accepting what the test authorization server issued."""

    def __init__(self, peers: Peers, resource: str) -> None:
        self.peers = peers
        self.resource = resource

    async def verify_token(self, token: str) -> AccessToken | None:
        scopes = self.peers.valid.get(token)
        if scopes is None:
            return None
        return AccessToken(token=token, client_id="client", scopes=sorted(scopes), resource=self.resource)


@contextlib.asynccontextmanager
async def official(peers: Peers) -> AsyncIterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    settings = mcp_auth.AuthSettings(
        issuer_url=peers.issuer, resource_server_url=url, required_scopes=["mcp:read"], validate_token_resource=True
    )
    server = MCPServer("official-protected", token_verifier=PeersVerifier(peers, url), auth=settings)

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    app = server.streamable_http_app()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    runner = uvicorn.Server(config)
    task = asyncio.create_task(runner.serve())
    while not runner.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield url
    finally:
        runner.should_exit = True
        await asyncio.wait_for(task, 10)


@pytest.mark.parametrize("mode", ["2026-07-28", "handshake"])
def test_our_client_authorizes_with_a_server_protected_by_the_official_sdk(mode):
    peers = Peers()  # the authorization server; its own /mcp is not used here
    browser = Browser()

    async def main() -> str:
        async with serving(peers), official(peers) as url:
            async with Client(url, auth=provider(browser), mode=mode, timeout=DEADLINE) as client:
                result = await client.call_tool("echo", {"text": "hi"})
                return str(result.content[0].text)

    assert run(main()) == "hi"
    (authorize,) = peers.authorize_requests
    assert authorize["scope"] == "mcp:read"  # from the official server's challenge / metadata
    assert authorize["resource"].endswith("/mcp")
