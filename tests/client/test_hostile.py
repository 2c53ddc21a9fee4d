"""A client facing a hostile server (issue 6, section 3): whatever a server sends, the
answer is an MCP error on the request it spoils, and the reader goes on.

Over stdio the server is a real subprocess (``servers/hostile_server.py``); over HTTP a
raw HTTP/1.1 server on 127.0.0.1 that writes the hostile replies byte for byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tracemalloc
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from modelctx.client import Client, ClientHandlers
from modelctx.client._session import MAX_SERVER_REQUESTS
from modelctx.errors import MalformedResponse, ParseError
from modelctx.transports.http_client import HttpClientTransport
from tests.support.paths import SERVERS

HOSTILE = SERVERS / "hostile_server.py"
DEADLINE = 30.0
DEPTH = 100_000


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, DEADLINE))


def text_of(result: Any) -> str:
    return result.content[0].text


def ok(request: dict[str, Any], text: str) -> bytes:
    result = {"content": [{"type": "text", "text": text}], "resultType": "complete"}
    return json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()


def head(request: dict[str, Any]) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + json.dumps(request["id"]).encode() + b',"result":'


# -- stdio -----------------------------------------------------------------------------------


def stdio_client() -> Client:
    return Client([sys.executable, str(HOSTILE)], mode="2026-07-28", timeout=DEADLINE)


@pytest.mark.parametrize(
    ("tool", "error"),
    [("nested", "could not be read"), ("huge", "exceeded")],
    ids=["a reply nested 100000 deep", "a reply line over 16 MiB"],
)
def test_stdio_a_reply_that_cannot_be_read_fails_its_call_and_the_next_call_works(tool: str, error: str):
    async def main() -> None:
        async with stdio_client() as client:
            with pytest.raises(ParseError, match=error):
                await client.call_tool(tool)
            assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"

    run(main())


def test_stdio_a_nested_line_without_an_id_is_dropped_and_the_answer_after_it_arrives():
    async def main() -> None:
        async with stdio_client() as client:
            assert text_of(await client.call_tool("garbage", {"text": "still here"})) == "still here"
            assert text_of(await client.call_tool("echo", {"text": "and after"})) == "and after"

    run(main())


# -- HTTP ------------------------------------------------------------------------------------
Respond = Callable[[dict[str, Any]], bytes | list[bytes]]


class RawHttp:
    """An HTTP/1.1 server that answers each POST with ``respond(request)``: one JSON
    body, or a list of raw pieces written one after another (a streamed body)."""

    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                fields = dict(
                    line.split(": ", 1) for line in head.decode("latin-1").lower().split("\r\n")[1:] if line
                )
                request = json.loads(await reader.readexactly(int(fields["content-length"])))
                reply = self.respond(request)
                if isinstance(reply, bytes):
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(reply), reply)
                    )
                    await writer.drain()
                    continue
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
                for piece in reply:
                    writer.write(piece)
                    await writer.drain()
                break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def http_client(respond: Respond, **options: Any) -> AsyncIterator[Client]:
    raw = RawHttp(respond)
    server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
    try:
        async with Client(HttpClientTransport(url, **options), mode="2026-07-28", timeout=DEADLINE) as client:
            yield client
    finally:
        server.close()
        for writer in raw.writers:
            writer.close()


def by_tool(hostile: dict[str, Respond]) -> Respond:
    def respond(request: dict[str, Any]) -> bytes | list[bytes]:
        params = request.get("params") or {}
        special = hostile.get(params.get("name"))
        if special is not None:
            return special(request)
        return ok(request, (params.get("arguments") or {}).get("text", ""))

    return respond


def test_http_a_json_reply_nested_100000_deep_fails_its_call_and_the_next_call_works():
    nested = by_tool({"nested": lambda r: head(r) + b"[" * DEPTH + b"]" * DEPTH + b"}"})

    async def main() -> None:
        async with http_client(nested) as client:
            with pytest.raises(ParseError, match="could not be read"):
                await client.call_tool("nested")
            assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"

    run(main())


def test_http_an_sse_event_nested_100000_deep_fails_its_call_and_the_next_call_works():
    def event(data: bytes) -> bytes:
        return b"event: message\ndata: " + data + b"\n\n"

    nested = by_tool({"nested": lambda r: [event(head(r) + b"[" * DEPTH + b"]" * DEPTH + b"}")]})

    async def main() -> None:
        async with http_client(nested) as client:
            with pytest.raises(ParseError, match="could not be read"):
                await client.call_tool("nested")
            assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"

    run(main())


def test_http_an_unreadable_event_that_answers_nothing_is_skipped_and_the_response_after_it_arrives():
    def stream(request: dict[str, Any]) -> list[bytes]:
        note = b'{"jsonrpc":"2.0","method":"notifications/message","params":' + b"[" * DEPTH
        return [b"data: " + note + b"\n\n", b"data: " + ok(request, "survived") + b"\n\n"]

    async def main() -> None:
        async with http_client(by_tool({"stream": stream})) as client:
            assert text_of(await client.call_tool("stream")) == "survived"

    run(main())


def test_http_a_json_reply_over_max_message_fails_its_call_and_the_next_call_works():
    huge = by_tool({"huge": lambda r: ok(r, "x" * 200_000)})

    async def main() -> None:
        async with http_client(huge, max_message=64 * 1024) as client:
            with pytest.raises(ParseError, match="larger than 65536 bytes"):
                await client.call_tool("huge")
            assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"

    run(main())


def test_http_an_sse_event_of_endless_data_lines_is_cut_at_max_message_and_the_stream_dropped():
    line = b"data: " + b"x" * 1000 + b"\n"

    def endless(request: dict[str, Any]) -> list[bytes]:
        return [line] * 10_000  # 10 MB of one event, if the client read it all

    async def main() -> None:
        async with http_client(by_tool({"endless": endless}), max_message=64 * 1024) as client:
            with pytest.raises(ParseError, match="exceeded 65536 bytes.*the stream was dropped"):
                await client.call_tool("endless")
            assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"

    run(main())


@pytest.mark.parametrize("newline", [b"\r", b"\r\n", b"\n"], ids=["CR", "CRLF", "LF"])
def test_http_sse_lines_may_end_in_cr_crlf_or_lf(newline):
    def stream(request: dict[str, Any]) -> list[bytes]:
        event = b": keep-alive" + newline + newline + b"event: message" + newline + b"data: " + ok(request, "ended")
        event += newline + newline
        # One byte at a time: a CR at the end of one piece and its LF in the next.
        return [event[i : i + 1] for i in range(len(event))]

    async def main() -> None:
        async with http_client(by_tool({"stream": stream})) as client:
            assert text_of(await client.call_tool("stream")) == "ended"

    run(main())


# -- floods: what a server can make the client hold (SECURITY.md, Limits) ---------------------


def test_a_listener_that_does_not_keep_up_loses_the_oldest_events_not_memory():
    # The server answers subscriptions/listen with 200,000 notifications while the
    # application reads only the first: the client keeps the newest MAX_UNREAD_EVENTS.
    async def main() -> None:
        async with stdio_client() as client:
            tracemalloc.start()
            try:
                events = client.listen(tools=True)
                assert (await anext(events)).kind == "tools"
                # The server reads the call after writing the whole flood: its answer
                # means the client has read all of it.
                assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"
                held, _peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            await events.aclose()
            # Unbounded, 200,000 Notification objects hold well over 100 MB.
            assert held < 20 * 1024 * 1024, f"{held / 1e6:.1f} MB held after the flood"

    run(main())


def test_a_round_asking_for_thousands_of_inputs_is_refused_without_asking_the_user():
    asked = []

    async def roots() -> list[str]:
        asked.append(1)
        return []

    async def main() -> None:
        client = Client(
            [sys.executable, str(HOSTILE)], mode="2026-07-28", timeout=DEADLINE,
            handlers=ClientHandlers(roots=roots),
        )
        async with client:
            with pytest.raises(MalformedResponse, match="10000 inputs in one round"):
                await client.call_tool("many_inputs")
            assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"
        assert asked == []

    run(main())


def test_a_flood_of_server_requests_is_refused_past_the_bound_at_once():
    # Handshake era: the server asks 1,000 questions of a user who answers none; the
    # client holds MAX_SERVER_REQUESTS of them and refuses the rest at once.
    never = asyncio.Event()

    async def elicit(question: Any) -> dict[str, Any]:
        await never.wait()
        return {"action": "cancel"}

    async def main() -> None:
        client = Client(
            [sys.executable, str(HOSTILE)], mode="handshake", timeout=DEADLINE,
            handlers=ClientHandlers(elicitation=elicit),
        )
        async with client:
            result = await client.call_tool("ask_flood")
        assert text_of(result) == f"refused={1000 - MAX_SERVER_REQUESTS}"

    run(main())
