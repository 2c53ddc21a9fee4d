"""The development authorization server (``modelctx auth-server``), over real HTTP.

Each server is the real command in a subprocess on a loopback port; the tests play the
MCP client and the browser with httpx: metadata (RFC 8414), registration (RFC 7591 and
Client ID Metadata Documents), the code flow with PKCE and ``resource`` (RFC 7636,
RFC 8707), ``iss`` in every authorization response (RFC 9207), refresh rotation, client
credentials, and the JWT access token the MCP server will verify.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import json
import os
import queue
import secrets
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet

from tests.support.wire import DEADLINE, free_port, stderr_lines

RESOURCE = "http://127.0.0.1:8000/mcp"
REDIRECT = "http://127.0.0.1:5999/callback"


@contextlib.contextmanager
def auth_server(*options: str, port: int | None = None) -> Iterator[str]:
    """Run ``modelctx auth-server`` with ``options``; yield its issuer once it is ready."""
    port = port or free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "modelctx", "auth-server", "--port", str(port), *options],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = stderr_lines(process)
    try:
        seen: list[str] = []
        while not (seen and "authorization server ready at" in seen[-1]):
            try:
                seen.append(lines.get(timeout=DEADLINE))
            except queue.Empty:
                pytest.fail(f"modelctx auth-server did not get ready within {DEADLINE}s: {''.join(seen)}")
        yield seen[-1].rsplit(" ", 1)[-1].strip()
    finally:
        process.terminate()
        process.wait(timeout=DEADLINE)


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    with auth_server("--auto-approve", "--client", "public-cli", "--client", "backend:backend-secret") as url:
        yield url


@pytest.fixture(scope="module")
def consent_issuer() -> Iterator[str]:
    with auth_server("--client", "public-cli") as url:
        yield url


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def authorize(issuer: str, client_id: str, challenge: str | None, **params: str | None) -> httpx.Response:
    query: dict[str, str | None] = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "state-123",
        "resource": RESOURCE,
    }
    if challenge is not None:
        query |= {"code_challenge": challenge, "code_challenge_method": "S256"}
    query |= params
    return httpx.get(f"{issuer}/authorize", params={k: v for k, v in query.items() if v is not None})


def redirected(response: httpx.Response, to: str = REDIRECT) -> dict[str, str]:
    """The parameters of the authorization response; each may appear once."""
    assert response.status_code == 302, response.text
    location = response.headers["location"]
    assert location.startswith(to + "?")
    params = parse_qs(urlsplit(location).query)
    assert all(len(v) == 1 for v in params.values()), params
    return {k: v[0] for k, v in params.items()}


def token(
    issuer: str, form: dict[str, str] | None = None, /, *, auth: tuple[str, str] | None = None, **fields: str
) -> httpx.Response:
    return httpx.post(f"{issuer}/token", data=(form or {}) | fields, auth=auth)


def exchange_code(issuer: str, code: str, verifier: str, client_id: str = "public-cli", **fields: str) -> httpx.Response:
    """The token request for an authorization code, with ``fields`` replacing any of its parameters."""
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id}
    return token(issuer, form | {"code_verifier": verifier, "resource": RESOURCE} | fields)


def code_flow(issuer: str, client_id: str = "public-cli", **extra: str) -> dict[str, Any]:
    verifier, challenge = pkce()
    code = redirected(authorize(issuer, client_id, challenge, **extra))["code"]
    response = exchange_code(issuer, code, verifier, client_id)
    assert response.status_code == 200, response.text
    return dict(response.json())


def verified_claims(issuer: str, access_token: str) -> dict[str, Any]:
    jwks = httpx.get(httpx.get(f"{issuer}/.well-known/oauth-authorization-server").json()["jwks_uri"]).json()
    decoded = jwt.decode(access_token, KeySet.import_key_set(jwks), algorithms=["ES256", "RS256"])
    assert decoded.header["typ"] == "at+jwt"
    return dict(decoded.claims)


def register(issuer: str, **metadata: Any) -> dict[str, Any]:
    response = httpx.post(f"{issuer}/register", json=metadata)
    assert response.status_code == 201, response.text
    return dict(response.json())


# Metadata.


@pytest.mark.parametrize("well_known", ["oauth-authorization-server", "openid-configuration"])
def test_metadata_names_the_exact_issuer_and_what_mcp_clients_need(issuer: str, well_known: str) -> None:
    response = httpx.get(f"{issuer}/.well-known/{well_known}")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    metadata = response.json()
    assert metadata["issuer"] == issuer
    assert metadata["authorization_endpoint"] == f"{issuer}/authorize"
    assert metadata["token_endpoint"] == f"{issuer}/token"
    assert metadata["registration_endpoint"] == f"{issuer}/register"
    assert metadata["response_types_supported"] == ["code"]
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["authorization_response_iss_parameter_supported"] is True
    assert metadata["client_id_metadata_document_supported"] is True
    assert set(metadata["grant_types_supported"]) == {"authorization_code", "refresh_token", "client_credentials"}
    assert set(metadata["token_endpoint_auth_methods_supported"]) == {
        "none",
        "client_secret_basic",
        "client_secret_post",
        "private_key_jwt",
    }
    keys = httpx.get(metadata["jwks_uri"]).json()["keys"]
    assert [k["alg"] for k in keys] == ["ES256"] and all("d" not in k for k in keys)  # public half only


def test_an_issuer_with_a_path_serves_metadata_at_the_path_inserted_well_known_urls() -> None:
    port = free_port()
    tenant = f"http://127.0.0.1:{port}/tenant1"
    with auth_server("--issuer", tenant, port=port) as issuer:
        assert issuer == tenant
        for url in (
            f"http://127.0.0.1:{port}/.well-known/oauth-authorization-server/tenant1",
            f"http://127.0.0.1:{port}/.well-known/openid-configuration/tenant1",
            f"{tenant}/.well-known/openid-configuration",
        ):
            metadata = httpx.get(url).json()
            assert metadata["issuer"] == tenant
            assert metadata["token_endpoint"] == f"{tenant}/token"


# The authorization code flow.


def test_registered_client_gets_a_code_with_state_and_iss_then_a_jwt_for_the_resource(issuer: str) -> None:
    client = register(
        issuer,
        client_name="an MCP client",
        redirect_uris=[REDIRECT],
        grant_types=["authorization_code", "refresh_token"],
        token_endpoint_auth_method="none",
        application_type="native",
    )
    assert "client_secret" not in client  # a public client gets no secret
    verifier, challenge = pkce()
    answer = redirected(authorize(issuer, client["client_id"], challenge, scope="notes:read notes:write"))
    assert answer["state"] == "state-123"
    assert answer["iss"] == issuer
    response = exchange_code(issuer, answer["code"], verifier, client["client_id"])
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert body["token_type"] == "Bearer" and body["refresh_token"]
    claims = verified_claims(issuer, body["access_token"])
    assert claims["iss"] == issuer
    assert claims["aud"] == RESOURCE
    assert claims["sub"] == "dev-user"
    assert claims["client_id"] == client["client_id"]
    assert claims["scope"] == "notes:read notes:write"
    assert claims["exp"] > claims["iat"] >= int(time.time()) - 60
    assert claims["jti"]


def test_refresh_rotates_the_refresh_token_and_the_old_one_stops_working(issuer: str) -> None:
    first = code_flow(issuer, scope="notes:read")
    refreshed = token(issuer, grant_type="refresh_token", refresh_token=first["refresh_token"], client_id="public-cli")
    assert refreshed.status_code == 200, refreshed.text
    second = refreshed.json()
    assert second["refresh_token"] != first["refresh_token"]
    claims = verified_claims(issuer, second["access_token"])
    assert claims["aud"] == RESOURCE and claims["scope"] == "notes:read"
    again = token(issuer, grant_type="refresh_token", refresh_token=first["refresh_token"], client_id="public-cli")
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"


def test_a_refresh_for_another_resource_is_invalid_target(issuer: str) -> None:
    first = code_flow(issuer)
    response = token(
        issuer,
        grant_type="refresh_token",
        refresh_token=first["refresh_token"],
        client_id="public-cli",
        resource="http://127.0.0.1:8001/other",
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_target"


# Client credentials.


@pytest.mark.parametrize("how", ["client_secret_basic", "client_secret_post"])
def test_client_credentials_give_a_token_for_the_client_itself(issuer: str, how: str) -> None:
    form = {"grant_type": "client_credentials", "resource": RESOURCE, "scope": "jobs:run"}
    if how == "client_secret_basic":
        response = token(issuer, form, auth=("backend", "backend-secret"))
    else:
        response = token(issuer, form, client_id="backend", client_secret="backend-secret")
    assert response.status_code == 200, response.text
    body = response.json()
    assert "refresh_token" not in body
    claims = verified_claims(issuer, body["access_token"])
    assert claims["sub"] == claims["client_id"] == "backend"
    assert claims["aud"] == RESOURCE and claims["scope"] == "jobs:run"


def test_client_credentials_with_a_wrong_secret_are_refused(issuer: str) -> None:
    response = token(issuer, auth=("backend", "guess"), grant_type="client_credentials", resource=RESOURCE)
    assert response.status_code == 401 and response.json()["error"] == "invalid_client"


def test_a_public_client_cannot_use_client_credentials(issuer: str) -> None:
    response = token(issuer, grant_type="client_credentials", client_id="public-cli", resource=RESOURCE)
    assert response.status_code in (400, 401) and response.json()["error"] == "invalid_client"


def client_assertion_form(issuer: str, client_id: str, key: ECKey) -> dict[str, str]:
    """A client credentials request authenticated by ``private_key_jwt`` (RFC 7523)."""
    now = int(time.time())
    claims = {"iss": client_id, "sub": client_id, "aud": f"{issuer}/token", "iat": now, "exp": now + 60}
    return {
        "grant_type": "client_credentials",
        "resource": RESOURCE,
        "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        "client_assertion": jwt.encode({"alg": "ES256", "kid": key.kid}, claims | {"jti": uuid.uuid4().hex}, key),
    }


def test_private_key_jwt_client_credentials_and_an_assertion_is_used_once(issuer: str) -> None:
    key = ECKey.generate_key("P-256", {"alg": "ES256"}, private=True, auto_kid=True)
    client = register(
        issuer,
        client_name="a workload",
        grant_types=["client_credentials"],
        token_endpoint_auth_method="private_key_jwt",
        jwks={"keys": [key.as_dict(private=False)]},
    )
    form = client_assertion_form(issuer, client["client_id"], key)
    first = token(issuer, form)
    assert first.status_code == 200, first.text
    assert verified_claims(issuer, first.json()["access_token"])["sub"] == client["client_id"]
    replay = token(issuer, form)
    assert replay.status_code in (400, 401) and replay.json()["error"] == "invalid_client"


# What the authorization server refuses.


def test_a_wrong_code_verifier_is_invalid_grant(issuer: str) -> None:
    _, challenge = pkce()
    code = redirected(authorize(issuer, "public-cli", challenge))["code"]
    response = exchange_code(issuer, code, pkce()[0])
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"


def test_a_code_is_used_once(issuer: str) -> None:
    verifier, challenge = pkce()
    code = redirected(authorize(issuer, "public-cli", challenge))["code"]
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "client_id": "public-cli",
        "code_verifier": verifier,
        "resource": RESOURCE,
    }
    assert token(issuer, form).status_code == 200
    again = token(issuer, form)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"


def test_a_reused_code_also_revokes_the_refresh_token_it_gave(issuer: str) -> None:
    verifier, challenge = pkce()
    code = redirected(authorize(issuer, "public-cli", challenge))["code"]
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "client_id": "public-cli",
        "code_verifier": verifier,
        "resource": RESOURCE,
    }
    first = token(issuer, form).json()
    assert token(issuer, form).json()["error"] == "invalid_grant"
    refreshed = token(issuer, grant_type="refresh_token", refresh_token=first["refresh_token"], client_id="public-cli")
    assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant"


def test_a_rotated_out_refresh_token_used_again_revokes_its_successor(issuer: str) -> None:
    first = code_flow(issuer)
    form = {"grant_type": "refresh_token", "client_id": "public-cli"}
    second = token(issuer, form, refresh_token=first["refresh_token"]).json()
    assert token(issuer, form, refresh_token=first["refresh_token"]).json()["error"] == "invalid_grant"
    after = token(issuer, form, refresh_token=second["refresh_token"])
    assert after.status_code == 400 and after.json()["error"] == "invalid_grant"


def test_an_unregistered_redirect_uri_is_shown_an_error_never_redirected_to(issuer: str) -> None:
    client = register(issuer, redirect_uris=[REDIRECT], token_endpoint_auth_method="none")
    _, challenge = pkce()
    for other in ("http://127.0.0.1:5999/callback/", "https://attacker.example/callback"):
        response = authorize(issuer, client["client_id"], challenge, redirect_uri=other)
        assert response.status_code == 400
        assert "location" not in response.headers
        assert "invalid_request" in response.text


def test_an_unknown_client_is_shown_an_error_never_redirected(issuer: str) -> None:
    response = authorize(issuer, "nobody", pkce()[1])
    assert response.status_code in (400, 401) and "location" not in response.headers
    assert "invalid_client" in response.text


def test_a_token_request_with_another_redirect_uri_is_invalid_grant(issuer: str) -> None:
    verifier, challenge = pkce()
    code = redirected(authorize(issuer, "public-cli", challenge))["code"]
    response = exchange_code(issuer, code, verifier, "public-cli", redirect_uri="http://127.0.0.1:5998/callback")
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"


def test_a_missing_resource_is_invalid_target_sent_back_with_state_and_iss(issuer: str) -> None:
    answer = redirected(authorize(issuer, "public-cli", pkce()[1], resource=None))
    assert answer["error"] == "invalid_target"
    assert answer["state"] == "state-123" and answer["iss"] == issuer
    assert "code" not in answer


def test_a_token_request_for_another_resource_than_the_code_is_invalid_target(issuer: str) -> None:
    verifier, challenge = pkce()
    code = redirected(authorize(issuer, "public-cli", challenge))["code"]
    response = exchange_code(issuer, code, verifier, "public-cli", resource="http://127.0.0.1:8001/other")
    assert response.status_code == 400 and response.json()["error"] == "invalid_target"


@pytest.mark.parametrize(
    "pkce_params",
    [
        {"code_challenge": None, "code_challenge_method": None},
        {"code_challenge_method": "plain"},
        {"code_challenge_method": None},
    ],
    ids=["no-pkce", "plain", "no-method"],
)
def test_pkce_with_s256_is_required(issuer: str, pkce_params: dict[str, str | None]) -> None:
    answer = redirected(authorize(issuer, "public-cli", pkce()[1], **pkce_params))
    assert answer["error"] == "invalid_request" and answer["iss"] == issuer
    assert "code" not in answer


def test_registration_refuses_a_redirect_uri_that_is_neither_https_nor_loopback(issuer: str) -> None:
    response = httpx.post(
        f"{issuer}/register", json={"redirect_uris": ["http://app.example/cb"], "token_endpoint_auth_method": "none"}
    )
    # RFC 7591 section 3.2.2 names the error for a redirect URI.
    assert response.status_code == 400 and response.json()["error"] == "invalid_redirect_uri"


def test_scopes_and_resources_outside_the_configured_ones_are_refused() -> None:
    with auth_server(
        "--auto-approve", "--client", "public-cli", "--scope", "notes:read", "--resource", RESOURCE
    ) as issuer:
        assert httpx.get(f"{issuer}/.well-known/oauth-authorization-server").json()["scopes_supported"] == [
            "notes:read"
        ]
        assert verified_claims(issuer, code_flow(issuer, scope="notes:read")["access_token"])["aud"] == RESOURCE
        too_wide = redirected(authorize(issuer, "public-cli", pkce()[1], scope="notes:read admin"))
        assert too_wide["error"] == "invalid_scope" and too_wide["iss"] == issuer
        elsewhere = redirected(authorize(issuer, "public-cli", pkce()[1], resource="http://127.0.0.1:8001/mcp"))
        assert elsewhere["error"] == "invalid_target" and elsewhere["iss"] == issuer


def test_token_requests_must_be_forms_of_bounded_size(issuer: str) -> None:
    as_json = httpx.post(f"{issuer}/token", json={"grant_type": "client_credentials"})
    assert as_json.status_code == 400 and as_json.json()["error"] == "invalid_request"
    huge = httpx.post(f"{issuer}/token", data={"grant_type": "client_credentials", "pad": "x" * 70_000})
    assert huge.status_code == 413


def test_registration_takes_a_json_object(issuer: str) -> None:
    for body in (b"[1, 2]", b"not json"):
        response = httpx.post(f"{issuer}/register", content=body, headers={"content-type": "application/json"})
        assert response.status_code == 400 and response.json()["error"] == "invalid_client_metadata"


# The consent page.


def test_consent_page_cannot_be_framed_and_approving_it_redirects_with_a_code(consent_issuer: str) -> None:
    with httpx.Client() as browser:
        verifier, challenge = pkce()
        page = browser.get(
            f"{consent_issuer}/authorize",
            params={
                "response_type": "code",
                "client_id": "public-cli",
                "redirect_uri": REDIRECT,
                "state": "s1",
                "resource": RESOURCE,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "scope": "notes:read",
            },
        )
        assert page.status_code == 200
        assert page.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert "public-cli" in page.text and RESOURCE in page.text and "notes:read" in page.text
        ticket = page.text.split('name="ticket" value="')[1].split('"')[0]
        approved = browser.post(f"{consent_issuer}/authorize", data={"ticket": ticket, "decision": "approve"})
        answer = redirected(approved)
        assert answer["state"] == "s1" and answer["iss"] == consent_issuer and answer["code"]
        replayed = browser.post(f"{consent_issuer}/authorize", data={"ticket": ticket, "decision": "approve"})
        assert replayed.status_code == 403


def test_auto_approve_still_asks_the_user_when_the_answer_leaves_this_machine(issuer: str) -> None:
    remote = "https://app.example/callback"
    client = register(issuer, redirect_uris=[remote], token_endpoint_auth_method="none")
    page = authorize(issuer, client["client_id"], pkce()[1], redirect_uri=remote)
    assert page.status_code == 200 and "location" not in page.headers
    assert 'name="decision" value="approve"' in page.text and remote in page.text


def test_a_request_naming_another_host_is_refused(issuer: str) -> None:
    # DNS rebinding: a page whose name now points here arrives with its own Host.
    response = httpx.get(f"{issuer}/.well-known/oauth-authorization-server", headers={"host": "attacker.example"})
    assert response.status_code == 400


def test_consent_posted_without_the_browser_cookie_or_from_another_origin_is_refused(consent_issuer: str) -> None:
    def open_page(browser: httpx.Client) -> str:
        page = browser.get(
            f"{consent_issuer}/authorize",
            params={
                "response_type": "code",
                "client_id": "public-cli",
                "redirect_uri": REDIRECT,
                "resource": RESOURCE,
                "code_challenge": pkce()[1],
                "code_challenge_method": "S256",
            },
        )
        return page.text.split('name="ticket" value="')[1].split('"')[0]

    with httpx.Client() as browser:
        ticket = open_page(browser)
    forged = httpx.post(f"{consent_issuer}/authorize", data={"ticket": ticket, "decision": "approve"})
    assert forged.status_code == 403 and "location" not in forged.headers
    with httpx.Client() as browser:
        ticket = open_page(browser)
        cross = browser.post(
            f"{consent_issuer}/authorize",
            data={"ticket": ticket, "decision": "approve"},
            headers={"origin": "http://attacker.example"},
        )
        assert cross.status_code == 403


def test_denying_consent_redirects_access_denied_with_iss(consent_issuer: str) -> None:
    with httpx.Client() as browser:
        page = browser.get(
            f"{consent_issuer}/authorize",
            params={
                "response_type": "code",
                "client_id": "public-cli",
                "redirect_uri": REDIRECT,
                "state": "s2",
                "resource": RESOURCE,
                "code_challenge": pkce()[1],
                "code_challenge_method": "S256",
            },
        )
        ticket = page.text.split('name="ticket" value="')[1].split('"')[0]
        answer = redirected(browser.post(f"{consent_issuer}/authorize", data={"ticket": ticket, "decision": "deny"}))
        assert answer["error"] == "access_denied" and "code" not in answer
        assert answer["state"] == "s2" and answer["iss"] == consent_issuer


# Client ID Metadata Documents.


@contextlib.contextmanager
def serving(answer: Any) -> Iterator[tuple[str, list[str]]]:
    """A loopback web server: ``answer(origin, path)`` gives (status, content type,
    body bytes) or None to hold the request without answering. Yields its origin and
    the paths requested."""
    requested: list[str] = []
    release = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            requested.append(self.path)
            reply = answer(origin, self.path)
            if reply is None:
                release.wait(DEADLINE)
                return
            status, media_type, body = reply
            self.send_response(status)
            self.send_header("content-type", media_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield origin, requested
    finally:
        release.set()
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def serving_documents(documents: dict[str, dict[str, Any]]) -> Iterator[str]:
    """A loopback web server answering GET path with the JSON document for it (404 if none)."""

    def answer(origin: str, path: str) -> tuple[int, str, bytes]:
        return 200 if path in documents else 404, "application/json", json.dumps(documents.get(path, {})).encode()

    with serving(answer) as (origin, _):
        yield origin


def test_a_client_id_metadata_document_client_completes_the_flow(issuer: str) -> None:
    documents: dict[str, dict[str, Any]] = {}
    with serving_documents(documents) as origin:
        client_id = f"{origin}/client.json"
        documents["/client.json"] = {
            "client_id": client_id,
            "client_name": "a CIMD client",
            "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "none",
        }
        body = code_flow(issuer, client_id=client_id)
        assert verified_claims(issuer, body["access_token"])["client_id"] == client_id


def test_a_metadata_document_client_authenticates_with_its_key_and_no_client_id_in_the_form(issuer: str) -> None:
    key = ECKey.generate_key("P-256", {"alg": "ES256"}, private=True, auto_kid=True)
    documents: dict[str, dict[str, Any]] = {}
    with serving_documents(documents) as origin:
        client_id = f"{origin}/workload.json"
        documents["/workload.json"] = {
            "client_id": client_id,
            "client_name": "a workload",
            "redirect_uris": [REDIRECT],
            "grant_types": ["client_credentials"],
            "token_endpoint_auth_method": "private_key_jwt",
            "jwks": {"keys": [key.as_dict(private=False)]},
        }
        response = token(issuer, client_assertion_form(issuer, client_id, key))
        assert response.status_code == 200, response.text
        assert verified_claims(issuer, response.json()["access_token"])["sub"] == client_id
        stranger = ECKey.generate_key("P-256", {"alg": "ES256"}, private=True, auto_kid=True)
        forged = token(issuer, client_assertion_form(issuer, client_id, stranger))
        assert forged.status_code in (400, 401) and forged.json()["error"] == "invalid_client"


def test_a_metadata_document_naming_another_client_id_is_refused(issuer: str) -> None:
    documents: dict[str, dict[str, Any]] = {}
    with serving_documents(documents) as origin:
        documents["/impostor.json"] = {
            "client_id": "https://trusted.example/client.json",
            "redirect_uris": [REDIRECT],
        }
        response = authorize(issuer, f"{origin}/impostor.json", pkce()[1])
        assert response.status_code == 400 and "location" not in response.headers
        assert "invalid_client" in response.text


def test_a_metadata_document_on_a_private_address_is_not_fetched(issuer: str) -> None:
    # The SSRF guard refuses the address before anything connects to it.
    response = authorize(issuer, "https://10.0.0.7/client.json", pkce()[1])
    assert response.status_code == 400 and "location" not in response.headers
    assert "invalid_client" in response.text and "could not be used" in response.text


# The signing key, kept in a file.


def test_a_key_file_is_created_0600_and_tokens_verify_after_a_restart(tmp_path: Path) -> None:
    key_file = tmp_path / "signing-key.json"
    port = free_port()
    with auth_server("--auto-approve", "--client", "backend:s", "--key-file", str(key_file), port=port) as issuer:
        before = token(issuer, auth=("backend", "s"), grant_type="client_credentials", resource=RESOURCE).json()
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    with auth_server("--key-file", str(key_file), port=port) as issuer:
        assert verified_claims(issuer, before["access_token"])["sub"] == "backend"


def test_a_key_file_others_can_read_is_refused_with_what_to_do(tmp_path: Path) -> None:
    key_file = tmp_path / "signing-key.json"
    key_file.write_text(json.dumps(ECKey.generate_key("P-256", private=True).as_dict(private=True)))
    key_file.chmod(0o644)
    result = subprocess.run(
        [sys.executable, "-m", "modelctx", "auth-server", "--key-file", str(key_file)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert result.returncode == 2
    assert "chmod 600" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_key_file_that_is_not_a_regular_file_is_refused_saying_so(tmp_path: Path, kind: str) -> None:
    # The file is opened once and checked through that descriptor; a FIFO must not hang the start.
    key_file = tmp_path / "signing-key.json"
    key_file.mkdir() if kind == "directory" else os.mkfifo(key_file, 0o600)
    result = subprocess.run(
        [sys.executable, "-m", "modelctx", "auth-server", "--key-file", str(key_file)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert result.returncode == 2, result.stderr
    assert str(key_file) in result.stderr and "Traceback" not in result.stderr


def test_importing_modelctx_auth_loads_neither_authlib_nor_starlette() -> None:
    code = "import sys, modelctx.auth; print(sorted(m for m in sys.modules if m.split('.')[0] in ('authlib', 'starlette')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE)
    assert result.stdout.strip() == "[]", result.stderr


def test_the_command_prints_its_issuer_then_a_ready_line() -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "modelctx", "auth-server", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        issuer = f"http://127.0.0.1:{port}"
        assert process.stderr.readline().strip() == (
            f"modelctx: development authorization server, issuer {issuer} (not for production)"
        )
        assert process.stderr.readline().strip() == f"modelctx: authorization server ready at {issuer}"
        assert httpx.get(f"{issuer}/.well-known/oauth-authorization-server").json()["issuer"] == issuer
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=DEADLINE)
    assert out == ""


def test_an_issuer_that_is_plain_http_off_loopback_is_a_usage_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "modelctx", "auth-server", "--issuer", "http://auth.example.com"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "https" in result.stderr
