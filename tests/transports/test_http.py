"""Streamable HTTP, as basic/transports/streamable-http.mdx states it (DIGEST §9.3).

The server is a real ``modelctx serve --http`` subprocess; the tests use raw httpx.
"""

from __future__ import annotations

import httpx
import pytest

from tests.support.wire import request, sse_messages

ECHO = request(1, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
LEGACY = "2025-11-25"


def test_a_response_is_json_by_default(http):
    response = http.post(ECHO)

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "content": [{"type": "text", "text": "hi"}],
            "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "sample-server", "version": "1.2.3"}},
        },
    }


def test_progress_turns_the_response_into_an_sse_stream_that_the_result_ends(http):
    message = request(7, "tools/call", {"name": "progress", "arguments": {"steps": 2}}, progressToken="tok")

    response = http.post(message)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-accel-buffering"] == "no"
    *notifications, result = sse_messages(response.text)
    assert [n["params"] for n in notifications] == [
        {"progressToken": "tok", "progress": 1, "total": 2, "message": "step 1"},
        {"progressToken": "tok", "progress": 2, "total": 2, "message": "step 2"},
    ]
    assert result["id"] == 7
    assert result["result"]["content"] == [{"type": "text", "text": "done after 2 steps"}]


def test_without_a_progress_token_the_same_call_is_plain_json(http):
    response = http.post(request(7, "tools/call", {"name": "progress", "arguments": {"steps": 2}}))

    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["content"] == [{"type": "text", "text": "done after 2 steps"}]


def test_a_notification_is_accepted_with_202_and_no_body(http):
    response = http.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}})

    assert response.status_code == 202
    assert response.content == b""


def test_the_endpoint_is_only_at_its_path(http, http_server):
    response = http.client.post(http_server.url.replace("/mcp", "/other"), json=ECHO, headers=http.headers_for(ECHO))

    assert response.status_code == 404


# -- DNS-rebinding protection -------------------------------------------------------------------
def test_a_foreign_origin_is_refused_with_403(http):
    response = http.post(ECHO, headers={"origin": "http://evil.example"})

    assert response.status_code == 403
    error = response.json()
    assert "id" not in error and error["error"]["code"] == -32600


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_a_loopback_origin_is_allowed(http, http_server, host):
    response = http.post(ECHO, headers={"origin": f"http://{host}:{http_server.port}"})

    assert response.status_code == 200
    assert response.json()["result"]["content"] == [{"type": "text", "text": "hi"}]


@pytest.mark.parametrize("origin", ["http://localhost.evil.example", "null", "http://127.0.0.1.evil.example:80"])
def test_an_origin_that_only_looks_local_is_refused(http, origin):
    assert http.post(ECHO, headers={"origin": origin}).status_code == 403


def test_a_foreign_host_header_is_refused(http):
    """A rebinding attack reaches us under the attacker's host name."""
    response = http.post(ECHO, headers={"host": "evil.example"})

    assert response.status_code == 421
    assert response.json()["error"]["code"] == -32600


def test_a_loopback_host_header_is_allowed(http, http_server):
    response = http.post(ECHO, headers={"host": f"localhost:{http_server.port}"})

    assert response.status_code == 200


# -- no GET stream and no sessions in 2026-07-28 --------------------------------------------
def test_get_without_a_session_is_405(http):
    response = http.client.get(http.url, headers={"accept": "text/event-stream"})

    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


def test_delete_without_a_session_is_405(http):
    response = http.client.delete(http.url)

    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


def test_a_modern_request_is_given_no_session_and_ignores_one_it_sends(http):
    response = http.post(ECHO, headers={"mcp-session-id": "made-up"})

    assert response.status_code == 200
    assert "mcp-session-id" not in response.headers


# -- handshake-era sessions (2025-11-25) -------------------------------------------------------
def initialize(http, id=1):
    return http.post(
        {
            "jsonrpc": "2.0",
            "id": id,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "legacy-client", "version": "1"},
            },
        }
    )


def in_session(http, session_id, message):
    return http.post(message, headers={"mcp-session-id": session_id, "mcp-protocol-version": LEGACY})


LEGACY_ECHO = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "old"}}}


def test_initialize_returns_a_session_id_that_later_requests_use(http):
    opened = initialize(http)
    session_id = opened.headers["mcp-session-id"]
    initialized = in_session(http, session_id, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    echoed = in_session(http, session_id, LEGACY_ECHO)

    assert opened.status_code == 200
    assert opened.json()["result"]["protocolVersion"] == LEGACY
    assert session_id.isascii() and session_id.isprintable() and " " not in session_id
    assert initialized.status_code == 202
    assert echoed.status_code == 200
    assert echoed.json() == {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "old"}]}}


def test_each_initialize_opens_its_own_session(http):
    assert initialize(http).headers["mcp-session-id"] != initialize(http).headers["mcp-session-id"]


def test_an_initialize_naming_a_live_session_never_renegotiates_that_session(http):
    session_id = initialize(http).headers["mcp-session-id"]
    in_session(http, session_id, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    older = {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "again", "version": "1"}}
    again = in_session(http, session_id, {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": older})
    added = in_session(
        http, session_id,
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}},
    )  # fmt: skip

    # Today the initialize opens a session of its own (the header is not read for it);
    # either way the session it names keeps its revision: 2024-11-05 has no structuredContent.
    assert again.headers.get("mcp-session-id") != session_id
    assert added.status_code == 200 and added.json()["result"]["structuredContent"] == {"result": 3}


def test_a_handshake_era_request_without_a_session_is_refused(http):
    response = http.post(LEGACY_ECHO, headers={"mcp-protocol-version": LEGACY})

    assert response.status_code == 400


def test_an_unknown_session_id_is_404(http):
    response = in_session(http, "0123456789abcdef", LEGACY_ECHO)

    assert response.status_code == 404
    assert response.json()["id"] == 2


def test_delete_ends_the_session(http):
    session_id = initialize(http).headers["mcp-session-id"]
    in_session(http, session_id, {"jsonrpc": "2.0", "method": "notifications/initialized"})

    deleted = http.client.delete(http.url, headers={"mcp-session-id": session_id})
    after = in_session(http, session_id, LEGACY_ECHO)
    deleted_again = http.client.delete(http.url, headers={"mcp-session-id": session_id})

    assert deleted.status_code == 200
    assert after.status_code == 404
    assert deleted_again.status_code == 404


def test_delete_ends_the_sessions_open_get_stream_at_once(http):
    """The GET stream ends with its session, not at its next keep-alive 15 s later."""
    session_id = initialize(http).headers["mcp-session-id"]
    in_session(http, session_id, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    headers = {"accept": "text/event-stream", "mcp-session-id": session_id, "mcp-protocol-version": LEGACY}
    with httpx.Client(timeout=30.0) as listener, listener.stream("GET", http.url, headers=headers) as stream:
        assert stream.status_code == 200
        deleted = http.client.delete(http.url, headers={"mcp-session-id": session_id})
        body = b"".join(stream.iter_bytes())

    assert deleted.status_code == 200
    assert body == b""  # ended, and no keep-alive comment came first


def test_get_with_an_unknown_session_is_404(http):
    response = http.client.get(http.url, headers={"accept": "text/event-stream", "mcp-session-id": "nope"})

    assert response.status_code == 404


def test_deleting_one_session_leaves_the_others(http):
    first = initialize(http).headers["mcp-session-id"]
    second = initialize(http).headers["mcp-session-id"]

    http.client.delete(http.url, headers={"mcp-session-id": first})
    ping = in_session(http, second, {"jsonrpc": "2.0", "id": 4, "method": "ping"})

    assert ping.status_code == 200
    assert ping.json() == {"jsonrpc": "2.0", "id": 4, "result": {}}
