"""JSON-RPC batches over Streamable HTTP, on a 2025-03-26 session (issue 21).

The batch rule is 2025-03-26's alone (``Feature.BATCH``); its Streamable HTTP transport
lets a POST body be an array: only notifications and responses get 202, requests get
one ``application/json`` array of their responses, or (here, once a handler sends
early, e.g. progress) an SSE stream of those messages and then the responses. A real
``modelctx serve --http`` on loopback, driven with raw httpx (no official client sends
batches).
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelctx.protocol.connection import MAX_BATCH
from modelctx.protocol.versions import HANDSHAKE_VERSIONS, LEGACY_HANDSHAKE_VERSIONS
from tests.support.wire import DEADLINE, wait_until
from tests.transports.test_limits import LimitsServer

OLD, OLDEST = LEGACY_HANDSHAKE_VERSIONS  # 2025-03-26, 2024-11-05
NEWEST_HANDSHAKE = HANDSHAKE_VERSIONS[0]
ACCEPT = "application/json, text/event-stream"


def call(id: int | str, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}


def initialize_message(version: str, id: int = 0) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }


class Session:
    """A handshake-era session of ``version`` on a served endpoint, opened and initialized."""

    def __init__(self, client: httpx.Client, url: str, version: str) -> None:
        self.client, self.url, self.version = client, url, version
        opened = client.post(url, json=initialize_message(version), headers={"accept": ACCEPT})
        assert opened.status_code == 200, opened.text
        assert opened.json()["result"]["protocolVersion"] == version
        self.id = opened.headers["mcp-session-id"]
        assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202

    @property
    def headers(self) -> dict[str, str]:
        return {"accept": ACCEPT, "content-type": "application/json", "mcp-session-id": self.id, "mcp-protocol-version": self.version}

    def post(self, body: Any) -> httpx.Response:
        return self.client.post(self.url, content=json.dumps(body).encode(), headers=self.headers)


@pytest.fixture
def client() -> Any:
    with httpx.Client(timeout=DEADLINE) as client:
        yield client


def test_a_batch_of_two_tool_calls_and_a_ping_is_answered_as_one_array(http_server, client):
    session = Session(client, http_server.url, OLD)

    reply = session.post(
        [call(1, "add", {"a": 1, "b": 2}), call("two", "echo", {"text": "hi"}), {"jsonrpc": "2.0", "id": 3, "method": "ping"}]
    )

    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("application/json")
    answers = reply.json()
    assert isinstance(answers, list) and len(answers) == 3
    by_id = {answer["id"]: answer for answer in answers}
    assert by_id[1]["result"]["content"] == [{"type": "text", "text": '{"result":3}'}]
    assert "structuredContent" not in by_id[1]["result"]  # shaped for 2025-03-26
    assert by_id["two"]["result"]["content"][0]["text"] == "hi"
    assert by_id[3]["result"] == {}


def test_a_batchs_bad_items_are_answered_alone_among_the_others(http_server, client):
    session = Session(client, http_server.url, OLD)

    answers = session.post(
        [
            call(1, "echo", {"text": "ok"}),
            {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
            {"jsonrpc": "2.0", "id": 2, "method": "no/such"},
            {"jsonrpc": "1.0", "id": 3, "method": "ping"},
        ]
    ).json()

    by_id = {answer["id"]: answer for answer in answers}
    assert set(by_id) == {1, 2, 3}
    assert by_id[1]["result"]["content"][0]["text"] == "ok"
    assert by_id[2]["error"]["code"] == -32601
    assert by_id[3]["error"]["code"] == -32600


def test_a_batch_of_notifications_only_gets_202_and_no_body(http_server, client):
    session = Session(client, http_server.url, OLD)

    reply = session.post(
        [
            {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
        ]
    )

    assert reply.status_code == 202 and reply.content == b""
    assert session.post(call(1, "echo", {"text": "after"})).json()["result"]["content"][0]["text"] == "after"


def test_a_batch_larger_than_the_bound_is_refused_whole(http_server, client, tmp_path):
    session = Session(client, http_server.url, OLD)
    marker = tmp_path / "ran"

    reply = session.post([call(i, "sleepy", {"seconds": 0, "marker": str(marker)}) for i in range(1, MAX_BATCH + 2)])

    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["code"] == -32600 and f"at most {MAX_BATCH}" in error["message"]
    assert not Path(str(marker) + ".started").exists()  # none of it ran
    full = session.post([call(i, "echo", {"text": str(i)}) for i in range(1, MAX_BATCH + 1)]).json()
    assert sorted(answer["id"] for answer in full) == list(range(1, MAX_BATCH + 1))


def test_initialize_inside_a_batch_is_refused_alone(http_server, client):
    session = Session(client, http_server.url, OLD)

    answers = session.post([initialize_message(OLD, id=1), call(2, "echo", {"text": "ok"})]).json()

    by_id = {answer["id"]: answer for answer in answers}
    assert by_id[1]["error"]["code"] == -32600
    assert "initialize must not be part of a batch" in by_id[1]["error"]["message"]
    assert by_id[2]["result"]["content"][0]["text"] == "ok"


@pytest.mark.parametrize("version", [OLDEST, NEWEST_HANDSHAKE])
def test_other_revisions_still_refuse_a_batch(http_server, client, version):
    session = Session(client, http_server.url, version)

    reply = session.post([call(1, "echo", {"text": "x"})])

    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["code"] == -32600 and "batches are not supported" in error["message"]


def test_a_batch_with_no_session_or_an_unknown_one_is_refused_as_before(http_server, client):
    body = json.dumps([call(1, "echo", {"text": "x"})]).encode()
    for headers in ({}, {"mcp-session-id": "no-such-session", "mcp-protocol-version": OLD}):
        reply = client.post(http_server.url, content=body, headers={"accept": ACCEPT, "content-type": "application/json", **headers})
        assert reply.status_code == 400
        assert "batches are not supported" in reply.json()["error"]["message"]
    # initialize itself in a batch, before any session: refused the same way
    reply = client.post(http_server.url, content=json.dumps([initialize_message(OLD)]).encode(), headers={"accept": ACCEPT})
    assert reply.status_code == 400 and "batches are not supported" in reply.json()["error"]["message"]


def sse_messages(text: str) -> list[Any]:
    messages = []
    for event in text.split("\n\n"):
        data = [line[5:].strip() for line in event.splitlines() if line.startswith("data:")]
        if data and data[0]:
            messages.append(json.loads("\n".join(data)))
    return messages


def test_progress_of_a_batched_call_streams_the_reply_as_sse(http_server, client):
    session = Session(client, http_server.url, OLD)

    reply = session.post([call(1, "progress", {"steps": 2}, {"progressToken": "p"}), call(2, "echo", {"text": "too"})])

    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/event-stream")
    messages = sse_messages(reply.text)
    progress = [m for m in messages if m.get("method") == "notifications/progress"]
    assert [m["params"]["progress"] for m in progress] == [1, 2]
    assert all(m["params"]["progressToken"] == "p" for m in progress)
    responses = {m["id"]: m for m in messages if "id" in m}
    assert responses[1]["result"]["content"][0]["text"] == "done after 2 steps"
    assert responses[2]["result"]["content"][0]["text"] == "too"
    # the responses come after every notification of their requests
    assert messages.index(responses[1]) > messages.index(progress[-1])


def test_a_cancelled_request_of_a_batch_is_left_out_of_its_answer(http_server, client, tmp_path):
    session = Session(client, http_server.url, OLD)
    marker = tmp_path / "sleepy"
    replies: list[httpx.Response] = []
    batch = [call(1, "sleepy", {"seconds": 60, "marker": str(marker)}), call(2, "echo", {"text": "kept"})]
    sender = threading.Thread(target=lambda: replies.append(session.post(batch)))
    sender.start()
    wait_until(lambda: Path(str(marker) + ".started").exists(), "the batched sleepy call to start")

    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "no"}}
    with httpx.Client(timeout=DEADLINE) as other:
        assert other.post(session.url, content=json.dumps(cancel).encode(), headers=session.headers).status_code == 202
    sender.join(DEADLINE)

    assert not sender.is_alive()
    assert marker.read_text() == "cancelled"
    answers = replies[0].json()
    assert [answer["id"] for answer in answers] == [2]
    assert answers[0]["result"]["content"][0]["text"] == "kept"


def test_a_batch_whose_client_leaves_has_its_requests_cancelled(http_server, client, tmp_path):
    session = Session(client, http_server.url, OLD)
    marker = tmp_path / "sleepy"
    body = json.dumps([call(1, "sleepy", {"seconds": 60, "marker": str(marker)})]).encode()
    # A raw socket: the reply's head comes only with the answers, so the client leaves first.
    port = int(session.url.split(":")[2].split("/")[0])
    head = "".join(f"{name}: {value}\r\n" for name, value in session.headers.items())
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as leaving:
        leaving.sendall(
            f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{head}content-length: {len(body)}\r\n\r\n".encode() + body
        )
        wait_until(lambda: Path(str(marker) + ".started").exists(), "the batched sleepy call to start")

    wait_until(lambda: marker.exists() and marker.read_text() == "cancelled", "the batched call to be cancelled")
    assert session.post(call(2, "echo", {"text": "alive"})).json()["result"]["content"][0]["text"] == "alive"


def test_a_batch_past_the_sessions_in_flight_cap_is_refused_whole_with_429(client, tmp_path):
    server = LimitsServer(tmp_path / "server.log", {"max_requests_per_session": 2})
    try:
        session = Session(client, server.url, OLD)
        marker = tmp_path / "held"

        refused = session.post([call(i, "sleepy", {"marker": f"{marker}{i}", "seconds": 0}) for i in range(1, 4)])

        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["message"].startswith("Too many requests in flight: this batch of 3 requests")
        assert not any(Path(f"{marker}{i}.started").exists() for i in range(1, 4))  # nothing of it ran
        answers = session.post([call(1, "echo", {"text": "a"}), call(2, "echo", {"text": "b"})]).json()
        assert sorted(answer["id"] for answer in answers) == [1, 2]  # a batch within the cap is served
    finally:
        server.stop()
