"""An MCP server as an OAuth 2.1 protected resource (basic/authorization/*.mdx, issue 9).

Everything runs on loopback with real HTTP: an issuer (a small ASGI app publishing RFC
8414 metadata, a JWKS and an RFC 7662 introspection endpoint, counting what it is asked)
and a modelctx server behind ``ProtectedResource``. Tokens are minted here with joserfc
and this file's own RSA key; the verifier finds the JWKS through the issuer's metadata.
Each bad token of the issue's list gets the spec's answer and reaches no tool.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import logging
import subprocess
import sys
import time
import urllib.parse
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn
from joserfc import jwt
from joserfc.jwk import RSAKey

from modelctx import Client, Context, Server, ServerConfig
from modelctx.auth import AccessToken, IntrospectionVerifier, JwtVerifier, ProtectedResource, RequiredScopes
from modelctx.client import UrlPolicy
from modelctx.errors import InsufficientScope, InvalidToken
from tests.support.wire import DEADLINE, McpHttp, async_test, free_port, request

run = async_test(40.0)
LOOPBACK = UrlPolicy(allow_loopback=True)
KEY = RSAKey.generate_key(2048, parameters={"kid": "key-1"}, private=True)
OTHER_KEY = RSAKey.generate_key(2048, parameters={"kid": "key-1"}, private=True)  # same kid, other key
SCOPES = ["mcp:tools", "files:write"]


# -- the issuer ------------------------------------------------------------------------------------------
class Issuer:
    """RFC 8414 metadata, a JWKS and an introspection endpoint, as an ASGI app."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.keys = [KEY]
        self.asked: list[str] = []  # paths requested, in order
        self.active: dict[str, dict[str, Any]] = {}  # introspection: token -> answer
        self.client = ("resource-server", "s3cret")

    def jwks(self) -> dict[str, Any]:
        return {"keys": [key.as_dict(private=False) for key in self.keys]}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        self.asked.append(path)
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if path == "/.well-known/oauth-authorization-server":
            status, answer = 200, {"issuer": self.url, "jwks_uri": self.url + "/jwks"}
        elif path == "/jwks":
            status, answer = 200, self.jwks()
        elif path == "/introspect":
            status, answer = self._introspect(scope, body)
        else:
            status, answer = 404, {"error": "not found"}
        data = json.dumps(answer).encode()
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": data})

    def _introspect(self, scope: dict[str, Any], body: bytes) -> tuple[int, dict[str, Any]]:
        headers = dict(scope["headers"])
        expected = "Basic " + base64.b64encode(":".join(self.client).encode()).decode()
        if headers.get(b"authorization", b"").decode() != expected:
            return 401, {"error": "invalid_client"}
        token = urllib.parse.parse_qs(body.decode())["token"][0]
        return 200, self.active.get(token, {"active": False})

    def count(self, path: str) -> int:
        return self.asked.count(path)


@contextlib.asynccontextmanager
async def served(app: Any, port: int) -> AsyncIterator[None]:
    """``app`` on http://127.0.0.1:port (uvicorn on this event loop)."""
    import asyncio

    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    http = uvicorn.Server(config)
    loop = asyncio.get_running_loop()
    task = loop.create_task(http.serve())
    deadline = loop.time() + DEADLINE
    while not http.started:
        assert not task.done() and loop.time() < deadline, "uvicorn did not start"
        await asyncio.sleep(0.01)
    try:
        yield
    finally:
        http.should_exit = True
        await asyncio.wait_for(task, DEADLINE)


# -- the protected server ----------------------------------------------------------------------------------
def make_server(ran: list[str], *middleware: Any) -> Server:
    server = Server("protected", config=ServerConfig(middleware=list(middleware)))

    @server.tool
    def echo(text: str) -> str:
        """Echo the text."""
        ran.append("echo")
        return text

    @server.tool
    def write_file(path: str, ctx: Context) -> str:
        """Write a file: needs files:write."""
        ctx.require_scopes("files:write")
        ran.append("write_file")
        return f"wrote {path}"

    @server.tool
    def whoami(ctx: Context) -> str:
        """Who the token says the caller is."""
        principal = ctx.principal
        assert isinstance(principal, AccessToken)
        return json.dumps(
            {
                "subject": principal.subject,
                "issuer": principal.issuer,
                "client_id": principal.client_id,
                "scopes": sorted(ctx.scopes),
                "fields": sorted(vars(principal) if hasattr(principal, "__dict__") else principal.__dataclass_fields__),
                "repr": repr(principal),
                "claims": json.dumps(dict(principal.claims)),
            }
        )

    return server


class Setup:
    def __init__(self, issuer: Issuer, url: str, ran: list[str], resource: ProtectedResource) -> None:
        self.issuer = issuer
        self.url = url
        self.ran = ran
        self.resource = resource
        self.http = McpHttp(self)  # type: ignore[arg-type]

    def token(self, key: RSAKey = KEY, header: dict[str, Any] | None = None, **claims: Any) -> str:
        now = int(time.time())
        payload = {
            "iss": self.issuer.url,
            "sub": "alice",
            "aud": self.url,
            "scope": "mcp:tools",
            "iat": now,
            "exp": now + 300,
            "jti": uuid.uuid4().hex,
            "client_id": "test-client",
        }
        payload.update(claims)
        payload = {k: v for k, v in payload.items() if v is not None}
        return jwt.encode({"alg": "RS256", "kid": key.kid, **(header or {})}, payload, key)

    async def call(self, tool: str, token: str | None, id: int = 1, url: str | None = None, **arguments: Any) -> httpx.Response:
        message = request(id, "tools/call", {"name": tool, "arguments": arguments})
        headers = self.http.headers_for(message)
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        async with httpx.AsyncClient(timeout=DEADLINE) as client:
            return await client.post(url or self.url, json=message, headers=headers)

    def metadata_url(self) -> str:
        return self.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")


@contextlib.asynccontextmanager
async def protected(
    *middleware: Any, scope_hierarchy: dict[str, list[str]] | None = None, **verifier_options: Any
) -> AsyncIterator[Setup]:
    issuer_port, port = free_port(), free_port()
    issuer = Issuer(f"http://127.0.0.1:{issuer_port}")
    url = f"http://127.0.0.1:{port}/mcp"
    ran: list[str] = []
    verifier = JwtVerifier(issuer.url, url, **verifier_options)  # a loopback issuer: loopback fetches allowed
    resource = ProtectedResource(
        url,
        authorization_servers=[issuer.url],
        scopes_supported=SCOPES,
        required_scopes=["mcp:tools"],
        verifier=verifier,
        resource_name="Protected test server",
        scope_hierarchy=scope_hierarchy,
    )
    async with served(issuer, issuer_port), served(make_server(ran, *middleware).http_app(auth=resource), port):
        yield Setup(issuer, url, ran, resource)


def challenge(response: httpx.Response) -> str:
    return response.headers["www-authenticate"]


# -- Protected Resource Metadata (RFC 9728, authorization-server-discovery.mdx) --------------------------------
@run
async def test_the_metadata_is_served_at_the_path_inserted_and_the_root_well_known_urls():
    async with protected() as setup, httpx.AsyncClient(timeout=DEADLINE) as client:
        inserted = await client.get(setup.metadata_url())
        root = await client.get(setup.url.replace("/mcp", "/.well-known/oauth-protected-resource"))

    for response in (inserted, root):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/json")
        assert response.json() == {
            "resource": setup.url,
            "authorization_servers": [setup.issuer.url],
            "bearer_methods_supported": ["header"],
            "scopes_supported": SCOPES,
            "resource_name": "Protected test server",
        }


@run
async def test_a_request_without_a_token_gets_401_naming_the_metadata_and_the_scope():
    async with protected() as setup:
        response = await setup.call("echo", None, text="hi")

    assert response.status_code == 401
    assert challenge(response) == f'Bearer resource_metadata="{setup.metadata_url()}", scope="mcp:tools"'
    assert setup.ran == []


@run
async def test_a_valid_token_is_served_and_the_handler_sees_the_principal_but_not_the_token():
    async with protected() as setup:
        token = setup.token(scope="mcp:tools files:write")
        echoed = await setup.call("echo", token, text="hi")
        who = await setup.call("whoami", token, id=2)

    assert echoed.status_code == 200 and echoed.json()["result"]["content"][0]["text"] == "hi"
    seen = json.loads(who.json()["result"]["content"][0]["text"])
    assert seen["subject"] == "alice" and seen["issuer"] == setup.issuer.url
    assert seen["client_id"] == "test-client"
    assert seen["scopes"] == ["files:write", "mcp:tools"]
    # Token passthrough is impossible: the principal has no field holding the token.
    assert "token" not in seen["fields"]
    assert token not in seen["repr"] and token not in seen["claims"]


# -- tokens the spec says to refuse with 401 invalid_token --------------------------------------------------------
def _unsigned(setup: Setup) -> str:
    def b64(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    now = int(time.time())
    claims = {"iss": setup.issuer.url, "sub": "alice", "aud": setup.url, "scope": "mcp:tools", "exp": now + 300}
    return f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(claims)}."


def _hmac_with_the_public_key(setup: Setup) -> str:
    """HS256 signed with the issuer's public key as the secret: the key-confusion attack."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    now = int(time.time())
    claims = {"iss": setup.issuer.url, "sub": "alice", "aud": setup.url, "scope": "mcp:tools", "exp": now + 300}
    signing_input = f"{b64(json.dumps({'alg': 'HS256', 'kid': KEY.kid}).encode())}.{b64(json.dumps(claims).encode())}"
    secret = KEY.as_pem(private=False)
    return f"{signing_input}.{b64(hmac.new(secret, signing_input.encode(), hashlib.sha256).digest())}"


BAD_TOKENS = {
    "another audience": lambda s: s.token(aud="http://127.0.0.1:1/other"),
    "another audience among several": lambda s: s.token(aud=["http://127.0.0.1:1/other", s.url + "/"]),
    "expired": lambda s: s.token(exp=int(time.time()) - 120),
    "without exp": lambda s: s.token(exp=None),
    "not yet valid": lambda s: s.token(nbf=int(time.time()) + 600),
    "signed by another key": lambda s: s.token(key=OTHER_KEY),
    "from another issuer": lambda s: s.token(iss="http://127.0.0.1:1"),
    "alg none": _unsigned,
    "HS256 with the public key": _hmac_with_the_public_key,
    "not a JWT": lambda s: "opaque-token-value",
    "DPoP-bound, sent as a bearer token": lambda s: s.token(cnf={"jkt": "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}),
}


@pytest.mark.parametrize("case", BAD_TOKENS)
@run
async def test_a_bad_token_gets_401_invalid_token_and_nothing_is_served(case, caplog):
    caplog.set_level(logging.DEBUG)
    async with protected() as setup:
        token = BAD_TOKENS[case](setup)
        response = await setup.call("echo", token, text="hi")

    assert response.status_code == 401
    header = challenge(response)
    assert header.startswith('Bearer error="invalid_token", error_description="')
    assert header.endswith(f'resource_metadata="{setup.metadata_url()}", scope="mcp:tools"')
    assert setup.ran == []
    assert token not in response.text and token not in header
    assert all(token not in record.getMessage() for record in caplog.records)


# -- JWTs that are not access tokens (RFC 8725 3.11, RFC 9068; issue 20) -----------------------------------------
def _without_typ(setup: Setup, **claims: Any) -> str:
    """A token whose JOSE header has no typ at all (joserfc's jwt.encode writes JWT)."""
    from joserfc import jws

    token = setup.token(**claims)
    payload = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    return jws.serialize_compact({"alg": "RS256", "kid": KEY.kid}, json.dumps(payload).encode(), KEY)


NOT_ACCESS_TOKENS = {
    "a DPoP proof": ({"typ": "dpop+jwt"}, {}, "The token is a DPoP proof (dpop+jwt), not an access token"),
    "a DPoP proof, with application/ and in capitals": (
        {"typ": "application/DPoP+JWT"}, {}, "The token is a DPoP proof (dpop+jwt), not an access token",
    ),
    "a logout token": ({"typ": "logout+jwt"}, {}, "The token is a logout token (logout+jwt), not an access token"),
    "a JWT of another type": (
        {"typ": "example+jwt"}, {}, "The token's typ header says it is not an access token (at+jwt or JWT)",
    ),
    "an ID token carrying a nonce": (
        {}, {"nonce": "n-0S6_WzA2Mj"}, "The token is an OpenID Connect ID token (it carries nonce), not an access token",
    ),
    "an ID token carrying at_hash": (
        {"typ": "JWT"}, {"at_hash": "77QmUPtjPfzWtF2AnpK9RQ"},
        "The token is an OpenID Connect ID token (it carries at_hash), not an access token",
    ),
    "an ID token marked typ ID": (
        {}, {"typ": "ID"}, "The token is an OpenID Connect ID token (its typ claim is ID), not an access token",
    ),
}


@pytest.mark.parametrize("case", NOT_ACCESS_TOKENS)
@run
async def test_a_jwt_that_is_not_an_access_token_gets_401_saying_what_it_is(case):
    header, claims, message = NOT_ACCESS_TOKENS[case]
    async with protected() as setup:
        response = await setup.call("echo", setup.token(header=header, **claims), text="hi")

    assert response.status_code == 401
    assert challenge(response).startswith(f'Bearer error="invalid_token", error_description="{message}"')
    assert setup.ran == []


@run
async def test_access_tokens_typed_at_jwt_or_jwt_or_untyped_are_served():
    async with protected() as setup:
        typed = [setup.token(header={"typ": typ}) for typ in ("at+jwt", "application/at+jwt", "AT+JWT", "JWT", "jwt")]
        answers = [await setup.call("echo", token, text="hi") for token in [*typed, _without_typ(setup)]]

    assert [answer.status_code for answer in answers] == [200] * 6
    assert setup.ran == ["echo"] * 6


@run
async def test_with_require_at_jwt_only_rfc_9068_access_tokens_are_served():
    async with protected(require_at_jwt=True) as setup:
        served_ok = [await setup.call("echo", setup.token(header={"typ": t}), text="hi") for t in ("at+jwt", "application/AT+JWT")]
        refused = [await setup.call("echo", token, text="hi") for token in (setup.token(), _without_typ(setup))]
        proof = await setup.call("echo", setup.token(header={"typ": "dpop+jwt"}), text="hi")

    assert [answer.status_code for answer in served_ok] == [200, 200] and setup.ran == ["echo", "echo"]
    strict = "This resource accepts RFC 9068 access tokens only: their typ header must be at+jwt"
    for answer in refused:
        assert answer.status_code == 401 and f'error_description="{strict}"' in challenge(answer)
    assert "a DPoP proof" in challenge(proof)


@run
async def test_rate_limits_count_tokens_without_a_subject_by_their_client():
    from modelctx.server.middleware import RATE_LIMITED, RateLimit

    async with protected(RateLimit(rate=0.01, burst=1, methods={"tools/call"})) as setup:
        first = await setup.call("echo", setup.token(sub=None, client_id="client-a"), text="a")
        again = await setup.call("echo", setup.token(sub=None, client_id="client-a"), text="a")
        other = await setup.call("echo", setup.token(sub=None, client_id="client-b"), text="b")

    assert "result" in first.json() and "result" in other.json()  # one bucket each
    assert again.json()["error"]["code"] == RATE_LIMITED


@run
async def test_the_401_for_another_audience_says_so_exactly():
    async with protected() as setup:
        response = await setup.call("echo", setup.token(aud="http://127.0.0.1:1/other"), text="hi")

    assert challenge(response) == (
        'Bearer error="invalid_token", error_description="The access token was not issued for this resource '
        f'(aud)", resource_metadata="{setup.metadata_url()}", scope="mcp:tools"'
    )


@run
async def test_expiry_within_the_leeway_is_accepted():
    async with protected(leeway=60) as setup:
        response = await setup.call("echo", setup.token(exp=int(time.time()) - 10), text="hi")

    assert response.status_code == 200


@run
async def test_a_token_in_the_query_string_is_ignored():
    async with protected() as setup:
        token = setup.token()
        response = await setup.call("echo", None, url=f"{setup.url}?access_token={token}", text="hi")

    assert response.status_code == 401 and 'error="' not in challenge(response)
    assert setup.ran == []


# -- scopes: 403 insufficient_scope (step-up) ------------------------------------------------------------------
@run
async def test_a_token_without_the_required_scope_gets_403_insufficient_scope():
    async with protected() as setup:
        response = await setup.call("echo", setup.token(scope="files:write"), text="hi")

    assert response.status_code == 403
    assert challenge(response) == (
        f'Bearer error="insufficient_scope", scope="mcp:tools", resource_metadata="{setup.metadata_url()}", '
        'error_description="Insufficient scope: this needs the scope(s) mcp:tools; authorize again asking for them"'
    )
    assert setup.ran == []


@run
async def test_a_tool_requiring_a_scope_answers_403_with_every_scope_needed_at_once():
    async with protected() as setup:
        refused = await setup.call("write_file", setup.token(scope="mcp:tools"), path="a.txt")
        stepped_up = await setup.call("write_file", setup.token(scope="mcp:tools files:write"), id=2, path="a.txt")

    assert refused.status_code == 403
    header = challenge(refused)
    assert header.startswith('Bearer error="insufficient_scope", scope="files:write mcp:tools", ')
    assert f'resource_metadata="{setup.metadata_url()}"' in header
    assert refused.json()["error"]["data"] == {"requiredScopes": ["files:write"]}
    assert stepped_up.status_code == 200 and stepped_up.json()["result"]["content"][0]["text"] == "wrote a.txt"
    assert setup.ran == ["write_file"]  # only the stepped-up call did the work


@run
async def test_scopes_declared_per_tool_are_checked_before_the_tool_runs():
    async with protected(RequiredScopes(tools={"echo": ["files:write"]})) as setup:
        refused = await setup.call("echo", setup.token(scope="mcp:tools"), text="hi")
        served_ = await setup.call("echo", setup.token(scope="mcp:tools files:write"), id=2, text="hi")
        other = await setup.call("whoami", setup.token(scope="mcp:tools"), id=3)

    assert refused.status_code == 403
    assert challenge(refused).startswith('Bearer error="insufficient_scope", scope="files:write mcp:tools", ')
    assert served_.status_code == 200 and other.status_code == 200
    assert setup.ran == ["echo"]


@run
async def test_a_broader_scope_holds_the_scopes_it_includes_as_the_server_declares():
    # authorization/index.mdx: servers MUST honor scope hierarchies. "admin" includes "files",
    # which includes files:write; "mcp:all" includes the required mcp:tools.
    hierarchy = {"admin": ["files"], "files": ["files:read", "files:write"], "mcp:all": ["mcp:tools"]}
    async with protected(scope_hierarchy=hierarchy) as setup:
        written = await setup.call("write_file", setup.token(scope="mcp:all admin"), path="a.txt")
        seen = await setup.call("whoami", setup.token(scope="mcp:all files"), id=2)
        narrower = await setup.call("write_file", setup.token(scope="mcp:tools files:read"), id=3, path="b.txt")

    assert written.status_code == 200 and written.json()["result"]["content"][0]["text"] == "wrote a.txt"
    scopes = json.loads(seen.json()["result"]["content"][0]["text"])["scopes"]
    assert scopes == ["files", "files:read", "files:write", "mcp:all", "mcp:tools"]
    assert narrower.status_code == 403  # an included scope never implies the broader one
    assert setup.ran == ["write_file"]


def test_a_scope_hierarchy_maps_scopes_to_lists():
    with pytest.raises(ValueError, match="list of the scopes it includes"):
        ProtectedResource(
            "http://127.0.0.1:1/mcp",
            authorization_servers=["http://127.0.0.1:2"],
            verifier=JwtVerifier("http://127.0.0.1:2", "http://127.0.0.1:1/mcp", jwks={"keys": [KEY.as_dict(private=False)]}),
            scope_hierarchy={"admin": "files"},
        )


def test_scopes_are_declared_as_lists():
    with pytest.raises(TypeError, match=r"\['files:write'\]"):
        RequiredScopes(tools={"echo": "files:write"})


@run
async def test_a_resource_with_two_authorization_servers_checks_each_token_with_its_issuers_keys():
    ports = free_port(), free_port(), free_port()
    first, second = Issuer(f"http://127.0.0.1:{ports[0]}"), Issuer(f"http://127.0.0.1:{ports[1]}")
    second.keys = [OTHER_KEY]  # the same kid as the first issuer's key, another key
    url = f"http://127.0.0.1:{ports[2]}/mcp"
    ran: list[str] = []
    issuers = [first.url, second.url]
    resource = ProtectedResource(url, authorization_servers=issuers, verifier=JwtVerifier(issuers, url))
    async with served(first, ports[0]), served(second, ports[1]), served(make_server(ran).http_app(auth=resource), ports[2]):
        setup = Setup(first, url, ran, resource)
        from_first = await setup.call("echo", setup.token(), text="1")
        from_second = await setup.call("echo", setup.token(key=OTHER_KEY, iss=second.url), id=2, text="2")
        forged = await setup.call("echo", setup.token(key=KEY, iss=second.url), id=3, text="3")
        elsewhere = await setup.call("echo", setup.token(iss="http://127.0.0.1:1"), id=4, text="4")

    assert from_first.status_code == from_second.status_code == 200
    assert forged.status_code == elsewhere.status_code == 401
    assert ran == ["echo", "echo"]


# -- the JWKS cache --------------------------------------------------------------------------------------------
@run
async def test_random_kids_do_not_make_the_server_fetch_the_jwks_each_time():
    async with protected() as setup:
        assert (await setup.call("echo", setup.token(), text="warm")).status_code == 200
        fetched = setup.issuer.count("/jwks")
        for i in range(10):
            forged = setup.token(header={"kid": uuid.uuid4().hex}, id=i)
            assert (await setup.call("echo", forged, id=i + 2, text="x")).status_code == 401
        assert (await setup.call("echo", setup.token(), id=20, text="still")).status_code == 200

    assert fetched == 1
    assert setup.issuer.count("/jwks") <= fetched + 1
    assert setup.issuer.count("/.well-known/oauth-authorization-server") == 1


@run
async def test_a_rotated_signing_key_is_fetched_when_a_token_names_it():
    async with protected(refetch_interval=0) as setup:
        assert (await setup.call("echo", setup.token(), text="old key")).status_code == 200
        new_key = RSAKey.generate_key(2048, parameters={"kid": "key-2"}, private=True)
        setup.issuer.keys = [KEY, new_key]
        response = await setup.call("echo", setup.token(key=new_key), id=2, text="new key")

    assert response.status_code == 200
    assert setup.issuer.count("/jwks") == 2


@run
async def test_the_keys_are_fetched_behind_the_ssrf_guard():
    # A policy admitting public https addresses only: the loopback issuer is never asked.
    async with protected(url_policy=UrlPolicy()) as setup:
        response = await setup.call("echo", setup.token(), text="hi")

    assert response.status_code == 401
    assert "could not fetch its issuer" in challenge(response)
    assert setup.issuer.asked == [] and setup.ran == []


def test_unsafe_algorithms_are_refused_when_the_verifier_is_built():
    for algorithms in (["none"], ["HS256"], ["RS256", "HS512"], []):
        with pytest.raises(ValueError, match="refused"):
            JwtVerifier("https://issuer.example", "https://mcp.example/mcp", algorithms=algorithms)


# -- principals: sessions keyed by issuer and subject ------------------------------------------------------------
@run
async def test_a_refreshed_token_keeps_its_session_and_another_subject_cannot_use_it():
    legacy = "2025-11-25"

    async def post(setup: Setup, token: str, message: dict[str, Any], session: str | None = None) -> httpx.Response:
        headers = {"accept": "application/json, text/event-stream", "authorization": f"Bearer {token}"}
        if session is not None:
            headers["mcp-session-id"] = session
        async with httpx.AsyncClient(timeout=DEADLINE) as client:
            return await client.post(setup.url, json=message, headers=headers)

    async with protected() as setup:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": legacy, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        opened = await post(setup, setup.token(), init)
        session = opened.headers["mcp-session-id"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}
        refreshed = await post(setup, setup.token(), call, session)
        mallory = await post(setup, setup.token(sub="mallory"), call, session)

    assert refreshed.status_code == 200
    assert mallory.status_code == 404


# -- token introspection (RFC 7662) --------------------------------------------------------------------------------
@contextlib.asynccontextmanager
async def introspected(**options: Any) -> AsyncIterator[Setup]:
    issuer_port, port = free_port(), free_port()
    issuer = Issuer(f"http://127.0.0.1:{issuer_port}")
    url = f"http://127.0.0.1:{port}/mcp"
    ran: list[str] = []
    verifier = IntrospectionVerifier(
        issuer.url + "/introspect", url, client_id=issuer.client[0], client_secret=issuer.client[1],
        issuer=issuer.url, **options,
    )
    resource = ProtectedResource(url, authorization_servers=[issuer.url], required_scopes=["mcp:tools"], verifier=verifier)
    async with served(issuer, issuer_port), served(make_server(ran).http_app(auth=resource), port):
        yield Setup(issuer, url, ran, resource)


def _answer(setup: Setup, **fields: Any) -> dict[str, Any]:
    answer = {"active": True, "iss": setup.issuer.url, "sub": "bob", "aud": setup.url,
              "scope": "mcp:tools", "exp": int(time.time()) + 300, "client_id": "c"}
    answer.update(fields)
    return answer


@run
async def test_an_active_introspected_token_is_served_and_the_answer_is_cached():
    async with introspected() as setup:
        setup.issuer.active["opaque-1"] = _answer(setup)
        first = await setup.call("echo", "opaque-1", text="one")
        second = await setup.call("echo", "opaque-1", id=2, text="two")

    assert first.status_code == second.status_code == 200
    assert setup.issuer.count("/introspect") == 1


@pytest.mark.parametrize(
    "case, fields",
    [
        ("inactive", {"active": False}),
        ("another audience", {"aud": "http://127.0.0.1:1/other"}),
        ("no audience", {"aud": None}),
        ("another issuer", {"iss": "http://127.0.0.1:1"}),
        ("expired", {"exp": int(time.time()) - 5}),
        ("a refresh token", {"token_type": "refresh_token"}),
        ("an ID token, as Keycloak marks it", {"typ": "ID"}),
    ],
)
@run
async def test_an_introspected_token_the_spec_refuses_gets_401(case, fields):
    async with introspected() as setup:
        answer = {k: v for k, v in _answer(setup, **fields).items() if v is not None}
        setup.issuer.active["opaque-2"] = answer
        response = await setup.call("echo", "opaque-2", text="hi")

    assert response.status_code == 401
    assert challenge(response).startswith('Bearer error="invalid_token"')
    assert setup.ran == []


@run
async def test_an_introspected_token_without_the_required_scope_gets_403():
    async with introspected() as setup:
        setup.issuer.active["opaque-3"] = _answer(setup, scope="other")
        response = await setup.call("echo", "opaque-3", text="hi")

    assert response.status_code == 403 and 'error="insufficient_scope"' in challenge(response)


@run
async def test_without_authentication_a_tool_requiring_a_scope_is_refused_with_the_scopes_named():
    ran: list[str] = []
    async with Client(make_server(ran), timeout=DEADLINE) as client:
        with pytest.raises(InsufficientScope) as refused:
            await client.call_tool("write_file", {"path": "a.txt"})

    assert refused.value.required == {"files:write"}
    assert ran == []


# -- the public surface ---------------------------------------------------------------------------------------------
def test_the_public_names_of_modelctx_auth():
    import modelctx.auth

    resource_side = {"AccessToken", "IntrospectionVerifier", "JwtVerifier", "ProtectedResource", "RequiredScopes"}
    assert resource_side | {"TokenVerifier"} <= set(modelctx.auth.__all__)
    for name in modelctx.auth.__all__:  # every public name loads (on first use)
        assert getattr(modelctx.auth, name) is not None


def test_the_server_and_its_http_transport_load_without_auth():
    code = (
        "import sys, modelctx, modelctx.server, modelctx.client, modelctx.transports.http\n"
        "loaded = [m for m in ('modelctx.auth', 'joserfc', 'authlib') if m in sys.modules]\n"
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=DEADLINE)


def test_the_refusals_are_modelctx_errors_that_never_quote_the_token():
    scope = InsufficientScope(["b", "a"])
    assert scope.to_error()["data"] == {"requiredScopes": ["a", "b"]}
    assert not InvalidToken("No access token", token_sent=False).token_sent


def test_a_jwks_without_a_usable_key_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match="no usable public key"):
        JwtVerifier("http://127.0.0.1:2", "http://127.0.0.1:1/mcp", jwks={"keys": [{"kty": "oct", "k": "c2VjcmV0"}]})
