"""DPoP (RFC 9449) end to end, over real loopback HTTP (issue 9).

The development authorization server (``modelctx auth-server``, a subprocess) binds
tokens to the key of a DPoP proof sent with the token request; a modelctx server behind
``ProtectedResource(dpop=...)`` accepts them only as ``Authorization: DPoP`` with a
proof for that request, that token and that key. Our client (``dpop=True``) does all of
it. Then the attacks: each proof below is built here with joserfc (not with
``DPoPKey``, so a bug shared by the two sides would not hide), and each bad one gets a
401 with a DPoP challenge while no tool runs.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from joserfc import jws, jwt
from joserfc.jwk import ECKey

from modelctx import Client
from modelctx.auth import (
    AuthorizationResponse,
    ClientCredentialsProvider,
    ClientMetadata,
    DPoPKey,
    InvalidDPoPProof,
    JwtVerifier,
    OAuthClientProvider,
    ProtectedResource,
)
from modelctx.errors import AuthorizationError
from modelctx.transports.http_client import HttpClientTransport
from tests.auth.test_dev_server import auth_server
from tests.auth.test_resource import make_server, served
from tests.support.wire import DEADLINE, McpHttp, async_test, free_port, request

run = async_test(60.0)
SECRET = "backend-secret"


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    with auth_server("--auto-approve", "--client", f"backend:{SECRET}") as url:
        yield url


class Protected:
    def __init__(self, url: str, ran: list[str], resource: ProtectedResource) -> None:
        self.url = url
        self.ran = ran
        self.resource = resource
        self.http = McpHttp(self)  # type: ignore[arg-type]

    async def echo(self, headers: dict[str, str], text: str = "hi") -> httpx.Response:
        message = request(1, "tools/call", {"name": "echo", "arguments": {"text": text}})
        async with httpx.AsyncClient(timeout=DEADLINE) as http:
            return await http.post(self.url, json=message, headers={**self.http.headers_for(message), **headers})


@contextlib.asynccontextmanager
async def protected(issuer: str, **dpop: Any) -> AsyncIterator[Protected]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    ran: list[str] = []
    resource = ProtectedResource(
        url, authorization_servers=[issuer], verifier=JwtVerifier(issuer, url), **dpop
    )
    async with served(make_server(ran).http_app(auth=resource), port):
        yield Protected(url, ran, resource)


class HeadlessBrowser:
    """Auto-approve answers the authorization request with a redirect at once: read it."""

    def __init__(self) -> None:
        self.location = ""

    async def open(self, url: str) -> None:
        async with httpx.AsyncClient(follow_redirects=False, timeout=DEADLINE) as http:
            self.location = (await http.get(url)).headers["location"]

    async def callback(self) -> AuthorizationResponse:
        return AuthorizationResponse.from_url(self.location)


def user_provider(key: DPoPKey) -> OAuthClientProvider:
    browser = HeadlessBrowser()
    return OAuthClientProvider(
        ClientMetadata(client_name="dpop test", redirect_uris=(f"http://127.0.0.1:{free_port()}/callback",)),
        redirect_handler=browser.open,
        callback_handler=browser.callback,
        dpop=key,
    )


def claims_of(token: str) -> dict[str, Any]:
    return dict(json.loads(jws.extract_compact(token.encode()).payload))


# -- our client, the dev authorization server, a protected modelctx server ------------------------------------
@run
async def test_the_user_flow_gets_a_token_bound_to_the_clients_key_and_the_server_serves_it(issuer: str):
    key = DPoPKey()
    auth = user_provider(key)
    async with protected(issuer, dpop="required") as server:
        async with Client(server.url, auth=auth, mode="2026-07-28", timeout=DEADLINE) as client:
            result = await client.call_tool("echo", {"text": "bound"})
            await client.call_tool("echo", {"text": "again"})  # a fresh proof each time
        async with httpx.AsyncClient(timeout=DEADLINE) as http:  # the server runs on this loop
            document = (await http.get(server.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"))).json()
    assert "bound" in str(result) and server.ran == ["echo", "echo"]
    stored = await auth.store.latest(server.url)
    assert stored is not None and stored.token_type == "DPoP" and stored.access_token
    assert claims_of(stored.access_token)["cnf"] == {"jkt": key.jkt}
    assert document["dpop_bound_access_tokens_required"] is True
    assert "ES256" in document["dpop_signing_alg_values_supported"]
    assert "ES256" in httpx.get(f"{issuer}/.well-known/oauth-authorization-server").json()[
        "dpop_signing_alg_values_supported"
    ]


@run
async def test_client_credentials_with_dpop_and_a_server_nonce(issuer: str):
    auth = ClientCredentialsProvider("backend", client_secret=SECRET, dpop=True)
    async with protected(issuer, dpop="allowed", dpop_nonce=True) as server:
        async with Client(server.url, auth=auth, mode="2026-07-28", timeout=DEADLINE) as client:
            await client.call_tool("echo", {"text": "service"})
            await client.call_tool("echo", {"text": "again"})
    assert server.ran == ["echo", "echo"]


@run
@pytest.mark.parametrize("flow", ["user", "client credentials"])
async def test_our_client_asks_no_token_for_an_http_sse_url_the_servers_metadata_does_not_name(issuer: str, flow: str):
    # A server's HTTP+SSE paths sit beside its endpoint, and its protected resource
    # metadata names the endpoint (/mcp). A client connecting to /sse is using another
    # resource identifier, and RFC 9728 3.3 forbids it the metadata: on a shared host
    # /a/mcp and /b/sse may be two tenants. So no token is asked for and nothing is sent;
    # the error names both URLs. (A DPoP-bound client of another kind, which asks for the
    # /mcp resource itself, is served on /sse: the test above with its own proofs.)
    auth = user_provider(DPoPKey()) if flow == "user" else ClientCredentialsProvider(
        "backend", client_secret=SECRET, dpop=True
    )
    async with protected(issuer, dpop="required") as server:
        sse = server.url.removesuffix("/mcp") + "/sse"
        with pytest.raises(AuthorizationError) as refused:
            await Client(HttpClientTransport(sse, transport="sse", auth=auth), timeout=DEADLINE).connect()
    assert f"is for '{server.url}', not for {sse}" in str(refused.value)
    assert server.ran == []


@run
async def test_an_allowing_server_challenges_with_both_schemes_and_still_serves_bearer_tokens(issuer: str):
    async with protected(issuer, dpop="allowed") as server:
        refused = await server.echo({})
        token = bearer_token(issuer, server.url)
        served_ok = await server.echo({"authorization": f"Bearer {token}"})
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith("Bearer resource_metadata=") and ', DPoP resource_metadata="' in challenge
    assert 'algs="ES256' in challenge
    assert served_ok.status_code == 200 and server.ran == ["echo"]


# -- proofs that must be refused ----------------------------------------------------------------------------
def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def proof(key: ECKey, htm: str, htu: str, token: str | None = None, **claims: Any) -> str:
    """A DPoP proof made here (RFC 9449 4.2); ``claims`` override or (None) drop claims."""
    public = {k: v for k, v in key.as_dict(private=False).items() if k != "kid"}
    body: dict[str, Any] = {"jti": secrets.token_urlsafe(16), "htm": htm, "htu": htu, "iat": int(time.time())}
    if token is not None:
        body["ath"] = b64(hashlib.sha256(token.encode()).digest())
    body.update(claims)
    body = {k: v for k, v in body.items() if v is not None}
    return jwt.encode({"typ": "dpop+jwt", "alg": "ES256", "jwk": public}, body, key)


def bound_token(issuer: str, key: ECKey, resource: str) -> str:
    """A client credentials token bound to ``key`` (a proof with the token request)."""
    reply = httpx.post(
        f"{issuer}/token",
        data={"grant_type": "client_credentials", "resource": resource},
        auth=("backend", SECRET),
        headers={"dpop": proof(key, "POST", f"{issuer}/token")},
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["token_type"] == "DPoP"
    return str(reply.json()["access_token"])


def bearer_token(issuer: str, resource: str) -> str:
    reply = httpx.post(
        f"{issuer}/token", data={"grant_type": "client_credentials", "resource": resource}, auth=("backend", SECRET)
    )
    assert reply.status_code == 200 and reply.json()["token_type"] == "Bearer", reply.text
    return str(reply.json()["access_token"])


def test_the_token_endpoint_refuses_an_invalid_proof(issuer: str):
    key = ECKey.generate_key("P-256", private=True)
    reply = httpx.post(
        f"{issuer}/token",
        data={"grant_type": "client_credentials", "resource": "http://127.0.0.1:1/mcp"},
        auth=("backend", SECRET),
        headers={"dpop": proof(key, "POST", f"{issuer}/other")},
    )
    assert reply.status_code == 400 and reply.json()["error"] == "invalid_dpop_proof"


@run
async def test_bad_proofs_get_401_and_nothing_is_served(issuer: str):
    key = ECKey.generate_key("P-256", private=True)
    other = ECKey.generate_key("P-256", private=True)
    async with protected(issuer, dpop="allowed") as server:
        token = bound_token(issuer, key, server.url)
        url = server.url

        def dpop(value: str) -> dict[str, str]:
            return {"authorization": f"DPoP {token}", "dpop": value}

        replayed = proof(key, "POST", url, token)
        assert (await server.echo(dpop(replayed))).status_code == 200  # the first time it is fine
        assert server.ran == ["echo"]
        cases = {
            "replayed": dpop(replayed),
            "another URL": dpop(proof(key, "POST", url.replace("/mcp", "/other"), token)),
            "another method": dpop(proof(key, "GET", url, token)),
            "another key than cnf.jkt": dpop(proof(other, "POST", url, token)),
            "a stale iat": dpop(proof(key, "POST", url, token, iat=int(time.time()) - 3600)),
            "no ath": dpop(proof(key, "POST", url, None)),
            "the ath of another token": dpop(proof(key, "POST", url, token + "x")),
            "no proof": {"authorization": f"DPoP {token}"},
            "a bound token as Bearer": {"authorization": f"Bearer {token}", "dpop": proof(key, "POST", url, token)},
        }
        answers = {name: await server.echo(headers) for name, headers in cases.items()}
    for name, answer in answers.items():
        assert answer.status_code == 401, (name, answer.text)
        challenge = answer.headers["www-authenticate"]
        assert "DPoP " in challenge and 'algs="' in challenge, (name, challenge)
        if name != "a bound token as Bearer":
            assert 'DPoP error="invalid_dpop_proof"' in challenge, (name, challenge)
    assert server.ran == ["echo"], "a refused request reached the tool"


@run
async def test_a_server_nonce_is_asked_for_and_then_accepted(issuer: str):
    key = ECKey.generate_key("P-256", private=True)
    async with protected(issuer, dpop="required", dpop_nonce=True) as server:
        token = bound_token(issuer, key, server.url)
        asked = await server.echo({"authorization": f"DPoP {token}", "dpop": proof(key, "POST", server.url, token)})
        nonce = asked.headers.get("dpop-nonce")
        assert nonce, asked.headers
        answered = await server.echo(
            {"authorization": f"DPoP {token}", "dpop": proof(key, "POST", server.url, token, nonce=nonce)}
        )
    assert asked.status_code == 401 and asked.headers["www-authenticate"].startswith('DPoP error="use_dpop_nonce"')
    assert answered.status_code == 200 and server.ran == ["echo"]


@run
async def test_a_required_server_refuses_bearer_tokens(issuer: str):
    async with protected(issuer, dpop="required") as server:
        answer = await server.echo({"authorization": f"Bearer {bearer_token(issuer, server.url)}"})
    assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("DPoP ")
    assert "Bearer" not in answer.headers["www-authenticate"] and server.ran == []


@run
async def test_a_proof_sent_to_an_http_sse_endpoint_is_checked_against_that_url(issuer: str):
    # RFC 9449 4.3: htu is the URL of the request it came with: GET /sse and POST /messages
    # are requests to those URLs, not to the resource (the endpoint, /mcp).
    key = ECKey.generate_key("P-256", private=True)
    async with protected(issuer, dpop="required") as server:
        token = bound_token(issuer, key, server.url)
        base = server.url.removesuffix("/mcp")

        async def check(htm: str, htu: str, path: str | None) -> Any:
            headers = {"authorization": f"DPoP {token}", "dpop": proof(key, htm, htu, token)}
            return await server.resource.authenticate(headers, htm, path)

        stream = await check("GET", base + "/sse", "/sse")
        message = await check("POST", base + "/messages/", "/messages/")
        refusals = {
            "a proof for the endpoint sent to /sse": ("GET", server.url, "/sse"),
            "a proof for /sse sent to the endpoint": ("POST", base + "/sse", None),
            "a proof for /sse sent to /messages": ("POST", base + "/sse", "/messages"),
            "a path that would name another host": ("GET", "http://evil.example/sse", "//evil.example/sse"),
        }
        refused = {}
        for name, (htm, htu, path) in refusals.items():
            with pytest.raises(InvalidDPoPProof) as caught:
                await check(htm, htu, path)
            refused[name] = caught.value.message
    assert stream.client_id == message.client_id == "backend"
    for name, why in refused.items():
        assert why == "The DPoP proof is for another URL (htu)", (name, why)


@run
async def test_a_dpop_bound_token_opens_an_http_sse_stream_and_posts_its_messages(issuer: str):
    key = ECKey.generate_key("P-256", private=True)
    async with protected(issuer, dpop="required") as server:
        token = bound_token(issuer, key, server.url)
        base = server.url.removesuffix("/mcp")
        async with httpx.AsyncClient(timeout=DEADLINE) as http:
            headers = {"authorization": f"DPoP {token}", "dpop": proof(key, "GET", base + "/sse", token)}
            async with http.stream("GET", base + "/sse", headers=headers) as opened:
                assert opened.status_code == 200, await opened.aread()
                lines = opened.aiter_lines()
                assert await anext(lines) == "event: endpoint"
                endpoint = (await anext(lines)).removeprefix("data: ")
                initialize = {
                    "jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
                }  # fmt: skip
                posted = await http.post(
                    base + endpoint, json=initialize,
                    headers={"authorization": f"DPoP {token}", "dpop": proof(key, "POST", base + endpoint.split("?")[0], token)},
                )  # fmt: skip
                assert posted.status_code == 202, posted.text


def test_a_public_clients_refresh_token_is_bound_to_its_dpop_key(issuer: str):
    from tests.auth.test_dev_server import REDIRECT, RESOURCE, authorize, pkce, redirected

    key = ECKey.generate_key("P-256", private=True)
    other = ECKey.generate_key("P-256", private=True)
    token_url = f"{issuer}/token"
    client_id = httpx.post(
        f"{issuer}/register",
        json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none",
              "grant_types": ["authorization_code", "refresh_token"]},
    ).json()["client_id"]
    verifier, challenge = pkce()
    code = redirected(authorize(issuer, client_id, challenge))["code"]
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id,
            "code_verifier": verifier, "resource": RESOURCE}
    granted = httpx.post(token_url, data=form, headers={"dpop": proof(key, "POST", token_url)}).json()
    assert granted["token_type"] == "DPoP" and "refresh_token" in granted, granted
    refresh = {"grant_type": "refresh_token", "refresh_token": granted["refresh_token"], "client_id": client_id}
    without = httpx.post(token_url, data=refresh)
    with_other = httpx.post(token_url, data=refresh, headers={"dpop": proof(other, "POST", token_url)})
    with_key = httpx.post(token_url, data=refresh, headers={"dpop": proof(key, "POST", token_url)})
    assert without.status_code == 400 and without.json()["error"] == "invalid_grant"
    assert with_other.status_code == 400 and with_other.json()["error"] == "invalid_grant"
    assert with_key.status_code == 200 and with_key.json()["token_type"] == "DPoP", with_key.text
    assert claims_of(with_key.json()["access_token"])["cnf"] == {"jkt": key.thumbprint()}


def test_a_dpop_client_refuses_a_bearer_token_from_a_server_that_ignored_its_proof():
    import asyncio

    from modelctx.errors import AuthorizationError
    from tests.auth.test_client import Browser, Peers, call_echo, provider, serving

    peers = Peers()  # its token endpoint answers token_type Bearer whatever the request

    async def main() -> None:
        async with serving(peers) as url:
            await call_echo(url, provider(Browser(), dpop=True))

    with pytest.raises(AuthorizationError, match="not the DPoP-bound one"):
        asyncio.run(asyncio.wait_for(main(), DEADLINE * 2))


# -- several worker processes: a proof is spent for all of them (issue 20) ---------------------------------------------
PID_SERVER = '''
import os
import time

from modelctx import Server

server = Server("dpop-workers")


@server.tool
def pid(hold: float = 0.0) -> str:
    """This worker's pid, after holding its event loop for `hold` seconds."""
    time.sleep(hold)
    return str(os.getpid())
'''


def dpop_post(url: str, token: str, dpop_proof: str, hold: float = 0.0) -> httpx.Response:
    """One modern tools/call of ``pid`` on a new connection, with a DPoP-bound token and a proof."""
    message = request(1, "tools/call", {"name": "pid", "arguments": {"hold": hold}})
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "pid",
        "authorization": f"DPoP {token}",
        "dpop": dpop_proof,
    }
    return httpx.post(url, json=message, headers=headers, timeout=DEADLINE)


def test_with_two_workers_and_redis_each_proof_is_accepted_exactly_once(issuer: str, redis_url: str, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from tests.support.scale_processes import Processes

    app = tmp_path / "pid_server.py"
    app.write_text(PID_SERVER)
    with Processes(tmp_path / "procs") as procs:
        replica = procs.start_replica(
            app, workers=2, env={"MODELCTX_REDIS_URL": None},
            options=("--redis", redis_url, "--auth-issuer", issuer, "--auth-dpop", "required"),
        )
        url = f"http://127.0.0.1:{replica.port}/mcp"
        key = ECKey.generate_key("P-256", private=True)
        token = bound_token(issuer, key, url)
        with ThreadPoolExecutor(6) as pool:
            # Both workers serve: calls that hold one worker's loop reach the other.
            held = list(pool.map(lambda _: dpop_post(url, token, proof(key, "POST", url, token), 0.5), range(6)))
            assert all(answer.status_code == 200 for answer in held), [a.text for a in held]
            pids = {answer.json()["result"]["content"][0]["text"] for answer in held}
            assert len(pids) == 2, pids
            accepted: dict[int, list[int]] = {}
            for number in range(12):
                once = proof(key, "POST", url, token)
                # The same proof six times at once, each on a new connection: both workers get it.
                answers = list(pool.map(dpop_post, [url] * 6, [token] * 6, [once] * 6))
                accepted[number] = [a.status_code for a in answers if a.status_code != 401]
                refused = [a for a in answers if a.status_code == 401]
                assert all('DPoP error="invalid_dpop_proof"' in a.headers["www-authenticate"] for a in refused)
                assert all("used before" in a.headers["www-authenticate"] for a in refused)
    assert all(codes == [200] for codes in accepted.values()), accepted  # replays accepted: 1 per proof


def test_dpop_with_two_workers_and_no_redis_is_refused_before_any_fork(issuer: str, tmp_path):
    import os
    import subprocess
    import sys

    app = tmp_path / "pid_server.py"
    app.write_text(PID_SERVER + '''
if __name__ == "__main__":
    import sys

    from modelctx.auth import JwtVerifier, ProtectedResource

    url = "http://127.0.0.1:" + sys.argv[2] + "/mcp"
    resource = ProtectedResource(
        url, authorization_servers=[sys.argv[1]], verifier=JwtVerifier(sys.argv[1], url), dpop="allowed"
    )
    server.run("http", port=int(sys.argv[2]), workers=2, auth=resource, ready_message="modelctx: serving")
''')
    env = {k: v for k, v in os.environ.items() if k != "MODELCTX_REDIS_URL"}
    port = str(free_port())
    cli = subprocess.run(
        [sys.executable, "-m", "modelctx", "serve", str(app), "--http", "--port", port, "--workers", "2",
         "--auth-issuer", issuer, "--auth-dpop", "allowed"],
        capture_output=True, text=True, timeout=DEADLINE, env=env,
    )
    script = subprocess.run(
        [sys.executable, str(app), issuer, port], capture_output=True, text=True, timeout=DEADLINE, env=env
    )
    for ran in (cli, script):
        assert ran.returncode != 0, ran.stderr
        lines = ran.stderr.strip().splitlines()
        assert len(lines) == 1, ran.stderr
        assert "DPoP" in lines[0] and "2 workers" in lines[0] and "--redis URL" in lines[0], lines[0]
        assert "serving" not in ran.stderr


@run
async def test_when_the_shared_replay_cache_does_not_answer_a_proof_gets_503_and_nothing_is_served(issuer: str):
    import asyncio

    from modelctx.auth import DPoPVerifier, RedisReplays

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # a "Redis" that accepts and never answers

    mute = await asyncio.start_server(silent, "127.0.0.1", 0)
    closed = free_port()  # and one where nothing listens
    key = ECKey.generate_key("P-256", private=True)
    answers = []
    async with mute:
        for port in (mute.sockets[0].getsockname()[1], closed):
            verifier = DPoPVerifier(replays=RedisReplays(f"redis://127.0.0.1:{port}/0", timeout=0.5))
            async with protected(issuer, dpop="required", dpop_verifier=verifier) as server:
                token = bound_token(issuer, key, server.url)
                headers = {"authorization": f"DPoP {token}", "dpop": proof(key, "POST", server.url, token)}
                answers.append(await asyncio.wait_for(server.echo(headers), DEADLINE))
                assert server.ran == []
    for answer in answers:
        assert answer.status_code == 503 and answer.headers["retry-after"] == "1", answer.text
        assert "replay cache is unreachable" in answer.text


NONCE_SERVER = PID_SERVER + """

if __name__ == "__main__":
    import sys

    from modelctx.auth import DPoPNonces, DPoPVerifier, JwtVerifier, ProtectedResource

    port, issuer = sys.argv[2], sys.argv[3]
    url = f"http://127.0.0.1:{port}/mcp"
    nonces = DPoPNonces(lifetime=6.0)  # each worker's nonce has changed by the time the test asks
    resource = ProtectedResource(
        url, authorization_servers=[issuer], verifier=JwtVerifier(issuer, url), dpop="required",
        dpop_verifier=DPoPVerifier(nonces=nonces),
    )
    server.run("http", port=int(port), workers=2, auth=resource, ready_message="modelctx: serving")
"""


def test_with_two_workers_and_redis_a_server_nonce_from_one_worker_is_accepted_by_the_other(
    issuer: str, redis_url: str, tmp_path
):
    from concurrent.futures import ThreadPoolExecutor

    from tests.support.scale_processes import Processes

    app = tmp_path / "nonce_server.py"
    app.write_text(NONCE_SERVER)
    with Processes(tmp_path / "procs") as procs:
        replica = procs.start_script(app, issuer, redis_url=redis_url)
        url = f"http://127.0.0.1:{replica.port}/mcp"
        key = ECKey.generate_key("P-256", private=True)
        token = bound_token(issuer, key, url)
        time.sleep(6.5)  # past the nonces' first turn (before it, every worker holds the nonce it was forked with)
        asked = dpop_post(url, token, proof(key, "POST", url, token))
        nonce = asked.headers["dpop-nonce"]
        with ThreadPoolExecutor(6) as pool:
            # Well within the nonce's life (at least 6 s): calls holding one worker's loop reach the other.
            answers = list(pool.map(lambda _: dpop_post(url, token, proof(key, "POST", url, token, nonce=nonce), 0.5),
                                    range(6)))
    assert asked.status_code == 401 and "use_dpop_nonce" in asked.headers["www-authenticate"]
    assert [answer.status_code for answer in answers] == [200] * 6, [a.headers for a in answers if a.status_code != 200]
    assert len({answer.json()["result"]["content"][0]["text"] for answer in answers}) == 2  # both workers served
