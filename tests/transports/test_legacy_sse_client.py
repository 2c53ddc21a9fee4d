"""Our client side of the HTTP+SSE transport of 2024-11-05 (issue 21).

The backwards-compatibility procedure of the 2025-03-26 and later transports pages: POST
to the URL; on 400, 404 or 405 with no JSON-RPC response, GET it and expect an event
stream whose first event is ``endpoint``, the URI every message is POSTed to from then
on; responses and server requests come back as ``event: message``. Three kinds of peer,
all real servers on 127.0.0.1: a scripted raw ASGI app under uvicorn in the test's own
loop (for what no real server does on purpose: a cross-origin endpoint, a stream cut in
the middle, an event past the bound, a 401 on GET), the official SDK's FastMCP of mcp
1.9.4 in its own venv (``tests/fixtures/peers/old_server.py``, ``FastMCP.run("sse")`` as people
run it), and the npm everything server of an older release (2025.5.12, on
@modelcontextprotocol/sdk 1.11.0) in its ``sse`` mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from modelctx.client import Client
from modelctx.errors import (
    ConnectionClosed,
    HttpStatusError,
    LocalError,
    MalformedResponse,
    RequestTimeout,
    UrlRefused,
)
from modelctx.host import Host, HostConfig, HostConfigError, ServerSpec, load_config
from modelctx.transports.http_client import HttpClientTransport
from tests.support.paths import PEERS
from tests.support.wire import DEADLINE, async_test, free_port, until, wait_until

OLD_SERVER = PEERS / "old_server.py"


def text(result: Any) -> str:
    return result.content[0].text


# -- a scripted HTTP+SSE server ---------------------------------------------------------------------
class LegacyScripted:
    """A raw ASGI HTTP+SSE server that records every request (verb, path, headers, body).

    ``GET /sse`` opens the stream; its first event is ``endpoint`` with ``endpoint``
    (default ``/messages?session=1``). ``POST /sse`` gets ``post_status`` (405). A POST
    to the endpoint gets 202, and its reply comes on the stream: ``initialize`` is
    answered 2025-03-26, ``tools/list`` with one tool ``add``, ``tools/call`` ``add``
    with the sum, ``hang`` never, ``cut`` by ending the stream, ``flood`` by an event
    larger than any client should buffer. With ``token`` set, every request must carry
    ``Authorization: Bearer <token>`` or gets 401 with a Bearer challenge.
    """

    def __init__(self) -> None:
        self.endpoint = "/messages?session=1"
        self.post_status = 405
        self.get_answer: tuple[int, bytes, bytes] | None = None  # (status, content type, body) instead of a stream
        self.token: str | None = None
        self.seen: list[dict[str, Any]] = []
        self.outbox: asyncio.Queue[bytes | None] | None = None

    def requests(self, verb: str, path: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.seen if r["verb"] == verb and (path is None or r["path"] == path)]

    def posted(self, method: str, tool: str | None = None) -> list[dict[str, Any]]:
        """The messages POSTed to the endpoint with ``method`` (and tool name ``tool``)."""
        bodies = [r["body"] for r in self.requests("POST", "/messages")]
        return [
            b for b in bodies
            if b.get("method") == method and (tool is None or (b.get("params") or {}).get("name") == tool)
        ]

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        assert scope["type"] == "http"
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        body = b""
        if scope["method"] == "POST":
            while True:
                event = await receive()
                body += event.get("body", b"")
                if not event.get("more_body"):
                    break
        message = json.loads(body) if body else None
        self.seen.append({"verb": scope["method"], "path": scope["path"], "headers": headers, "body": message})
        if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
            challenge = [(b"www-authenticate", b'Bearer error="invalid_token"')]
            await self._plain(send, 401, b"sign in", challenge)
        elif scope["method"] == "GET" and scope["path"] == "/sse":
            await self._stream(send, receive)
        elif scope["method"] == "POST" and scope["path"] == "/sse":
            await self._plain(send, self.post_status, b"Method Not Allowed")
        elif scope["method"] == "POST" and scope["path"] == "/messages":
            await self._plain(send, 202, b"Accepted")
            self._answer(message)
        else:
            await self._plain(send, 404, b"Not Found")

    async def _stream(self, send: Callable, receive: Callable) -> None:
        if self.get_answer is not None:
            status, content_type, body = self.get_answer
            await self._plain(send, status, body, content_type=content_type)
            return
        outbox = self.outbox = asyncio.Queue()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"event: endpoint\ndata: " + self.endpoint.encode() + b"\n\n", "more_body": True})
        while (chunk := await outbox.get()) is not None:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    def _answer(self, message: Any) -> None:
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            return
        assert self.outbox is not None
        method, params = message["method"], message.get("params") or {}
        result: Any = {}
        if method == "initialize":
            result = {"protocolVersion": "2025-03-26", "capabilities": {"tools": {}}, "serverInfo": {"name": "scripted-sse", "version": "0"}}
        elif method == "tools/list":
            schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
            result = {"tools": [{"name": "add", "inputSchema": schema}]}
        elif method == "tools/call":
            name, arguments = params.get("name"), params.get("arguments") or {}
            if name == "hang":
                return
            if name == "cut":
                self.outbox.put_nowait(None)
                return
            if name == "flood":
                self.outbox.put_nowait(b"event: message\ndata: " + b"x" * (2 * 1024 * 1024) + b"\n\n")
                return
            result = {"content": [{"type": "text", "text": str(arguments.get("a", 0) + arguments.get("b", 0))}]}
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        self.outbox.put_nowait(b"event: message\ndata: " + json.dumps(reply).encode() + b"\n\n")

    @staticmethod
    async def _plain(
        send: Callable, status: int, body: bytes, extra: list | None = None, content_type: bytes = b"text/plain"
    ) -> None:
        headers = [(b"content-type", content_type), *(extra or [])]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def scripted() -> AsyncIterator[tuple[str, LegacyScripted]]:
    """A fresh ``LegacyScripted`` under uvicorn in this loop: its base URL and the app."""
    app = LegacyScripted()
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(server.serve())
    await until(lambda: server.started or task.done(), "uvicorn to start")
    assert not task.done(), "uvicorn failed to start"
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        if app.outbox is not None:
            app.outbox.put_nowait(None)
        server.should_exit = True
        await asyncio.wait_for(task, DEADLINE)


def client(url: str, mode: str = "auto", **options: Any) -> Client:
    return Client(HttpClientTransport(url, **options), mode=mode, timeout=DEADLINE)


# -- finding the transport ----------------------------------------------------------------------------
@pytest.mark.parametrize("status", [400, 404, 405])
@pytest.mark.parametrize("mode", ["auto", "handshake"])
@async_test()
async def test_a_first_post_answered_400_404_or_405_opens_the_stream_and_posts_to_its_endpoint(status, mode):
    async with scripted() as (base, app):
        app.post_status = status
        async with client(f"{base}/sse", mode) as connected:
            added = await connected.call_tool("add", {"a": 2, "b": 3})
            assert connected.transport.handshake_only
            assert connected.protocol_version == "2025-03-26"

    first = "server/discover" if mode == "auto" else "initialize"
    assert [r["body"]["method"] for r in app.requests("POST", "/sse")] == [first]
    assert len(app.requests("GET", "/sse")) == 1
    posted = [r["body"].get("method") for r in app.requests("POST", "/messages")]
    assert posted[:3] == ["initialize", "notifications/initialized", "tools/call"]
    assert text(added) == "5"


@async_test()
async def test_the_sse_pin_skips_the_question_and_posts_nothing_to_the_stream_url():
    async with scripted() as (base, app):
        async with client(f"{base}/sse", transport="sse") as connected:
            assert [t.name for t in await connected.tools()] == ["add"]

    assert app.requests("POST", "/sse") == []
    assert [r["body"]["method"] for r in app.requests("POST", "/messages")][:2] == ["initialize", "notifications/initialized"]


@async_test()
async def test_the_streamable_pin_never_asks_with_get():
    async with scripted() as (base, app):
        with pytest.raises(HttpStatusError) as caught:
            await client(f"{base}/sse", "handshake", transport="streamable").connect()

    assert caught.value.status == 405
    assert app.requests("GET") == []


@async_test()
async def test_a_get_that_opens_no_event_stream_leaves_the_posts_status_standing():
    async with scripted() as (base, app):
        app.post_status = 404
        app.get_answer = (404, b"text/plain", b"no such page")
        with pytest.raises(HttpStatusError) as caught:
            await client(f"{base}/sse", "handshake").connect()

    assert caught.value.status == 404
    assert "initialize" in str(caught.value)
    assert len(app.requests("GET", "/sse")) == 1  # asked once, not again for the next POST


@async_test()
async def test_the_sse_pin_on_a_url_that_is_no_event_stream_says_what_came_instead():
    async with scripted() as (base, app):
        app.get_answer = (200, b"application/json", b'{"hello": "world"}')
        with pytest.raises(HttpStatusError) as caught:
            await client(f"{base}/sse", transport="sse").connect()

    assert "GET (to open an HTTP+SSE stream) got HTTP 200" in str(caught.value)


@async_test()
async def test_a_2026_07_28_request_over_the_sse_transport_fails_saying_how_to_connect():
    async with scripted() as (base, _app):
        connected = client(f"{base}/sse", "2026-07-28", transport="sse")
        await connected.connect()
        try:
            with pytest.raises(LocalError) as caught:
                await connected.list_tools()
        finally:
            await connected.close()

    assert "offers only the older HTTP+SSE transport" in str(caught.value)
    assert "mode='auto'" in str(caught.value)


# -- the endpoint event -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "endpoint",
    [
        "http://127.0.0.1:{other}/messages?session=1",  # another port
        "//localhost:{port}/messages?session=1",  # another host
        "https://127.0.0.1:{port}/messages?session=1",  # another scheme
    ],
)
@async_test()
async def test_an_endpoint_on_another_origin_is_refused_and_nothing_is_posted_there(endpoint):
    async with scripted() as (base, app), scripted() as (other_base, other):
        app.endpoint = endpoint.format(port=base.rsplit(":", 1)[1], other=other_base.rsplit(":", 1)[1])
        app.token = other.token = None
        with pytest.raises(UrlRefused) as caught:
            await client(f"{base}/sse", "handshake", headers={"Authorization": "Bearer secret"}).connect()

    assert "another origin" in str(caught.value)
    assert other.seen == []
    assert app.requests("POST", "/messages") == []
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    "endpoint", ["", "/messages?a=1 b=2", "/messages\x01", "http://127.0.0.1:8000:9/messages", "http://[::1/messages"]
)
@async_test()
async def test_an_endpoint_that_is_not_a_uri_is_refused(endpoint):
    async with scripted() as (base, app):
        app.endpoint = endpoint
        with pytest.raises(MalformedResponse) as caught:
            await client(f"{base}/sse", transport="sse").connect()

    assert app.requests("POST", "/messages") == []
    assert "endpoint" in str(caught.value)


# -- a session that ends ------------------------------------------------------------------------------
@async_test()
async def test_a_stream_that_ends_fails_the_pending_requests_at_once_with_a_clear_error():
    async with scripted() as (base, app):
        async with client(f"{base}/sse") as connected:
            hanging = asyncio.ensure_future(connected.call_tool("hang", {}, timeout=10 * DEADLINE))
            await until(lambda: app.posted("tools/call", "hang"), "the hang call to be posted")
            app.outbox.put_nowait(None)  # the server ends the stream
            with pytest.raises(ConnectionClosed) as caught:
                await hanging
            with pytest.raises(ConnectionClosed):
                await connected.call_tool("add", {"a": 1, "b": 1})

    assert "HTTP+SSE stream closed" in str(caught.value)
    assert "connect again" in str(caught.value)


@async_test()
async def test_an_event_past_the_bound_drops_the_stream_instead_of_buffering_it():
    async with scripted() as (base, app):
        connected = Client(HttpClientTransport(f"{base}/sse", max_message=64 * 1024), timeout=DEADLINE)
        async with connected:
            with pytest.raises(ConnectionClosed) as caught:
                await connected.call_tool("flood", {}, timeout=10 * DEADLINE)

    assert "exceeded 65536 bytes" in str(caught.value)


@async_test()
async def test_a_timed_out_call_is_cancelled_on_the_endpoint():
    async with scripted() as (base, app):
        async with client(f"{base}/sse") as connected:
            with pytest.raises(RequestTimeout):
                await connected.call_tool("hang", {}, timeout=0.3)
            await until(lambda: app.posted("notifications/cancelled"), "notifications/cancelled on the endpoint")
            assert text(await connected.call_tool("add", {"a": 1, "b": 2})) == "3"

    [hang] = app.posted("tools/call", "hang")
    [cancelled] = app.posted("notifications/cancelled")
    assert cancelled["params"]["requestId"] == hang["id"]


# -- authorization ------------------------------------------------------------------------------------
@async_test()
async def test_a_bearer_header_goes_on_the_get_and_on_every_post():
    async with scripted() as (base, app):
        app.token = "t0ken"
        async with client(f"{base}/sse", headers={"Authorization": "Bearer t0ken"}) as connected:
            await connected.tools()

    assert app.seen and all(r["headers"].get("authorization") == "Bearer t0ken" for r in app.seen)
    assert app.requests("GET", "/sse") and len(app.requests("POST", "/messages")) >= 3


class SignIn:
    """An ``HttpAuth``: no header until a 401 names Bearer, then ``token`` (a person who signed in)."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.signed_in = False
        self.challenges: list[tuple[int, str]] = []

    async def headers(self, method: str, url: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.signed_in else {}

    async def challenged(self, status: int, headers: Mapping[str, str], method: str, url: str) -> bool:
        self.challenges.append((status, method))
        if "bearer" not in headers.get("www-authenticate", "").lower():
            return False
        self.signed_in = True
        return True


@async_test()
async def test_a_401_on_the_get_goes_through_the_same_auth_flow():
    async with scripted() as (base, app):
        app.token = "fresh"
        auth = SignIn("fresh")
        async with client(f"{base}/sse", transport="sse", auth=auth) as connected:
            assert [t.name for t in await connected.tools()] == ["add"]

    assert auth.challenges == [(401, "GET")]
    assert all(r["headers"].get("authorization") == "Bearer fresh" for r in app.seen[1:])


@async_test()
async def test_a_401_on_the_get_that_auth_cannot_answer_fails_with_the_status():
    async with scripted() as (base, app):
        app.token = "never-given"
        with pytest.raises(HttpStatusError) as caught:
            await client(f"{base}/sse", transport="sse").connect()

    assert caught.value.status == 401
    assert "GET (to open the HTTP+SSE stream)" in str(caught.value)


# -- host configuration -------------------------------------------------------------------------------
def test_a_url_entry_finds_out_and_transport_or_type_sse_pins_it(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "found": {"url": "http://127.0.0.1:1/sse"},
                    "pinned": {"url": "http://127.0.0.1:1/sse", "transport": "sse"},
                    "typed": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
                    "streamable": {"url": "http://127.0.0.1:1/mcp", "transport": "streamable-http"},
                    "http": {"url": "http://127.0.0.1:1/mcp", "transport": "http"},
                }
            }
        )
    )
    servers = load_config(path).servers

    assert {name: spec.transport for name, spec in servers.items()} == {
        "found": "auto", "pinned": "sse", "typed": "sse", "streamable": "streamable", "http": "streamable",
    }


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ({"url": "http://127.0.0.1:1/sse", "transport": "websocket"}, "'transport' must be 'sse'"),
        ({"url": "http://127.0.0.1:1/sse", "transport": 1}, "'transport' must be 'sse'"),
        ({"command": "python", "transport": "sse"}, "'transport' does not apply to a stdio server"),
        ({"type": "sse", "url": "http://127.0.0.1:1/sse", "transport": "http"}, "'type' is 'sse' but 'transport' is 'http'"),
        ({"type": "sse", "command": "python"}, "an HTTP server needs 'url'"),
    ],
)
def test_a_transport_that_cannot_be_used_is_refused_naming_the_server_and_key(tmp_path, entry, fragment):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"old": entry}}))
    with pytest.raises(HostConfigError) as caught:
        load_config(path)

    assert "server 'old'" in str(caught.value)
    assert fragment in str(caught.value)


# -- real old servers ---------------------------------------------------------------------------------
class OldSseServer:
    """An HTTP+SSE server process of another SDK on a free loopback port (``command(port)``,
    also in ``PORT``); ``url`` is its stream's. It gets our environment without PYTHONPATH,
    so an old SDK's interpreter never imports our packages."""

    def __init__(self, command: Callable[[int], list[str]], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/sse"
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.process = subprocess.Popen(
            command(self.port),
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            env={**environment, "PORT": str(self.port)},
        )
        wait_until(self._answers, f"the HTTP+SSE server on port {self.port}")

    def _answers(self) -> bool:
        if self.process.poll() is not None:
            pytest.fail(f"the HTTP+SSE server exited with {self.process.returncode}:\n{self.log}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
        except OSError:
            return False
        return True

    @property
    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # uvicorn waits for open streams: kill after a moment
            try:
                self.process.wait(3)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(DEADLINE)
        self._log.close()


def old_python(version: str) -> str:
    variable = f"MODELCTX_MCP_{version.replace('.', '_')}_PYTHON"
    path = os.environ.get(variable)
    if not path or not Path(path).exists():
        pytest.fail(f"mcp {version} is not installed in its own venv ({variable}); scripts/test.sh makes it")
    return path


def everything_sse_bin() -> str:
    command = os.environ.get("MODELCTX_EVERYTHING_SSE_BIN")
    if not command or not Path(command).exists():
        pytest.fail(
            "@modelcontextprotocol/server-everything@2025.5.12 (on @modelcontextprotocol/sdk@1.11.0) is not "
            "installed (MODELCTX_EVERYTHING_SSE_BIN); scripts/test.sh installs it under .tools/everything-sse"
        )
    return command


@pytest.fixture(scope="module")
def mcp_1_9_4(tmp_path_factory) -> Iterator[OldSseServer]:
    """FastMCP of mcp 1.9.4 on HTTP+SSE (2025-03-26), shared by the module."""
    log = tmp_path_factory.mktemp("mcp-1.9.4-sse") / "server.log"
    python = old_python("1.9.4")
    server = OldSseServer(lambda port: [python, str(OLD_SERVER), "sse", str(port)], log)
    yield server
    server.stop()


@pytest.fixture
def npm_everything(tmp_path) -> Iterator[OldSseServer]:
    """The npm everything server of 2025.5.12 in its ``sse`` mode: one client, then it exits."""
    command = everything_sse_bin()
    server = OldSseServer(lambda port: [command, "sse"], tmp_path / "everything.log")
    yield server
    server.stop()


@pytest.mark.parametrize(("transport", "mode"), [("auto", "auto"), ("auto", "handshake"), ("sse", "auto")])
@async_test(60)
async def test_our_client_lists_calls_reads_and_gets_prompts_of_mcp_1_9_4_over_sse(mcp_1_9_4, transport, mode):
    async with client(mcp_1_9_4.url, mode, transport=transport) as connected:
        names = [tool.name for tool in await connected.tools()]
        added = await connected.call_tool("add", {"a": 2, "b": 3})
        read = await connected.read_resource("memo://greeting")
        prompt = await connected.get_prompt("greet", {"name": "Ada"})
        assert connected.transport.handshake_only

    assert connected.protocol_version == "2025-03-26"
    assert connected.server_info["name"] == "old-sse-server"
    assert names == ["add", "count", "sleepy"]
    assert text(added) == "5"
    assert read.contents[0]["text"] == "hello from an old server"
    assert prompt.messages[0].content.text == "Say hello to Ada."


@async_test(60)
async def test_a_client_given_only_the_sse_url_as_a_string_reaches_mcp_1_9_4(mcp_1_9_4):
    async with Client(mcp_1_9_4.url) as connected:
        added = await connected.call_tool("add", {"a": 40, "b": 2})

    assert text(added) == "42"


@async_test(60)
async def test_progress_of_mcp_1_9_4_reaches_the_callback_over_sse(mcp_1_9_4):
    seen: list[tuple[float, float | None]] = []
    async with client(mcp_1_9_4.url) as connected:
        done = await connected.call_tool("count", {"steps": 3}, progress=lambda p, t, m: seen.append((p, t)))

    assert text(done) == "counted to 3"
    assert seen == [(1, 3), (2, 3), (3, 3)]


@async_test(60)
async def test_a_cancelled_call_stops_the_handler_of_mcp_1_9_4_and_the_session_it_then_ends_is_reported(
    mcp_1_9_4, tmp_path
):
    # mcp 1.9.4 answers notifications/cancelled with an error response (code 0) on the
    # stream, then ends the stream (the same with a bare httpx client): the session is
    # gone, and the client must say so rather than leave the next call waiting.
    marker = tmp_path / "cancelled"
    async with client(mcp_1_9_4.url) as connected:
        call = asyncio.ensure_future(connected.call_tool("sleepy", {"marker": str(marker)}, timeout=10 * DEADLINE))
        await until(lambda: Path(str(marker) + ".started").exists(), "the sleepy tool to start")
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await until(marker.exists, "the old server to cancel the handler")
        await until(lambda: connected.session.closed_error is not None, "the client to hear the stream end")
        with pytest.raises(ConnectionClosed) as caught:
            await connected.call_tool("add", {"a": 1, "b": 1})

    assert marker.read_text() == "cancelled"
    assert "the HTTP+SSE stream closed" in str(caught.value)


@pytest.fixture(scope="module")
def mcp_1_2_0(tmp_path_factory) -> Iterator[OldSseServer]:
    """FastMCP of mcp 1.2.0 on HTTP+SSE (2024-11-05), shared by the module."""
    python = old_python("1.2.0")
    log = tmp_path_factory.mktemp("mcp-1.2.0-sse") / "server.log"
    server = OldSseServer(lambda port: [python, str(OLD_SERVER), "sse", str(port)], log)
    yield server
    server.stop()


@pytest.mark.parametrize(("transport", "mode"), [("auto", "auto"), ("auto", "handshake"), ("sse", "auto")])
@async_test(60)
async def test_our_client_lists_calls_reads_and_gets_prompts_of_mcp_1_2_0_over_sse(mcp_1_2_0, transport, mode):
    seen: list[tuple[float, float | None]] = []
    async with client(mcp_1_2_0.url, mode, transport=transport) as connected:
        names = [tool.name for tool in await connected.tools()]
        added = await connected.call_tool("add", {"a": 2, "b": 3})
        counted = await connected.call_tool("count", {"steps": 2}, progress=lambda p, t, m: seen.append((p, t)))
        read = await connected.read_resource("memo://greeting")
        prompt = await connected.get_prompt("greet", {"name": "Ada"})

    assert connected.protocol_version == "2024-11-05"
    assert names == ["add", "count", "sleepy"]
    assert text(added) == "5"
    assert text(counted) == "counted to 2"
    assert seen == [(1, 2), (2, 2)]
    assert read.contents[0]["text"] == "hello from an old server"
    assert prompt.messages[0].content.text == "Say hello to Ada."


@async_test(60)
async def test_a_cancelled_call_to_mcp_1_2_0_ends_at_once_and_the_session_goes_on(mcp_1_2_0, tmp_path):
    # mcp 1.2.0 knows no notifications/cancelled and runs one request at a time: its tool
    # sleeps on, but our caller is not held, the late answer to the cancelled id is
    # dropped, and the next call is answered once the tool is done.
    marker = tmp_path / "cancelled"
    async with client(mcp_1_2_0.url) as connected:
        arguments = {"marker": str(marker), "seconds": 1}
        call = asyncio.ensure_future(connected.call_tool("sleepy", arguments, timeout=10 * DEADLINE))
        await until(lambda: Path(str(marker) + ".started").exists(), "the sleepy tool to start")
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        after = await connected.call_tool("add", {"a": 1, "b": 1})

    assert text(after) == "2"
    assert not marker.exists()


@async_test(60)
async def test_our_client_reaches_the_npm_everything_server_of_2025_5_12_over_sse(npm_everything):
    seen: list[tuple[float, float | None]] = []
    async with client(npm_everything.url) as connected:
        names = {tool.name for tool in await connected.tools()}
        added = await connected.call_tool("add", {"a": 2, "b": 3})
        long = await connected.call_tool(
            "longRunningOperation", {"duration": 0.3, "steps": 3}, progress=lambda p, t, m: seen.append((p, t))
        )
        read = await connected.read_resource("test://static/resource/1")
        prompt = await connected.get_prompt("simple_prompt")

    assert connected.protocol_version == "2025-03-26"
    assert {"echo", "add", "longRunningOperation", "getTinyImage"} <= names
    assert text(added) == "The sum of 2 and 3 is 5."
    assert "completed" in text(long)
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert read.contents[0]["text"] == "Resource 1: This is a plaintext resource"
    assert prompt.messages[0].content.text == "This is a simple prompt without arguments."


# -- host, gateway, CLI, inspector --------------------------------------------------------------------
@async_test(60)
async def test_a_host_url_entry_reaches_an_sse_server_with_no_extra_key(npm_everything):
    config = HostConfig({"old": ServerSpec("old", url=npm_everything.url, approval="allow")})
    async with Host(config) as host:
        assert host.failures == {}
        names = {tool.name for tool in await host.tools()}
        added = await host.call_tool("old_add", {"a": 2, "b": 3})

    assert {"old_echo", "old_add", "old_longRunningOperation"} <= names
    assert text(added) == "The sum of 2 and 3 is 5."


@async_test(60)
async def test_a_host_entry_pinned_to_sse_reaches_mcp_1_9_4(mcp_1_9_4, tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"old": {"type": "sse", "url": mcp_1_9_4.url, "approval": "allow"}}}))
    async with Host.from_file(path) as host:
        assert host.failures == {}
        added = await host.call_tool("old_add", {"a": 20, "b": 22})

    assert text(added) == "42"


@async_test(90)
async def test_the_gateway_fronts_an_sse_server_for_a_modern_client(mcp_1_9_4, tmp_path):
    from modelctx.transports.stdio_client import StdioClientTransport

    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"old": {"url": mcp_1_9_4.url, "approval": "allow"}}}))
    gateway = StdioClientTransport([sys.executable, "-m", "modelctx", "gateway", "--config", str(path)])
    async with Client(gateway, timeout=DEADLINE) as connected:
        names = {tool.name for tool in await connected.tools()}
        added = await connected.call_tool("old_add", {"a": 2, "b": 5})
        seen: list[tuple[float, float | None]] = []
        counted = await connected.call_tool("old_count", {"steps": 2}, progress=lambda p, t, m: seen.append((p, t)))

    assert connected.modern
    assert {"old_add", "old_count", "old_sleepy"} <= names
    assert text(added) == "7"
    assert text(counted) == "counted to 2"
    assert seen == [(1, 2), (2, 2)]


def test_the_cli_lists_and_calls_tools_of_an_sse_url_as_given(mcp_1_9_4):
    from tests.support.cli_run import modelctx

    listed = modelctx("tools", "--url", mcp_1_9_4.url, "--json")
    called = modelctx("call", "add", "a=4", "b=5", "--url", mcp_1_9_4.url)

    assert listed.returncode == 0, listed.stderr
    assert [tool["name"] for tool in json.loads(listed.stdout)["tools"]] == ["add", "count", "sleepy"]
    assert called.returncode == 0, called.stderr
    assert called.stdout.strip() == "9"


def test_the_inspector_inspects_an_sse_url_as_given(mcp_1_9_4):
    import httpx

    from tests.support.inspector_processes import running_inspector

    with running_inspector("inspect", mcp_1_9_4.url) as url:
        state = inspected(url)
        assert state["status"]["state"] == "connected", state["status"]
        called = httpx.post(url + "api/call", json={"name": "add", "arguments": {"a": 1, "b": 2}}, timeout=30)

    assert state["status"]["serverInfo"]["name"] == "old-sse-server"
    assert {tool["name"] for tool in state["lists"]["tools"]} == {"add", "count", "sleepy"}
    assert called.json()["result"]["content"][0]["text"] == "3"


def inspected(url: str) -> dict[str, Any]:
    """The inspector page's state once it connected or failed (its event stream's snapshot,
    then the status and lists that followed it)."""
    import httpx

    state: dict[str, Any] = {}
    with httpx.stream("GET", url + "api/events", timeout=30) as response:
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[len("data: ") :])
            if event["type"] == "snapshot":
                state = event
            elif event["type"] in ("status", "lists"):
                state[event["type"]] = event[event["type"]]
            if state and (state["status"]["state"] == "failed" or any(state["lists"].values())):
                return state
    raise AssertionError(f"the inspector's event stream ended before it connected: {state}")
