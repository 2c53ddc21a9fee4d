"""``modelctx serve --http --auth-*``: the served app is an OAuth 2.1 protected resource.

Real processes on loopback: ``modelctx auth-server`` issues the tokens, ``modelctx serve``
checks them (JWT against the issuer's JWKS, or RFC 7662 introspection at a small endpoint
this file runs), and every option combination that cannot work is one line and status 2.
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import os
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.cli.test_cli import assert_one_line_error, run
from tests.support.auth_processes import client_credentials_token, dev_auth_server, mcp_post, protected_notes
from tests.support.wire import DEADLINE, SAMPLE_SERVER, request

BACKEND = ("backend", "backend-secret")


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    with dev_auth_server("--client", ":".join(BACKEND)) as url:
        yield url


def whoami() -> dict[str, Any]:
    return request(1, "tools/call", {"name": "whoami", "arguments": {}})


def test_serve_with_an_issuer_serves_metadata_challenges_and_accepts_its_tokens(issuer: str) -> None:
    options = ("--auth-issuer", issuer, "--auth-scopes", "notes:read,notes:write", "--auth-required-scopes", "notes:read")
    with protected_notes(*options) as url:
        document = httpx.get(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"), timeout=DEADLINE)
        anonymous = mcp_post(url, whoami())
        good = mcp_post(url, whoami(), client_credentials_token(issuer, url, "notes:read", BACKEND))
        too_few = mcp_post(url, whoami(), client_credentials_token(issuer, url, "notes:write", BACKEND))

    # The resource defaults to the served URL (RFC 9728 3, RFC 8707).
    assert document.json() == {
        "resource": url,
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["notes:read", "notes:write"],
    }
    metadata_url = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_url}", scope="notes:read"'
    assert good.status_code == 200, good.text
    assert good.json()["result"]["content"][0]["text"] == "backend notes:read"
    assert too_few.status_code == 403
    assert 'error="insufficient_scope"' in too_few.headers["www-authenticate"]


def test_auth_resource_names_the_audience_tokens_must_carry(issuer: str) -> None:
    public_url = "https://notes.example.com/mcp"
    with protected_notes("--auth-issuer", issuer, "--auth-resource", public_url) as url:
        document = httpx.get(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"), timeout=DEADLINE)
        for_the_public_url = mcp_post(url, whoami(), client_credentials_token(issuer, public_url, "", BACKEND))
        for_the_local_url = mcp_post(url, whoami(), client_credentials_token(issuer, url, "", BACKEND))
    assert document.json()["resource"] == public_url
    assert for_the_public_url.status_code == 200, for_the_public_url.text
    assert for_the_local_url.status_code == 401
    assert "(aud)" in for_the_local_url.headers["www-authenticate"]


def test_auth_dpop_required_advertises_dpop_and_refuses_bearer_tokens(issuer: str) -> None:
    with protected_notes("--auth-issuer", issuer, "--auth-dpop", "required") as url:
        document = httpx.get(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"), timeout=DEADLINE)
        anonymous = mcp_post(url, whoami())
        bearer = mcp_post(url, whoami(), client_credentials_token(issuer, url, "", BACKEND))

    assert document.json()["dpop_bound_access_tokens_required"] is True
    assert "ES256" in document.json()["dpop_signing_alg_values_supported"]
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith("DPoP ")
    assert bearer.status_code == 401 and "DPoP" in bearer.headers["www-authenticate"]


def test_auth_strict_jwt_serves_rfc_9068_access_tokens(issuer: str) -> None:
    # The development server's tokens are typed at+jwt (RFC 9068 2.1); others: tests/auth/test_resource.py.
    with protected_notes("--auth-issuer", issuer, "--auth-strict-jwt") as url:
        good = mcp_post(url, whoami(), client_credentials_token(issuer, url, "", BACKEND))
    assert good.status_code == 200, good.text


@contextlib.contextmanager
def introspection_endpoint(answers: dict[str, dict[str, Any]], client: tuple[str, str]) -> Iterator[str]:
    """An RFC 7662 endpoint on loopback: ``answers`` by token; the caller must
    authenticate as ``client`` (HTTP Basic) or gets 401."""
    expected = "Basic " + base64.b64encode(":".join(client).encode()).decode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers["content-length"])).decode()
            form = dict(pair.split("=", 1) for pair in body.split("&"))
            if self.headers.get("authorization") != expected:
                status, answer = 401, {"error": "invalid_client"}
            else:
                status, answer = 200, answers.get(form.get("token", ""), {"active": False})
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/introspect"
    finally:
        server.shutdown()
        server.server_close()


def test_auth_introspect_checks_tokens_with_the_credentials_from_the_environment() -> None:
    issuer = "https://auth.example.com"
    answers: dict[str, dict[str, Any]] = {}
    credentials = ("notes-resource", "introspection-secret")
    with introspection_endpoint(answers, credentials) as endpoint:
        env = {**os.environ, "MODELCTX_INTROSPECTION_CLIENT_ID": credentials[0],
               "MODELCTX_INTROSPECTION_CLIENT_SECRET": credentials[1]}
        with protected_notes("--auth-issuer", issuer, "--auth-introspect", endpoint, env=env) as url:
            answers["opaque-good"] = {"active": True, "sub": "ada", "aud": url, "iss": issuer, "scope": "notes:read"}
            answers["opaque-other-issuer"] = {"active": True, "sub": "eve", "aud": url, "iss": "https://evil.example"}
            good = mcp_post(url, whoami(), "opaque-good")
            inactive = mcp_post(url, whoami(), "opaque-revoked")
            other_issuer = mcp_post(url, whoami(), "opaque-other-issuer")
    assert good.status_code == 200, good.text
    assert good.json()["result"]["content"][0]["text"] == "ada notes:read"
    assert inactive.status_code == 401 and "not active" in inactive.headers["www-authenticate"]
    assert other_issuer.status_code == 401 and "another authorization server" in other_issuer.headers["www-authenticate"]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--http", "--auth-scopes", "a"], "--auth-scopes needs --auth-issuer URL"),
        (["--auth-issuer", "https://as.example"], "add --http"),
        (["--http", "--auth-issuer", "as.example"], "--auth-issuer 'as.example' is not an absolute http(s) URL"),
        (["--http", "--auth-issuer", "https://a.example", "--auth-issuer", "https://a.example"], "the same issuer twice"),
        (
            ["--http", "--auth-issuer", "https://a.example", "--auth-issuer", "https://b.example",
             "--auth-jwks-uri", "https://a.example/jwks"],
            "--auth-jwks-uri names one issuer's keys",
        ),
        (
            ["--http", "--auth-issuer", "https://a.example", "--auth-jwks-uri", "https://a.example/jwks",
             "--auth-introspect", "https://a.example/introspect"],
            "give one of them",
        ),
        (
            ["--http", "--auth-issuer", "https://a.example", "--auth-introspect", "https://a.example/introspect"],
            "set MODELCTX_INTROSPECTION_CLIENT_ID and MODELCTX_INTROSPECTION_CLIENT_SECRET",
        ),
        (
            ["--http", "--auth-issuer", "https://a.example", "--auth-scopes", "read", "--auth-required-scopes", "write"],
            "--auth-required-scopes names write, which --auth-scopes does not advertise",
        ),
        (["--http", "--host", "0.0.0.0", "--auth-issuer", "https://a.example"], "give --auth-resource"),
        (
            ["--http", "--auth-issuer", "https://a.example", "--auth-resource", "https://notes.example/mcp#x"],
            "must not have a fragment",
        ),
        (["--http", "--auth-issuer", "https://a.example", "--auth-scopes", ","], "not a comma-separated list"),
        (["--http", "--auth-dpop", "required"], "--auth-dpop needs --auth-issuer URL"),
        (["--http", "--auth-strict-jwt"], "--auth-strict-jwt needs --auth-issuer URL"),
        (
            ["--http", "--auth-issuer", "https://a.example", "--auth-strict-jwt",
             "--auth-introspect", "https://a.example/introspect"],
            "--auth-strict-jwt checks JWT access tokens",
        ),
    ],
)
def test_auth_options_that_cannot_work_are_one_line_usage_errors(options: list[str], says: str) -> None:
    assert_one_line_error(run("serve", str(SAMPLE_SERVER), *options), says)


def test_serve_help_names_the_introspection_variables() -> None:
    result = run("serve", "--help")
    assert "MODELCTX_INTROSPECTION_CLIENT_ID" in result.stdout
    assert "MODELCTX_INTROSPECTION_CLIENT_SECRET" in result.stdout
