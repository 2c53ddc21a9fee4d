"""Mcp-Param-* headers as the server checks them (basic/transports/streamable-http.mdx,
Request Metadata, Server Validation), through a real ``modelctx serve --http`` process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.paths import SERVERS
from tests.support.wire import HttpServer, McpHttp, request

HEADER_SERVER = SERVERS / "header_server.py"


@pytest.fixture
def headers_http(tmp_path) -> Iterator[McpHttp]:
    server = HttpServer(HEADER_SERVER, tmp_path / "server.log")
    client = McpHttp(server)
    try:
        yield client
    finally:
        client.close()
        server.stop()


def call(http: McpHttp, n: int, tool: str, arguments: dict[str, Any], **headers: str) -> dict[str, Any]:
    message = request(n, "tools/call", {"name": tool, "arguments": arguments})
    return http.call(message, headers={f"mcp-param-{k}": v for k, v in headers.items()})


def test_a_tool_registered_again_is_checked_against_its_new_x_mcp_header(headers_http):
    before = call(headers_http, 1, "lookup", {"region": "eu"}, region="eu")
    assert before["result"]["content"][0]["text"] == "region=eu"

    assert call(headers_http, 2, "swap", {})["result"]["content"][0]["text"] == "swapped"

    # The new definition mirrors zone: its header is what is required now, not Region's.
    after = call(headers_http, 3, "lookup", {"zone": "z1"}, zone="z1")
    assert "result" in after, after
    assert after["result"]["content"][0]["text"] == "zone=z1"
    missing = call(headers_http, 4, "lookup", {"zone": "z1"})
    assert missing["error"]["code"] == -32020
    assert "mcp-param-zone" in missing["error"]["message"].lower()


def test_an_integer_header_must_equal_the_body_exactly_beyond_2_to_the_53(headers_http):
    big = 2**53 + 1

    exact = call(headers_http, 1, "count", {"n": big}, count=str(big))
    assert exact["result"]["content"][0]["text"] == str(big)

    # As floats, 9007199254740992 and 9007199254740993 are the same number.
    off_by_one = call(headers_http, 2, "count", {"n": big}, count=str(2**53))
    assert off_by_one["error"]["code"] == -32020
    assert "mcp-param-count" in off_by_one["error"]["message"].lower()


@pytest.mark.parametrize("header", ["+5", "5_0", "0x5", "5.", "Infinity"])
def test_an_integer_header_that_is_not_a_json_number_is_a_mismatch(headers_http, header):
    answer = call(headers_http, 1, "count", {"n": 5 if header != "5_0" else 50}, count=header)

    assert answer["error"]["code"] == -32020


@pytest.mark.parametrize("header", ["5", "5.0", "5e0", "0.5e1"])
def test_an_integer_header_equal_as_a_number_is_accepted(headers_http, header):
    answer = call(headers_http, 1, "count", {"n": 5}, count=header)

    assert answer["result"]["content"][0]["text"] == "5"
