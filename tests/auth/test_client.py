"""The OAuth client (modelctx.auth) against a real authorization server and a real
protected MCP server, both on 127.0.0.1 (uvicorn in the test's event loop).

``Peers`` is one ASGI app that plays both: an authorization server (RFC 8414 metadata,
/authorize that approves at once and redirects, /token, /register) and a modelctx
``Server`` behind a bearer check that answers 401/403 with ``WWW-Authenticate`` and
serves RFC 9728 metadata. Each test sets what the peers do and reads what they saw.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import socket
import stat
import time
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn

from modelctx import Server
from modelctx.auth import (
    AuthorizationResponse,
    ClientCredentialsProvider,
    ClientMetadata,
    FileTokenStore,
    LoopbackReceiver,
    MemoryTokenStore,
    OAuthClientProvider,
    StoredCredentials,
    open_in_browser,
)
from modelctx.auth._discovery import as_metadata_urls, parse_challenge, prm_urls
from modelctx.client import Client
from modelctx.errors import AuthorizationError, HttpStatusError
from modelctx.transports.http import HttpApp
from modelctx.transports.http_client import HttpClientTransport

DEADLINE = 20.0
REDIRECT = "http://127.0.0.1:3000/callback"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def make_server() -> Server:
    server = Server("protected")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    return server


@dataclass
class Peers:
    """What the authorization server and the protected MCP server do, and what they saw."""

    base: str = ""
    as_path: str = ""  # the issuer's path (e.g. "/tenant1")
    prm_path: str | None = "/.well-known/oauth-protected-resource/mcp"
    header_prm: bool = True  # name the PRM URL in WWW-Authenticate
    challenge_scope: str | None = None
    scopes_supported: list[str] | None = None
    call_scope: str | None = None  # a scope tools/call needs beyond the rest (step-up)
    pkce_methods: list[str] | None = field(default_factory=lambda: ["S256"])
    iss_supported: bool | None = True
    iss_value: str | None = "correct"  # "correct", None (omit) or a literal
    refresh_tokens: bool = True
    withheld: set[str] = field(default_factory=set)  # scopes the AS never grants
    auth_methods: list[str] = field(default_factory=lambda: ["none"])  # at the token endpoint
    client_key: Any = None  # the public key a private_key_jwt client signs with
    client_secret: str | None = None
    token_headers: list[dict[str, str]] = field(default_factory=list)
    reject_all: bool = False  # the MCP server refuses every token (a broken deployment)
    authorization_endpoint: str | None = None  # what the metadata names instead of /authorize
    seen_paths: list[str] = field(default_factory=list)
    authorize_requests: list[dict[str, str]] = field(default_factory=list)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    registrations: list[dict[str, Any]] = field(default_factory=list)
    valid: dict[str, set[str]] = field(default_factory=dict)  # access token -> scopes
    refresh: dict[str, set[str]] = field(default_factory=dict)  # refresh token -> scopes
    bearer_seen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.mcp = HttpApp(make_server())
        self._codes: dict[str, tuple[set[str], str]] = {}
        self._counter = 0

    @property
    def issuer(self) -> str:
        return self.base + self.as_path

    # -- ASGI ------------------------------------------------------------------------------
    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.mcp(scope, receive, send)
            return
        path = scope["path"]
        self.seen_paths.append(path)
        if path == "/mcp":
            await self._protected(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = dict(urllib.parse.parse_qsl(scope["query_string"].decode()))
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        status, reply, extra = self._route(scope["method"], path, query, body, headers)
        payload = json.dumps(reply).encode() if reply is not None else b""
        head = [(b"content-type", b"application/json"), *extra]
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": payload})

    def _route(
        self, method: str, path: str, query: dict[str, str], body: bytes, headers: dict[str, str]
    ) -> tuple[int, Any, list[tuple[bytes, bytes]]]:
        if path == self.prm_path:
            document: dict[str, Any] = {"resource": self.base + "/mcp", "authorization_servers": [self.issuer]}
            if self.scopes_supported is not None:
                document["scopes_supported"] = self.scopes_supported
            return 200, document, []
        if path == f"/.well-known/oauth-authorization-server{self.as_path}":
            return 200, self._as_metadata(), []
        if path == self.as_path + "/authorize":
            return self._authorize(query)
        if path == self.as_path + "/token" and method == "POST":
            return self._token(dict(urllib.parse.parse_qsl(body.decode())), headers)
        if path == self.as_path + "/register" and method == "POST":
            document = json.loads(body)
            self.registrations.append(document)
            return 201, {"client_id": f"client-{len(self.registrations)}", **document}, []
        return 404, {"error": "not_found"}, []

    def _as_metadata(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "issuer": self.issuer,
            "authorization_endpoint": self.authorization_endpoint or self.issuer + "/authorize",
            "token_endpoint": self.issuer + "/token",
            "registration_endpoint": self.issuer + "/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": self.auth_methods,
        }
        if self.pkce_methods is not None:
            document["code_challenge_methods_supported"] = self.pkce_methods
        if self.iss_supported is not None:
            document["authorization_response_iss_parameter_supported"] = self.iss_supported
        return document

    def _authorize(self, query: dict[str, str]) -> tuple[int, Any, list[tuple[bytes, bytes]]]:
        self.authorize_requests.append(query)
        self._counter += 1
        code = f"code-{self._counter}"
        self._codes[code] = (set(query.get("scope", "").split()) - self.withheld, query["code_challenge"])
        back = {"code": code, "state": query.get("state", "")}
        if self.iss_value is not None:
            back["iss"] = self.issuer if self.iss_value == "correct" else self.iss_value
        location = query["redirect_uri"] + "?" + urllib.parse.urlencode(back)
        return 302, None, [(b"location", location.encode())]

    def _token(self, form: dict[str, str], headers: dict[str, str]) -> tuple[int, Any, list[tuple[bytes, bytes]]]:
        self.token_requests.append(form)
        self.token_headers.append(headers)
        grant = form.get("grant_type")
        if grant == "client_credentials":
            if not self._client_authenticated(form, headers):
                return 401, {"error": "invalid_client"}, []
            scopes = set(form.get("scope", "").split())
        elif grant == "authorization_code" and form.get("code") in self._codes:
            scopes, challenge = self._codes.pop(form["code"])
            verifier = form.get("code_verifier", "").encode()
            import hashlib

            computed = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
            if computed != challenge:
                return 400, {"error": "invalid_grant", "error_description": "PKCE verifier mismatch"}, []
        elif grant == "refresh_token" and form.get("refresh_token") in self.refresh:
            scopes = self.refresh.pop(form["refresh_token"])
        else:
            return 400, {"error": "invalid_grant"}, []
        self._counter += 1
        token = f"access-{self._counter}"
        self.valid[token] = scopes
        reply: dict[str, Any] = {"access_token": token, "token_type": "Bearer", "expires_in": 3600}
        if scopes:
            reply["scope"] = " ".join(sorted(scopes))
        if self.refresh_tokens:
            self.refresh[f"refresh-{self._counter}"] = scopes
            reply["refresh_token"] = f"refresh-{self._counter}"
        return 200, reply, []

    def _client_authenticated(self, form: dict[str, str], headers: dict[str, str]) -> bool:
        if "client_assertion" in form:
            from joserfc import jwt

            token = jwt.decode(form["client_assertion"], self.client_key, algorithms=["ES256"])
            claims = token.claims
            return (
                form.get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
                and claims["iss"] == claims["sub"] == form.get("client_id") == "service"
                and claims["aud"] == self.issuer
                and claims["exp"] > time.time()
            )
        basic = headers.get("authorization", "")
        if basic.startswith("Basic "):
            # RFC 6749 §2.3.1: each part form-encoded, then joined with ":" and base64'd.
            client_id, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
            decoded = (urllib.parse.unquote_plus(client_id), urllib.parse.unquote_plus(secret))
            return decoded == ("service", self.client_secret)
        return form.get("client_secret") == self.client_secret is not None

    async def _protected(self, scope: dict, receive: Any, send: Any) -> None:
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        authorization = headers.get("authorization", "")
        token = authorization[7:] if authorization.startswith("Bearer ") else None
        if token is not None:
            self.bearer_seen.append(token)
        params = []
        if self.header_prm and self.prm_path is not None:
            params.append(f'resource_metadata="{self.base}{self.prm_path}"')
        if token is None or token not in self.valid or self.reject_all:
            if self.challenge_scope:
                params.append(f'scope="{self.challenge_scope}"')
            await _refuse(send, 401, "Bearer " + ", ".join(params) if params else "Bearer")
            return
        if self.call_scope is not None and self.call_scope not in self.valid[token]:
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            if b'"tools/call"' in body:
                params += [f'scope="{self.call_scope}"', 'error="insufficient_scope"']
                await _refuse(send, 403, "Bearer " + ", ".join(params))
                return
            replay = [{"type": "http.request", "body": body, "more_body": False}]

            async def again() -> Any:
                return replay.pop() if replay else await receive()

            await self.mcp(scope, again, send)
            return
        await self.mcp(scope, receive, send)


async def _refuse(send: Any, status: int, challenge: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"www-authenticate", challenge.encode()), (b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": b'{"error":"invalid_token"}'})


@contextlib.asynccontextmanager
async def serving(peers: Peers) -> AsyncIterator[str]:
    port = free_port()
    peers.base = f"http://127.0.0.1:{port}"
    config = uvicorn.Config(peers, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
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


class Browser:
    """Follows the authorization URL one step and reads where it is redirected."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.location: str | None = None

    async def open(self, url: str) -> None:
        self.opened.append(url)
        async with httpx.AsyncClient(follow_redirects=False, timeout=DEADLINE) as http:
            self.location = (await http.get(url)).headers.get("location")

    async def callback(self) -> AuthorizationResponse:
        assert self.location is not None
        return AuthorizationResponse.from_url(self.location)


def provider(browser: Browser, **options: Any) -> OAuthClientProvider:
    return OAuthClientProvider(
        ClientMetadata(client_name="test", redirect_uris=(REDIRECT,)),
        redirect_handler=browser.open,
        callback_handler=browser.callback,
        **options,
    )


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, DEADLINE * 2))


async def call_echo(url: str, auth: OAuthClientProvider, mode: str = "2026-07-28") -> str:
    async with Client(url, auth=auth, mode=mode, timeout=DEADLINE) as client:
        await client.tools()
        result = await client.call_tool("echo", {"text": "hi"})
        return str(result.content[0].text)


# -- the flow end to end ----------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["2026-07-28", "handshake"])
def test_a_401_runs_the_flow_and_the_request_goes_through_with_the_token(mode):
    peers = Peers(scopes_supported=["mcp:read"])

    async def main() -> None:
        async with serving(peers) as url:
            assert await call_echo(url, provider(Browser()), mode) == "hi"

    run(main())
    (authorize,) = peers.authorize_requests
    assert authorize["code_challenge_method"] == "S256"
    assert authorize["resource"] == peers.base + "/mcp"
    assert authorize["scope"] == "mcp:read"  # scopes_supported of the PRM, no challenge scope
    assert peers.registrations[0]["application_type"] == "native"
    assert "refresh_token" in peers.registrations[0]["grant_types"]
    (token,) = peers.token_requests
    assert token["resource"] == peers.base + "/mcp" and token["code_verifier"]
    assert peers.bearer_seen and all(t == "access-2" for t in peers.bearer_seen)


def test_requests_refused_at_once_share_one_authorization():
    peers = Peers(refresh_tokens=False)
    browser = Browser()

    async def main() -> None:
        async with serving(peers) as url:
            async with Client(url, auth=provider(browser), mode="2026-07-28", timeout=DEADLINE) as client:
                # A pinned version sends nothing on connect: these are the first requests.
                await asyncio.gather(client.tools(), client.tools(), client.call_tool("echo", {"text": "x"}))

    run(main())
    assert len(browser.opened) == 1 and len(peers.token_requests) == 1


def test_the_default_callback_receives_the_redirect_on_the_loopback_port():
    peers = Peers()
    port = free_port()
    redirect = f"http://127.0.0.1:{port}/callback"

    async def follow(url: str) -> None:  # the "browser": follows the redirect to our receiver
        async with httpx.AsyncClient(follow_redirects=True, timeout=DEADLINE) as http:
            reply = await http.get(url)
        assert reply.status_code == 200, reply.text

    async def main() -> None:
        async with serving(peers) as url:
            auth = OAuthClientProvider(ClientMetadata(redirect_uris=(redirect,)), redirect_handler=follow)
            assert await call_echo(url, auth) == "hi"

    run(main())
    assert peers.authorize_requests[0]["redirect_uri"] == redirect


# -- discovery ----------------------------------------------------------------------------------------------
def test_without_a_header_the_prm_is_looked_for_path_inserted_then_at_the_root():
    peers = Peers(prm_path="/.well-known/oauth-protected-resource", header_prm=False, as_path="/tenant1")

    async def main() -> None:
        async with serving(peers) as url:
            assert await call_echo(url, provider(Browser())) == "hi"

    run(main())
    wanted = [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-authorization-server/tenant1",
    ]
    looked = [p for p in peers.seen_paths if p.startswith("/.well-known")]
    assert looked[:3] == wanted


def test_the_orders_of_well_known_urls_are_the_specs():
    assert prm_urls("https://a.example/public/mcp", None) == [
        "https://a.example/.well-known/oauth-protected-resource/public/mcp",
        "https://a.example/.well-known/oauth-protected-resource",
    ]
    assert prm_urls("https://a.example/mcp", "https://a.example/custom.json")[0] == "https://a.example/custom.json"
    assert as_metadata_urls("https://auth.example.com/tenant1") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]
    assert as_metadata_urls("https://auth.example.com") == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]


def test_a_challenge_is_read_with_quoted_and_bare_parameters():
    challenge = parse_challenge(
        {"WWW-Authenticate": 'Bearer error="insufficient_scope", scope="a b", resource_metadata="https://x/y"'}
    )
    assert (challenge.error, challenge.scopes, challenge.resource_metadata) == ("insufficient_scope", ["a", "b"], "https://x/y")
    assert parse_challenge({"www-authenticate": "Basic realm=x"}).scope is None


def test_an_authorization_server_without_pkce_s256_is_refused_before_the_browser_opens():
    peers = Peers(pkce_methods=None)
    browser = Browser()

    async def main() -> None:
        async with serving(peers) as url:
            with pytest.raises(AuthorizationError, match="PKCE S256"):
                await call_echo(url, provider(browser))

    run(main())
    assert browser.opened == [] and peers.authorize_requests == []


@pytest.mark.parametrize("endpoint", ["javascript:alert(1)//", "file:///etc/passwd"])
def test_an_authorization_endpoint_that_is_not_http_is_never_opened(endpoint):
    peers = Peers(authorization_endpoint=endpoint)
    browser = Browser()

    async def main() -> None:
        async with serving(peers) as url:
            with pytest.raises(AuthorizationError, match="authorization endpoint"):
                await call_echo(url, provider(browser))

    run(main())
    assert browser.opened == []


# -- RFC 9207 iss ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("advertised", "sent", "accepted"),
    [
        (True, "correct", True),
        (None, None, True),  # neither advertised nor sent: proceed
        (True, None, False),  # advertised, missing: refuse
        (True, "https://evil.example", False),
        (None, "https://evil.example", False),  # not advertised, present: still compared
        (True, "trailing-slash", False),  # no normalization before comparing
    ],
)
def test_the_iss_parameter_is_checked_as_the_specs_table_says(advertised, sent, accepted):
    peers = Peers(iss_supported=advertised, iss_value=sent)

    async def main() -> None:
        async with serving(peers) as url:
            if sent == "trailing-slash":
                peers.iss_value = peers.issuer + "/"
            if accepted:
                assert await call_echo(url, provider(Browser())) == "hi"
            else:
                with pytest.raises(AuthorizationError, match="iss"):
                    await call_echo(url, provider(Browser()))

    run(main())
    assert bool(peers.token_requests) is accepted  # a refused response is never exchanged


# -- scopes ------------------------------------------------------------------------------------------------------
def test_step_up_asks_for_the_union_of_the_scopes_held_and_the_challenged_one():
    peers = Peers(challenge_scope="mcp:read", call_scope="mcp:write")

    async def main() -> None:
        async with serving(peers) as url:
            assert await call_echo(url, provider(Browser())) == "hi"

    run(main())
    first, second = peers.authorize_requests
    assert first["scope"] == "mcp:read"
    assert set(second["scope"].split()) == {"mcp:read", "mcp:write"}


def test_a_server_that_keeps_refusing_is_answered_by_its_status_after_one_retry():
    peers = Peers(challenge_scope="mcp:read", call_scope="mcp:admin", withheld={"mcp:admin"})

    async def main() -> None:
        async with serving(peers) as url:
            auth = provider(Browser())
            async with Client(url, auth=auth, timeout=DEADLINE) as client:
                await client.tools()
                with pytest.raises(HttpStatusError) as caught:
                    await client.call_tool("echo", {"text": "hi"})
                assert caught.value.status == 403

    run(main())
    assert len(peers.authorize_requests) == 2  # the first token, one step-up; then the 403 stands


def test_a_server_that_refuses_every_token_gets_three_flows_a_minute_not_more():
    peers = Peers(reject_all=True, refresh_tokens=False)
    browser = Browser()

    async def main() -> None:
        async with serving(peers) as url:
            auth = provider(browser)
            for _ in range(5):
                with pytest.raises(HttpStatusError):
                    async with Client(url, auth=auth, timeout=DEADLINE) as client:
                        await client.tools()

    run(main())
    assert len(browser.opened) == 3


# -- refresh --------------------------------------------------------------------------------------------------------
def test_a_refused_token_is_refreshed_without_asking_the_user_again():
    peers = Peers()
    store = MemoryTokenStore()
    browser = Browser()

    async def main() -> None:
        async with serving(peers) as url:
            peers.refresh["refresh-old"] = set()
            stale = StoredCredentials(
                resource=url, issuer=peers.issuer, client_id="client-0", token_endpoint_auth_method="none",
                access_token="expired-token", refresh_token="refresh-old", resource_indicator=url,
            )
            await store.put(stale)
            assert await call_echo(url, provider(browser, store=store)) == "hi"
            held = await store.get(url, peers.issuer)
            assert held is not None and held.access_token in peers.valid

    run(main())
    assert browser.opened == []
    assert [r["grant_type"] for r in peers.token_requests] == ["refresh_token"]
    assert peers.token_requests[0]["resource"].endswith("/mcp")
    assert peers.bearer_seen[0] == "expired-token"  # sent, refused with 401, then refreshed


def test_an_expired_token_is_refreshed_before_it_is_sent():
    peers = Peers()
    store = MemoryTokenStore()

    async def main() -> None:
        async with serving(peers) as url:
            peers.refresh["refresh-old"] = set()
            await store.put(
                StoredCredentials(
                    resource=url, issuer=peers.issuer, client_id="client-0", token_endpoint_auth_method="none",
                    access_token="expired-token", refresh_token="refresh-old", expires_at=time.time() - 10,
                )
            )
            assert await call_echo(url, provider(Browser(), store=store)) == "hi"

    run(main())
    assert "expired-token" not in peers.bearer_seen
    assert [r["grant_type"] for r in peers.token_requests] == ["refresh_token"]


# -- client credentials -------------------------------------------------------------------------------------------
def test_a_service_authorizes_with_a_private_key_jwt_assertion():
    from joserfc.jwk import ECKey

    key = ECKey.generate_key("P-256")
    peers = Peers(auth_methods=["private_key_jwt"], client_key=key, scopes_supported=["jobs"])

    async def main() -> None:
        async with serving(peers) as url:
            pem = key.as_pem(private=True).decode()
            assert await call_echo(url, ClientCredentialsProvider("service", private_key=pem)) == "hi"

    run(main())
    (request,) = peers.token_requests
    assert request["grant_type"] == "client_credentials" and request["scope"] == "jobs"
    assert request["resource"] == peers.base + "/mcp"
    assert "authorization" not in peers.token_headers[0]  # the assertion authenticates, not a secret


@pytest.mark.parametrize(("methods", "basic"), [(["client_secret_basic"], True), (["client_secret_post"], False)])
def test_a_service_authenticates_with_its_secret_as_the_server_lists(methods, basic):
    peers = Peers(auth_methods=methods, client_secret="s3cret:with/odd chars")

    async def main() -> None:
        async with serving(peers) as url:
            auth = ClientCredentialsProvider("service", client_secret="s3cret:with/odd chars")
            assert await call_echo(url, auth) == "hi"

    run(main())
    assert ("authorization" in peers.token_headers[0]) is basic
    assert ("client_secret" in peers.token_requests[0]) is not basic


def test_no_token_or_secret_reaches_a_log_record_or_a_repr(caplog):
    peers = Peers(scopes_supported=["mcp:read"])
    caplog.set_level(logging.DEBUG)
    auth = provider(Browser())

    async def main() -> None:
        async with serving(peers) as url:
            assert await call_echo(url, auth) == "hi"
            held = await auth.store.latest(url)
            assert held is not None
            assert held.access_token not in repr(held) + repr(auth) + repr(auth.store)

    run(main())
    issued = [*peers.valid, *peers.refresh]
    assert issued
    for token in issued:
        assert not [r for r in caplog.records if token in r.getMessage()], token


# -- token stores ----------------------------------------------------------------------------------------------------
def test_the_file_store_is_0600_survives_a_new_store_and_keeps_tokens_out_of_repr(tmp_path):
    path = tmp_path / "nested" / "tokens.json"
    credentials = StoredCredentials(
        resource="https://mcp.example/mcp", issuer="https://as.example", client_id="c",
        access_token="SECRET-ACCESS", refresh_token="SECRET-REFRESH", client_secret="SECRET-CLIENT",
    )

    async def main() -> StoredCredentials | None:
        await FileTokenStore(path).put(credentials)
        await FileTokenStore(path).put(StoredCredentials("https://mcp.example/mcp", "https://other.example"))
        again = FileTokenStore(path)
        assert await again.get("https://mcp.example/mcp", "https://nowhere") is None
        await again.remove("https://mcp.example/mcp", "https://other.example")
        return await again.get("https://mcp.example/mcp", "https://as.example")

    restored = run(main())
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert restored is not None and restored.access_token == "SECRET-ACCESS"
    assert [p.name for p in path.parent.iterdir()] == ["tokens.json"]  # no temporary left behind
    shown = repr(restored) + repr(FileTokenStore(path))
    assert "SECRET" not in shown


def test_credentials_are_kept_per_issuer():
    async def main() -> None:
        store = MemoryTokenStore()
        await store.put(StoredCredentials("https://m/mcp", "https://as1", client_id="one"))
        await store.put(StoredCredentials("https://m/mcp", "https://as2", client_id="two"))
        first = await store.get("https://m/mcp", "https://as1")
        assert first is not None and first.client_id == "one"
        latest = await store.latest("https://m/mcp")
        assert latest is not None and latest.client_id == "two"

    run(main())


# -- the browser step -----------------------------------------------------------------------------------------------
def test_the_redirect_receiver_refuses_a_wrong_state_and_keeps_waiting():
    async def main() -> None:
        async with LoopbackReceiver("http://127.0.0.1:0/callback") as receiver:
            waiting = asyncio.create_task(receiver.wait("the-state", DEADLINE))
            async with httpx.AsyncClient(timeout=DEADLINE) as http:
                forged = await http.get(receiver.redirect_uri, params={"code": "evil", "state": "guessed"})
                assert forged.status_code == 400
                assert not waiting.done()
                good = await http.get(receiver.redirect_uri, params={"code": "good", "state": "the-state", "iss": "x"})
                assert good.status_code == 200
            response = await waiting
            assert (response.code, response.state, response.iss) == ("good", "the-state", "x")

    run(main())


def test_an_error_redirect_fails_with_what_the_server_said():
    async def main() -> None:
        async with LoopbackReceiver("http://127.0.0.1:0/callback") as receiver:
            waiting = asyncio.create_task(receiver.wait("s", DEADLINE))
            async with httpx.AsyncClient(timeout=DEADLINE) as http:
                await http.get(receiver.redirect_uri, params={"error": "access_denied", "state": "s"})
            with pytest.raises(AuthorizationError, match="access_denied"):
                await waiting

    run(main())


def test_a_redirect_port_held_by_another_program_is_an_authorization_error_saying_what_to_do():
    async def main() -> None:
        async with LoopbackReceiver("http://127.0.0.1:0/callback") as holder:
            taken = holder.redirect_uri
            with pytest.raises(AuthorizationError, match="another program holds that port") as refused:
                await LoopbackReceiver(taken).start()
            assert taken in str(refused.value)

    run(main())


def test_the_default_redirect_port_is_below_every_systems_ephemeral_range():
    # A port in the ephemeral range may be held by any outgoing connection's local end.
    port = urllib.parse.urlsplit(ClientMetadata().redirect_uris[0]).port
    assert port is not None and port < 32768


@pytest.mark.parametrize("url", ["javascript:alert(1)", "file:///etc/passwd", "data:text/html,hi", "/relative"])
def test_the_browser_opener_refuses_anything_but_http_urls(url):
    with pytest.raises(AuthorizationError, match="refusing to open"):
        run(open_in_browser(url))


# -- the transport seam -----------------------------------------------------------------------------------------------
class CountingAuth:
    def __init__(self) -> None:
        self.challenges: list[int] = []

    async def headers(self, method: str, url: str) -> dict[str, str]:
        return {"authorization": "Bearer never-valid"}

    async def challenged(self, status: int, headers: Any, method: str, url: str) -> bool:
        self.challenges.append(status)
        return True


def test_the_transport_retries_once_after_the_auth_object_acted_then_the_status_stands():
    peers = Peers()
    auth = CountingAuth()

    async def main() -> None:
        async with serving(peers) as url:
            with pytest.raises(HttpStatusError) as caught:
                async with Client(HttpClientTransport(url, auth=auth), timeout=DEADLINE) as client:
                    await client.tools()
            assert caught.value.status == 401

    run(main())
    # Each request the client made was challenged once and sent once more, no more.
    assert auth.challenges and set(auth.challenges) == {401}
    assert len(peers.bearer_seen) == 2 * len(auth.challenges)


def test_the_older_header_hook_still_authorizes_requests():
    peers = Peers()

    async def main() -> None:
        async with serving(peers) as url:
            peers.valid["fixed-token"] = set()

            async def hook() -> dict[str, str]:
                return {"Authorization": "Bearer fixed-token"}

            async with Client(HttpClientTransport(url, auth=hook), timeout=DEADLINE) as client:
                await client.tools()

    run(main())
    assert set(peers.bearer_seen) == {"fixed-token"}


def test_auth_for_a_target_that_is_not_a_url_is_a_type_error():
    with pytest.raises(TypeError, match="auth= is for an http"):
        Client("python server.py", auth=CountingAuth())
