"""Property-based tests of every place a peer's bytes enter (issue 7, Fuzzing).

Hypothesis generates the inputs. Each property is a promise the code makes to a hostile
peer: the decoder, the connection, the framings (split at every byte boundary), the
``Mcp-*`` header checks, cursors, ``requestState`` and URI templates never raise
anything but the JSON-RPC error they document, and round trips give back what went in.
300 examples a property in CI; ``MODELCTX_FUZZ_EXAMPLES=3000`` for a longer local run.
"""

from __future__ import annotations

import os
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelctx.errors import InvalidParams, ProtocolError, RegistrationError
from modelctx.protocol._request_state import StateSealer, _unb64
from modelctx.protocol.connection import ClientConnection, ServerConnection
from modelctx.protocol.framing import LineBuffer, LineTooLong, SSEParser, response_id
from modelctx.protocol.headers import check_headers, decode_value, encode_value
from modelctx.protocol.jsonrpc import Notification, Request, Response, decode, encode
from modelctx.server._methods import _decode_cursor, _encode_cursor
from modelctx.server._uri_template import UriTemplate

FUZZ = settings(max_examples=int(os.environ.get("MODELCTX_FUZZ_EXAMPLES", "300")), deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
ids = st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=12)
# Objects shaped like JSON-RPC messages, with every member possibly wrong.
message_like = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | json_values,
        "id": ids | json_values,
        "method": st.sampled_from(["tools/call", "notifications/cancelled", "initialize"]) | json_values,
        "params": st.dictionaries(st.text(max_size=8), json_values, max_size=3) | json_values,
        "result": json_values,
        "error": st.fixed_dictionaries({"code": st.integers(), "message": st.text()}) | json_values,
    },
)


# -- the decoder and the connection -----------------------------------------------------------
@FUZZ
@given(st.binary(max_size=200))
def test_any_bytes_decode_to_a_message_or_a_json_rpc_error(data: bytes) -> None:
    try:
        message = decode(data)
    except ProtocolError as exc:
        assert exc.code in (-32700, -32600, -32602)
        return
    assert isinstance(message, Request | Notification | Response)


@FUZZ
@given(message_like)
def test_any_json_object_decodes_to_a_message_or_a_json_rpc_error(obj: dict[str, Any]) -> None:
    try:
        decode(encode(obj))
    except ProtocolError as exc:
        assert exc.code in (-32600, -32602)


@FUZZ
@given(st.lists(message_like | st.binary(max_size=40), max_size=8))
def test_the_server_connection_takes_any_frames_without_raising(frames: list[Any]) -> None:
    connection = ServerConnection()
    for frame in frames:
        data = frame if isinstance(frame, bytes) else encode(frame)
        event = connection.receive_data(data)
        assert event is not None


@FUZZ
@given(st.lists(message_like, max_size=8))
def test_the_client_connection_takes_any_messages_without_raising(objects: list[dict[str, Any]]) -> None:
    connection = ClientConnection()
    connection.request("tools/call", {}, now=0.0, progress=True)
    for obj in objects:
        try:
            message = decode(encode(obj))
        except ProtocolError:
            continue
        connection.receive(message, now=1.0)


@FUZZ
@given(st.binary(max_size=300))
def test_response_id_never_raises_and_names_only_ids(frame: bytes) -> None:
    found = response_id(frame)
    assert found is None or isinstance(found, str | int)


# -- framing, split at every byte boundary ----------------------------------------------------
lines_strategy = st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), max_size=6)


@FUZZ
@given(lines_strategy, st.data())
def test_lines_come_back_whole_however_the_stream_is_split(lines: list[bytes], data: Any) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(stream)), max_size=8)))
    buffer, got = LineBuffer(), []
    start = 0
    for cut in [*cuts, len(stream)]:
        got += buffer.feed(stream[start:cut])
        start = cut
    assert got == lines and buffer.tail() == b""


def test_lines_come_back_whole_split_at_every_single_byte_boundary() -> None:
    lines = [b'{"jsonrpc":"2.0","id":1}', b"", b"x" * 10, b"\r"]
    stream = b"".join(line + b"\n" for line in lines)
    for cut in range(len(stream) + 1):
        buffer = LineBuffer()
        assert buffer.feed(stream[:cut]) + buffer.feed(stream[cut:]) == lines


@FUZZ
@given(st.binary(max_size=100), st.integers(1, 40))
def test_a_line_buffer_never_holds_more_than_its_bound(data: bytes, bound: int) -> None:
    buffer = LineBuffer(max_line=bound)
    try:
        buffer.feed(data)
    except LineTooLong:
        pass
    assert len(buffer.tail()) <= bound


sse_text = st.text(alphabet=string.ascii_letters + string.digits + ' {}":,', max_size=20)


@FUZZ
@given(
    st.lists(st.tuples(st.sampled_from(["message", "ping"]), sse_text), max_size=5),
    st.sampled_from([b"\n", b"\r", b"\r\n"]),
    st.data(),
)
def test_sse_events_come_back_whatever_the_line_endings_and_the_split(
    events: list[tuple[str, str]], end: bytes, data: Any
) -> None:
    stream = b"".join(
        b"event: " + name.encode() + end + b"data: " + text.encode() + end + end for name, text in events
    )
    cuts = sorted(data.draw(st.sets(st.integers(0, len(stream)), max_size=8)))
    parser, got = SSEParser(), []
    start = 0
    for cut in [*cuts, len(stream)]:
        got += parser.feed(stream[start:cut])
        start = cut
    assert got == [(name, text.encode()) for name, text in events]


@FUZZ
@given(st.binary(max_size=200))
def test_an_sse_parser_takes_any_bytes(data: bytes) -> None:
    parser = SSEParser(max_event=64)
    try:
        parser.feed(data)
    except ValueError:  # EventTooLarge: the bound held
        pass


# -- headers, cursors, requestState, URI templates -------------------------------------------
@FUZZ
@given(st.text(max_size=40) | st.integers() | st.booleans())
def test_a_header_value_encodes_and_decodes_back(value: Any) -> None:
    decoded = decode_value("Mcp-Name", encode_value(value))
    expected = ("true" if value else "false") if isinstance(value, bool) else str(value)
    assert decoded == expected


@FUZZ
@given(st.dictionaries(st.sampled_from(["mcp-protocol-version", "mcp-method", "mcp-name", "mcp-param-x"]), st.text(max_size=30)), json_values)
def test_header_checks_raise_only_header_mismatch(headers: dict[str, str], name: Any) -> None:
    try:
        check_headers(headers, "tools/call", {"name": name, "arguments": {"x": name}}, "2026-07-28", {"mcp-param-x": ("x",)})
    except ProtocolError as exc:
        assert exc.code == -32020


@FUZZ
@given(json_values | st.text(max_size=40))
def test_a_cursor_is_one_we_issued_or_invalid_params(cursor: Any) -> None:
    try:
        offset = _decode_cursor("tools", cursor)
    except InvalidParams:
        return
    assert offset >= 0 and _decode_cursor("tools", _encode_cursor("tools", offset)) == offset


@FUZZ
@given(st.integers(0, 10**9))
def test_cursors_round_trip_and_belong_to_their_kind(offset: int) -> None:
    cursor = _encode_cursor("prompts", offset)
    assert _decode_cursor("prompts", cursor) == offset
    with pytest.raises(InvalidParams):
        _decode_cursor("tools", cursor)


SEALER = StateSealer(b"k" * 32)


def _same_bytes(one: str, other: str) -> bool:
    try:
        return [_unb64(part) for part in one.split(".")] == [_unb64(part) for part in other.split(".")]
    except ValueError:
        return False


@FUZZ
@given(json_values | st.text(max_size=80))
def test_a_request_state_we_did_not_issue_is_invalid_params(state: Any) -> None:
    with pytest.raises(InvalidParams):
        SEALER.open_round(state, "tools/call", {"name": "x"})


@FUZZ
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=3), st.data())
def test_a_sealed_state_opens_once_whole_and_never_once_changed(answers: dict[str, Any], data: Any) -> None:
    params = {"name": "tool", "arguments": {"a": 1}}
    state = SEALER.seal("tools/call", params, answers, "alice")
    assert SEALER.open(state, "tools/call", params, "alice") == answers
    at = data.draw(st.integers(0, len(state) - 1))
    replacement = data.draw(st.sampled_from("AB._-x0"))
    changed = state[:at] + replacement + state[at + 1 :]
    if not _same_bytes(changed, state):  # the unused low bits of a last base64 digit
        with pytest.raises(InvalidParams):
            SEALER.open(changed, "tools/call", params, "alice")
    with pytest.raises(InvalidParams):
        SEALER.open(state, "tools/call", params, "mallory")


unreserved = st.text(alphabet=string.ascii_letters + string.digits + "-_~", min_size=1, max_size=12)


@FUZZ
@given(unreserved, unreserved, unreserved)
def test_expanded_templates_match_back_to_their_values(a: str, b: str, q: str) -> None:
    template = UriTemplate("x://{a}/items/{b}{?q}")
    uri = template.expand({"a": a, "b": b, "q": q})
    assert template.match(uri) == {"a": a, "b": b, "q": q}


@FUZZ
@given(st.text(max_size=200))
def test_matching_any_text_never_raises(uri: str) -> None:
    for text in ("x://{a}.{b}.{c}/end", "x://{+path}/{name}{?q,limit}", "x://{;p}{#frag}"):
        found = UriTemplate(text).match(uri)
        assert found is None or isinstance(found, dict)


@FUZZ
@given(st.text(max_size=30))
def test_parsing_any_template_gives_a_template_or_a_registration_error(text: str) -> None:
    try:
        UriTemplate(text)
    except RegistrationError:
        pass
