"""The official ``mcp`` client's OAuth flow against ``modelctx auth-server``.

``mcp.client.auth.OAuthClientProvider`` (mcp 2.3.0) is an ``httpx.Auth``: on a 401 it
reads the protected resource metadata, discovers our authorization server, registers
dynamically, sends the browser to ``/authorize`` with PKCE and ``resource``, validates
``iss``, exchanges the code and retries. The protected resource here is a small loopback
server that accepts only a JWT from our issuer, signed by its JWKS, for its own URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

from tests.auth.test_dev_server import auth_server
from tests.support.wire import DEADLINE, free_port


class _Memory:
    """The official client's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@contextlib.contextmanager
def protected_resource(issuer: str) -> Iterator[str]:
    """A loopback resource at ``/mcp`` that answers 200 with the token's claims to a
    valid token for itself, else 401 pointing at its protected resource metadata."""
    jwks = KeySet.import_key_set(httpx.get(f"{issuer}/jwks").json())

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            base = f"http://127.0.0.1:{port}"
            if self.path == "/.well-known/oauth-protected-resource/mcp":
                self._json(200, {"resource": f"{base}/mcp", "authorization_servers": [issuer]})
                return
            claims = self._claims(f"{base}/mcp")
            if claims is None:
                self.send_response(401)
                metadata = f"{base}/.well-known/oauth-protected-resource/mcp"
                self.send_header("www-authenticate", f'Bearer resource_metadata="{metadata}", scope="notes:read"')
                self.send_header("content-length", "0")
                self.end_headers()
                return
            self._json(200, claims)

        def _claims(self, resource: str) -> dict[str, Any] | None:
            scheme, _, value = self.headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer":
                return None
            try:
                claims = dict(jwt.decode(value, jwks, algorithms=["ES256"]).claims)
            except (JoseError, ValueError):
                return None
            return claims if claims.get("aud") == resource and claims.get("iss") == issuer else None

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.shutdown()
        server.server_close()


def test_the_official_client_gets_a_token_for_the_resource_from_our_authorization_server() -> None:
    with auth_server("--auto-approve") as issuer, protected_resource(issuer) as resource:
        answers: asyncio.Queue[AuthorizationCodeResult] = asyncio.Queue()

        async def browser(url: str) -> None:
            async with httpx.AsyncClient(timeout=DEADLINE) as client:
                reply = await client.get(url)
            assert reply.status_code == 302, reply.text
            params = {k: v[0] for k, v in parse_qs(urlsplit(reply.headers["location"]).query).items()}
            await answers.put(AuthorizationCodeResult(code=params["code"], state=params["state"], iss=params["iss"]))

        async def callback() -> AuthorizationCodeResult:
            return await asyncio.wait_for(answers.get(), DEADLINE)

        storage = _Memory()
        provider = OAuthClientProvider(
            resource,
            OAuthClientMetadata(
                client_name="official mcp client",
                redirect_uris=[AnyUrl("http://127.0.0.1:5999/callback")],
                grant_types=["authorization_code", "refresh_token"],
                token_endpoint_auth_method="none",
            ),
            storage,
            redirect_handler=browser,
            callback_handler=callback,
        )

        async def call() -> httpx2.Response:
            # mcp 2.3.0 speaks httpx2 (its fork of httpx): the provider is an httpx2.Auth.
            async with httpx2.AsyncClient(auth=provider, timeout=DEADLINE) as client:
                return await client.get(resource)

        response = asyncio.run(asyncio.wait_for(call(), 3 * DEADLINE))
        assert response.status_code == 200, response.text
        claims = response.json()
        assert claims["iss"] == issuer and claims["aud"] == resource
        assert claims["sub"] == "dev-user" and claims["scope"] == "notes:read"
        assert storage.tokens is not None and storage.tokens.refresh_token
