"""The OAuth proxy (issue 24) end to end, every part a real process on loopback.

The upstream identity provider is ``modelctx auth-server --no-registration`` (like
GitHub's: no dynamic registration, one pre-registered confidential client for the
proxy, ``proxy:proxy-secret``), auto-approving. The MCP server is
``tests/fixtures/servers/proxied_server.py``: an ``OAuthProxy`` in front of it. MCP clients
register at the proxy, approve the client at the proxy's consent page (the browser
here is httpx with a cookie jar), sign in upstream and get the proxy's own token,
whose ``sub`` is the upstream user, whose ``iss`` is the proxy and whose ``aud`` is the
MCP server. What must not pass: an upstream token, a token request for another
resource, an unregistered redirect URI, a replayed code, a callback from another
browser or one replayed, a client the browser never approved (consent comes first).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import secrets
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest

from modelctx import Client
from modelctx.auth import ClientMetadata, MemoryTokenStore, OAuthClientProvider
from tests.support.auth_processes import client_credentials_token, dev_auth_server, mcp_post, running
from tests.support.paths import SERVERS
from tests.support.wire import DEADLINE, async_test, free_port, modern_meta

PROXIED_SERVER = SERVERS / "proxied_server.py"
PROXY_CLIENT = ("proxy", "proxy-secret")
REDIRECT = "http://127.0.0.1:5998/callback"
run = async_test(60.0)


class Setup:
    def __init__(self, upstream: str, port: int) -> None:
        self.upstream = upstream
        self.proxy = f"http://127.0.0.1:{port}"
        self.url = f"{self.proxy}/mcp"


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    # Upstream tokens live 20 s: under the proxy's 30 s margin, so each use renews them.
    options = ("--auto-approve", "--no-registration", "--client", ":".join(PROXY_CLIENT), "--token-ttl", "20")
    with dev_auth_server(*options) as upstream:
        port = free_port()
        command = [sys.executable, "-P", str(PROXIED_SERVER), upstream, str(port)]
        with running(command, "proxied server ready at"):
            yield Setup(upstream, port)


# -- helpers: a client registered at the proxy, and a browser ---------------------------------------
def register(setup: Setup, redirect: str = REDIRECT, name: str = "test client") -> str:
    reply = httpx.post(
        f"{setup.proxy}/register",
        json={"client_name": name, "redirect_uris": [redirect], "token_endpoint_auth_method": "none",
              "grant_types": ["authorization_code", "refresh_token"]},
        timeout=DEADLINE,
    )  # fmt: skip
    assert reply.status_code == 201, reply.text
    return str(reply.json()["client_id"])


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def authorize_url(setup: Setup, client_id: str, challenge: str, **overrides: str) -> str:
    query = {
        "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "state": "client-state",
        "code_challenge": challenge, "code_challenge_method": "S256", "resource": setup.url, "scope": "notes:read",
        **overrides,
    }  # fmt: skip
    return f"{setup.proxy}/authorize?" + urllib.parse.urlencode(query)


class Browser:
    """A browser: a cookie jar, and every page and redirect it saw."""

    def __init__(self) -> None:
        self.web = httpx.Client(timeout=DEADLINE)
        self.seen: list[str] = []  # each response's Location and body

    def get(self, url: str) -> httpx.Response:
        response = self.web.get(url)
        self.seen += [response.headers.get("location", ""), response.text]
        return response

    def approve(self, page: httpx.Response, decision: str = "approve") -> httpx.Response:
        """Answer the consent ``page`` as the user would (its form, from its origin)."""
        match = re.search(r'name="ticket" value="([^"]+)"', page.text)
        assert page.status_code == 200 and match, page.text
        origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(str(page.url)))
        response = self.web.post(
            str(page.url).split("?")[0], data={"ticket": match[1], "decision": decision}, headers={"origin": origin}
        )
        self.seen += [response.headers.get("location", ""), response.text]
        return response

    def follow(self, response: httpx.Response, until: str = REDIRECT) -> dict[str, str]:
        """Follow redirects until one goes to ``until`` (the MCP client); its query."""
        for _hop in range(10):
            assert response.status_code in (302, 303), (response.status_code, response.text)
            location = response.headers["location"]
            if location.startswith(until):
                return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
            response = self.get(location)
        raise AssertionError("too many redirects")

    def sign_in(self, url: str) -> dict[str, str]:
        """Open ``url``, approve the client if asked, sign in upstream: the MCP client's redirect query."""
        response = self.get(url)
        if response.status_code == 200:
            response = self.approve(response)
        return self.follow(response)


def exchange(setup: Setup, client_id: str, code: str, verifier: str) -> httpx.Response:
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id,
            "code_verifier": verifier, "resource": setup.url}  # fmt: skip
    return httpx.post(f"{setup.proxy}/token", data=form, timeout=DEADLINE)


def claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


# -- the upstream: registration off --------------------------------------------------------------------
def test_an_upstream_without_registration_advertises_none_and_refuses_it(setup: Setup) -> None:
    metadata = httpx.get(f"{setup.upstream}/.well-known/oauth-authorization-server", timeout=DEADLINE).json()
    assert "registration_endpoint" not in metadata
    assert "client_id_metadata_document_supported" not in metadata
    refused = httpx.post(f"{setup.upstream}/register", json={"redirect_uris": [REDIRECT]}, timeout=DEADLINE)
    assert refused.status_code in (404, 405)


# -- the proxy's own metadata ----------------------------------------------------------------------------
def test_the_proxy_is_the_authorization_server_the_resource_names(setup: Setup) -> None:
    resource = httpx.get(f"{setup.proxy}/.well-known/oauth-protected-resource/mcp", timeout=DEADLINE).json()
    assert resource["authorization_servers"] == [setup.proxy]
    metadata = httpx.get(f"{setup.proxy}/.well-known/oauth-authorization-server", timeout=DEADLINE).json()
    assert metadata["issuer"] == setup.proxy
    assert metadata["registration_endpoint"] == f"{setup.proxy}/register"
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    # Every token stands for a user who signed in upstream: no client credentials grant.
    assert metadata["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert "client_id_metadata_document_supported" not in metadata  # not fetched here


def test_registering_for_client_credentials_is_refused(setup: Setup) -> None:
    reply = httpx.post(
        f"{setup.proxy}/register",
        json={"redirect_uris": [REDIRECT], "grant_types": ["client_credentials"]},
        timeout=DEADLINE,
    )
    assert reply.status_code == 400, reply.text


# -- the whole flow, by our Client -----------------------------------------------------------------------
@run
async def test_our_client_registers_at_the_proxy_signs_in_upstream_and_calls_a_tool(setup: Setup) -> None:
    browser = Browser()
    store = MemoryTokenStore()

    def visit(url: str) -> None:
        query = _sign_in(browser, url, callback)  # consent page, upstream, back to the proxy
        httpx.get(callback + "?" + urllib.parse.urlencode(query), timeout=DEADLINE)  # to the client's receiver

    async def sign_in(url: str) -> None:
        await asyncio.to_thread(visit, url)  # the client's receiver runs on this loop

    callback = f"http://127.0.0.1:{free_port()}/callback"
    auth = OAuthClientProvider(
        ClientMetadata(client_name="proxy e2e", redirect_uris=(callback,)), store=store, redirect_handler=sign_in
    )
    async with Client(setup.url, auth=auth) as client:
        result = await client.call_tool("whoami", {})
        upstream = [json.loads((await client.call_tool("upstream_claims", {})).content[0].text) for _ in range(2)]
    subject, issuer, client_id = result.content[0].text.split()
    # The server, not the client, holds the upstream's token of this sign-in, and renews it when it expires.
    assert [(c["iss"], c["sub"], c["aud"]) for c in upstream] == [(setup.upstream, "dev-user", f"{setup.upstream}/userinfo")] * 2
    assert upstream[0]["jti"] != upstream[1]["jti"]
    assert (subject, issuer) == ("dev-user", setup.proxy)  # the upstream's user, in the proxy's token

    stored = await store.get(setup.url, setup.proxy)
    assert stored is not None and stored.client_id == client_id
    token = claims(stored.access_token)
    assert (token["iss"], token["aud"], token["sub"]) == (setup.proxy, setup.url, "dev-user")
    # No token passthrough: nothing the browser or the client saw came from the upstream's token endpoint.
    assert not any(setup.upstream in page and "access_token" in page for page in browser.seen)
    assert stored.refresh_token is not None and stored.refresh_token not in "".join(browser.seen)


@run
async def test_a_dpop_client_gets_a_token_bound_to_its_key_and_uses_it(setup: Setup) -> None:
    browser = Browser()
    callback = f"http://127.0.0.1:{free_port()}/callback"

    def visit(url: str) -> None:
        httpx.get(callback + "?" + urllib.parse.urlencode(_sign_in(browser, url, callback)), timeout=DEADLINE)

    async def sign_in(url: str) -> None:
        await asyncio.to_thread(visit, url)

    store = MemoryTokenStore()
    auth = OAuthClientProvider(
        ClientMetadata(client_name="dpop client", redirect_uris=(callback,)), store=store, redirect_handler=sign_in,
        dpop=True,
    )  # fmt: skip
    async with Client(setup.url, auth=auth) as client:
        assert (await client.call_tool("whoami", {})).content[0].text.startswith("dev-user ")
    stored = await store.get(setup.url, setup.proxy)
    assert stored is not None and stored.token_type == "DPoP" and "jkt" in claims(stored.access_token)["cnf"]
    # Without its proof the bound token is refused (RFC 9449 7.1).
    listed = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta()}}
    assert mcp_post(setup.url, listed, token=stored.access_token).status_code == 401


# -- the whole flow, by the official mcp client ----------------------------------------------------------
@run
async def test_the_official_client_registers_at_the_proxy_and_calls_a_tool(setup: Setup) -> None:
    from mcp import Client as OfficialClient
    from mcp.client.auth import OAuthClientProvider as OfficialProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

    from tests.interop.test_auth_resource import MemoryStorage

    callback = "http://127.0.0.1:1/callback"  # never served: the browser stops at it
    browser = Browser()
    redirect: dict[str, str] = {}

    async def open_browser(url: str) -> None:
        redirect.update(await asyncio.to_thread(_sign_in, browser, url, callback))

    async def answer() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=redirect["code"], state=redirect.get("state"), iss=redirect.get("iss"))

    provider = OfficialProvider(
        server_url=setup.url,
        client_metadata=OAuthClientMetadata(
            client_name="official client", redirect_uris=[callback],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"], response_types=["code"],
        ),
        storage=MemoryStorage(),
        redirect_handler=open_browser,
        callback_handler=answer,
    )  # fmt: skip
    async with httpx2.AsyncClient(auth=provider, timeout=DEADLINE) as http:
        async with OfficialClient(streamable_http_client(setup.url, http_client=http)) as client:
            result = await client.call_tool("whoami", {})
    assert result.content[0].text.split()[:2] == ["dev-user", setup.proxy]


def _sign_in(browser: Browser, url: str, until: str) -> dict[str, str]:
    response = browser.get(url)
    if response.status_code == 200:
        response = browser.approve(response)
    return browser.follow(response, until=until)


# -- consent comes first (the confused deputy) -----------------------------------------------------------
def test_a_client_the_browser_never_approved_gets_the_consent_page_not_the_upstream(setup: Setup) -> None:
    browser = Browser()
    mine = register(setup)
    verifier, challenge = pkce()
    query = browser.sign_in(authorize_url(setup, mine, challenge))
    assert exchange(setup, mine, query["code"], verifier).status_code == 200
    # Approved once: the same client and redirect URI go straight upstream the next time.
    again = browser.get(authorize_url(setup, mine, challenge))
    assert again.status_code == 302 and again.headers["location"].startswith(setup.upstream)
    # Even approved, a link followed from another site is asked again (Fetch Metadata).
    from_a_link = browser.web.get(authorize_url(setup, mine, challenge), headers={"sec-fetch-site": "cross-site"})
    assert from_a_link.status_code == 200 and 'name="ticket"' in from_a_link.text
    # An attacker registers a client of its own and sends the user's browser to it: the
    # upstream would skip its consent (it already approved the proxy), so the proxy asks.
    attacker = register(setup, redirect="https://attacker.example/callback", name="totally legit")
    lured = browser.get(authorize_url(setup, attacker, challenge, redirect_uri="https://attacker.example/callback"))
    assert lured.status_code == 200 and "totally legit" in lured.text and "https://attacker.example/callback" in lured.text
    assert "frame-ancestors 'none'" in lured.headers["content-security-policy"]
    # The approval of one redirect URI is not one of another for the same client.
    other_uri = register(setup, redirect="http://127.0.0.1:5997/cb")
    assert browser.get(authorize_url(setup, other_uri, challenge, redirect_uri="http://127.0.0.1:5997/cb")).status_code == 200


def test_denying_at_the_proxy_sends_access_denied_and_never_reaches_the_upstream(setup: Setup) -> None:
    browser = Browser()
    client_id = register(setup)
    page = browser.get(authorize_url(setup, client_id, pkce()[1]))
    response = browser.approve(page, decision="deny")
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(response.headers["location"]).query))
    assert response.headers["location"].startswith(REDIRECT)
    assert (query["error"], query["state"], query["iss"]) == ("access_denied", "client-state", setup.proxy)


def test_a_consent_form_posted_from_another_origin_is_refused(setup: Setup) -> None:
    browser = Browser()
    page = browser.get(authorize_url(setup, register(setup), pkce()[1]))
    ticket = re.search(r'name="ticket" value="([^"]+)"', page.text)
    assert ticket
    forged = browser.web.post(
        f"{setup.proxy}/authorize", data={"ticket": ticket[1], "decision": "approve"},
        headers={"origin": "https://attacker.example"},
    )  # fmt: skip
    assert forged.status_code == 403


# -- what the proxy refuses --------------------------------------------------------------------------------
def test_a_redirect_uri_not_registered_is_refused_without_redirecting(setup: Setup) -> None:
    client_id = register(setup)
    response = Browser().get(authorize_url(setup, client_id, pkce()[1], redirect_uri="http://127.0.0.1:5998/other"))
    assert response.status_code == 400 and "location" not in response.headers


def test_a_token_for_another_resource_is_refused(setup: Setup) -> None:
    client_id = register(setup)
    response = Browser().get(authorize_url(setup, client_id, pkce()[1], resource="http://127.0.0.1:1/other-mcp"))
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(response.headers["location"]).query))
    assert query["error"] == "invalid_target"


def test_an_upstream_token_is_refused_by_the_mcp_server(setup: Setup) -> None:
    # A token the upstream signed, even one naming the MCP server as its audience.
    upstream_token = client_credentials_token(setup.upstream, setup.url, "notes:read", PROXY_CLIENT)
    assert claims(upstream_token)["aud"] == setup.url
    reply = mcp_post(setup.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, token=upstream_token)
    assert reply.status_code == 401
    assert 'error="invalid_token"' in reply.headers["www-authenticate"]


def test_a_replayed_code_is_refused_and_revokes_what_it_gave(setup: Setup) -> None:
    client_id = register(setup)
    verifier, challenge = pkce()
    query = Browser().sign_in(authorize_url(setup, client_id, challenge))
    first = exchange(setup, client_id, query["code"], verifier)
    assert first.status_code == 200, first.text
    assert exchange(setup, client_id, query["code"], verifier).json()["error"] == "invalid_grant"
    refresh = {"grant_type": "refresh_token", "refresh_token": first.json()["refresh_token"], "client_id": client_id}
    assert httpx.post(f"{setup.proxy}/token", data=refresh, timeout=DEADLINE).json()["error"] == "invalid_grant"
    # The access token it gave is refused from now on, not only when it expires.
    listed = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta()}}
    reply = mcp_post(setup.url, listed, token=first.json()["access_token"])
    assert reply.status_code == 401 and "revoked" in reply.headers["www-authenticate"]


def test_refresh_tokens_are_the_proxys_own_and_rotate(setup: Setup) -> None:
    client_id = register(setup)
    verifier, challenge = pkce()
    query = Browser().sign_in(authorize_url(setup, client_id, challenge))
    tokens = exchange(setup, client_id, query["code"], verifier).json()
    refresh = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": client_id}
    renewed = httpx.post(f"{setup.proxy}/token", data=refresh, timeout=DEADLINE).json()
    assert claims(renewed["access_token"])["sub"] == "dev-user" and renewed["refresh_token"] != tokens["refresh_token"]
    # The same sign-in (sid): a renewed token still reaches the upstream tokens of that sign-in.
    assert claims(renewed["access_token"])["sid"] == claims(tokens["access_token"])["sid"]
    listed = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta()}}
    assert mcp_post(setup.url, listed, token=renewed["access_token"]).status_code == 200
    # The rotated-out refresh token used again: a copy exists, so the whole sign-in is revoked.
    assert httpx.post(f"{setup.proxy}/token", data=refresh, timeout=DEADLINE).json()["error"] == "invalid_grant"
    assert mcp_post(setup.url, listed, token=renewed["access_token"]).status_code == 401


# -- the upstream's answer: bound to the transaction and to the browser ----------------------------------
def _upstream_answer(setup: Setup, browser: Browser, url: str | None = None) -> str:
    """Approve a new client in ``browser`` (or open ``url``, approved before); the
    upstream's redirect back to the proxy, not followed."""
    response = browser.get(url or authorize_url(setup, register(setup), pkce()[1]))
    if response.status_code == 200:
        response = browser.approve(response)
    upstream = browser.web.get(response.headers["location"])
    assert upstream.status_code == 302 and upstream.headers["location"].startswith(f"{setup.proxy}/oauth/callback")
    return str(upstream.headers["location"])


def test_a_callback_in_another_browser_is_refused(setup: Setup) -> None:
    callback = _upstream_answer(setup, Browser())
    stranger = Browser().get(callback)  # the right state, not the browser that approved
    assert stranger.status_code == 400 and "location" not in stranger.headers


def test_a_replayed_callback_is_refused(setup: Setup) -> None:
    browser = Browser()
    callback = _upstream_answer(setup, browser)
    assert browser.get(callback).headers["location"].startswith(REDIRECT)
    replayed = browser.get(callback)  # the same browser, its cookie still there: the state is spent
    assert replayed.status_code == 400 and "location" not in replayed.headers


def test_two_sign_ins_at_once_in_one_browser_both_complete(setup: Setup) -> None:
    browser = Browser()
    first, second = _upstream_answer(setup, browser), _upstream_answer(setup, browser)
    assert browser.get(second).headers["location"].startswith(REDIRECT)
    assert browser.get(first).headers["location"].startswith(REDIRECT)


def test_a_callback_with_a_state_the_proxy_never_sent_is_refused(setup: Setup) -> None:
    browser = Browser()
    callback = _upstream_answer(setup, browser)
    forged = callback.replace("state=", "state=x")
    assert browser.get(forged).status_code == 400


def test_pending_sign_ins_are_bounded(setup: Setup) -> None:
    browser = Browser()
    url = authorize_url(setup, register(setup), pkce()[1])
    first = _upstream_answer(setup, browser, url)
    for _ in range(1000):  # approved: each opens a pending sign-in; at MAX_TRANSACTIONS the oldest goes
        assert browser.web.get(url).status_code == 302
    assert browser.get(first).status_code == 400
    # The newest is still there.
    assert browser.get(_upstream_answer(setup, browser, url)).headers["location"].startswith(REDIRECT)


def _client_query(response: httpx.Response) -> dict[str, str]:
    assert response.status_code == 302 and response.headers["location"].startswith(REDIRECT), response.text
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(response.headers["location"]).query))


def test_an_answer_naming_another_issuer_is_not_exchanged(setup: Setup) -> None:
    # RFC 9207: a code from another authorization server (a mix-up) is never sent to the upstream.
    browser = Browser()
    callback = _upstream_answer(setup, browser)
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(callback).query))
    assert query["iss"] == setup.upstream
    mixed_up = callback.replace(urllib.parse.quote(setup.upstream, safe=""), urllib.parse.quote("http://127.0.0.1:1", safe=""))
    answer = _client_query(browser.get(mixed_up))
    assert (answer["error"], answer["state"], answer["iss"]) == ("temporarily_unavailable", "client-state", setup.proxy)
    assert "code" not in answer


def test_the_upstream_refusing_reaches_the_client_as_access_denied(setup: Setup) -> None:
    browser = Browser()
    callback = _upstream_answer(setup, browser)
    state = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(callback).query))["state"]
    refused = f"{setup.proxy}/oauth/callback?" + urllib.parse.urlencode({"error": "access_denied", "state": state})
    answer = _client_query(browser.get(refused))
    assert (answer["error"], answer["state"]) == ("access_denied", "client-state") and "code" not in answer


def test_several_workers_are_refused_saying_why(tmp_path: Path) -> None:
    # Each worker would hold its own clients, codes and pending sign-ins.
    script = tmp_path / "workers.py"
    script.write_text(
        "from modelctx import Server\nfrom modelctx.auth import OAuthProxy\n"
        f"proxy = OAuthProxy('http://127.0.0.1:{free_port()}/mcp', upstream_authorize='http://127.0.0.1:1/authorize',\n"
        "    upstream_token='http://127.0.0.1:1/token', client_id='proxy', upstream_issuer='http://127.0.0.1:1')\n"
        f"Server('s').run('http', port={free_port()}, workers=2, auth=proxy)\n"
    )
    result = subprocess.run([sys.executable, "-P", str(script)], capture_output=True, text=True, timeout=DEADLINE)
    assert result.returncode == 1
    assert "the OAuth proxy keeps its clients, codes and pending sign-ins in memory" in result.stderr
    assert "serve one worker" in result.stderr
    assert "add --redis URL (or set ServerConfig.redis_url)" in result.stderr


def test_a_proxy_that_cannot_tell_who_signed_in_is_refused_when_built() -> None:
    from modelctx.auth import OAuthProxy

    with pytest.raises(ValueError, match="say how the proxy learns who signed in: identify="):
        OAuthProxy("https://mcp.example.com/mcp", upstream_authorize="https://idp.example/authorize",
                   upstream_token="https://idp.example/token", client_id="proxy")  # fmt: skip
    with pytest.raises(ValueError, match="callback_url 'http://mcp.example.com/cb' must be https"):
        OAuthProxy("https://mcp.example.com/mcp", upstream_authorize="https://idp.example/authorize",
                   upstream_token="https://idp.example/token", client_id="proxy", upstream_issuer="https://idp.example",
                   callback_url="http://mcp.example.com/cb")  # fmt: skip
