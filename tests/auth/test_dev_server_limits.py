"""The development authorization server under hostile input, over real HTTP: what it
keeps is bounded (field sizes, clients, metadata documents, codes, refresh tokens,
assertion ids), one redirect URI rule holds for registration and metadata documents, a
document that cannot be used is answered with one sentence whatever the reason, and a
malformed request gets a 4xx OAuth error that names the problem, never a 500.

Most tests run ``modelctx auth-server`` in a subprocess; those that count past a cap
run the app on a loopback uvicorn in a thread, with the cap made small.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from joserfc import jwt
from joserfc.jwk import ECKey

from modelctx.auth import DevAuthorizationServer
from modelctx.auth.dev import _cimd, _models
from tests.auth.test_dev_server import (
    REDIRECT,
    RESOURCE,
    auth_server,
    authorize,
    exchange_code,
    pkce,
    redirected,
    register,
    serving,
    token,
)
from tests.support.wire import DEADLINE, free_port

# The limits of modelctx.auth.dev._metadata, as a client reads them in the errors.
MAX_NAME, MAX_URI, MAX_REDIRECT_URIS = 200, 2000, 20
UNUSABLE = (
    "The client metadata document named by client_id could not be used (the authorization server logs the reason)."
)


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    with auth_server("--auto-approve", "--client", "public-cli", "--client", "backend:backend-secret") as url:
        yield url


@contextlib.contextmanager
def app_server(**options: Any) -> Iterator[str]:
    """A ``DevAuthorizationServer`` app on a loopback uvicorn in a thread; its issuer."""
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    dev = DevAuthorizationServer(issuer, **options)
    dev.register_client("public-cli")
    server = uvicorn.Server(uvicorn.Config(dev.app, lifespan="off", log_level="warning", access_log=False))
    sock = socket.create_server(("127.0.0.1", port))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + DEADLINE
    while not server.started:
        assert time.monotonic() < deadline, "the app did not start"
        time.sleep(0.05)
    try:
        yield issuer
    finally:
        server.should_exit = True
        thread.join(DEADLINE)
        sock.close()


def document_for(client_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "client_id": client_id,
        "client_name": "a CIMD client",
        "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "none",
    } | fields


def json_reply(document: Any) -> tuple[int, str, bytes]:
    return 200, "application/json", json.dumps(document).encode()


def metadata_documents(origin: str, path: str) -> tuple[int, str, bytes]:
    """Any path is the metadata document of the client named by its own URL."""
    return json_reply(document_for(origin + path))


def registered(issuer: str, client: httpx.Client | None = None, **metadata: Any) -> httpx.Response:
    body = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"} | metadata
    return (client or httpx).post(f"{issuer}/register", json=body)


def authorized(issuer: str, client_id: str, client: httpx.Client | None = None) -> httpx.Response:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "resource": RESOURCE,
        "code_challenge": pkce()[1],
        "code_challenge_method": "S256",
    }
    return (client or httpx).get(f"{issuer}/authorize", params=query)


# Bounded state: field sizes.


def test_a_60_kb_client_name_is_refused_as_invalid_client_metadata(issuer: str) -> None:
    response = registered(issuer, client_name="x" * 60_000)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_client_metadata" and "client_name" in body["error_description"]
    assert registered(issuer, client_name="x" * MAX_NAME).status_code == 201


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("redirect_uris", [f"http://127.0.0.1:5999/{'a' * MAX_URI}"]),
        ("redirect_uris", [f"http://127.0.0.1:{5000 + n}/cb" for n in range(MAX_REDIRECT_URIS + 1)]),
        ("client_uri", "https://app.example/" + "a" * MAX_URI),
        ("logo_uri", "https://app.example/" + "a" * MAX_URI),
        ("scope", "notes:read " * 200),
        ("contacts", ["dev@app.example"] * 11),
        ("contacts", ["a" * 321]),
        ("software_id", "s" * 201),
        ("software_version", "v" * 201),
        ("grant_types", ["authorization_code"] * 11),
    ],
    ids=[
        "long-redirect-uri",
        "too-many-redirect-uris",
        "long-client-uri",
        "long-logo-uri",
        "long-scope",
        "too-many-contacts",
        "long-contact",
        "long-software-id",
        "long-software-version",
        "too-many-grant-types",
    ],
)
def test_every_metadata_field_has_a_bound(issuer: str, field: str, value: Any) -> None:
    response = registered(issuer, **{field: value})
    assert response.status_code == 400, response.text
    assert response.json()["error"] in ("invalid_client_metadata", "invalid_redirect_uri")


def test_metadata_fields_this_server_does_not_read_are_not_kept(issuer: str) -> None:
    body = registered(issuer, client_name="kept", extension="x" * 40_000).json()
    assert body["client_name"] == "kept" and "extension" not in body


# Bounded state: how many of each record.


def test_past_the_cap_the_least_recently_used_registered_client_is_dropped(issuer: str) -> None:
    # The cap is 1,000 a server: the client used since survives, the oldest unused goes.
    with auth_server("--auto-approve") as fresh, httpx.Client() as client:
        oldest = registered(fresh, client).json()["client_id"]
        used = registered(fresh, client).json()["client_id"]
        for _ in range(_models.MAX_REGISTERED - 2):
            assert registered(fresh, client).status_code == 201
        assert authorized(fresh, used, client).status_code == 302
        newest = registered(fresh, client).json()["client_id"]
        gone = authorized(fresh, oldest, client)
        assert gone.status_code in (400, 401) and "invalid_client" in gone.text
        assert authorized(fresh, used, client).status_code == 302
        assert authorized(fresh, newest, client).status_code == 302


def test_past_the_cap_the_least_recently_used_metadata_document_is_dropped_and_fetched_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_models, "MAX_DOCUMENTS", 3)
    with serving(metadata_documents) as (origin, requested), app_server(auto_approve=True) as issuer:
        first, used, *others = (f"{origin}/client-{n}.json" for n in range(5))
        for client_id in (first, used, others[0]):
            assert authorized(issuer, client_id).status_code == 302
        assert authorized(issuer, used).status_code == 302  # from the cache
        for client_id in others[1:]:
            assert authorized(issuer, client_id).status_code == 302
        assert requested.count("/client-1.json") == 1  # used recently: still held
        assert authorized(issuer, first).status_code == 302
        assert requested.count("/client-0.json") == 2  # dropped, so fetched again


def test_past_the_cap_of_documents_being_fetched_another_is_refused_not_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_cimd, "MAX_FETCHES", 2)

    def answer(origin: str, path: str) -> tuple[int, str, bytes] | None:
        return None if path.startswith("/silent") else metadata_documents(origin, path)

    with serving(answer) as (origin, requested), app_server(auto_approve=True) as issuer:
        def hold(client_id: str) -> None:
            with httpx.Client(timeout=DEADLINE) as client:
                assert authorized(issuer, client_id, client).status_code == 400

        held = [threading.Thread(target=hold, args=(f"{origin}/silent-{n}.json",), daemon=True) for n in range(2)]
        for thread in held:
            thread.start()
        deadline = time.monotonic() + DEADLINE
        while len(requested) < 2:
            assert time.monotonic() < deadline, "the server did not fetch the held documents"
            time.sleep(0.05)
        refused = authorized(issuer, f"{origin}/client.json")
        assert refused.status_code == 400 and UNUSABLE in refused.text
        assert "/client.json" not in requested
        for thread in held:
            thread.join(DEADLINE)  # each fetch gives up after its timeout
        assert authorized(issuer, f"{origin}/client.json").status_code == 302


def test_past_the_cap_the_oldest_unexchanged_code_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_models, "MAX_CODES", 3)
    with app_server(auto_approve=True) as issuer:
        flows = [pkce() for _ in range(4)]
        codes = [redirected(authorize(issuer, "public-cli", challenge))["code"] for _, challenge in flows]

        def exchange(n: int) -> httpx.Response:
            return exchange_code(issuer, codes[n], flows[n][0])

        dropped = exchange(0)
        assert dropped.status_code == 400 and dropped.json()["error"] == "invalid_grant"
        assert exchange(3).status_code == 200


def test_past_the_cap_the_oldest_refresh_token_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_models, "MAX_REFRESH_TOKENS", 3)
    with app_server(auto_approve=True) as issuer:
        refresh_tokens = []
        for _ in range(4):
            verifier, challenge = pkce()
            code = redirected(authorize(issuer, "public-cli", challenge))["code"]
            exchanged = exchange_code(issuer, code, verifier)
            refresh_tokens.append(exchanged.json()["refresh_token"])

        def refresh(n: int) -> httpx.Response:
            return token(issuer, grant_type="refresh_token", refresh_token=refresh_tokens[n], client_id="public-cli")

        assert refresh(0).json()["error"] == "invalid_grant"
        assert refresh(3).status_code == 200


def assertion(issuer: str, client_id: str, key: ECKey, lifetime: float = 60) -> dict[str, str]:
    now = int(time.time())
    claims = {"iss": client_id, "sub": client_id, "aud": f"{issuer}/token", "iat": now, "exp": int(now + lifetime)}
    return {
        "grant_type": "client_credentials",
        "resource": RESOURCE,
        "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        "client_assertion": jwt.encode({"alg": "ES256", "kid": key.kid}, claims | {"jti": uuid.uuid4().hex}, key),
    }


def workload(issuer: str) -> tuple[str, ECKey]:
    key = ECKey.generate_key("P-256", {"alg": "ES256"}, private=True, auto_kid=True)
    client = register(
        issuer,
        grant_types=["client_credentials"],
        token_endpoint_auth_method="private_key_jwt",
        jwks={"keys": [key.as_dict(private=False)]},
    )
    return client["client_id"], key


def test_a_client_assertion_living_more_than_an_hour_is_refused(issuer: str) -> None:
    # Its jti would have to be remembered for as long, to refuse its replay.
    client_id, key = workload(issuer)
    response = token(issuer, assertion(issuer, client_id, key, lifetime=10 * 365 * 86400))
    assert response.status_code in (400, 401) and response.json()["error"] == "invalid_client"
    assert "exp" in response.json()["error_description"]
    assert token(issuer, assertion(issuer, client_id, key)).status_code == 200


def test_past_the_cap_of_live_assertions_a_new_one_is_refused_not_an_old_one_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_models, "MAX_ASSERTIONS", 2)
    with app_server() as issuer:
        client_id, key = workload(issuer)
        first = assertion(issuer, client_id, key)
        assert token(issuer, first).status_code == 200
        assert token(issuer, assertion(issuer, client_id, key)).status_code == 200
        refused = token(issuer, assertion(issuer, client_id, key))
        assert refused.status_code in (400, 401) and "Too many" in refused.json()["error_description"]
        assert token(issuer, first).json()["error"] == "invalid_client"  # still a replay


def test_an_authorization_request_over_8_kb_is_refused_on_a_page(issuer: str) -> None:
    response = authorize(issuer, "public-cli", pkce()[1], state="s" * 9000)
    assert response.status_code == 400 and "location" not in response.headers
    assert "invalid_request" in response.text


# One redirect URI rule for registration and metadata documents.

REFUSED_REDIRECTS = [
    "javascript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "file:///etc/passwd",
    "com.example.app:/callback",
    "ftp://app.example/cb",
    "http://app.example/cb",
    "https://app.example/cb#fragment",
    "https:///no-host",
    "http://127.0.0.1:5999/a b",
]


@pytest.mark.parametrize("redirect_uri", REFUSED_REDIRECTS)
def test_registration_and_metadata_documents_refuse_the_same_redirect_uris(issuer: str, redirect_uri: str) -> None:
    def answer(origin: str, path: str) -> tuple[int, str, bytes]:
        return json_reply(document_for(origin + path, redirect_uris=[redirect_uri]))

    with serving(answer) as (origin, _):
        page = authorize(issuer, f"{origin}/client.json", pkce()[1], redirect_uri=redirect_uri)
        assert page.status_code == 400 and "location" not in page.headers
        assert 'name="decision"' not in page.text  # no consent page to approve
        assert "invalid_client" in page.text and UNUSABLE in page.text
    response = registered(issuer, redirect_uris=[redirect_uri])
    assert response.status_code == 400 and response.json()["error"] == "invalid_redirect_uri"


@pytest.mark.parametrize(
    "redirect_uri",
    ["https://app.example/callback", "http://127.0.0.1:5999/callback", "http://[::1]:5999/cb", "http://localhost/cb"],
)
def test_registration_and_metadata_documents_accept_https_and_loopback_http(issuer: str, redirect_uri: str) -> None:
    assert registered(issuer, redirect_uris=[redirect_uri]).status_code == 201

    def answer(origin: str, path: str) -> tuple[int, str, bytes]:
        return json_reply(document_for(origin + path, redirect_uris=[redirect_uri]))

    with serving(answer) as (origin, _):
        response = authorize(issuer, f"{origin}/client.json", pkce()[1], redirect_uri=redirect_uri)
        assert response.status_code in (200, 302), response.text  # a consent page off loopback


# A document that cannot be used: one answer, whatever the reason.


def test_a_document_that_cannot_be_used_gets_one_answer_whatever_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    # The silent document is given up after the fetch deadline: 1 s here (in process), well
    # inside the test client's own 5 s, which the default of 5 s raced on a loaded machine.
    monkeypatch.setattr(_cimd, "FETCH_TIMEOUT", 1.0)
    closed = f"http://127.0.0.1:{free_port()}/client.json"
    secret = {"service": "internal-admin", "token": "s3cr3t-value", "redirect_uris": ["x"]}

    def answer(origin: str, path: str) -> tuple[int, str, bytes] | None:
        client_id = origin + path
        replies: dict[str, tuple[int, str, bytes] | None] = {
            "/arbitrary.json": json_reply(secret),
            "/other-id.json": json_reply(document_for("https://trusted.example/c.json")),
            "/not-json.html": (200, "text/html", b"<h1>s3cr3t-value</h1>"),
            "/broken.json": (200, "application/json", b'{"token": "s3cr3t-value"'),
            "/too-big.json": json_reply(document_for(client_id, client_name="s3cr3t-value" + "x" * 70_000)),
            "/deep.json": (200, "application/json", b"[" * 5000 + b"]" * 5000),
            "/wrong-fields.json": json_reply(document_for(client_id, redirect_uris="s3cr3t-value")),
            "/no-redirects.json": json_reply(document_for(client_id, redirect_uris=[])),
            "/secret-method.json": json_reply(document_for(client_id, token_endpoint_auth_method="client_secret_post")),
            "/missing.json": (404, "application/json", b'{"token": "s3cr3t-value"}'),
            "/silent.json": None,
        }
        return replies[path]

    with app_server(auto_approve=True) as issuer, serving(answer) as (origin, _):
        paths = [
            "/arbitrary.json", "/other-id.json", "/not-json.html", "/broken.json", "/too-big.json", "/deep.json",
            "/wrong-fields.json", "/no-redirects.json", "/secret-method.json", "/missing.json", "/silent.json",
        ]  # fmt: skip
        client_ids = [closed, *(origin + path for path in paths)]
        pages, errors = set(), set()
        for client_id in client_ids:
            page = authorize(issuer, client_id, pkce()[1])
            assert page.status_code == 400 and "location" not in page.headers, (client_id, page.text)
            pages.add(page.text)
            refused = token(issuer, grant_type="authorization_code", client_id=client_id, code="c", code_verifier="v")
            assert refused.status_code == 400, (client_id, refused.text)
            errors.add(json.dumps(refused.json()))
    assert len(pages) == 1 and UNUSABLE in pages.pop()
    assert errors == {json.dumps({"error": "invalid_client", "error_description": UNUSABLE})}


# Malformed requests: a 4xx OAuth error that names the problem.


@pytest.mark.parametrize(
    ("body", "names"),
    [
        (b"[" * 50_000, "nested too deeply"),
        (b'{"redirect_uris": [1]}', "redirect URI must be a string"),
        (b'{"a":' * 3000 + b"1" + b"}" * 3000, "nested too deeply"),
        (b'{"client_name": "\\ud800", "redirect_uris": ["http://127.0.0.1:5999/cb"]}', "lone surrogate"),
        (b'{"client_name": NaN, "redirect_uris": ["http://127.0.0.1:5999/cb"]}', "NaN"),
        (b'{"client_name": "\xff"}', "UTF-8"),
        (b'{"client_name": 5, "redirect_uris": ["http://127.0.0.1:5999/cb"]}', "'client_name' must be a string"),
        (b'{"response_types": [1], "redirect_uris": ["http://127.0.0.1:5999/cb"]}', "'response_types'"),
        (b'{"client_uri": 1, "redirect_uris": ["http://127.0.0.1:5999/cb"]}', "'client_uri'"),
        (b'{"jwks_uri": 1, "redirect_uris": ["http://127.0.0.1:5999/cb"]}', "'jwks_uri'"),
        (b'{"jwks": "x", "token_endpoint_auth_method": "private_key_jwt"}', "'jwks'"),
        (b'{"token_endpoint_auth_method": ["none"], "redirect_uris": ["http://127.0.0.1:5999/cb"]}', "'token_"),
        (b'{"application_type": ["web"], "redirect_uris": ["http://127.0.0.1:5999/cb"]}', "'application_type'"),
        (b"{}", "JSON object of client metadata"),
    ],
    ids=[
        "open-brackets",
        "redirect-uri-number",
        "deep-object",
        "lone-surrogate",
        "nan",
        "not-utf8",
        "name-number",
        "response-type-number",
        "client-uri-number",
        "jwks-uri-number",
        "jwks-string",
        "auth-method-list",
        "application-type-list",
        "empty",
    ],
)
def test_a_malformed_registration_is_a_400_naming_the_problem(issuer: str, body: bytes, names: str) -> None:
    response = httpx.post(f"{issuer}/register", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["error"] in ("invalid_client_metadata", "invalid_redirect_uri")
    assert names in error["error_description"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@pytest.mark.parametrize(
    ("form", "headers"),
    [
        (
            {"grant_type": "client_credentials", "resource": RESOURCE},
            {"authorization": "Basic " + base64.b64encode(b"\xff:\xfe").decode()},
        ),
        ({"grant_type": "client_credentials", "resource": RESOURCE}, {"authorization": "Basic %%%"}),
        (
            {
                "grant_type": "client_credentials",
                "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                "client_assertion": _b64(b'{"alg":"ES256"}') + "." + _b64(b"[" * 5000) + ".AAAA",
            },
            {},
        ),
        (
            {
                "grant_type": "client_credentials",
                "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                "client_assertion": _b64(b"[" * 5000) + "." + _b64(b"{}") + ".AAAA",
            },
            {},
        ),
    ],
    ids=["basic-not-utf8", "basic-not-base64", "assertion-deep-payload", "assertion-deep-header"],
)
def test_a_malformed_token_request_is_a_4xx_oauth_error(
    issuer: str, form: dict[str, str], headers: dict[str, str]
) -> None:
    response = httpx.post(f"{issuer}/token", data=form, headers=headers)
    assert 400 <= response.status_code < 500, response.text
    body = response.json()
    assert body["error"] == "invalid_client" and body["error_description"]


def test_no_client_with_a_lone_surrogate_in_its_name_reaches_the_consent_page() -> None:
    with auth_server() as issuer:  # no auto-approve: every request gets the consent page
        raw = b'{"client_name": "\\ud800", "redirect_uris": ["http://127.0.0.1:5999/cb"], "token_endpoint_auth_method": "none"}'
        response = httpx.post(f"{issuer}/register", content=raw, headers={"content-type": "application/json"})
        assert response.status_code == 400
        named = registered(issuer, client_name="caf\u00e9 \U0001f600")
        page = authorized(issuer, named.json()["client_id"])
        assert page.status_code == 200 and "caf\u00e9 \U0001f600" in page.text
