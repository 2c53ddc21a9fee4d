"""Workload identity federation (``WorkloadIdentityProvider``, the JWT bearer grant of
RFC 7523) and enterprise-managed authorization (``EnterpriseAuthorizationProvider``:
token exchange for an ID-JAG at the IdP, then the JWT bearer grant) against real peers on
127.0.0.1: one ASGI app plays the protected MCP server (RFC 9728 metadata, 401 with
``WWW-Authenticate``), its authorization server and an enterprise identity provider. The
authorization server verifies each assertion's signature and audience with joserfc.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import socket
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from joserfc import jwt
from joserfc.jwk import ECKey

from modelctx import Server
from modelctx.auth import EnterpriseAuthorizationProvider, WorkloadIdentityProvider
from modelctx.client import Client
from modelctx.errors import AuthorizationError
from modelctx.transports.http import HttpApp

DEADLINE = 20.0
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def sign(key: ECKey, claims: dict[str, Any], typ: str | None = None) -> str:
    header = {"alg": "ES256", **({"typ": typ} if typ else {})}
    return jwt.encode(header, claims, key, algorithms=["ES256"])


def workload_jwt(key: ECKey, audience: str, lifetime: int = 300) -> str:
    now = int(time.time())
    claims = {"iss": "https://idp.example", "sub": "workload-1", "aud": audience, "iat": now,
              "exp": now + lifetime, "jti": str(uuid.uuid4())}
    return sign(key, claims)


def make_server() -> Server:
    server = Server("protected")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    return server


@dataclass
class Peers:
    """The MCP server, its authorization server (issuer = ``base``) and an IdP (issuer
    ``base/idp``); what each saw."""

    base: str = ""
    workload_key: ECKey = field(default_factory=lambda: ECKey.generate_key("P-256"))
    idp_key: ECKey = field(default_factory=lambda: ECKey.generate_key("P-256"))
    grant_types: list[str] = field(default_factory=lambda: [JWT_BEARER])
    auth_methods: list[str] = field(default_factory=lambda: ["none"])
    client_secret: str | None = None
    refuse_grant: dict[str, str] | None = None  # the token endpoint's error body, when it refuses
    refuse_status: int = 400
    refuse_exchange: dict[str, str] | None = None  # the IdP's, when it refuses
    token_requests: list[dict[str, str]] = field(default_factory=list)
    token_headers: list[dict[str, str]] = field(default_factory=list)
    exchanges: list[dict[str, str]] = field(default_factory=list)
    valid: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.mcp = HttpApp(make_server())

    @property
    def idp(self) -> str:
        return self.base + "/idp"

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.mcp(scope, receive, send)
            return
        path = scope["path"]
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if path == "/mcp":
            authorization = headers.get("authorization", "")
            if authorization.removeprefix("Bearer ") in self.valid:
                await self.mcp(scope, receive, send)
                return
            prm = f'Bearer resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp"'
            await respond(send, 401, {"error": "invalid_token"}, [(b"www-authenticate", prm.encode())])
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        form = dict(urllib.parse.parse_qsl(body.decode()))
        status, reply = self._route(path, form, headers)
        await respond(send, status, reply)

    def _route(self, path: str, form: dict[str, str], headers: dict[str, str]) -> tuple[int, Any]:
        if path == "/.well-known/oauth-protected-resource/mcp":
            return 200, {"resource": self.base + "/mcp", "authorization_servers": [self.base],
                         "scopes_supported": ["files:read"]}
        if path == "/.well-known/oauth-authorization-server":
            return 200, {"issuer": self.base, "token_endpoint": self.base + "/token",
                         "grant_types_supported": self.grant_types,
                         "token_endpoint_auth_methods_supported": self.auth_methods}
        if path == "/.well-known/openid-configuration/idp":
            return 200, {"issuer": self.idp, "token_endpoint": self.idp + "/token",
                         "grant_types_supported": [TOKEN_EXCHANGE]}
        if path == "/token":
            return self._token(form, headers)
        if path == "/idp/token":
            return self._exchange(form)
        return 404, {"error": "not_found"}

    def _token(self, form: dict[str, str], headers: dict[str, str]) -> tuple[int, Any]:
        self.token_requests.append(form)
        self.token_headers.append(headers)
        if self.refuse_grant is not None:
            return self.refuse_status, self.refuse_grant
        if form.get("grant_type") != JWT_BEARER:
            return 400, {"error": "unsupported_grant_type"}
        key = self.idp_key if "authorization" in headers else self.workload_key
        try:
            claims = jwt.decode(form["assertion"], key, algorithms=["ES256"]).claims
        except Exception:  # noqa: BLE001 - any bad signature or encoding is a refusal
            return 400, {"error": "invalid_grant", "error_description": "bad signature"}
        if claims["aud"] != self.base or claims["exp"] <= time.time():
            return 400, {"error": "invalid_grant", "error_description": "wrong audience or expired"}
        token = f"access-{len(self.token_requests)}"
        self.valid.add(token)
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600}

    def _exchange(self, form: dict[str, str]) -> tuple[int, Any]:
        self.exchanges.append(form)
        if self.refuse_exchange is not None:
            return 400, self.refuse_exchange
        now = int(time.time())
        claims = {"iss": self.idp, "sub": "user@example.com", "aud": form["audience"], "resource": form["resource"],
                  "client_id": "mcp-client", "iat": now, "exp": now + 300, "jti": str(uuid.uuid4())}
        grant = sign(self.idp_key, claims, typ="oauth-id-jag+jwt")
        return 200, {"access_token": grant, "issued_token_type": ID_JAG, "token_type": "N_A", "expires_in": 300}


async def respond(send: Any, status: int, document: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    head = [(b"content-type", b"application/json"), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": json.dumps(document).encode()})


@contextlib.asynccontextmanager
async def serving(peers: Peers) -> AsyncIterator[str]:
    port = free_port()
    peers.base = f"http://127.0.0.1:{port}"
    server = uvicorn.Server(uvicorn.Config(peers, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield peers.base + "/mcp"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, DEADLINE * 2))


async def call_echo(url: str, auth: Any) -> str:
    async with Client(url, auth=auth, timeout=DEADLINE) as client:
        result = await client.call_tool("echo", {"text": "hi"})
        return str(result.content[0].text)


def with_peers(peers: Peers, body: Callable[[str], Any]) -> Any:
    async def main() -> Any:
        async with serving(peers) as url:
            return await body(url)

    return run(main())


# -- workload identity federation ------------------------------------------------------------------------
def test_the_workload_jwt_is_sent_with_the_jwt_bearer_grant_for_the_servers_audience():
    peers = Peers()
    audiences: list[str] = []

    async def mint(audience: str) -> str:
        audiences.append(audience)
        return workload_jwt(peers.workload_key, audience)

    async def body(url: str) -> str:
        return await call_echo(url, WorkloadIdentityProvider(mint, client_id="workload"))

    assert with_peers(peers, body) == "hi"
    assert audiences == [peers.base]  # the source is asked for the authorization server's issuer
    (request,) = peers.token_requests
    assert request["grant_type"] == JWT_BEARER
    assert jwt.decode(request["assertion"], peers.workload_key).claims["aud"] == peers.base
    assert request["resource"] == peers.base + "/mcp" and request["scope"] == "files:read"
    assert request["client_id"] == "workload" and "authorization" not in peers.token_headers[0]


def test_an_expired_assertion_is_asked_for_again_and_never_sent():
    peers = Peers()
    given: list[str] = []

    def source(audience: str) -> str:
        # What a token cache of the platform's might do: hand out a stale token once.
        token = workload_jwt(peers.workload_key, audience, lifetime=-60 if not given else 300)
        given.append(token)
        return token

    async def body(url: str) -> str:
        return await call_echo(url, WorkloadIdentityProvider(source, client_id="workload"))

    assert with_peers(peers, body) == "hi"
    assert len(given) == 2
    assert [r["assertion"] for r in peers.token_requests] == [given[1]]


def test_a_fixed_assertion_that_expired_is_reported_before_anything_is_sent():
    peers = Peers()
    stale = workload_jwt(peers.workload_key, "http://127.0.0.1", lifetime=-60)

    async def body(url: str) -> None:
        with pytest.raises(AuthorizationError, match=r"expired at .*give a callable or a file") as caught:
            await call_echo(url, WorkloadIdentityProvider(stale, client_id="workload"))
        assert stale not in str(caught.value)

    with_peers(peers, body)
    assert peers.token_requests == []


def test_the_assertion_file_is_reread_for_each_grant(tmp_path):
    peers = Peers()
    path = tmp_path / "token"

    async def body(url: str) -> None:
        path.write_text(workload_jwt(peers.workload_key, peers.base) + "\n")
        auth = WorkloadIdentityProvider(assertion_file=path, client_id="workload")
        assert await call_echo(url, auth) == "hi"
        rotated = workload_jwt(peers.workload_key, peers.base)
        path.write_text(rotated)
        peers.valid.clear()  # the server forgets the token: a new grant is needed
        assert await call_echo(url, auth) == "hi"
        assert peers.token_requests[-1]["assertion"] == rotated

    with_peers(peers, body)
    assert len(peers.token_requests) == 2


def test_a_refused_grant_is_reported_with_what_to_do_and_not_retried(caplog):
    caplog.set_level(logging.DEBUG)
    peers = Peers()
    assertion = workload_jwt(ECKey.generate_key("P-256"), "http://127.0.0.1")  # a key the AS does not trust
    # A careless server echoes the assertion in its error: it must not reach the message.
    peers.refuse_grant = {"error": "invalid_grant", "error_description": f"untrusted assertion {assertion}"}

    async def body(url: str) -> list[str]:
        auth = WorkloadIdentityProvider(assertion, client_id="workload")
        messages = []
        for _ in range(2):
            with pytest.raises(AuthorizationError) as caught:
                await call_echo(url, auth)
            messages.append(str(caught.value))
        assert assertion not in repr(auth)
        return messages

    first, second = with_peers(peers, body)
    assert len(peers.token_requests) == 1  # the refused assertion is not sent again
    assert "invalid_grant" in first and "its audience is " + peers.base in first and "federation" in first
    assert "not asked again" in second
    for text in (first, second, *(r.getMessage() for r in caplog.records)):
        assert assertion not in text


def test_a_failing_token_endpoint_is_not_a_refusal_the_next_connection_tries_again():
    peers = Peers(refuse_grant={"message": "upstream unavailable"}, refuse_status=502)

    async def body(url: str) -> str:
        auth = WorkloadIdentityProvider(lambda aud: workload_jwt(peers.workload_key, aud), client_id="workload")
        with pytest.raises(AuthorizationError, match=r"HTTP 502"):
            await call_echo(url, auth)
        peers.refuse_grant = None  # the server recovers
        return await call_echo(url, auth)

    assert with_peers(peers, body) == "hi"


def test_a_refused_scope_says_which_scopes_to_drop():
    peers = Peers(refuse_grant={"error": "invalid_scope"})

    async def body(url: str) -> None:
        auth = WorkloadIdentityProvider(lambda aud: workload_jwt(peers.workload_key, aud), client_id="workload")
        with pytest.raises(AuthorizationError, match=r"\(invalid_scope\).*scopes asked for \(files:read\)"):
            await call_echo(url, auth)

    with_peers(peers, body)


def test_a_server_without_the_jwt_bearer_grant_is_refused_before_the_assertion_is_sent():
    peers = Peers(grant_types=["authorization_code"])

    async def body(url: str) -> None:
        auth = WorkloadIdentityProvider(lambda aud: workload_jwt(peers.workload_key, aud), client_id="workload")
        with pytest.raises(AuthorizationError, match="does not accept the JWT bearer grant"):
            await call_echo(url, auth)

    with_peers(peers, body)
    assert peers.token_requests == []


# -- enterprise-managed authorization ----------------------------------------------------------------------
def enterprise(peers: Peers, id_token: str = "the-users-id-token") -> EnterpriseAuthorizationProvider:
    return EnterpriseAuthorizationProvider(
        "mcp-client",
        client_secret="mcp-secret",
        id_token=lambda: id_token,
        idp_issuer=peers.idp,
        idp_client_id="idp-client",
    )


def test_the_id_token_is_exchanged_for_an_id_jag_then_for_an_access_token():
    peers = Peers(auth_methods=["client_secret_basic"], client_secret="mcp-secret")

    async def body(url: str) -> str:
        return await call_echo(url, enterprise(peers))

    assert with_peers(peers, body) == "hi"
    (exchange,) = peers.exchanges
    assert exchange == {
        "grant_type": TOKEN_EXCHANGE,
        "requested_token_type": ID_JAG,
        "audience": peers.base,  # the MCP server's authorization server
        "resource": peers.base + "/mcp",
        "scope": "files:read",
        "subject_token": "the-users-id-token",
        "subject_token_type": ID_TOKEN,
        "client_id": "idp-client",
    }
    (request,) = peers.token_requests
    assert request["grant_type"] == JWT_BEARER and request["resource"] == peers.base + "/mcp"
    grant = jwt.decode(request["assertion"], peers.idp_key)
    assert grant.header["typ"] == "oauth-id-jag+jwt" and grant.claims["aud"] == peers.base
    basic = base64.b64decode(peers.token_headers[0]["authorization"].removeprefix("Basic ")).decode()
    assert basic == "mcp-client:mcp-secret"  # pre-registered at the authorization server


def test_a_refused_exchange_names_the_identity_provider_and_reaches_no_authorization_server(caplog):
    caplog.set_level(logging.DEBUG)
    peers = Peers(refuse_exchange={"error": "invalid_grant", "error_description": "ID token expired"})

    async def body(url: str) -> list[str]:
        auth = enterprise(peers, id_token="secret-id-token-text")
        messages = []
        for _ in range(2):
            with pytest.raises(AuthorizationError) as caught:
                await call_echo(url, auth)
            messages.append(str(caught.value))
        return messages

    first, second = with_peers(peers, body)
    assert "identity provider" in first and "ID token expired" in first and "sign the user in again" in first
    assert "not asked again" in second and len(peers.exchanges) == 1
    assert peers.token_requests == []
    for text in (first, second, *(r.getMessage() for r in caplog.records)):
        assert "secret-id-token-text" not in text


def test_a_refused_id_jag_says_the_authorization_server_refused_it():
    peers = Peers(auth_methods=["client_secret_basic"], refuse_grant={"error": "invalid_client"})

    async def body(url: str) -> None:
        with pytest.raises(AuthorizationError, match=r"refused the JWT bearer grant \(invalid_client\).*pre-registered"):
            await call_echo(url, enterprise(peers))

    with_peers(peers, body)
    assert len(peers.exchanges) == 1 and len(peers.token_requests) == 1
