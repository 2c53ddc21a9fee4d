"""Secrets stay where they belong (security practices of issue 7; security_best_practices.mdx,
"Token Passthrough").

* Never logged: a real HTTP server (uvicorn, with an ``authenticate`` hook) and real
  clients in one process, every logger at DEBUG (modelctx and uvicorn, access log on),
  through bearer tokens, cookies, a password in the URL, ``requestState``, a URL
  elicitation whose URL carries a token, 401s, malformed requests, a failing tool,
  redirects and both eras. No secret appears in any log record or on stderr.
* No token passthrough: a handler sees the principal the ``authenticate`` hook returned,
  never the request's ``Authorization`` header (the hook is where a server author opts
  in, by putting what they need into the principal).
* The client carries ``Authorization`` and ``Cookie`` to the origin they were given for
  only, never across a redirect to another origin, and never fetches a URL a server
  names in an elicitation or a resource link: it hands those to the application.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import uvicorn

from modelctx.client import Client, ClientHandlers, Elicitation
from modelctx.errors import HttpStatusError
from modelctx.server import Context, ResourceLink, Server, ToolResult
from modelctx.transports.http import HttpApp
from modelctx.transports.http_client import HttpClientTransport
from tests.support.wire import free_port

DEADLINE = 60.0
TOKEN = "tok-3f9a1c77-SECRET"
WRONG_TOKEN = "wrong-9c2e41-SECRET"
COOKIE = "ck-77e2b0d4-SECRET"
URL_TOKEN = "urltok-5d1b93-SECRET"
PASSWORD = "pw-91aa0e5f-SECRET"
ANSWER = "typed-in-4b7c-SECRET"  # what a user typed into a form


class Principal:
    """What the hook decided about the caller: a subject, not the token."""

    def __init__(self, subject: str) -> None:
        self.subject = subject


async def authenticate(scope: dict[str, Any]) -> Principal:
    headers = dict(scope["headers"])
    if headers.get(b"authorization") != f"Bearer {TOKEN}".encode():
        raise PermissionError("invalid bearer token")
    return Principal("alice")


class Counter:
    """A loopback port that counts the connections made to it (and answers none)."""

    def __init__(self) -> None:
        self.connections = 0
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.close()


def make_server(elsewhere: str) -> Server:
    server = Server("secrets")

    @server.tool
    async def echo(text: str) -> str:
        return text

    @server.tool
    async def boom() -> str:
        raise RuntimeError("the tool failed on purpose")

    @server.tool
    async def consent(ctx: Context) -> str:
        answer = await ctx.elicit_url("Open this page to grant access", f"{elsewhere}/consent?token={URL_TOKEN}")
        return answer.action

    @server.tool
    async def form(ctx: Context) -> str:
        answer = await ctx.elicit("Your passphrase?", {"type": "object", "properties": {"phrase": {"type": "string"}}})
        return "got it" if answer.content and answer.content["phrase"] == ANSWER else "no"

    @server.tool
    async def link() -> ToolResult:
        return ToolResult([ResourceLink(uri=f"{elsewhere}/doc?token={URL_TOKEN}", name="doc")])

    @server.tool
    async def whoami(ctx: Context) -> str:
        leaked = [path for path, text in reachable(ctx, "ctx", depth=4) if TOKEN in text]
        return f"{ctx.principal.subject} leaked={leaked}"

    return server


def reachable(value: Any, path: str, depth: int) -> list[tuple[str, str]]:
    """``(path, repr)`` of ``value`` and of what it holds, ``depth`` levels down: public
    attributes (and an object's ``__dict__``, which a plain ``repr`` does not show),
    mapping keys and values, sequence items. A secret hidden in an attribute of an
    attribute (a principal carrying the request's headers) is found too."""
    found = [(path, repr(value))]
    if depth == 0 or isinstance(value, (str, bytes, int, float, bool, type(None))):
        return found
    children: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        children = [(f"{path}[{k!r}]", v) for k, v in value.items()] + [(f"{path}.keys", list(value))]
    elif isinstance(value, (list, tuple, set, frozenset)):
        children = [(f"{path}[{n}]", item) for n, item in enumerate(value)]
    else:
        held = getattr(value, "__dict__", {})
        children = [(f"{path}.{k}", v) for k, v in held.items()]
        for name in dir(value):
            if name.startswith("_") or name in held:
                continue
            attribute = getattr(value, name)
            if not callable(attribute):
                children.append((f"{path}.{name}", attribute))
    for child_path, child in children:
        found.extend(reachable(child, child_path, depth - 1))
    return found


def recording(app: Any, bodies: list[bytes]) -> Any:
    """The app, with ``/old`` redirecting (307) to ``/mcp``; every body it sends kept."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/old":
            await send(
                {
                    "type": "http.response.start",
                    "status": 307,
                    "headers": [(b"location", b"/mcp"), (b"content-length", b"0")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return

        async def keep(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                bodies.append(message.get("body", b""))
            await send(message)

        await app(scope, receive, keep)

    return asgi


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="debug", access_log=True, log_config=None, lifespan="on"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []
        self.names: set[str] = set()
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.names.add(record.name)
        self.texts.append(self.format(record))  # the message, the traceback and stack included


@pytest.fixture
def logs() -> Any:
    """Every record at DEBUG, wherever an earlier test's logging setup left these loggers
    (uvicorn's own config stops ``uvicorn`` and ``uvicorn.access`` from propagating)."""
    records = Records()
    stderr = logging.StreamHandler()  # what a default setup would print
    stderr.setLevel(logging.DEBUG)
    root = logging.getLogger()
    names = ("modelctx", "uvicorn", "uvicorn.error", "uvicorn.access")
    saved = [(root, root.level, root.propagate, root.disabled)]
    saved += [(logger, logger.level, logger.propagate, logger.disabled) for logger in map(logging.getLogger, names)]
    root.addHandler(records)
    root.addHandler(stderr)
    for logger, *_ in saved:
        logger.setLevel(logging.DEBUG)
        logger.propagate = True
        logger.disabled = False
    yield records
    root.removeHandler(records)
    root.removeHandler(stderr)
    for logger, level, propagate, disabled in saved:
        logger.setLevel(level)
        logger.propagate = propagate
        logger.disabled = disabled


def bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Cookie": f"session={COOKIE}"}


async def answer_everything(request: Elicitation) -> dict[str, Any]:
    if request.mode == "url":
        assert request.url is not None and URL_TOKEN in request.url  # handed over, not fetched
        return {"action": "accept"}
    return {"action": "accept", "content": {"phrase": ANSWER}}


async def exercise(base: str, counter: Counter, bodies: list[bytes]) -> list[str]:
    """Every path a secret could take; returns the text of each error raised on the way."""
    errors: list[str] = []
    handlers = ClientHandlers(elicitation=answer_everything)
    for mode in ("2026-07-28", "handshake"):
        transport = HttpClientTransport(f"{base}/old", headers=bearer())  # a redirect within the origin
        async with Client(transport, mode=mode, timeout=DEADLINE, handlers=handlers) as client:
            assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"
            assert (await client.call_tool("boom", {})).is_error
            assert (await client.call_tool("consent", {})).content[0].text == "accept"
            assert (await client.call_tool("form", {})).content[0].text == "got it"
            assert URL_TOKEN in (await client.call_tool("link", {})).content[0].uri
            assert (await client.call_tool("whoami", {})).content[0].text == "alice leaked=[]"
    assert counter.connections == 0  # the elicitation URL and the resource link were not fetched

    # 401s: a wrong token, with a password in the URL or without.
    for url in (f"{base}/mcp", base.replace("//", f"//user:{PASSWORD}@") + "/mcp"):
        for mode in ("auto", "2026-07-28", "handshake"):
            transport = HttpClientTransport(url, headers=bearer(WRONG_TOKEN))
            with pytest.raises(HttpStatusError) as refused:
                async with Client(transport, mode=mode, timeout=DEADLINE) as client:
                    await client.call_tool("echo", {"text": "hi"})
            assert refused.value.status == 401
            errors.append(str(refused.value))

    # Raw requests a client should not send, each carrying the secrets.
    states = re.findall(rb'"requestState":"([^"]+)"', b"".join(bodies))
    assert states, "no requestState was issued: the test would prove nothing about it"
    async with httpx.AsyncClient(timeout=DEADLINE) as raw:
        headers = {**bearer(), "accept": "application/json, text/event-stream", "content-type": "application/json"}
        posts = [
            f'{{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {{"token": "{TOKEN}"'.encode(),
            json.dumps(
                {"jsonrpc": "2.0", "id": 2, "result": {"requestState": states[0].decode(), "answer": ANSWER}}
            ).encode(),
            json.dumps(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": TOKEN}}
            ).encode(),
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": TOKEN}},
                }
            ).encode(),
        ]
        for body in posts:
            await raw.post(f"{base}/mcp", content=body, headers=headers)
        retry = {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {
                "name": "consent",
                "arguments": {},
                "requestState": states[0].decode()[:-4] + "AAAA",
                "inputResponses": {"x": {"action": "accept"}},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
        mirrored = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "consent"}
        reply = await raw.post(f"{base}/mcp", json=retry, headers={**headers, **mirrored})
        assert "requestState" in reply.text  # refused: tampered
        await raw.post(
            f"{base}/mcp",
            content=b"{}",
            headers={**headers, "mcp-session-id": TOKEN, "mcp-protocol-version": "2025-11-25"},
        )
        await raw.get(f"{base}/mcp", headers={**bearer(), "accept": "text/event-stream", "mcp-session-id": TOKEN})
        await raw.delete(f"{base}/mcp", headers={**bearer(), "mcp-session-id": TOKEN})
    return errors + [state.decode() for state in states]


def test_no_secret_reaches_a_log_record_or_stderr(logs, capfd):
    async def main() -> tuple[list[str], list[str]]:
        counter = Counter()
        listener = await asyncio.start_server(counter.handle, "127.0.0.1", 0)
        elsewhere = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
        bodies: list[bytes] = []
        app = recording(HttpApp(make_server(elsewhere), authenticate=authenticate), bodies)
        try:
            async with serving(app) as base:
                texts = await exercise(base, counter, bodies)
        finally:
            listener.close()
        return texts[:-1], texts[-1:]

    errors, states = asyncio.run(asyncio.wait_for(main(), DEADLINE * 2))
    secrets = [TOKEN, WRONG_TOKEN, COOKIE, URL_TOKEN, PASSWORD, ANSWER, *states]
    stderr = capfd.readouterr().err

    # Something was logged on both sides, the failing tool's traceback among it.
    assert {"uvicorn.error", "uvicorn.access"} <= logs.names and any(
        n.startswith("modelctx.server") for n in logs.names
    )
    assert any("the tool failed on purpose" in text for text in logs.texts)
    for secret in secrets:
        assert not [text for text in logs.texts if secret in text], secret
        assert secret not in stderr, secret
    for text in errors:  # errors an application would log, too
        for secret in secrets:
            assert secret not in text, (secret, text)


# -- the client side of credentials ------------------------------------------------------------------
class Recorder:
    def __init__(self, location: str | None = None) -> None:
        self.location = location
        self.seen: list[dict[str, str]] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            fields = {k.lower(): v for k, v in (line.split(": ", 1) for line in head[1:] if line)}
            self.seen.append(fields)
            request = json.loads(await reader.readexactly(int(fields.get("content-length", "0"))))
            if self.location is not None:
                writer.write(
                    b"HTTP/1.1 307 Moved\r\nlocation: %s\r\ncontent-length: 0\r\n\r\n" % self.location.encode()
                )
            else:
                result = {"content": [{"type": "text", "text": "ok"}], "resultType": "complete"}
                reply = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                    % (len(reply), reply)
                )
            await writer.drain()
        writer.close()


def test_a_redirect_to_another_origin_leaves_authorization_and_cookie_behind():
    async def main() -> None:
        target, first = Recorder(), Recorder()
        target_server = await asyncio.start_server(target.handle, "127.0.0.1", 0)
        first_server = await asyncio.start_server(first.handle, "127.0.0.1", 0)
        first.location = f"http://localhost:{target_server.sockets[0].getsockname()[1]}/mcp"
        url = f"http://127.0.0.1:{first_server.sockets[0].getsockname()[1]}/mcp"
        try:
            transport = HttpClientTransport(url, headers={**bearer(), "X-Trace": "t1"})
            async with Client(transport, mode="2026-07-28", timeout=DEADLINE) as client:
                assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "ok"
        finally:
            target_server.close()
            first_server.close()
        assert first.seen[0]["authorization"] == f"Bearer {TOKEN}" and first.seen[0]["cookie"] == f"session={COOKIE}"
        assert "authorization" not in target.seen[0] and "cookie" not in target.seen[0]
        assert target.seen[0]["x-trace"] == "t1"

    asyncio.run(asyncio.wait_for(main(), DEADLINE))


def test_the_transport_name_in_errors_and_logs_hides_a_password_in_the_url():
    transport = HttpClientTransport(f"http://user:{PASSWORD}@127.0.0.1:9/mcp")
    assert PASSWORD not in transport.name and "user:***@127.0.0.1:9" in transport.name
