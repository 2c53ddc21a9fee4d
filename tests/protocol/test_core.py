"""The protocol core, as the spec states it: no event loop, no I/O."""

import subprocess
import sys

import msgspec
import pytest

from modelctx.errors import (
    HeaderMismatch,
    InvalidParams,
    InvalidRequest,
    ParseError,
    UnsupportedProtocolVersion,
    error_from_wire,
)
from modelctx.protocol import (
    LineBuffer,
    Notification,
    Request,
    Response,
    SSEParser,
    StateSealer,
    decode,
    headers,
    sse_event,
)
from modelctx.protocol.versions import Feature, features, has, negotiate_handshake, offers


def test_the_core_imports_without_asyncio_or_http():
    """Lesson 1 of STYLE.md: the protocol core does no I/O, so it needs no I/O library."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('asyncio', 'anyio', 'httpx', 'starlette', 'uvicorn'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import modelctx.protocol, modelctx.errors\n"
        "from modelctx.protocol import decode, headers, StateSealer\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


class TestJsonRpcMessages:
    def test_a_request_has_an_id_and_a_method(self):
        msg = decode(b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}')
        assert type(msg) is Request and msg.id == 7 and msg.method == "tools/list"

    def test_a_notification_has_no_id(self):
        msg = decode(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}')
        assert type(msg) is Notification and msg.params == {"requestId": 1}

    def test_a_response_carries_result_or_error(self):
        ok = decode(b'{"jsonrpc":"2.0","id":"a","result":{}}')
        bad = decode(b'{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"x"}}')
        assert type(ok) is Response and ok.result == {} and ok.error is None
        assert type(bad) is Response and bad.error["code"] == -32601

    def test_invalid_json_is_a_parse_error(self):
        with pytest.raises(ParseError) as info:
            decode(b'{"jsonrpc":')
        assert info.value.code == -32700

    @pytest.mark.parametrize(
        "raw",
        [b"[]", b"42", b'"text"', b"null", b'{"id":1,"method":"x"}', b'{"jsonrpc":"1.0","id":1,"method":"x"}'],
    )
    def test_anything_but_a_jsonrpc_object_is_an_invalid_request(self, raw):
        with pytest.raises(InvalidRequest) as info:
            decode(raw)
        assert info.value.code == -32600

    def test_the_id_is_kept_when_it_could_be_read(self):
        with pytest.raises(InvalidRequest) as info:
            decode(b'{"jsonrpc":"1.0","id":5,"method":"x"}')
        assert info.value.request_id == 5

    @pytest.mark.parametrize("raw", [b'{"jsonrpc":"2.0","id":null,"method":"x"}', b'{"jsonrpc":"2.0","id":true,"method":"x"}'])
    def test_ids_must_be_strings_or_integers(self, raw):
        with pytest.raises(InvalidRequest):
            decode(raw)

    def test_params_must_be_an_object(self):
        with pytest.raises(InvalidParams):
            decode(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1,2]}')


class TestVersions:
    def test_features_differ_by_era(self):
        assert has("2026-07-28", Feature.MRTR) and not has("2026-07-28", Feature.PING)
        assert has("2025-11-25", Feature.PING) and not has("2025-11-25", Feature.MRTR)
        assert has("2025-11-25", Feature.URL_ELICITATION) and not has("2025-06-18", Feature.URL_ELICITATION)
        assert has("2025-11-25", Feature.ELICITATION_ID) and not has("2026-07-28", Feature.ELICITATION_ID)

    def test_methods_that_exist_in_one_era_only(self):
        modern, handshake = features("2026-07-28"), features("2025-11-25")
        for method in ("server/discover", "subscriptions/listen"):
            assert offers(modern, method) and not offers(handshake, method)
        for method in ("ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"):
            assert offers(handshake, method) and not offers(modern, method)
        assert offers(modern, "tools/call") and offers(handshake, "tools/call")

    def test_an_unknown_version_has_nothing(self):
        assert features("1999-01-01") == frozenset()

    def test_every_feature_is_read_outside_the_table(self):
        """A feature nobody reads does not belong in the table (issue 6, section 2)."""
        import pathlib

        import modelctx

        source = "".join(
            path.read_text()
            for path in pathlib.Path(modelctx.__file__).parent.rglob("*.py")
            if path.name != "versions.py"
        )
        unread = [f.name for f in Feature if f"Feature.{f.name}" not in source]
        # Features that gate a method are read through offers()'s method table.
        unread = [name for name in unread if name not in {"PING", "SET_LEVEL", "RESOURCE_SUBSCRIBE", "LISTEN", "STATELESS"}]
        assert unread == []

    def test_no_version_string_is_compared_outside_the_table(self):
        import pathlib
        import re

        import modelctx

        literal = re.compile(r"[\"']20[0-9]{2}-[0-9]{2}-[0-9]{2}[\"']")
        offenders = []
        for path in pathlib.Path(modelctx.__file__).parent.rglob("*.py"):
            if path.name == "versions.py" or "types" in path.parts:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#", 1)[0]
                if literal.search(code) and ("==" in code or " in " in code or "!=" in code):
                    offenders.append(f"{path.name}:{number}: {line.strip()}")
        assert offenders == []

    def test_handshake_echoes_a_supported_version_else_offers_the_latest(self):
        assert negotiate_handshake("2025-06-18") == "2025-06-18"
        assert negotiate_handshake("1999-01-01") == "2025-11-25"
        assert negotiate_handshake("2026-07-28") == "2025-11-25"


class TestErrors:
    def test_unsupported_version_names_supported_and_requested(self):
        err = UnsupportedProtocolVersion("1900-01-01", ["2026-07-28"]).to_error()
        assert err == {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": "1900-01-01"},
        }

    def test_errors_from_the_wire_are_remote_and_typed(self):
        exc = error_from_wire({"code": -32020, "message": "Header mismatch"})
        assert isinstance(exc, HeaderMismatch) and exc.remote


class TestHeaders:
    """basic/transports/streamable-http.mdx, Value Encoding and Server Validation."""

    @pytest.mark.parametrize(
        "value,wire",
        [
            ("us-west1", "us-west1"),
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            (" padded ", "=?base64?IHBhZGRlZCA=?="),
            ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
            ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
            (True, "true"),
            (42, "42"),
        ],
    )
    def test_values_are_encoded_as_the_spec_table_shows(self, value, wire):
        assert headers.encode_value(value) == wire
        if isinstance(value, str):
            assert headers.decode_value("Mcp-Name", wire) == value

    def test_x_mcp_header_must_be_reachable_through_properties_only(self):
        good = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
        assert headers.header_paths(good) == {"mcp-param-region": ("region",)}
        bad = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "string", "x-mcp-header": "X"}}}}
        with pytest.raises(ValueError):
            headers.header_paths(bad)
        number = {"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}
        with pytest.raises(ValueError):
            headers.header_paths(number)

    def test_a_server_rejects_headers_unlike_the_body(self):
        params = {"name": "get_weather", "arguments": {"region": "eu"}}
        paths = {"mcp-param-region": ("region",)}
        sent = headers.request_headers("tools/call", params, "2026-07-28", paths)
        headers.check_headers(sent, "tools/call", params, "2026-07-28", paths)  # agrees
        for key, value in (("mcp-name", "other"), ("mcp-method", "tools/list"), ("mcp-param-region", "us")):
            with pytest.raises(HeaderMismatch):
                headers.check_headers({**sent, key: value}, "tools/call", params, "2026-07-28", paths)
        missing = dict(sent)
        del missing["mcp-param-region"]
        with pytest.raises(HeaderMismatch):
            headers.check_headers(missing, "tools/call", params, "2026-07-28", paths)

    def test_integers_compare_numerically(self):
        params = {"name": "t", "arguments": {"n": 42}}
        paths = {"mcp-param-n": ("n",)}
        sent = {**headers.request_headers("tools/call", params, "2026-07-28", paths), "mcp-param-n": "42.0"}
        headers.check_headers(sent, "tools/call", params, "2026-07-28", paths)


class TestRequestState:
    """basic/patterns/mrtr.mdx: requestState is integrity-protected and bound to its request."""

    params = {"name": "t", "arguments": {"a": 1}, "_meta": {"x": 1}}

    def test_round_trip_returns_the_answers(self):
        sealer = StateSealer(b"k" * 32)
        state = sealer.seal("tools/call", self.params, {"q": {"action": "accept"}})
        retry = {**self.params, "inputResponses": {}, "requestState": state, "_meta": {"y": 2}}
        assert sealer.open(state, "tools/call", retry) == {"q": {"action": "accept"}}

    def test_tampering_is_rejected(self):
        sealer = StateSealer(b"k" * 32)
        state = sealer.seal("tools/call", self.params, {})
        payload, tag = state.split(".")
        forged = payload[:-2] + ("A" if payload[-2] != "A" else "B") + payload[-1] + "." + tag
        with pytest.raises(InvalidParams, match="integrity"):
            sealer.open(forged, "tools/call", self.params)

    def test_a_state_is_bound_to_method_params_and_key(self):
        sealer = StateSealer(b"k" * 32)
        state = sealer.seal("tools/call", self.params, {})
        with pytest.raises(InvalidParams, match="different request"):
            sealer.open(state, "prompts/get", self.params)
        with pytest.raises(InvalidParams, match="different request"):
            sealer.open(state, "tools/call", {**self.params, "arguments": {"a": 2}})
        with pytest.raises(InvalidParams, match="integrity"):
            StateSealer(b"z" * 32).open(state, "tools/call", self.params)

    def test_a_state_expires(self):
        sealer = StateSealer(b"k" * 32, ttl_seconds=-1)
        state = sealer.seal("tools/call", self.params, {})
        with pytest.raises(InvalidParams, match="expired"):
            sealer.open(state, "tools/call", self.params)


class TestFraming:
    def test_lines_are_split_and_partial_lines_held_back(self):
        buf = LineBuffer()
        assert list(buf.feed(b'{"a":1}\n{"b"')) == [b'{"a":1}']
        assert list(buf.feed(b":2}\n")) == [b'{"b":2}']

    def test_a_line_over_the_limit_is_refused_and_forgotten(self):
        buf = LineBuffer(max_line=8)
        with pytest.raises(ValueError):
            list(buf.feed(b"x" * 20))
        assert list(buf.feed(b"still the long line\n")) == []  # dropped up to its newline
        assert list(buf.feed(b"ok\n")) == [b"ok"]

    def test_sse_round_trip_ignores_comments(self):
        parser = SSEParser()
        data = msgspec.json.encode({"jsonrpc": "2.0", "method": "m"})
        stream = b": keep-alive\n\n" + sse_event(data)
        events = list(parser.feed(stream[:10])) + list(parser.feed(stream[10:]))
        assert events == [("message", data)]
