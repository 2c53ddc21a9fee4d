"""The OAuth proxy (issue 24) with its state in Redis: every step of a sign-in may reach
another process, and what is single use stays single use across them.

Real processes on loopback: the upstream is ``modelctx auth-server --no-registration``
(auto-approving, the proxy's client ``proxy:proxy-secret``), the MCP server is
``tests/fixtures/servers/proxied_shared_server.py`` (an ``OAuthProxy`` in front of it, the
server's Redis from ``MODELCTX_REDIS_URL``, as ``--redis``), Redis is a real
``redis-server`` (tests/support/redis_server.py). Two shapes: one server with ``--workers 2``,
each request on a new connection (so the kernel spreads them over the workers); and
two replicas on two ports naming the same public URL, each step sent to the other
replica than the step before, so every hop crosses processes for certain.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.auth.test_proxy import PROXY_CLIENT, REDIRECT, claims, pkce
from tests.support.auth_processes import dev_auth_server, running
from tests.support.paths import SERVERS
from tests.support.wire import DEADLINE, free_port, modern_meta

SERVER = SERVERS / "proxied_shared_server.py"


class Site:
    """The proxy as the world sees it (``public``) and the ports that serve it."""

    def __init__(self, public: int, ports: list[int]) -> None:
        self.public = public
        self.ports = ports
        self.proxy = f"http://127.0.0.1:{public}"
        self.url = f"{self.proxy}/mcp"
        self._next = itertools.cycle(ports)

    def at(self, url: str) -> str:
        """``url`` sent to the next serving port in turn (a load balancer's choice, made certain)."""
        parts = urllib.parse.urlsplit(url)
        if parts.netloc != f"127.0.0.1:{self.public}":
            return url
        return urllib.parse.urlunsplit(parts._replace(netloc=f"127.0.0.1:{next(self._next)}"))


def _start(upstream: str, public: int, port: int, workers: int, redis_url: str) -> Any:
    env = {**os.environ, "MODELCTX_REDIS_URL": redis_url}
    command = [sys.executable, "-P", str(SERVER), upstream, str(public), str(port), str(workers)]
    return running(command, f"proxied replica ready on {port}", env=env)


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    options = ("--auto-approve", "--no-registration", "--client", ":".join(PROXY_CLIENT), "--token-ttl", "20")
    with dev_auth_server(*options) as issuer:
        yield issuer


@pytest.fixture
def workers(upstream: str, redis_url: str) -> Iterator[Site]:
    port = free_port()
    with _start(upstream, port, port, 2, redis_url):
        yield Site(port, [port])


@pytest.fixture
def replicas(upstream: str, redis_url: str) -> Iterator[Site]:
    public, other = free_port(), free_port()
    with _start(upstream, public, public, 1, redis_url), _start(upstream, public, other, 1, redis_url):
        yield Site(public, [public, other])


def _new_connection(method: str, url: str, jar: httpx.Cookies, **kwargs: Any) -> httpx.Response:
    """One request on a connection of its own (never kept alive), cookies carried over."""
    with httpx.Client(timeout=DEADLINE, cookies=jar, limits=httpx.Limits(max_keepalive_connections=0)) as web:
        response = web.request(method, url, **kwargs)
        jar.update(web.cookies)
    return response


def _sign_in(site: Site) -> tuple[str, str, str]:
    """Register, consent, sign in upstream, exchange the code: (client_id, code, token
    response's access token), every proxy step at the next port."""
    jar = httpx.Cookies()
    registered = _new_connection("POST", site.at(f"{site.proxy}/register"), jar, json={
        "client_name": "shared", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"]})  # fmt: skip
    assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    verifier, challenge = pkce()
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "state": "s1",
             "code_challenge": challenge, "code_challenge_method": "S256", "resource": site.url, "scope": "notes:read"}
    page = _new_connection("GET", site.at(f"{site.proxy}/authorize?" + urllib.parse.urlencode(query)), jar)
    ticket = re.search(r'name="ticket" value="([^"]+)"', page.text)
    assert page.status_code == 200 and ticket, page.text
    response = _new_connection("POST", site.at(f"{site.proxy}/authorize"), jar,
                               data={"ticket": ticket[1], "decision": "approve"}, headers={"origin": site.proxy})
    for _hop in range(10):  # to the upstream, back to the proxy's callback, on to the client
        assert response.status_code in (302, 303), (response.status_code, response.text)
        location = response.headers["location"]
        if location.startswith(REDIRECT):
            break
        response = _new_connection("GET", site.at(location), jar)
    answer = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query))
    assert answer.get("state") == "s1" and "code" in answer, answer
    form = {"grant_type": "authorization_code", "code": answer["code"], "redirect_uri": REDIRECT,
            "client_id": client_id, "code_verifier": verifier, "resource": site.url}  # fmt: skip
    tokens = _new_connection("POST", site.at(f"{site.proxy}/token"), jar, data=form)
    assert tokens.status_code == 200, tokens.text
    return client_id, answer["code"], tokens.json()["access_token"]


def _call(site: Site, token: str, tool: str) -> httpx.Response:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": tool, "arguments": {}, "_meta": modern_meta()}}  # fmt: skip
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
               "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": tool,
               "authorization": f"Bearer {token}"}  # fmt: skip
    return _new_connection("POST", site.at(site.url), httpx.Cookies(), json=message, headers=headers)


def _text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return str(response.json()["result"]["content"][0]["text"])


def _replay(site: Site, client_id: str, code: str) -> httpx.Response:
    verifier, _ = pkce()
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id,
            "code_verifier": verifier, "resource": site.url}  # fmt: skip
    return _new_connection("POST", site.at(f"{site.proxy}/token"), httpx.Cookies(), data=form)


def test_with_redis_several_workers_are_served_and_every_step_of_a_sign_in_may_reach_any(workers: Site) -> None:
    pids = set()
    for _round in range(3):
        client_id, code, token = _sign_in(workers)
        assert (claims(token)["iss"], claims(token)["aud"]) == (workers.proxy, workers.url)
        for _call_round in range(4):
            subject, issuer, pid = _text(_call(workers, token, "whoami")).split()
            assert (subject, issuer) == ("dev-user", workers.proxy)
            pids.add(pid)
            assert _text(_call(workers, token, "upstream_subject")) == "held True"  # in whichever worker
        replayed = _replay(workers, client_id, code)
        assert replayed.status_code == 400 and replayed.json()["error"] == "invalid_grant", replayed.text
        assert _call(workers, token, "whoami").status_code == 401  # the replay revoked the sign-in, everywhere
    assert len(pids) == 2, pids  # 24 new connections: both workers answered


def test_two_replicas_on_one_redis_serve_alternate_steps_and_a_code_spent_in_one_is_spent_in_both(replicas: Site) -> None:
    # register at A, consent page at B, its answer at A, the callback at B, the token at A...
    client_id, code, token = _sign_in(replicas)
    answers = [_text(_call(replicas, token, "whoami")).split()[2] for _ in range(2)]
    assert answers[0] != answers[1]  # each replica accepts the token the other's key signed
    assert _text(_call(replicas, token, "upstream_subject")) == "held True"
    assert _text(_call(replicas, token, "upstream_subject")) == "held True"
    replayed = _replay(replicas, client_id, code)
    assert replayed.status_code == 400 and replayed.json()["error"] == "invalid_grant", replayed.text
    for _ in replicas.ports:
        refused = _call(replicas, token, "whoami")
        assert refused.status_code == 401 and "revoked" in refused.headers["www-authenticate"]


def test_one_code_sent_to_both_replicas_at_once_is_exchanged_once(replicas: Site) -> None:
    # Fresh codes, each raced for by eight requests at once, four at each replica.
    for _round in range(5):
        fresh = _fresh_code(replicas)
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _, code=fresh: _exchange(replicas, *code), range(8)))
        assert sorted(a.status_code for a in answers) == [200] + [400] * 7, [a.text for a in answers]


def _fresh_code(site: Site) -> tuple[str, str, str]:
    """A sign-in stopped before its code is exchanged: (client_id, code, verifier)."""
    jar = httpx.Cookies()
    client_id = _new_connection("POST", site.at(f"{site.proxy}/register"), jar, json={
        "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}).json()["client_id"]  # fmt: skip
    verifier, challenge = pkce()
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "code_challenge": challenge,
             "code_challenge_method": "S256", "resource": site.url}  # fmt: skip
    page = _new_connection("GET", site.at(f"{site.proxy}/authorize?" + urllib.parse.urlencode(query)), jar)
    ticket = re.search(r'name="ticket" value="([^"]+)"', page.text)
    assert ticket, page.text
    response = _new_connection("POST", site.at(f"{site.proxy}/authorize"), jar,
                               data={"ticket": ticket[1], "decision": "approve"}, headers={"origin": site.proxy})
    while not response.headers["location"].startswith(REDIRECT):
        response = _new_connection("GET", site.at(response.headers["location"]), jar)
    code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(response.headers["location"]).query))["code"]
    return client_id, code, verifier


def _exchange(site: Site, client_id: str, code: str, verifier: str) -> httpx.Response:
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id,
            "code_verifier": verifier, "resource": site.url}  # fmt: skip
    return _new_connection("POST", site.at(f"{site.proxy}/token"), httpx.Cookies(), data=form)


def test_redis_silent_is_a_503_at_the_proxy_and_at_the_endpoint_never_an_acceptance(upstream, tmp_path):
    # Frozen (SIGSTOP): connections accepted and never answered; only the 2 s deadline
    # turns that into an answer, and the answer refuses: nothing is checked against
    # nothing, no token is accepted unchecked.
    import shutil
    import signal

    from tests.support.redis_server import RedisServer

    if shutil.which("redis-server") is None and not Path("/usr/bin/redis-server").exists():
        pytest.skip("redis-server is not installed (scripts/test.sh installs it)")
    redis = RedisServer(tmp_path)
    port = free_port()
    try:
        with _start(upstream, port, port, 1, redis.url):
            site = Site(port, [port])
            _, _, token = _sign_in(site)
            assert _text(_call(site, token, "whoami"))
            os.kill(redis.process.pid, signal.SIGSTOP)
            try:
                registered = _new_connection("POST", f"{site.proxy}/register", httpx.Cookies(), json={
                    "client_name": "late", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})  # fmt: skip
                called = _call(site, token, "whoami")
            finally:
                os.kill(redis.process.pid, signal.SIGCONT)
            assert registered.status_code == 503 and registered.headers["retry-after"] == "1", registered.text
            assert called.status_code == 503, called.text
            assert _text(_call(site, token, "whoami"))  # Redis back: served again
    finally:
        redis.stop()
