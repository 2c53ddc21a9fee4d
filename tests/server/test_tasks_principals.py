"""Tasks and who owns them, over real HTTP with real OAuth access tokens (tasks.md,
Security Considerations: "Auth binding").

A task belongs to the principal that created it: its issuer, subject and client id, each
kept as typed (a token without ``sub`` is not the token whose ``sub`` is ``"None"``). A
principal naming neither a subject nor a client cannot be told apart from the next such
caller, so it owns no task: a ``"required"`` tool refuses it (-32600, saying why), an
``"optional"`` one answers in place. One principal holds at most
``max_running_tasks_per_principal`` running tasks, counted across every replica when they
share Redis, so one token cannot take every slot of the server.

The issuer is ``test_auth_resource``'s (RFC 8414 metadata and a JWKS on loopback); the
tokens are signed here with its key and checked by a ``JwtVerifier``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import redis
from joserfc import jwt

from modelctx import Server
from modelctx.auth import JwtVerifier, ProtectedResource
from modelctx.server import SqliteTaskStore, TaskRecord
from modelctx.server._redis_tasks import RedisTaskStore
from tests.auth.test_resource import KEY, Issuer, served
from tests.server.test_tasks import held_tasks_server
from tests.support.wire import DEADLINE, MODERN, async_test, free_port, request

TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS = {"extensions": {TASKS: {}}}
run = async_test(60.0)


class Protected:
    """A tasks server behind ``ProtectedResource`` on loopback, and tokens for it."""

    def __init__(self, issuer: Issuer, urls: list[str]) -> None:
        self.issuer = issuer
        self.urls = urls
        self.ids = 0

    def token(self, **claims: Any) -> str:
        """A valid access token for the server; a claim given as None is left out."""
        now = int(time.time())
        payload = {"iss": self.issuer.url, "aud": self.urls[0], "scope": "mcp:tools", "iat": now,
                   "exp": now + 300, "jti": uuid.uuid4().hex, **claims}  # fmt: skip
        return jwt.encode({"alg": "RS256", "kid": KEY.kid}, {k: v for k, v in payload.items() if v is not None}, KEY)

    async def rpc(self, token: str, method: str, params: dict[str, Any], on: int = 0) -> dict[str, Any]:
        """One JSON-RPC request (declaring the tasks extension) to server ``on``; its response."""
        self.ids += 1
        message = request(self.ids, method, params, capabilities=WITH_TASKS)
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
                   "mcp-protocol-version": MODERN, "mcp-method": method, "authorization": f"Bearer {token}"}  # fmt: skip
        named = params.get("name", params.get("taskId"))  # Mcp-Name: the tool, or the task
        if named is not None:
            headers["mcp-name"] = named
        async with httpx.AsyncClient(timeout=DEADLINE) as client:
            response = await client.post(self.urls[on], json=message, headers=headers)
        answer: dict[str, Any] = response.json()
        # A method's errors come with 200, but -32600 (as -32021) with 400 (the transport's table).
        assert response.status_code == (400 if answer.get("error", {}).get("code") == -32600 else 200), answer
        return answer

    async def start(self, token: str, tool: str = "hold", on: int = 0, **arguments: Any) -> str:
        answer = await self.rpc(token, "tools/call", {"name": tool, "arguments": arguments}, on)
        assert answer.get("result", {}).get("resultType") == "task", answer
        return str(answer["result"]["taskId"])


@contextlib.asynccontextmanager
async def protected(*servers: Server) -> AsyncIterator[Protected]:
    """``servers`` (one or more replicas) on loopback ports, each a protected resource of one issuer."""
    issuer_port = free_port()
    issuer = Issuer(f"http://127.0.0.1:{issuer_port}")
    ports = [free_port() for _ in servers]
    urls = [f"http://127.0.0.1:{ports[0]}/mcp", *(f"http://127.0.0.1:{port}/mcp" for port in ports[1:])]
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(served(issuer, issuer_port))
        for server, port in zip(servers, ports, strict=True):
            # Replicas of one resource: every one checks tokens for the same audience.
            resource = ProtectedResource(urls[0], authorization_servers=[issuer.url],
                                         verifier=JwtVerifier(issuer.url, urls[0]))  # fmt: skip
            await stack.enter_async_context(served(server.http_app(auth=resource), port))
        yield Protected(issuer, urls)
        for server in servers:
            server.release.set()  # type: ignore[attr-defined]


def error_of(answer: dict[str, Any]) -> dict[str, Any]:
    assert "error" in answer, answer
    error: dict[str, Any] = answer["error"]
    return error


# -- owner identity -------------------------------------------------------------------------------------------
@run
async def test_a_task_of_a_token_without_sub_is_invisible_and_uncancellable_to_another_token_without_sub() -> None:
    # Both were owner [iss, "None"]: client Y read and cancelled client X's task.
    async with protected(held_tasks_server()) as setup:
        x, y = setup.token(client_id="client-x"), setup.token(client_id="client-y")
        task = await setup.start(x)
        for method in ("tasks/get", "tasks/cancel"):
            refused = error_of(await setup.rpc(y, method, {"taskId": task}))
            assert refused["code"] == -32602 and "no task" in refused["message"]
        answer = await setup.rpc(y, "tasks/update", {"taskId": task, "inputResponses": {"k": {}}})
        assert error_of(answer)["code"] == -32602
        mine = await setup.rpc(x, "tasks/get", {"taskId": task})
        assert mine["result"]["status"] == "working"  # Y's cancel did not reach it


@run
async def test_a_subject_named_None_and_a_missing_subject_are_different_owners() -> None:
    async with protected(held_tasks_server()) as setup:
        missing, named = setup.token(client_id="app"), setup.token(sub="None", client_id="app")
        task = await setup.start(missing)
        assert error_of(await setup.rpc(named, "tasks/get", {"taskId": task}))["code"] == -32602
        other = await setup.start(named)
        assert error_of(await setup.rpc(missing, "tasks/get", {"taskId": other}))["code"] == -32602
        # The same principal with a fresh token (a refresh) still owns its task.
        again = setup.token(client_id="app")
        assert (await setup.rpc(again, "tasks/get", {"taskId": task}))["result"]["status"] == "working"


@run
async def test_a_principal_naming_neither_subject_nor_client_is_refused_a_task_saying_why() -> None:
    async with protected(held_tasks_server()) as setup:
        nobody = setup.token()  # iss, aud, scope: no sub, no client_id, no azp
        refused = error_of(await setup.rpc(nobody, "tools/call", {"name": "hold", "arguments": {}}))
        assert refused["code"] == -32600
        assert "names neither a subject (sub) nor a client (client_id)" in refused["message"]
        assert "token that carries sub or client_id" in refused["message"]
        # An optional tool is simply answered in place, as a plain call.
        in_place = await setup.rpc(nobody, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        assert in_place["result"]["resultType"] == "complete"
        assert in_place["result"]["content"] == [{"type": "text", "text": "echo hi"}]
        # Nor does it reach the tasks of anyone else without an identity.
        somebody = await setup.start(setup.token(client_id="c"))
        assert error_of(await setup.rpc(nobody, "tasks/get", {"taskId": somebody}))["code"] == -32602


@run
async def test_tasks_stored_with_the_earlier_owner_form_stay_readable_by_their_subject_only(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    async with protected(held_tasks_server(store)) as setup:
        now = time.time()

        async def stored(task_id: str, owner: str) -> None:
            await store.create(TaskRecord(task_id, "completed", now, now, 600_000, 50, owner=owner,
                                          result={"content": [{"type": "text", "text": task_id}]}))  # fmt: skip

        await stored("alices", json.dumps([setup.issuer.url, "alice"]))
        await stored("nones", json.dumps([setup.issuer.url, "None"]))  # every token without sub
        alice = setup.token(sub="alice", client_id="any")
        assert (await setup.rpc(alice, "tasks/get", {"taskId": "alices"}))["result"]["status"] == "completed"
        assert error_of(await setup.rpc(setup.token(sub="bob"), "tasks/get", {"taskId": "alices"}))["code"] == -32602
        for token in (setup.token(client_id="c"), setup.token(sub="None", client_id="c")):
            assert error_of(await setup.rpc(token, "tasks/get", {"taskId": "nones"}))["code"] == -32602


# -- running tasks per principal --------------------------------------------------------------------------------
@run
async def test_a_principal_at_its_cap_is_refused_while_another_still_gets_a_task() -> None:
    # One token created 9,997 tasks in 9 s and every other principal got -31429.
    async with protected(held_tasks_server(max_running_tasks_per_principal=3)) as setup:
        a, b = setup.token(sub="a"), setup.token(sub="b")
        held = [await setup.start(a) for _ in range(3)]
        refused = error_of(await setup.rpc(a, "tools/call", {"name": "hold", "arguments": {}}))
        assert refused["code"] == -31429 and refused["data"] == {"retryAfterMs": 50}
        assert "this principal is at its limit of running tasks (3, " in refused["message"]
        in_place = await setup.rpc(a, "tools/call", {"name": "echo", "arguments": {"text": "a"}})
        assert in_place["result"]["resultType"] == "complete"  # optional: answered in place
        await setup.start(b)  # another principal is not held back
        await setup.rpc(a, "tasks/cancel", {"taskId": held[0]})
        end = time.monotonic() + DEADLINE
        while "error" in (answer := await setup.rpc(a, "tools/call", {"name": "hold", "arguments": {}})):
            assert time.monotonic() < end, f"a cancelled task still counted against its principal: {answer}"
            await asyncio.sleep(0.05)


@run
async def test_the_cap_of_a_principal_holds_across_replicas_sharing_redis(redis_url: str) -> None:
    def replica() -> Server:
        store = RedisTaskStore(redis_url, prefix="capped:tasks:")
        return held_tasks_server(store, max_running_tasks_per_principal=2)

    servers = [replica(), replica()]
    async with protected(*servers) as setup:
        a, b = setup.token(sub="a"), setup.token(sub="b")
        await setup.start(a, on=0)
        await setup.start(a, on=1)
        for on in (0, 1):
            refused = error_of(await setup.rpc(a, "tools/call", {"name": "hold", "arguments": {}}, on))
            assert refused["code"] == -31429 and "this principal is at its limit" in refused["message"]
        await setup.start(b, on=1)
        for server in servers:
            server.release.set()  # type: ignore[attr-defined]
        # Each task leaves its owner's count when it ends: nothing is left in Redis.
        keys = redis.Redis.from_url(redis_url)
        end = time.monotonic() + DEADLINE
        while left := keys.keys("capped:tasks:owner:*"):
            assert time.monotonic() < end, f"owner counts left in Redis: {left}"
            await asyncio.sleep(0.05)
        await setup.start(a, on=1)
