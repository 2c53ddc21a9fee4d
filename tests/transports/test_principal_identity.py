"""Who a principal is, for everything keyed by it: one rule (``transports.identity``).

A principal is its issuer, subject and client id, each kept as typed: a token without
``sub`` is not the token whose ``sub`` is ``"None"``, and two tokens without ``sub`` of two
clients are two principals. A token naming neither a subject nor a client is no one but
itself (its digest). Handshake sessions are bound to the principal that opened it
(transports.mdx, Session Management: a session must not be usable by another caller),
the per-principal session quota counts by it, and so does a ``requestState`` (mrtr.mdx:
bound to the principal it was issued to).

Over real HTTP with real JWTs: the issuer of ``test_auth_resource`` (RFC 8414 metadata and
a JWKS on loopback) and a ``JwtVerifier``.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from joserfc import jwt

from modelctx import Context, Server, ServerConfig
from modelctx.auth import JwtVerifier, ProtectedResource
from modelctx.server.middleware import RateLimit
from modelctx.transports.identity import principal_key
from tests.auth.test_resource import KEY, Issuer, served
from tests.support.wire import DEADLINE, async_test, free_port, request

LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
ELICITING = {"elicitation": {"form": {}}}
run = async_test(60.0)


def identity_server(*middleware: Any, **config: Any) -> Server:
    server = Server("identity", config=ServerConfig(middleware=list(middleware), **config))

    @server.tool
    def echo(text: str) -> str:
        return text

    @server.tool
    async def confirm(ctx: Context) -> str:
        answer = await ctx.elicit("Go on?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return str(answer.action)

    return server


class Setup:
    """A protected server (or replicas of one) on loopback, and what a test sends it."""

    def __init__(self, issuer: Issuer, urls: list[str]) -> None:
        self.issuer = issuer
        self.urls = urls
        self.url = urls[0]  # the resource, every replica's audience

    def token(self, **claims: Any) -> str:
        """A valid access token (no ``sub``, no ``client_id`` unless given); a new ``jti`` each time."""
        now = int(time.time())
        payload = {"iss": self.issuer.url, "aud": self.url, "scope": "mcp:tools", "iat": now,
                   "exp": now + 300, "jti": uuid.uuid4().hex, **claims}  # fmt: skip
        return jwt.encode({"alg": "RS256", "kid": KEY.kid}, payload, KEY)

    async def post(
        self, token: str, message: dict[str, Any], session: str | None = None, on: int = 0
    ) -> httpx.Response:
        headers = {"accept": ACCEPT, "content-type": "application/json", "authorization": f"Bearer {token}"}
        if session is not None:
            headers |= {"mcp-session-id": session, "mcp-protocol-version": LEGACY}
        elif "_meta" in message.get("params", {}):
            headers |= {"mcp-protocol-version": "2026-07-28", "mcp-method": message["method"]}
            name = message["params"].get("name")
            if name is not None:
                headers["mcp-name"] = name
        async with httpx.AsyncClient(timeout=DEADLINE) as client:
            return await client.post(self.urls[on], json=message, headers=headers)

    async def open_session(self, token: str) -> str:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
        opened = await self.post(token, init)
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        initialized = await self.post(token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        assert initialized.status_code == 202, initialized.text
        return session

    async def echo_in(self, session: str, token: str, on: int = 0) -> int:
        """The status of a tools/call in ``session`` sent with ``token`` to replica ``on``."""
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hi"}},
        }
        return (await self.post(token, call, session, on)).status_code


@contextlib.asynccontextmanager
async def protected(*servers: Server, **http_options: Any) -> AsyncIterator[Setup]:
    """``servers`` (default: one ``identity_server``) on loopback, each a protected resource of one issuer."""
    servers = servers or (identity_server(),)
    issuer_port, ports = free_port(), [free_port() for _ in servers]
    issuer = Issuer(f"http://127.0.0.1:{issuer_port}")
    urls = [f"http://127.0.0.1:{port}/mcp" for port in ports]
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(served(issuer, issuer_port))
        for server, port in zip(servers, ports, strict=True):
            resource = ProtectedResource(urls[0], authorization_servers=[issuer.url],
                                         verifier=JwtVerifier(issuer.url, urls[0]))  # fmt: skip
            await stack.enter_async_context(served(server.http_app(auth=resource, **http_options), port))
        yield Setup(issuer, urls)


# -- handshake sessions are bound to the principal that opened them -------------------------------------------------
@run
async def test_a_token_without_sub_of_another_client_cannot_use_the_session() -> None:
    # Both were the principal (iss, None): client Y used client X's session.
    async with protected() as setup:
        session = await setup.open_session(setup.token(client_id="x"))
        assert await setup.echo_in(session, setup.token(client_id="y")) == 404
        assert await setup.echo_in(session, setup.token(client_id="x")) == 200  # X, refreshed


@run
async def test_a_token_naming_neither_subject_nor_client_is_bound_to_itself() -> None:
    # Every such token of one issuer was the same principal; now each is its own.
    async with protected() as setup:
        mine = setup.token()
        session = await setup.open_session(mine)
        assert await setup.echo_in(session, setup.token()) == 404  # same claims, another token
        assert await setup.echo_in(session, setup.token(client_id="x")) == 404
        assert await setup.echo_in(session, mine) == 200


@run
async def test_a_subject_named_None_cannot_use_the_session_of_a_token_without_sub() -> None:
    async with protected() as setup:
        session = await setup.open_session(setup.token(client_id="app"))
        assert await setup.echo_in(session, setup.token(sub="None", client_id="app")) == 404
        named = await setup.open_session(setup.token(sub="None", client_id="app"))
        assert await setup.echo_in(named, setup.token(client_id="app")) == 404


@run
async def test_a_session_in_redis_is_not_restored_for_another_client_without_sub(redis_url: str) -> None:
    # Redis kept a digest of (iss, None) for both: Y restored X's session on another replica.
    replicas = [identity_server(redis_url=redis_url) for _ in range(2)]
    async with protected(*replicas) as setup:
        session = await setup.open_session(setup.token(client_id="x"))
        assert await setup.echo_in(session, setup.token(client_id="y"), on=1) == 404
        assert await setup.echo_in(session, setup.token(), on=1) == 404  # a token naming no one
        assert await setup.echo_in(session, setup.token(client_id="x"), on=1) == 200


# -- the per-principal session quota -----------------------------------------------------------------------------
@run
async def test_two_clients_without_sub_each_have_their_own_session_quota() -> None:
    # One quota for both: Y's initialize evicted X's only session.
    async with protected(max_sessions_per_principal=1) as setup:
        x, y = setup.token(client_id="x"), setup.token(client_id="y")
        kept = await setup.open_session(x)
        await setup.open_session(y)
        assert await setup.echo_in(kept, x) == 200
        # X's own second session still takes the place of its first (the quota holds).
        await setup.open_session(x)
        assert await setup.echo_in(kept, x) == 404


@run
async def test_two_tokens_naming_no_one_each_have_their_own_session_quota() -> None:
    async with protected(max_sessions_per_principal=1) as setup:
        first, second = setup.token(), setup.token()
        kept = await setup.open_session(first)
        await setup.open_session(second)
        assert await setup.echo_in(kept, first) == 200


# -- requestState is bound to the principal it was issued to ---------------------------------------------------
async def _sealed_for(setup: Setup, token: str) -> str:
    first = await setup.post(
        token, request(1, "tools/call", {"name": "confirm", "arguments": {}}, capabilities=ELICITING)
    )
    result = first.json()["result"]
    assert result["resultType"] == "input_required", result
    return str(result["requestState"])


async def _retry(setup: Setup, token: str, state: str) -> dict[str, Any]:
    params = {"name": "confirm", "arguments": {}, "requestState": state,
              "inputResponses": {key: {"action": "accept", "content": {"ok": True}} for key in ("confirm", "0", "1")}}  # fmt: skip
    answer: dict[str, Any] = (await setup.post(token, request(2, "tools/call", params, capabilities=ELICITING))).json()
    return answer


@run
async def test_a_request_state_of_a_token_without_sub_does_not_open_for_sub_None() -> None:
    # Both were the principal '["iss", "None"]' (a stringified None).
    async with protected() as setup:
        state = await _sealed_for(setup, setup.token(client_id="app"))
        refused = await _retry(setup, setup.token(sub="None", client_id="app"), state)
        assert refused["error"]["code"] == -32602
        assert "issued to a different principal" in refused["error"]["message"]
        other = await _retry(setup, setup.token(client_id="other"), state)
        assert "issued to a different principal" in other["error"]["message"]
        assert "error" not in await _retry(setup, setup.token(client_id="app"), state)


# -- rate limits count per principal --------------------------------------------------------------------------
@run
async def test_tokens_naming_no_one_each_have_their_own_rate_limit_bucket() -> None:
    # One bucket for every token of the issuer without sub and client_id: one starved all.
    limit = RateLimit(rate=0.01, burst=1, methods={"tools/call"})
    async with protected(identity_server(limit)) as setup:

        async def echo(token: str) -> dict[str, Any]:
            call = request(1, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
            answer: dict[str, Any] = (await setup.post(token, call)).json()
            return answer

        first, second = setup.token(), setup.token()
        assert "result" in await echo(first)
        assert "result" in await echo(second)
        assert (await echo(first))["error"]["code"] == -31429  # its own bucket holds


# -- the rule itself --------------------------------------------------------------------------------------------
def test_the_key_keeps_None_apart_from_the_string_None_and_each_part_typed() -> None:
    keys = {
        principal_key({"iss": "i", "client_id": "c"}),
        principal_key({"iss": "i", "sub": "None", "client_id": "c"}),
        principal_key({"iss": "i", "sub": 5}),
        principal_key({"iss": "i", "sub": "5"}),
        principal_key({"iss": "j", "sub": "5"}),
        principal_key({"sub": "5"}),
        principal_key("5"),  # a hook's plain subject
    }
    assert len(keys) == 6  # "5" as a bare subject is {"sub": "5"}, the same principal
    assert principal_key(None) is None  # the anonymous caller
    assert principal_key({"iss": "i"}) == "value:{'iss': 'i'}"  # a hook's own value, by repr
