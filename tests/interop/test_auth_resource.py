"""The official ``mcp`` 2.3.0 client completes the OAuth flow against a modelctx
protected resource (issue 9, "What must hold").

The authorization server is built from the official SDK's own server pieces
(``mcp.server.auth.routes.create_auth_routes`` with an in-memory provider, as its own
tests do) and issues JWTs signed with this file's RSA key, ``aud`` set to the
``resource`` the client asked for (RFC 8707). The official client finds our Protected
Resource Metadata from the 401 challenge, registers, authorizes with PKCE (the
"browser" step is an HTTP GET of the authorization URL), calls a tool, then steps up
when a tool answers 403 insufficient_scope. Everything is real HTTP on loopback.
"""

from __future__ import annotations

import contextlib
import secrets
import time
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import httpx
import httpx2
from joserfc import jwt
from joserfc.jwk import RSAKey
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.provider import AuthorizationCode, AuthorizationParams, construct_redirect_uri
from mcp.server.auth.routes import create_auth_routes
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from modelctx import Context, Server
from modelctx.auth import JwtVerifier, ProtectedResource
from tests.auth.test_resource import LOOPBACK, served
from tests.support.wire import DEADLINE, async_test, free_port

run = async_test(60.0)
KEY = RSAKey.generate_key(2048, parameters={"kid": "interop"}, private=True)


class MemoryAuthorizationServer:
    """An ``OAuthAuthorizationServerProvider`` in memory that issues JWT access tokens."""

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.issued: list[list[str]] = []  # the scopes of each access token issued

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        # This AS lets every client ask for every scope it knows (so a step-up can be granted).
        self.clients[client_info.client_id] = client_info.model_copy(update={"scope": "mcp:tools files:write"})

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject="interop-user",
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state, iss=self.issuer)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    async def exchange_authorization_code(self, client: OAuthClientInformationFull, code: AuthorizationCode) -> OAuthToken:
        del self.codes[code.code]
        now = int(time.time())
        claims = {
            "iss": self.issuer, "sub": code.subject, "aud": code.resource, "scope": " ".join(code.scopes),
            "iat": now, "exp": now + 300, "jti": secrets.token_hex(8), "client_id": client.client_id,
        }
        self.issued.append(sorted(code.scopes))
        token = jwt.encode({"alg": "RS256", "kid": KEY.kid}, claims, KEY)
        return OAuthToken(access_token=token, token_type="Bearer", expires_in=300, scope=" ".join(code.scopes))

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> None:
        return None

    async def exchange_refresh_token(self, *args: Any) -> OAuthToken:
        raise NotImplementedError

    async def load_access_token(self, token: str) -> None:
        return None

    async def revoke_token(self, token: Any) -> None:
        return None


class MemoryStorage:
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


class Browser:
    """Stands in for the user's browser: follows the authorization URL to its redirect."""

    def __init__(self) -> None:
        self.redirect: dict[str, str] = {}
        self.visits = 0

    async def open(self, url: str) -> None:
        self.visits += 1
        async with httpx.AsyncClient(timeout=DEADLINE) as client:
            response = await client.get(url)
        assert response.status_code in (302, 303, 307), response.text
        query = urllib.parse.urlsplit(response.headers["location"]).query
        self.redirect = {k: v[0] for k, v in urllib.parse.parse_qs(query).items()}

    async def callback(self) -> AuthorizationCodeResult:
        assert "code" in self.redirect, self.redirect
        return AuthorizationCodeResult(code=self.redirect["code"], state=self.redirect.get("state"), iss=self.redirect.get("iss"))


def protected_server() -> Server:
    server = Server("interop-protected")

    @server.tool
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    @server.tool
    def write_file(path: str, ctx: Context) -> str:
        """Needs files:write."""
        ctx.require_scopes("files:write")
        return f"{ctx.principal.subject} wrote {path}"

    return server


@contextlib.asynccontextmanager
async def authorization_server(port: int) -> AsyncIterator[MemoryAuthorizationServer]:
    issuer = f"http://127.0.0.1:{port}/"
    provider = MemoryAuthorizationServer(issuer)
    routes = create_auth_routes(
        provider,  # type: ignore[arg-type]
        AnyHttpUrl(issuer),
        client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=["mcp:tools", "files:write"]),
    )

    async def jwks(request: Any) -> JSONResponse:
        return JSONResponse({"keys": [KEY.as_dict(private=False)]})

    app = Starlette(routes=[*routes, Route("/jwks", jwks)])
    async with served(app, port):
        yield provider


@run
async def test_the_official_client_authorizes_calls_and_steps_up_against_our_protected_server():
    as_port, port = free_port(), free_port()
    # The official server pieces write the issuer as pydantic does, with a trailing slash.
    issuer, url = f"http://127.0.0.1:{as_port}/", f"http://127.0.0.1:{port}/mcp"
    resource = ProtectedResource(
        url,
        authorization_servers=[issuer],
        scopes_supported=["mcp:tools", "files:write"],
        required_scopes=["mcp:tools"],
        verifier=JwtVerifier(issuer, url, jwks_uri=issuer + "jwks", url_policy=LOOPBACK),
    )
    browser = Browser()
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="official interop client",
            redirect_uris=["http://127.0.0.1:1/callback"],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=MemoryStorage(),
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )
    async with authorization_server(as_port) as tokens, served(protected_server().http_app(auth=resource), port):
        async with httpx2.AsyncClient(auth=provider, timeout=DEADLINE) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                echoed = await client.call_tool("echo", {"text": "hello"})
                written = await client.call_tool("write_file", {"path": "a.txt"})

    assert echoed.content[0].text == "hello"
    assert written.content[0].text == "interop-user wrote a.txt"
    # First the scope of the 401 challenge, then the union after the 403 (step-up).
    assert tokens.issued == [["mcp:tools"], ["files:write", "mcp:tools"]]
    assert browser.visits == 2
