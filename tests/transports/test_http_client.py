"""The Streamable HTTP client transport, as basic/transports/streamable-http.mdx states it.

Two kinds of peer, both real servers on 127.0.0.1: our own ``modelctx serve --http``
subprocess (one per module) for the round trips, and a scripted raw ASGI app under
uvicorn, in the test's own event loop, for what our server never does (SSE priming
events and resumption, bare HTTP errors). The transport is driven through its
contract only: ``send``/``cancel``/``close`` in, ``TransportEvents`` out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from modelctx.errors import ConnectionClosed, HttpStatusError, RequestLost, SessionExpired
from modelctx.protocol import meta as _meta
from modelctx.protocol.headers import header_paths, request_headers
from modelctx.protocol.jsonrpc import Notification, Response
from modelctx.protocol.versions import HANDSHAKE_VERSIONS, LATEST
from modelctx.transports.client_seam import Outgoing
from modelctx.transports.http_client import HttpClientTransport

DEADLINE = 15.0  # seconds any single wait may take before the test fails
LEGACY = HANDSHAKE_VERSIONS[0]

SERVER_FILE = '''
import asyncio
from pathlib import Path

from modelctx import Context, Server

server = Server("client-transport-tests", version="0")


@server.tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool(
    input_schema={
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        "required": ["region"],
    }
)
def where(region: str) -> str:
    """Mirror region into Mcp-Param-Region."""
    return f"in {region}"


@server.tool
async def progress(steps: int, ctx: Context) -> str:
    """Report progress, then finish."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"done after {steps} steps"


@server.tool
async def sleepy(marker: str) -> str:
    """Sleep; write 'cancelled' to the file marker when cancelled."""
    Path(marker + ".started").write_text("started")
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        Path(marker).write_text("cancelled")
        raise
    return "slept"


@server.tool
def grow(name: str) -> str:
    """Add a tool, so the server announces tools/list_changed."""
    server.add_tool(lambda: "new", name=name, description="added at run time", replace=True)
    return "grown"
'''


# -- helpers ---------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serve_http(path: Path, log_path: Path) -> Iterator[str]:
    """Serve ``path`` with ``modelctx serve --http``; yield the endpoint URL; stop it after."""
    port = free_port()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "modelctx", "serve", str(path), "--http"]
            + ["--host", "127.0.0.1", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            end = time.monotonic() + DEADLINE
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"server exited early:\n{log_path.read_text()[-2000:]}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    if time.monotonic() > end:
                        raise RuntimeError(f"server did not listen on {port} within {DEADLINE}s") from None
                    time.sleep(0.05)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=DEADLINE)


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> Iterator[str]:
    """Our own server, on Streamable HTTP, shared by this module's tests."""
    root = tmp_path_factory.mktemp("http-client")
    path = root / "server.py"
    path.write_text(SERVER_FILE)
    with serve_http(path, root / "server.log") as endpoint:
        yield endpoint


class Events:
    """A ``TransportEvents`` that records what arrives, in order."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.failures: dict[str | int, BaseException] = {}
        self.closed_with: BaseException | None = None

    def message(self, message: Any, related: str | int | None = None) -> None:
        self.messages.append(message)

    def request_failed(self, request_id: str | int, exc: BaseException) -> None:
        self.failures[request_id] = exc

    def closed(self, exc: BaseException) -> None:
        self.closed_with = exc

    def response(self, request_id: str | int) -> Response | None:
        return next((m for m in self.messages if type(m) is Response and m.id == request_id), None)

    def outcome(self, request_id: str | int) -> Response | BaseException | None:
        return self.response(request_id) or self.failures.get(request_id)


async def within(condition: Callable[[], Any], seconds: float) -> Any:
    """``condition()`` once it is truthy, or its last (falsy) value after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not (value := condition()) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return value


async def until(condition: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
    """``condition()`` once it is truthy; fail the test after ``timeout`` seconds."""
    value = await within(condition, timeout)
    if not value:
        pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
    return value


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 4 * DEADLINE))


@contextlib.asynccontextmanager
async def connected(url: str, **options: Any) -> AsyncIterator[tuple[HttpClientTransport, Events]]:
    transport = HttpClientTransport(url, **options)
    events = Events()
    await transport.connect(events)
    try:
        yield transport, events
    finally:
        await asyncio.wait_for(transport.close(), DEADLINE)


def modern(
    request_id: int, method: str, params: dict[str, Any], *, progress: Any = None, version: str = LATEST
) -> Outgoing:
    """A 2026-07-28 request: ``_meta`` in the body, its mirror in the headers."""
    meta: dict[str, Any] = {
        _meta.PROTOCOL_VERSION: version,
        _meta.CLIENT_CAPABILITIES: {},
        _meta.CLIENT_INFO: {"name": "http-client-tests", "version": "0"},
    }
    if progress is not None:
        meta[_meta.PROGRESS_TOKEN] = progress
    params = {**params, "_meta": meta}
    paths = header_paths(_WHERE_SCHEMA) if params.get("name") == "where" else None
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return Outgoing(message, request_headers(method, params, version, paths), request_id)


_WHERE_SCHEMA = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}


def call(request_id: int, tool: str, progress: Any = None, **arguments: Any) -> Outgoing:
    return modern(request_id, "tools/call", {"name": tool, "arguments": arguments}, progress=progress)


def handshake_era(request_id: int | None, method: str, params: dict[str, Any] | None = None) -> Outgoing:
    """A handshake-era message (initialize carries no MCP-Protocol-Version header)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if request_id is not None:
        message["id"] = request_id
    headers = {} if method == "initialize" else {"mcp-protocol-version": LEGACY}
    return Outgoing(message, headers, request_id, handshake=True)


def initialize(request_id: int = 1) -> Outgoing:
    return handshake_era(
        request_id,
        "initialize",
        {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "tests", "version": "0"}},
    )


def text_of(response: Response) -> str:
    assert response.error is None, response.error
    return response.result["content"][0]["text"]


# -- a scripted server ------------------------------------------------------------------------------
class Scripted:
    """A raw ASGI Streamable HTTP server that records every HTTP request it gets.

    POST ``initialize`` opens session ``s1``; notifications get 202; GET without
    ``Last-Event-ID`` gets 405 (no standalone stream); DELETE gets 200. ``tools/call``
    acts on the tool's name:

    * ``primed``: SSE with only a priming event (``id: e1``, ``retry: 300``), then the
      stream ends without the result; a GET with ``Last-Event-ID`` delivers it.
      ``primed_busy``: the same, but the first such GET gets 503.
    * ``fail_500``: 500 with a plain-text body.
    * ``hang``: an SSE stream that sends nothing until the client leaves.
    * anything else: a JSON result.

    With ``standalone`` set, GET without ``Last-Event-ID`` opens a standalone stream
    that sends one notification (``id: l1``, ``retry: 100``) and ends; a GET resuming
    from ``l1`` sends one more and ends; after that, 405.
    """

    def __init__(self, standalone: bool = False) -> None:
        self.standalone = standalone
        self.seen: list[dict[str, Any]] = []
        self.primed_closed_at: float | None = None
        self.pending: Any = None
        self.busy_resumes = 0  # resumption GETs still to answer 503

    def requests(self, verb: str) -> list[dict[str, Any]]:
        return [r for r in self.seen if r["verb"] == verb]

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        assert scope["type"] == "http"
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        message = json.loads(body) if body else None
        seen = {"verb": scope["method"], "headers": headers, "body": message, "at": time.monotonic()}
        self.seen.append(seen)
        if scope["method"] == "GET":
            last = headers.get("last-event-id")
            if last == "e1" and self.busy_resumes > 0:
                self.busy_resumes -= 1
                await self._plain(send, 503, b"try again")
            elif last == "e1":
                content = [{"type": "text", "text": "resumed"}]
                result = {"jsonrpc": "2.0", "id": self.pending, "result": {"content": content}}
                await self._sse(send, b"id: e2\ndata: " + json.dumps(result).encode() + b"\n\n")
            elif self.standalone and last in (None, "l1"):
                kind = b"tools" if last is None else b"prompts"
                note = b'{"jsonrpc":"2.0","method":"notifications/' + kind + b'/list_changed"}'
                event_id = b"l1" if last is None else b"l2"
                await self._sse(send, b"id: " + event_id + b"\nretry: 100\ndata: " + note + b"\n\n")
            else:
                await self._plain(send, 405, b"no standalone stream")
            return
        if scope["method"] == "DELETE":
            await self._plain(send, 200, b"")
            return
        method = message.get("method")
        if "id" not in message:
            await self._plain(send, 202, b"")
            return
        if method == "initialize":
            info = {"name": "scripted", "version": "0"}
            result = {"protocolVersion": LEGACY, "capabilities": {}, "serverInfo": info}
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            await self._json(send, reply, [(b"mcp-session-id", b"s1")])
            return
        tool = message["params"].get("name")
        if tool in ("primed", "primed_busy"):
            self.pending = message["id"]
            self.busy_resumes = 1 if tool == "primed_busy" else 0
            await self._start(send, 200, b"text/event-stream")
            priming = b"id: e1\nretry: 300\ndata: \n\n"
            await send({"type": "http.response.body", "body": priming, "more_body": True})
            await asyncio.sleep(0.05)
            self.primed_closed_at = time.monotonic()
            await send({"type": "http.response.body", "body": b""})
        elif tool == "fail_500":
            await self._plain(send, 500, b"database on fire\n" + b"x" * 1000)
        elif tool == "hang":
            await self._start(send, 200, b"text/event-stream")
            await send({"type": "http.response.body", "body": b": hello\n\n", "more_body": True})
            while (await receive())["type"] != "http.disconnect":
                pass
        else:
            await self._json(send, {"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}})

    @staticmethod
    async def _start(send: Callable, status: int, content_type: bytes, extra: list | None = None) -> None:
        headers = [(b"content-type", content_type), *(extra or [])]
        await send({"type": "http.response.start", "status": status, "headers": headers})

    async def _sse(self, send: Callable, body: bytes) -> None:
        await self._start(send, 200, b"text/event-stream")
        await send({"type": "http.response.body", "body": body})

    async def _plain(self, send: Callable, status: int, body: bytes) -> None:
        await self._start(send, status, b"text/plain")
        await send({"type": "http.response.body", "body": body})

    async def _json(self, send: Callable, message: dict, extra: list | None = None) -> None:
        await self._start(send, 200, b"application/json", extra)
        await send({"type": "http.response.body", "body": json.dumps(message).encode()})


@contextlib.asynccontextmanager
async def scripted(
    standalone: bool = False, wrap: Callable[[Scripted], Any] | None = None
) -> AsyncIterator[tuple[str, Scripted]]:
    """Serve a fresh ``Scripted`` app (or ``wrap(app)``) with uvicorn in this event loop."""
    app = Scripted(standalone)
    port = free_port()
    config = uvicorn.Config(
        wrap(app) if wrap else app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(server.serve())
    await until(lambda: server.started or task.done(), "uvicorn to start")
    assert not task.done(), "uvicorn failed to start"
    try:
        yield f"http://127.0.0.1:{port}/mcp", app
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, DEADLINE)


# -- 2026-07-28: requests and replies --------------------------------------------------------------
def test_a_modern_tools_call_round_trips_with_the_request_metadata_headers(url):
    async def main() -> None:
        async with connected(url) as (transport, events):
            await transport.send(call(1, "add", a=1, b=2))
            await transport.send(call(2, "where", region="us-west1"))
            await until(lambda: events.outcome(1) and events.outcome(2), "both responses")

            assert text_of(events.response(1)) == "3"
            # The server checks Mcp-Method, Mcp-Name and Mcp-Param-Region: no -32020.
            assert text_of(events.response(2)) == "in us-west1"
            assert events.failures == {}

    run(main())


def test_an_sse_reply_delivers_progress_before_the_response(url):
    async def main() -> None:
        async with connected(url) as (transport, events):
            await transport.send(call(5, "progress", steps=2, progress="tok"))
            await until(lambda: events.outcome(5), "the response")

            *notes, last = events.messages
            assert [type(n) for n in notes] == [Notification, Notification]
            assert [n.params["progress"] for n in notes] == [1, 2]
            assert {n.method for n in notes} == {"notifications/progress"}
            assert {n.params["progressToken"] for n in notes} == {"tok"}
            assert text_of(last) == "done after 2 steps"

    run(main())


def test_a_400_with_a_json_rpc_body_is_delivered_as_a_message(url):
    """Unsupported version: 400 + -32022; the session needs the body to pick a version."""

    async def main() -> None:
        async with connected(url) as (transport, events):
            await transport.send(modern(3, "tools/list", {}, version="1999-01-01"))
            await until(lambda: events.outcome(3), "the error response")

            response = events.response(3)
            assert response is not None and response.error["code"] == -32022
            assert LATEST in response.error["data"]["supported"]
            assert events.failures == {}

    run(main())


def test_a_404_method_not_found_body_is_delivered_as_a_message(url):
    async def main() -> None:
        async with connected(url) as (transport, events):
            await transport.send(modern(4, "no/such/method", {}))
            await until(lambda: events.outcome(4), "the error response")

            assert events.response(4).error["code"] == -32601

    run(main())


def test_cancel_closes_the_stream_and_the_server_cancels_the_tool(url, tmp_path):
    marker = tmp_path / "sleepy"

    async def main() -> None:
        async with connected(url) as (transport, events):
            await transport.send(call(6, "sleepy", marker=str(marker)))
            await until(lambda: Path(str(marker) + ".started").exists(), "the tool to start")

            await transport.cancel(6, "the user pressed stop")
            # The file appears empty for a moment before its text is written.
            await until(lambda: marker.exists() and marker.read_text() == "cancelled", "the tool's cancellation")

            assert events.outcome(6) is None  # the session, not the transport, settles it

    run(main())


# -- handshake era -------------------------------------------------------------------------------------
def test_a_handshake_session_is_captured_used_listened_to_and_deleted(url):
    async def main() -> None:
        async with connected(url) as (transport, events):
            await transport.send(initialize())
            await until(lambda: events.outcome(1), "the initialize response")
            session_id = transport.session_id
            assert session_id, "the initialize response names a session"
            await transport.send(handshake_era(None, "notifications/initialized"))

            await transport.send(handshake_era(2, "tools/list"))
            await until(lambda: events.outcome(2), "tools/list")
            assert "add" in [t["name"] for t in events.response(2).result["tools"]]

            # The standalone GET stream carries what no request asked for.
            def list_changed() -> bool:
                methods = [getattr(m, "method", None) for m in events.messages]
                return "notifications/tools/list_changed" in methods

            for n in range(3, 40):  # until the GET stream is up, a change goes nowhere
                grow = {"name": "grow", "arguments": {"name": f"new_{n}"}}
                await transport.send(handshake_era(n, "tools/call", grow))
                await until(lambda n=n: events.outcome(n), "grow")
                if await within(list_changed, 0.3):
                    break
            assert list_changed(), "tools/list_changed arrived on the GET stream"
            assert events.failures == {}

        assert transport.session_id is None
        async with httpx.AsyncClient(timeout=DEADLINE) as raw:
            after = await raw.post(
                url,
                json={"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}},
                headers={"mcp-session-id": session_id, "mcp-protocol-version": LEGACY},
            )
        assert after.status_code == 404, "close() ended the session with DELETE"

    run(main())


def test_a_404_on_a_handshake_session_is_session_expired_and_forgets_it(url):
    async def main() -> None:
        async with connected(url) as (transport, events):
            await transport.send(initialize())
            await until(lambda: events.outcome(1), "initialize")
            session_id = transport.session_id
            async with httpx.AsyncClient(timeout=DEADLINE) as raw:
                deleted = await raw.delete(url, headers={"mcp-session-id": session_id})
            assert deleted.status_code == 200

            await transport.send(handshake_era(2, "tools/list"))
            await until(lambda: events.outcome(2), "the failure")

            error = events.failures[2]
            assert isinstance(error, SessionExpired) and isinstance(error, ConnectionClosed)
            assert session_id in str(error) and "initialize again" in str(error)
            assert transport.session_id is None

    run(main())


def test_a_handshake_stream_that_ends_early_is_resumed_after_retry_with_last_event_id():
    """2025-11-25 resumability, as the conformance scenario sse-retry checks it."""

    async def main() -> None:
        async with scripted() as (url, app), connected(url) as (transport, events):
            await transport.send(initialize())
            await until(lambda: events.outcome(1), "initialize")
            await transport.send(handshake_era(None, "notifications/initialized"))
            await transport.send(handshake_era(2, "tools/call", {"name": "primed", "arguments": {}}))
            await until(lambda: events.outcome(2), "the resumed response")

            assert text_of(events.response(2)) == "resumed"
            resumed = [r for r in app.requests("GET") if "last-event-id" in r["headers"]]
            assert len(resumed) == 1
            get = resumed[0]
            assert get["headers"]["last-event-id"] == "e1"
            assert get["headers"]["mcp-session-id"] == "s1"
            assert get["headers"]["accept"] == "text/event-stream"
            assert get["headers"]["mcp-protocol-version"] == LEGACY
            assert get["at"] - app.primed_closed_at >= 0.3, "waited the server's retry"
            assert events.failures == {}

    run(main())


def test_a_resumption_answered_503_is_tried_again_after_retry():
    """A balancer whose replica is down, or a session store away for a moment, answers
    503: the stream may still be there, so the client tries again (within its misses)."""

    async def main() -> None:
        async with scripted() as (url, app), connected(url) as (transport, events):
            await transport.send(initialize())
            await until(lambda: events.outcome(1), "initialize")
            await transport.send(handshake_era(None, "notifications/initialized"))
            await transport.send(handshake_era(2, "tools/call", {"name": "primed_busy", "arguments": {}}))
            await until(lambda: events.outcome(2), "the resumed response")

            assert text_of(events.response(2)) == "resumed" and events.failures == {}
            resumed = [r for r in app.requests("GET") if "last-event-id" in r["headers"]]
            assert len(resumed) == 2
            assert resumed[1]["at"] - resumed[0]["at"] >= 0.3, "waited the server's retry again"

    run(main())


def test_the_standalone_get_stream_reconnects_with_last_event_id_when_it_drops():
    async def main() -> None:
        async with scripted(standalone=True) as (url, app), connected(url) as (transport, events):
            await transport.send(initialize())
            await until(lambda: events.outcome(1), "initialize")
            await transport.send(handshake_era(None, "notifications/initialized"))
            await until(lambda: len(app.requests("GET")) == 3, "the GET stream: opened, resumed, refused")

            assert [m.method for m in events.messages if type(m) is Notification] == [
                "notifications/tools/list_changed",
                "notifications/prompts/list_changed",
            ]
            first, second, third = app.requests("GET")
            assert "last-event-id" not in first["headers"]
            assert second["headers"]["last-event-id"] == "l1" and third["headers"]["last-event-id"] == "l2"
            assert all(g["headers"]["mcp-session-id"] == "s1" for g in (first, second, third))
            assert all(g["headers"]["mcp-protocol-version"] == LEGACY for g in (first, second, third))
            assert second["at"] - first["at"] >= 0.1, "waited the server's retry"
            await asyncio.sleep(0.3)
            assert len(app.requests("GET")) == 3, "405 means no stream: stop asking"

    run(main())


def test_a_modern_stream_that_ends_early_is_a_lost_request():
    """2026-07-28 has no resumption: no GET, the request fails at once."""

    async def main() -> None:
        async with scripted() as (url, app), connected(url) as (transport, events):
            await transport.send(call(7, "primed"))
            await until(lambda: events.outcome(7), "the failure")

            error = events.failures[7]
            assert type(error) is RequestLost and isinstance(error, ConnectionClosed)
            assert "closed before the response" in str(error) and url in str(error)
            assert app.requests("GET") == []

    run(main())


def test_a_handshake_cancel_also_posts_notifications_cancelled():
    async def main() -> None:
        async with scripted() as (url, app), connected(url) as (transport, events):
            await transport.send(initialize())
            await until(lambda: events.outcome(1), "initialize")
            await transport.send(handshake_era(2, "tools/call", {"name": "hang", "arguments": {}}))
            await until(lambda: any(r["body"] and r["body"].get("id") == 2 for r in app.seen), "the POST")

            await transport.cancel(2, "enough")

            notes = [r for r in app.requests("POST") if r["body"].get("method") == "notifications/cancelled"]
            assert [n["body"]["params"] for n in notes] == [{"requestId": 2, "reason": "enough"}]
            assert notes[0]["headers"]["mcp-session-id"] == "s1"
            assert events.outcome(2) is None

    run(main())


def test_close_deletes_the_session_once_and_is_idempotent():
    async def main() -> None:
        async with scripted() as (url, app):
            transport = HttpClientTransport(url)
            events = Events()
            await transport.connect(events)
            await transport.send(initialize())
            await until(lambda: events.outcome(1), "initialize")
            await transport.send(call(2, "hang"))
            await until(lambda: len(app.requests("POST")) == 2, "the hanging POST")

            started = time.monotonic()
            await transport.close()
            await transport.close()

            assert time.monotonic() - started < 5
            deletes = app.requests("DELETE")
            assert len(deletes) == 1 and deletes[0]["headers"]["mcp-session-id"] == "s1"
            assert isinstance(events.failures[2], ConnectionClosed)
            with pytest.raises(ConnectionClosed, match="closed"):
                await transport.send(modern(3, "tools/list", {}))

    run(main())


# -- errors at the HTTP level ----------------------------------------------------------------------
def test_a_status_without_a_json_rpc_body_is_an_http_status_error():
    async def main() -> None:
        async with scripted() as (url, app), connected(url) as (transport, events):
            await transport.send(call(8, "fail_500"))
            await until(lambda: events.outcome(8), "the failure")

            error = events.failures[8]
            assert isinstance(error, HttpStatusError)
            assert error.status == 500
            assert error.excerpt.startswith("database on fire") and len(error.excerpt) <= 200
            assert url in str(error) and "tools/call" in str(error) and "HTTP 500" in str(error)

    run(main())


def test_connect_is_lazy_and_a_refused_post_fails_the_request_naming_the_server():
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens here

    async def main() -> None:
        async with connected(url) as (transport, events):
            await transport.send(modern(1, "tools/list", {}))
            await until(lambda: events.outcome(1), "the failure")

            error = events.failures[1]
            assert type(error) is ConnectionClosed
            assert f"HTTP server {url}" in str(error) and "ConnectError" in str(error)

    run(main())


def test_headers_and_the_auth_hook_go_on_every_request_and_key_the_credentials():
    tokens = iter(["Bearer one", "Bearer one", "Bearer two"])

    async def auth() -> dict[str, str]:
        return {"Authorization": next(tokens)}

    async def main() -> None:
        async with scripted() as (url, app), connected(url, headers={"X-Team": "blue"}, auth=auth) as (
            transport,
            events,
        ):
            assert transport.credential_key is None
            await transport.send(modern(1, "tools/list", {}))
            await until(lambda: events.outcome(1), "the first response")
            first = transport.credential_key
            await transport.send(modern(2, "tools/list", {}))
            await until(lambda: events.outcome(2), "the second response")
            assert transport.credential_key == first
            await transport.send(modern(3, "tools/list", {}))
            await until(lambda: events.outcome(3), "the third response")

            assert transport.credential_key not in (None, first)
            assert "one" not in first and "two" not in transport.credential_key
            posts = app.requests("POST")
            sent = [p["headers"]["authorization"] for p in posts]
            assert sent == ["Bearer one", "Bearer one", "Bearer two"]
            assert all(p["headers"]["x-team"] == "blue" for p in posts)
            assert all(p["headers"]["accept"] == "application/json, text/event-stream" for p in posts)
            assert all(p["headers"]["content-type"] == "application/json" for p in posts)
            assert all(p["headers"]["mcp-method"] == "tools/list" for p in posts)
            assert all("mcp-session-id" not in p["headers"] for p in posts)

        static = HttpClientTransport(url, headers={"authorization": "Bearer fixed"})
        same = HttpClientTransport(url, headers={"Authorization": "Bearer fixed"})
        assert static.credential_key == same.credential_key
        assert static.credential_key is not None
        assert HttpClientTransport(url).credential_key is None

    run(main())


def test_the_transport_names_the_server_and_is_http():
    transport = HttpClientTransport("http://example.test/mcp")

    assert transport.name == "HTTP server http://example.test/mcp"
    assert transport.kind == "http"


# -- the lean HTTP/1.1 client (_http11): the transport's one way to talk HTTP -------------------------
# These tests hold it to what HTTP/1.1 allows a server, with and without an auth hook.

PATHS = {
    "plain": {},
    "auth hook": {"auth": None},  # replaced below by a hook
}


@contextlib.asynccontextmanager
async def via(url: str, path: str, **options: Any) -> AsyncIterator[tuple[HttpClientTransport, Events]]:
    """``connected``, with the options the named path adds."""
    if path == "auth hook":

        async def no_headers() -> dict[str, str]:
            return {}

        options["auth"] = no_headers
    async with connected(url, **options) as (transport, events):
        yield transport, events


def listen(request_id: int) -> Outgoing:
    return modern(request_id, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})


@pytest.mark.parametrize("path", list(PATHS))
def test_open_listen_streams_neither_block_nor_are_blocked_by_many_concurrent_calls(url, path):
    async def main() -> None:
        async with via(url, path) as (transport, events):

            def acked(request_id: int) -> bool:
                return any(
                    type(m) is Notification
                    and m.method == "notifications/subscriptions/acknowledged"
                    and (m.params or {}).get("_meta", {}).get(_meta.SUBSCRIPTION_ID) == request_id
                    for m in events.messages
                )

            streams = range(100, 106)
            for n in streams:
                await transport.send(listen(n))
            await until(lambda: all(acked(n) for n in streams), "six acknowledged listen streams")

            calls = range(1, 41)
            for n in calls:
                await transport.send(call(n, "add", a=n, b=1))
            await until(lambda: all(events.outcome(n) for n in calls), "forty concurrent calls")
            assert [text_of(events.response(n)) for n in calls] == [str(n + 1) for n in calls]

            # The streams are still open: each one carries the change a call makes.
            await transport.send(call(50, "grow", name=f"grown_{path.split()[0]}"))
            await until(lambda: events.outcome(50), "grow")

            def changes() -> int:
                return sum(getattr(m, "method", None) == "notifications/tools/list_changed" for m in events.messages)

            await until(lambda: changes() >= len(streams), "tools/list_changed on every listen stream")
            assert all(events.outcome(n) is None for n in streams)
            assert events.failures == {}

    run(main())


@pytest.mark.parametrize("path", list(PATHS))
def test_slow_calls_do_not_hold_up_quick_ones(url, tmp_path, path):
    """Eight slow calls in flight: a quick call still goes out and comes back at once."""

    async def main() -> None:
        async with via(url, path) as (transport, events):
            markers = [tmp_path / f"slow{n}" for n in range(8)]
            for n, marker in enumerate(markers):
                await transport.send(call(10 + n, "sleepy", marker=str(marker)))
            await until(lambda: all(Path(f"{m}.started").exists() for m in markers), "eight slow calls")

            started = time.monotonic()
            await transport.send(call(1, "add", a=2, b=2))
            await until(lambda: events.outcome(1), "the quick call")
            assert text_of(events.response(1)) == "4"
            assert time.monotonic() - started < 2.0

            for n in range(8):
                await transport.cancel(10 + n)

    run(main())


def test_the_lean_path_keeps_one_connection_and_sends_the_headers_of_a_post():
    def respond(n: int, request: dict[str, Any]) -> tuple[bytes, bool]:
        return SHAPES["content-length"](request)

    async def main() -> None:
        async with raw_server(respond) as (url, raw), connected(url, headers={"X-Team": "blue"}) as (transport, events):
            for n in range(1, 6):
                await transport.send(call(n, "add", a=n, b=n))
                await until(lambda n=n: events.outcome(n), f"call {n}")
            assert events.failures == {}
            assert raw.connections == 1
            sent = raw.heads[-1]
            assert sent["host"] == url.split("/")[2]
            assert sent["content-type"] == "application/json"
            assert sent["accept"] == "application/json, text/event-stream"
            assert sent["accept-encoding"] == "gzip, deflate" and sent["user-agent"].startswith("modelctx")
            assert int(sent["content-length"]) > 0
            assert sent["x-team"] == "blue" and sent["mcp-method"] == "tools/call"

    run(main())


# A bare HTTP/1.1 server, for the response shapes and failures uvicorn never produces.
def json_reply(request: dict[str, Any], text: str = "ok") -> bytes:
    content = [{"type": "text", "text": text}]
    return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"content": content}}).encode()


class Raw:
    """Answers each request with ``respond(n, request)``: bytes to write and whether to
    close after, or None to close without answering. Records (connection, body)."""

    def __init__(self, respond: Callable[[int, dict[str, Any]], tuple[bytes, bool] | None]) -> None:
        self.respond = respond
        self.seen: list[tuple[int, dict[str, Any]]] = []
        self.heads: list[dict[str, str]] = []
        self.connections = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        connection = self.connections
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                fields = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines[1:] if line)}
                self.heads.append(fields)
                body = await reader.readexactly(int(fields["content-length"]))
                request = json.loads(body)
                self.seen.append((connection, request))
                answer = self.respond(len(self.seen), request)
                if answer is None:
                    break
                data, close = answer
                writer.write(data)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def raw_server(respond: Callable[[int, dict[str, Any]], tuple[bytes, bool] | None]) -> AsyncIterator[tuple[str, Raw]]:
    raw = Raw(respond)
    server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp", raw
    finally:
        server.close()
        for writer in raw.writers:
            writer.close()


def http(status: str, headers: list[str], body: bytes = b"") -> bytes:
    return (f"HTTP/1.1 {status}\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n").encode() + body


def chunked(body: bytes, size: int = 7) -> bytes:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def gzipped(body: bytes) -> bytes:
    import gzip

    return gzip.compress(body)


SHAPES: dict[str, Callable[[dict[str, Any]], tuple[bytes, bool]]] = {
    "content-length": lambda r: (
        http("200 OK", ["content-type: application/json", f"content-length: {len(json_reply(r))}"], json_reply(r)),
        False,
    ),
    "chunked": lambda r: (
        http("200 OK", ["content-type: application/json", "transfer-encoding: chunked"], chunked(json_reply(r))),
        False,
    ),
    "gzip": lambda r: (
        http(
            "200 OK",
            ["content-type: application/json", "content-encoding: gzip", f"content-length: {len(gzipped(json_reply(r)))}"],
            gzipped(json_reply(r)),
        ),
        False,
    ),
    "100-continue first": lambda r: (
        http("100 Continue", [])
        + http("200 OK", ["content-type: application/json", f"content-length: {len(json_reply(r))}"], json_reply(r)),
        False,
    ),
    "until close": lambda r: (http("200 OK", ["content-type: application/json", "connection: close"], json_reply(r)), True),
    "http/1.0": lambda r: (
        b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n" + json_reply(r),
        True,
    ),
    "sse, chunked": lambda r: (
        http("200 OK", ["content-type: text/event-stream", "transfer-encoding: chunked"])
        + chunked(b": keep-alive\n\nevent: message\ndata: " + json_reply(r) + b"\n\n", size=5),
        False,
    ),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_lean_path_reads_every_response_shape_http_allows(shape):
    async def main() -> None:
        async with raw_server(lambda n, r: SHAPES[shape](r)) as (url, raw), connected(url) as (transport, events):
            for n in (1, 2, 3):
                await transport.send(call(n, "echo"))
                await until(lambda n=n: events.outcome(n), f"reply {n}")
                assert text_of(events.response(n)) == "ok", events.failures
            closing = shape in ("until close", "http/1.0")
            assert raw.connections == (3 if closing else 1)

    run(main())


def test_a_keep_alive_connection_the_server_closed_while_idle_is_not_reused():
    def respond(n: int, request: dict[str, Any]) -> tuple[bytes, bool]:
        data, _ = SHAPES["content-length"](request)
        return data, n == 1  # the server closes the first connection after answering

    async def main() -> None:
        async with raw_server(respond) as (url, raw), connected(url) as (transport, events):
            await transport.send(call(1, "echo"))
            await until(lambda: events.outcome(1), "the first reply")
            await asyncio.sleep(0.1)
            await transport.send(call(2, "echo"))
            await until(lambda: events.outcome(2), "the second reply")

            assert text_of(events.response(2)) == "ok" and events.failures == {}
            assert [c for c, _ in raw.seen] == [1, 2]

    run(main())


FAILURES = {
    "closed without a response": (lambda n, r: None, "RemoteProtocolError"),
    "malformed status line": (lambda n, r: (b"HTTP/1.1 twohundred\r\n\r\n", False), "RemoteProtocolError"),
    "body cut short": (
        lambda n, r: (http("200 OK", ["content-type: application/json", "content-length: 500"], b'{"jsonrpc"'), True),
        "RemoteProtocolError",
    ),
    "silence": (lambda n, r: (b"", False), "ReadTimeout"),
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_broken_responses_fail_the_request_naming_the_cause(failure):
    respond, cause = FAILURES[failure]

    async def main() -> None:
        async with raw_server(respond) as (url, _), connected(url, sse_read_timeout=0.3) as (transport, events):
            await transport.send(call(1, "echo"))
            await until(lambda: events.outcome(1), "the failure")

            error = events.failures[1]
            assert type(error) is ConnectionClosed
            assert f"HTTP server {url}" in str(error) and f"failed: {cause}" in str(error)

    run(main())


def test_a_redirect_is_followed_as_httpx_follows_it():
    def respond(n: int, request: dict[str, Any]) -> tuple[bytes, bool]:
        return SHAPES["content-length"](request)

    async def main() -> None:
        async with raw_server(respond) as (target, raw):

            def moved(app: Scripted) -> Callable:
                async def asgi(scope: dict, receive: Callable, send: Callable) -> None:
                    if scope["method"] != "POST":
                        return await app(scope, receive, send)
                    app.seen.append({"verb": "POST", "headers": {}, "body": None, "at": time.monotonic()})
                    headers = [(b"location", target.encode()), (b"content-length", b"0")]
                    await send({"type": "http.response.start", "status": 307, "headers": headers})
                    await send({"type": "http.response.body", "body": b""})

                return asgi

            async with scripted(wrap=moved) as (url, app), connected(url) as (transport, events):
                for n in (1, 2):
                    await transport.send(call(n, "echo"))
                    await until(lambda n=n: events.outcome(n), f"reply {n}")
                    assert text_of(events.response(n)) == "ok", events.failures
            assert [r["id"] for _, r in raw.seen] == [1, 2]  # each POST reached the target once
            assert len(app.requests("POST")) == 2  # after a 307 at the first URL

    run(main())


@pytest.mark.parametrize("headers", [{"X-Note": "café"}, {"X-Note": "a\r\nx-injected: 1"}])
def test_a_header_value_http_cannot_carry_fails_the_request_and_nothing_is_sent(headers):
    async def main() -> None:
        async with raw_server(lambda n, r: SHAPES["content-length"](r)) as (url, raw), connected(
            url, headers=headers
        ) as (transport, events):
            await transport.send(call(1, "add", a=1, b=1))
            await until(lambda: events.outcome(1), "the failure")
            error = events.failures[1]
            assert type(error) is ConnectionClosed
            assert "LocalProtocolError: Illegal header value" in str(error)
            assert raw.seen == []

    run(main())


def test_the_get_stream_is_open_before_the_message_after_initialized_goes_out():
    """With POSTs as quick as the lean path makes them, the next request could reach a
    server before the GET stream does (the conformance mock for sse-retry then routes
    the call's result to that GET): send(notifications/initialized) waits for it."""

    async def main() -> None:
        async with scripted(standalone=True) as (url, app), connected(url) as (transport, events):
            await transport.send(initialize())
            await until(lambda: events.outcome(1), "initialize")
            await transport.send(handshake_era(None, "notifications/initialized"))

            assert len(app.requests("GET")) >= 1
            await transport.send(handshake_era(2, "tools/list"))
            await until(lambda: events.outcome(2), "tools/list")
            first_get, tools_list = app.requests("GET")[0], app.requests("POST")[-1]
            assert first_get["at"] < tools_list["at"]

    run(main())
