"""What the coverage-guided fuzzer feeds (issue 7, Fuzzing): every place a peer's bytes
enter modelctx, each with the only exceptions it may raise.

Each target takes the fuzzer's bytes. An exception that is not one of the documented
JSON-RPC errors (or a bound being enforced) is a finding: the fuzzer stops and writes the
input to a ``crash-*`` file, which becomes a regression test.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import Callable
from typing import Any

import atheris

with atheris.instrument_imports():
    from modelctx import Client, ClientHandlers, ClientOptions, Server, ToolError
    from modelctx.errors import (
        HeaderMismatch,
        InvalidParams,
        MalformedResponse,
        MCPError,
        ProtocolError,
        RegistrationError,
        UrlRefused,
    )
    from modelctx.protocol._request_state import StateSealer
    from modelctx.protocol.connection import ClientConnection, ServerConnection
    from modelctx.protocol.framing import LineBuffer, LineTooLong, SSEParser, response_id
    from modelctx.protocol.headers import check_headers, decode_value
    from modelctx.protocol.jsonrpc import decode
    from modelctx.server._uri_reach import POSITIONS_PER_STEP, Cost, count_steps, match_steps
    from modelctx.server._uri_template import UriTemplate, _compile, _parse
    from modelctx.transports._legacy_sse_client import endpoint_url
    from modelctx.transports.client_seam import ClientTransport, Outgoing, TransportEvents
    from modelctx.transports.http import HttpApp


def jsonrpc_decode(data: bytes) -> None:
    try:
        decode(data)
    except ProtocolError:
        pass


def server_connection(data: bytes) -> None:
    connection = ServerConnection()
    for frame in data.split(b"\n"):
        connection.receive_data(frame)
    connection.close()


def client_connection(data: bytes) -> None:
    connection = ClientConnection()
    for n in range(3):
        connection.request("tools/call", {}, now=0.0, progress=n == 1)
    for frame in data.split(b"\n"):
        try:
            message = decode(frame)
        except ProtocolError:
            response_id(frame)
            continue
        connection.receive(message, now=1.0)
    connection.expire(100.0)


def _chunks(data: bytes) -> list[bytes]:
    """Split ``data`` where its first byte says, so the fuzzer explores the cuts too."""
    if not data:
        return []
    step = data[0] % 17 + 1
    rest = data[1:]
    return [rest[i : i + step] for i in range(0, len(rest), step)]


def line_framing(data: bytes) -> None:
    buffer, lines = LineBuffer(max_line=256), []
    for chunk in _chunks(data):
        try:
            lines += buffer.feed(chunk)
        except LineTooLong as exc:
            lines += exc.lines
    buffer.tail()


def sse_framing(data: bytes) -> None:
    parser = SSEParser(max_event=1024)
    for chunk in _chunks(data):
        try:
            events = parser.feed(chunk)
        except ValueError:  # EventTooLarge: the bound held
            return
        for _event, event_data in events:
            _endpoint(event_data)


def _endpoint(data: bytes) -> None:
    """What an HTTP+SSE client makes of an event as its ``endpoint``: a URL of the
    stream's own origin, or a refusal."""
    try:
        url = endpoint_url("http://127.0.0.1:8000/sse", data, "fuzz")
    except (MalformedResponse, UrlRefused):
        return
    parts = urllib.parse.urlsplit(url)
    assert (parts.scheme.lower(), parts.hostname, parts.port) == ("http", "127.0.0.1", 8000), url


def headers(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    given = {
        "mcp-protocol-version": fdp.ConsumeUnicodeNoSurrogates(12),
        "mcp-method": fdp.ConsumeUnicodeNoSurrogates(12),
        "mcp-name": fdp.ConsumeUnicodeNoSurrogates(40),
        "mcp-param-x": fdp.ConsumeUnicodeNoSurrogates(40),
    }
    name: Any = fdp.PickValueInList([fdp.ConsumeUnicodeNoSurrogates(20), fdp.ConsumeInt(8), None, True])
    try:
        decode_value("Mcp-Name", given["mcp-name"])
        check_headers(given, "tools/call", {"name": name, "arguments": {"x": name}}, "2026-07-28", {"mcp-param-x": ("x",)})
    except HeaderMismatch:
        pass


def uri_template(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    text = fdp.ConsumeUnicodeNoSurrogates(40)
    uri = fdp.ConsumeUnicodeNoSurrogates(200)
    try:
        template = UriTemplate(text)
    except RegistrationError:
        template = UriTemplate("x://{a}.{b}/{+c}{?q,r}{#f}")
    found = template.match(uri)
    if found is not None and not isinstance(found, dict):
        raise AssertionError(f"match gave {found!r}")
    for hostile in ("x://{a}{b}{?q}{c}{d}", text):
        # Matching stays linear for any template that parses, even one registration
        # refuses ({a}{b}{c}): a finding here is a matcher that rescans the URI.
        try:
            steps, _ = _compile(_parse(hostile))
        except RegistrationError:
            continue
        cost = Cost()
        match_steps(steps, uri, cost)
        if cost.positions > POSITIONS_PER_STEP * (len(uri) + 1) * count_steps(steps):
            raise AssertionError(f"{cost.positions} positions scanned matching {uri!r} to {hostile!r}")


_SEALER = StateSealer(b"fuzz" * 8)


def request_state(data: bytes) -> None:
    try:
        _SEALER.open_round(data.decode("utf-8", "replace"), "tools/call", {"name": "x"})
    except InvalidParams:
        pass


# -- the HTTP application as a whole, in-process over ASGI ------------------------------------
def _fuzz_server() -> Server:
    server = Server("fuzz")

    @server.tool
    async def echo(text: str) -> str:
        return text

    @server.tool
    def fail(reason: str = "no") -> str:
        raise ToolError(reason)

    @server.resource("fuzz://items/{id}{?q}")
    def item(id: str, q: str = "") -> str:
        return id + q

    @server.prompt
    def greet(name: str) -> str:
        return f"hello {name}"

    return server


_APP = HttpApp(_fuzz_server())
_LOOP = asyncio.new_event_loop()
_METHODS = [b"POST", b"GET", b"DELETE", b"PUT"]
_HEADER_NAMES = [
    b"content-type", b"accept", b"mcp-protocol-version", b"mcp-method", b"mcp-name",
    b"mcp-session-id", b"mcp-param-x", b"origin", b"host", b"last-event-id", b"content-length",
]


def http_app(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    method = fdp.PickValueInList(_METHODS)
    headers = [(b"host", b"127.0.0.1:8000")]
    for _ in range(fdp.ConsumeIntInRange(0, 8)):
        headers.append((fdp.PickValueInList(_HEADER_NAMES), fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 60))))
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
    scope = {"type": "http", "method": method.decode(), "path": "/mcp", "headers": headers, "query_string": b""}
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)  # the client stays connected
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    _LOOP.run_until_complete(asyncio.wait_for(_APP(scope, receive, send), 5))
    status = next((m["status"] for m in sent if m["type"] == "http.response.start"), None)
    if status is None or status >= 500:
        raise AssertionError(f"answered {status} to {method!r} {headers!r} {body[:200]!r}")


class _ScriptedServer(ClientTransport):
    """A server that answers the client's n-th request with the n-th line of the input as
    its ``result`` (a line starting with ``!`` is sent as a whole message instead: an
    error, a notification, a request of the server's), so the client's handling of
    whatever a server replies is what gets fuzzed."""

    def __init__(self, lines: list[bytes]) -> None:
        self.lines = lines
        self.events: TransportEvents | None = None

    async def connect(self, events: TransportEvents) -> None:
        self.events = events

    async def send(self, outgoing: Outgoing) -> None:
        request_id = outgoing.request_id
        if request_id is None or self.events is None:
            return
        line = self.lines.pop(0) if self.lines else b"{}"
        frame = line[1:] if line.startswith(b"!") else b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (
            json.dumps(request_id).encode(), line,
        )
        try:
            message = decode(frame)
        except ProtocolError as exc:
            self.events.request_failed(request_id, exc)
            return
        self.events.message(message)
        if line.startswith(b"!"):  # the request itself still needs an answer
            self.events.request_failed(request_id, ProtocolError("no answer"))

    async def cancel(self, request_id: str | int, reason: str | None = None) -> None:
        pass

    async def close(self) -> None:
        pass


async def _client_calls(lines: list[bytes]) -> None:
    async def elicit(params: Any) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "x"}}

    # Two input rounds at most: a "retry later" round backs off (sleeps), and ten of them
    # cost seconds of wall time an input that find nothing the first two do not.
    client = Client(
        _ScriptedServer(lines), mode="2026-07-28", timeout=1.0,
        handlers=ClientHandlers(elicitation=elicit), options=ClientOptions(max_rounds=2),
    )
    await client.connect()
    calls = (
        client.discover, client.list_tools, lambda: client.call_tool("t", {"a": 1}),
        client.list_resources, client.list_resource_templates, lambda: client.read_resource("x://a"),
        client.list_prompts, lambda: client.get_prompt("p", {"a": "b"}), client.tools,
        lambda: client.complete({"type": "ref/prompt", "name": "p"}, "a", "b"),
    )
    for call in calls:
        try:
            await call()
        except MCPError:
            pass  # what a bad reply may give: MalformedResponse, the server's error...
    await client.close()


def client_replies(data: bytes) -> None:
    _LOOP.run_until_complete(asyncio.wait_for(_client_calls(data.split(b"\n")), 10))


TARGETS: dict[str, Callable[[bytes], None]] = {
    "jsonrpc_decode": jsonrpc_decode,
    "server_connection": server_connection,
    "client_connection": client_connection,
    "line_framing": line_framing,
    "sse_framing": sse_framing,
    "headers": headers,
    "uri_template": uri_template,
    "request_state": request_state,
    "http_app": http_app,
    "client_replies": client_replies,
}
