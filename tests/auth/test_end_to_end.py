"""Authorization end to end (issue 9, "What must hold"): every part a real process or a
real HTTP exchange on loopback.

``modelctx auth-server`` (A) issues tokens; ``modelctx serve notes_server.py --http
--auth-issuer A`` checks them. Our ``Client`` with an ``OAuthClientProvider`` signs in
(the test is the browser: it opens the authorization URL, which the dev AS approves and
redirects to the provider's loopback receiver), calls a tool, and steps up when a tool
needs a scope it lacks. Then each token the server must refuse, sent over HTTP as a
client would: one for another audience, an expired one, one signed by another key (a
second dev AS that claims A's issuer), one from an issuer the server does not trust,
one without the scope a tool needs. Each gets the status and ``WWW-Authenticate`` of
RFC 6750 section 3 / RFC 9728 section 5.1, and the server's log of tools run shows none ran.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey

from modelctx import Client
from modelctx.auth import ClientMetadata, OAuthClientProvider
from tests.support.auth_processes import client_credentials_token, dev_auth_server, mcp_post, protected_notes
from tests.support.wire import DEADLINE, async_test, free_port, request

BACKEND = ("backend", "backend-secret")
SCOPES = "notes:read,notes:write"


class Setup:
    def __init__(self, issuer: str, key_file: Path, url: str, ran_log: Path) -> None:
        self.issuer = issuer
        self.key_file = key_file
        self.url = url
        self.ran_log = ran_log
        self.metadata_url = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")

    def ran(self) -> list[str]:
        return self.ran_log.read_text().split() if self.ran_log.exists() else []


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    where = tmp_path_factory.mktemp("e2e")
    key_file = where / "signing-key.json"
    ran_log = where / "ran.log"
    env = {**os.environ, "NOTES_RAN_LOG": str(ran_log)}
    options = ("--auto-approve", "--client", ":".join(BACKEND), "--key-file", str(key_file))
    with dev_auth_server(*options) as issuer, protected_notes(
        "--auth-issuer", issuer, "--auth-scopes", SCOPES, "--auth-required-scopes", "notes:read", env=env
    ) as url:
        yield Setup(issuer, key_file, url, ran_log)


class Browser:
    """The person's browser: opens the authorization URL (the dev AS approves at once and
    redirects to the client's loopback receiver)."""

    def __init__(self) -> None:
        self.opened: list[str] = []

    async def __call__(self, url: str) -> None:
        self.opened.append(url)
        async with httpx.AsyncClient(follow_redirects=True, timeout=DEADLINE) as browser:
            landed = await browser.get(url)
        assert landed.status_code == 200, landed.text


@async_test(90)
async def test_our_client_signs_in_calls_a_tool_and_steps_up_for_a_scope(setup: Setup) -> None:
    browser = Browser()
    redirect = f"http://127.0.0.1:{free_port()}/callback"
    provider = OAuthClientProvider(ClientMetadata(client_name="e2e", redirect_uris=(redirect,)), redirect_handler=browser)
    async with Client(setup.url, auth=provider) as client:
        who = await client.call_tool("whoami", {})
        signed_in = list(browser.opened)
        note = await client.call_tool("write_note", {"text": "hello"})  # 403, step-up, retried
        who_after = await client.call_tool("whoami", {})

    assert who.content[0].text == "dev-user notes:read"  # type: ignore[union-attr]
    [first] = signed_in
    assert httpx.URL(first).params["resource"] == setup.url  # RFC 8707
    assert httpx.URL(first).params["scope"] == "notes:read"  # what the 401 challenge asked for
    assert note.content[0].text == "saved: hello"  # type: ignore[union-attr]
    assert len(browser.opened) == 2
    assert set(httpx.URL(browser.opened[1]).params["scope"].split()) == {"notes:read", "notes:write"}
    assert who_after.content[0].text == "dev-user notes:read notes:write"  # type: ignore[union-attr]


def call_whoami(setup: Setup, token: str | None) -> httpx.Response:
    return mcp_post(setup.url, request(1, "tools/call", {"name": "whoami", "arguments": {}}), token)


def challenge_params(response: httpx.Response) -> dict[str, str]:
    value = response.headers["www-authenticate"]
    assert value.startswith("Bearer ")
    params = {}
    for part in value[len("Bearer "):].split('", '):
        name, _, quoted = part.partition("=")
        params[name] = quoted.strip('"')
    return params


def assert_refused_as_invalid_token(setup: Setup, response: httpx.Response, because: str) -> None:
    assert response.status_code == 401, response.text
    params = challenge_params(response)
    assert params["error"] == "invalid_token"
    assert because in params["error_description"]
    assert params["resource_metadata"] == setup.metadata_url
    assert params["scope"] == "notes:read"
    assert "result" not in response.text


def mint_with_the_issuers_key(setup: Setup, **claims: object) -> str:
    """A token signed with the dev AS's own key (its key file), with ``claims``."""
    key = ECKey.import_key(json.loads(setup.key_file.read_text()))
    now = int(time.time())
    payload = {"iss": setup.issuer, "sub": "dev-user", "aud": setup.url, "scope": "notes:read",
               "client_id": "backend", "iat": now, "exp": now + 600, "jti": uuid.uuid4().hex, **claims}
    return jwt.encode({"alg": "ES256", "kid": key.kid, "typ": "at+jwt"}, payload, key)


def test_without_a_token_the_answer_is_401_naming_the_metadata_and_scope(setup: Setup) -> None:
    before = setup.ran()
    response = call_whoami(setup, None)
    assert response.status_code == 401
    assert challenge_params(response) == {"resource_metadata": setup.metadata_url, "scope": "notes:read"}
    assert setup.ran() == before


def test_a_token_the_issuer_gave_for_another_resource_is_refused(setup: Setup) -> None:
    before = setup.ran()
    other = f"http://127.0.0.1:{free_port()}/mcp"
    token = client_credentials_token(setup.issuer, other, "notes:read", BACKEND)
    assert_refused_as_invalid_token(setup, call_whoami(setup, token), "not issued for this resource (aud)")
    assert setup.ran() == before


def test_an_expired_token_is_refused(setup: Setup) -> None:
    before = setup.ran()
    now = int(time.time())
    good = mint_with_the_issuers_key(setup)
    expired = mint_with_the_issuers_key(setup, iat=now - 7200, exp=now - 3600)
    assert call_whoami(setup, good).status_code == 200  # the same key and claims, in time, are accepted
    assert_refused_as_invalid_token(setup, call_whoami(setup, expired), "has expired")
    assert setup.ran() == [*before, "whoami"]  # only the good token's call ran


def test_a_token_signed_by_another_key_is_refused(setup: Setup) -> None:
    before = setup.ran()
    # A second dev AS that claims the trusted issuer's name but signs with its own key.
    port = free_port()
    with dev_auth_server("--client", ":".join(BACKEND), "--issuer", setup.issuer, port=port):
        forged = client_credentials_token(f"http://127.0.0.1:{port}", setup.url, "notes:read", BACKEND)
    assert_refused_as_invalid_token(setup, call_whoami(setup, forged), "signed with a key this resource does not know")
    assert setup.ran() == before


def test_a_token_from_an_issuer_the_server_does_not_trust_is_refused(setup: Setup) -> None:
    before = setup.ran()
    with dev_auth_server("--client", ":".join(BACKEND)) as untrusted:
        token = client_credentials_token(untrusted, setup.url, "notes:read", BACKEND)
    assert_refused_as_invalid_token(setup, call_whoami(setup, token), "issued by another authorization server")
    assert setup.ran() == before


def test_a_token_without_the_tools_scope_gets_403_insufficient_scope(setup: Setup) -> None:
    before = setup.ran()
    token = client_credentials_token(setup.issuer, setup.url, "notes:read", BACKEND)
    message = request(2, "tools/call", {"name": "write_note", "arguments": {"text": "sneaky"}})
    response = mcp_post(setup.url, message, token)
    assert response.status_code == 403
    params = challenge_params(response)
    assert params["error"] == "insufficient_scope"
    assert set(params["scope"].split()) == {"notes:read", "notes:write"}  # everything needed, at once
    assert params["resource_metadata"] == setup.metadata_url
    assert setup.ran() == before
