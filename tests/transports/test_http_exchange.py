"""Streamable HTTP's decisions, driven with no event loop: plain calls into the sans-IO
exchange (``transports/_exchange.py``), as a test drives ``ServerConnection``.

basic/transports/streamable-http.mdx (2026-07-28) and the 2025-11-25 transport page:
the DNS-rebinding guard, the POST's Content-Type and Accept, the era of a message (a
stateless request by its ``_meta`` or its header, ``initialize``, a handshake session by
``Mcp-Session-Id``), the modern header checks, and the caps of handshake sessions. Every
refusal is the status and JSON-RPC error the wire carries; the HTTP tests
(test_http_transport.py, test_http_sessions.py, test_limits.py) prove the same through a
served app.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from modelctx import Server
from modelctx.errors import HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION
from modelctx.protocol.jsonrpc import decode
from modelctx.protocol.versions import HANDSHAKE_VERSIONS, LATEST
from modelctx.transports._exchange import Confirm, HttpExchange, Named, OneWay, Refuse, ServeRequest
from modelctx.transports._session_store import MemorySessions
from modelctx.transports.session import HandshakeSession

HOST = {"host": "127.0.0.1:8000"}
POST = {**HOST, "content-type": "application/json", "accept": "application/json, text/event-stream"}
META = {"io.modelcontextprotocol/protocolVersion": LATEST, "io.modelcontextprotocol/clientCapabilities": {}}
MODERN = {**POST, "mcp-protocol-version": LATEST, "mcp-method": "tools/call", "mcp-name": "echo"}
OLD = HANDSHAKE_VERSIONS[0]

server = Server("exchange", "1.0")


@server.tool
def echo(text: str) -> str:
    return text


def exchange(
    max_sessions: int = 10, per_principal: int | None = None, max_requests: int = 256
) -> HttpExchange:
    sessions = MemorySessions(max_sessions, per_principal, 900.0)
    return HttpExchange(
        server, sessions, max_sessions=max_sessions, max_sessions_per_principal=per_principal or 100,
        max_requests_per_session=max_requests,
    )


def body(id: int | None, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if id is not None:
        message["id"] = id
    return json.dumps(message).encode()


def call(id: int = 1, meta: dict[str, Any] | None = META) -> bytes:
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": "hi"}}
    if meta is not None:
        params["_meta"] = meta
    return body(id, "tools/call", params)


def opened(ex: HttpExchange, principal: Any = None, session_id: str = "s1") -> HandshakeSession:
    session = HandshakeSession(session_id, OLD, {}, None)
    session.principal = principal
    ex.sessions.add(session)
    return session


def busy(session: HandshakeSession, id: int = 99) -> None:
    """Give ``session`` a request in flight, so no admission may evict it."""
    request = decode(body(id, "tools/call", {"name": "echo"}))
    session.connection.receive(request)  # type: ignore[arg-type]


def error_of(refusal: Refuse) -> dict[str, Any]:
    assert isinstance(refusal.body, dict), refusal
    error: dict[str, Any] = refusal.body["error"]
    return error


# -- the DNS-rebinding guard ---------------------------------------------------------------------
def test_a_host_outside_the_allowed_names_is_refused_421_misdirected():
    refusal = exchange().guard({"host": "evil.example:8000"})

    assert isinstance(refusal, Refuse) and refusal.status == 421
    assert error_of(refusal)["code"] == INVALID_REQUEST
    assert "allowed_hosts" in error_of(refusal)["message"]


def test_a_missing_or_malformed_host_is_refused_400():
    missing = exchange().guard({})
    malformed = exchange().guard({"host": "127.0.0.1:80/x"})

    assert isinstance(missing, Refuse) and missing.status == 400
    assert "missing" in error_of(missing)["message"]
    assert isinstance(malformed, Refuse) and malformed.status == 400
    assert "malformed" in error_of(malformed)["message"]


def test_an_origin_outside_the_allowed_origins_is_refused_403_and_a_loopback_origin_passes():
    ex = exchange()
    refusal = ex.guard({**HOST, "origin": "https://evil.example"})

    assert isinstance(refusal, Refuse) and refusal.status == 403
    assert "evil.example" in error_of(refusal)["message"]
    assert ex.guard({**HOST, "origin": "http://localhost:3000"}) is None


def test_a_header_the_spec_defines_once_sent_twice_is_refused_400():
    headers, refusal = HttpExchange.head([(b"host", b"127.0.0.1"), (b"mcp-method", b"a"), (b"mcp-method", b"b")])

    assert isinstance(refusal, Refuse) and refusal.status == 400
    assert error_of(refusal)["code"] == HEADER_MISMATCH


# -- the POST's media types ------------------------------------------------------------------------
def test_a_content_type_other_than_application_json_is_refused_415():
    refusal = exchange().post({**POST, "content-type": "text/plain"}, call(), None)

    assert isinstance(refusal, Refuse) and refusal.status == 415
    assert "text/plain" in error_of(refusal)["message"]


def test_an_accept_admitting_neither_json_nor_sse_is_refused_406():
    refusal = exchange().post({**POST, "accept": "text/html"}, call(), None)

    assert isinstance(refusal, Refuse) and refusal.status == 406


def test_a_body_that_is_not_json_rpc_is_refused_400_with_the_parse_error():
    refusal = exchange().post(POST, b"{not json", None)

    assert isinstance(refusal, Refuse) and refusal.status == 400
    assert error_of(refusal)["code"] == -32700


# -- the era ---------------------------------------------------------------------------------------
def test_a_request_whose_meta_names_a_version_is_served_statelessly():
    decided = exchange().post(MODERN, call(), None)

    assert isinstance(decided, ServeRequest) and decided.session is None
    assert decided.request.method == "tools/call"


def test_a_modern_protocol_version_header_makes_a_request_modern_even_without_meta():
    refusal = exchange().post(MODERN, call(meta=None), None)

    assert isinstance(refusal, Refuse) and refusal.status == 400
    assert error_of(refusal)["code"] == INVALID_PARAMS
    assert "missing required key" in error_of(refusal)["message"]


def test_a_modern_request_ignores_mcp_session_id():
    decided = exchange().post({**MODERN, "mcp-session-id": "nobody"}, call(), None)

    assert isinstance(decided, ServeRequest) and decided.session is None


def test_initialize_is_served_to_open_a_handshake_session():
    init = body(0, "initialize", {"protocolVersion": OLD, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}})
    decided = exchange().post(POST, init, None)

    assert isinstance(decided, ServeRequest) and decided.session is None
    assert decided.request.method == "initialize"


def test_a_request_naming_a_held_session_by_mcp_session_id_is_served_on_it():
    ex = exchange()
    session = opened(ex)
    decided = ex.post({**POST, "mcp-session-id": "s1", "mcp-protocol-version": OLD}, call(meta=None), None)

    assert isinstance(decided, ServeRequest) and decided.session is session


def test_another_principals_session_is_not_found():
    ex = exchange()
    opened(ex, principal="alice")
    decided = ex.post({**POST, "mcp-session-id": "s1"}, call(meta=None), "mallory")

    assert isinstance(decided, Confirm) and decided.held is None


def test_an_unknown_session_id_is_left_to_the_store_then_answered_404():
    ex = exchange()
    decided = ex.post({**POST, "mcp-session-id": "gone"}, call(meta=None), None)

    assert isinstance(decided, Confirm) and decided.session_id == "gone" and decided.held is None
    refusal = ex.confirmed(decided, None)
    assert isinstance(refusal, Refuse) and refusal.status == 404
    assert error_of(refusal)["message"] == "Session not found or expired; send initialize again"
    assert refusal.body is not None and refusal.body["id"] == 1  # type: ignore[index]


def test_a_request_without_mcp_session_id_or_meta_is_invalid_params():
    refusal = exchange().post(POST, call(meta=None), None)

    assert isinstance(refusal, Refuse) and refusal.status == 400
    error = error_of(refusal)
    assert error["code"] == INVALID_PARAMS
    assert "no Mcp-Session-Id header" in error["message"] and "send initialize first" in error["message"]


def test_a_notification_of_a_held_session_is_one_way_on_it_and_outside_any_session_one_way_alone():
    ex = exchange()
    session = opened(ex)
    note = body(None, "notifications/initialized")

    on_session = ex.post({**POST, "mcp-session-id": "s1"}, note, None)
    alone = ex.post(POST, note, None)

    assert isinstance(on_session, OneWay) and on_session.session is session
    assert isinstance(alone, OneWay) and alone.session is None


# -- 2026-07-28 header checks ------------------------------------------------------------------------
def test_a_modern_request_without_the_protocol_version_header_is_a_header_mismatch():
    headers = {k: v for k, v in MODERN.items() if k != "mcp-protocol-version"}
    refusal = exchange().post(headers, call(), None)

    assert isinstance(refusal, Refuse) and refusal.status == 400
    assert error_of(refusal)["code"] == HEADER_MISMATCH
    assert "MCP-Protocol-Version header is required" in error_of(refusal)["message"]


def test_a_protocol_version_header_unlike_the_body_is_a_header_mismatch():
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2026-01-01"}
    refusal = exchange().post(MODERN, call(meta=meta), None)

    assert isinstance(refusal, Refuse) and refusal.status == 400
    assert error_of(refusal)["code"] == HEADER_MISMATCH
    assert "does not match body value '2026-01-01'" in error_of(refusal)["message"]


def test_an_unsupported_modern_version_is_refused_with_the_supported_ones():
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    refusal = exchange().post({**MODERN, "mcp-protocol-version": "2099-01-01"}, call(meta=meta), None)

    assert isinstance(refusal, Refuse) and refusal.status == 400
    error = error_of(refusal)
    assert error["code"] == UNSUPPORTED_PROTOCOL_VERSION
    assert LATEST in json.dumps(error["data"])


def test_an_mcp_name_header_unlike_the_tool_named_in_the_body_is_a_header_mismatch():
    refusal = exchange().post({**MODERN, "mcp-name": "other"}, call(), None)

    assert isinstance(refusal, Refuse) and refusal.status == 400
    assert error_of(refusal)["code"] == HEADER_MISMATCH


# -- the caps of handshake sessions ---------------------------------------------------------------------
INIT = body(0, "initialize", {"protocolVersion": OLD, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}})


def test_initialize_with_every_session_of_the_table_in_use_is_503_with_retry_after():
    ex = exchange(max_sessions=2)
    for n in range(2):
        busy(opened(ex, session_id=f"s{n}"))
    refusal = ex.post(POST, INIT, None)

    assert isinstance(refusal, Refuse) and refusal.status == 503
    assert (b"retry-after", b"1") in refusal.headers
    assert "all 2 sessions are in use" in error_of(refusal)["message"]


def test_initialize_at_the_cap_evicts_an_idle_session_instead():
    ex = exchange(max_sessions=2)
    busy(opened(ex, session_id="s0"))
    opened(ex, session_id="s1")  # idle: the one evicted

    assert isinstance(ex.post(POST, INIT, None), ServeRequest)
    assert ex.sessions.find("s1", None) is None and ex.sessions.find("s0", None) is not None


def test_initialize_with_every_session_of_the_principal_in_use_is_429_with_retry_after():
    ex = exchange(max_sessions=50, per_principal=2)
    for n in range(2):
        busy(opened(ex, principal="alice", session_id=f"a{n}"))
    refusal = ex.post(POST, INIT, "alice")

    assert isinstance(refusal, Refuse) and refusal.status == 429
    assert (b"retry-after", b"1") in refusal.headers
    assert "all 2 sessions of this principal are in use" in error_of(refusal)["message"]
    assert isinstance(ex.post(POST, INIT, "bob"), ServeRequest)  # another principal still has room


def test_a_request_past_the_sessions_requests_in_flight_is_429_and_never_runs():
    ex = exchange(max_requests=1)
    session = opened(ex)
    busy(session)
    request = decode(call(id=7, meta=None))
    refusal = ex.enter(request, session)  # type: ignore[arg-type]

    assert isinstance(refusal, Refuse) and refusal.status == 429
    assert (b"retry-after", b"1") in refusal.headers
    assert 7 not in session.connection.inflight


# -- GET and DELETE ------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_or_delete_without_mcp_session_id_is_405_allowing_post(method):
    refusal = exchange().route(method, HOST, None)

    assert isinstance(refusal, Refuse) and refusal.status == 405
    assert refusal.headers == ((b"allow", b"POST"),)


def test_another_method_is_405_allowing_post_get_and_delete():
    refusal = exchange().route("PUT", HOST, None)

    assert isinstance(refusal, Refuse) and refusal.status == 405
    assert refusal.headers == ((b"allow", b"POST, GET, DELETE"),)


def test_a_get_naming_a_session_names_the_one_held_for_that_principal():
    ex = exchange()
    session = opened(ex, principal="alice")

    mine = ex.route("GET", {**HOST, "mcp-session-id": "s1", "accept": "text/event-stream"}, "alice")
    theirs = ex.route("GET", {**HOST, "mcp-session-id": "s1"}, "mallory")

    assert mine == Named("s1", session)
    assert theirs == Named("s1", None)
