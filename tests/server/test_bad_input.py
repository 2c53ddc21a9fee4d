"""Bad input gets the JSON-RPC error the spec names, and the server keeps serving.

Each case is sent on the wire as it is (raw JSON lines on stdio, raw HTTP bodies),
and each test then sends a valid request on the same connection (stdio) or to the
same server (HTTP) and checks that it is answered. Error codes: basic/index.mdx
(Error Codes, DIGEST §12); HTTP statuses: basic/transports/streamable-http.mdx
(DIGEST §9.3).
"""

from __future__ import annotations

import json
import socket
import uuid

import pytest

from tests.fixtures.servers.sample_server import SECRET
from tests.support.wire import McpHttp, StdioServer, request, wait_until

ELICITING = {"elicitation": {"form": {}}}


def assert_still_serving_stdio(server: StdioServer, id: int = 999) -> None:
    response = server.call(request(id, "tools/call", {"name": "echo", "arguments": {"text": "still here"}}))
    assert response["result"]["content"] == [{"type": "text", "text": "still here"}]


def assert_still_serving_http(http: McpHttp) -> None:
    response = http.post(request(999, "tools/call", {"name": "echo", "arguments": {"text": "still here"}}))
    assert response.status_code == 200
    assert response.json()["result"]["content"] == [{"type": "text", "text": "still here"}]


def error_of(message: dict) -> dict:
    assert "result" not in message, message
    return message["error"]


# -- malformed messages ------------------------------------------------------------------------
NOT_JSON_RPC = {
    "malformed JSON": (b'{"jsonrpc":"2.0","id":1,"method":"tools/list"', -32700),
    "a number, not an object": (b"42", -32600),
    "a string, not an object": (b'"tools/list"', -32600),
    "a batch": (b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', -32600),
    "no jsonrpc member": (json.dumps({k: v for k, v in request(1, "tools/list").items() if k != "jsonrpc"}).encode(), -32600),
    "jsonrpc 1.0": (json.dumps({**request(1, "tools/list"), "jsonrpc": "1.0"}).encode(), -32600),
    "a null id": (json.dumps({**request(1, "tools/list"), "id": None}).encode(), -32600),
}


@pytest.mark.parametrize("line, code", NOT_JSON_RPC.values(), ids=NOT_JSON_RPC.keys())
def test_stdio_a_line_that_is_no_json_rpc_request_gets_its_error_code(stdio_server, line, code):
    stdio_server.send_raw(line)

    assert error_of(stdio_server.recv())["code"] == code
    assert_still_serving_stdio(stdio_server)


@pytest.mark.parametrize("body, code", NOT_JSON_RPC.values(), ids=NOT_JSON_RPC.keys())
def test_http_a_body_that_is_no_json_rpc_request_gets_400_and_its_error_code(http, body, code):
    response = http.post(
        content=body, headers={"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}
    )

    assert response.status_code == 400
    assert error_of(response.json())["code"] == code
    assert_still_serving_http(http)


def test_stdio_the_error_keeps_the_id_when_it_could_be_read(stdio_server):
    message = request(7, "tools/list")
    del message["jsonrpc"]
    stdio_server.send(message)

    response = stdio_server.recv()
    assert response["id"] == 7
    assert error_of(response)["code"] == -32600


@pytest.mark.parametrize(
    "line, named",
    [(b"null", "got null"), (b"42", "got a number"), (b"true", "got a boolean"), (b'"x"', "got a string")],
)
def test_stdio_a_message_that_is_no_object_is_named_by_its_json_type(stdio_server, line, named):
    # The peer wrote JSON, so the error speaks JSON ("null"), not Python ("NoneType").
    stdio_server.send_raw(line)

    assert error_of(stdio_server.recv())["message"].endswith(named)


# -- unknown methods and wrong params -------------------------------------------------------
def test_stdio_an_unknown_method_is_method_not_found(stdio_server):
    response = stdio_server.call(request(1, "tools/frobnicate"))

    assert error_of(response)["code"] == -32601
    assert_still_serving_stdio(stdio_server)


def test_http_an_unknown_method_is_method_not_found_with_status_404(http):
    response = http.post(request(1, "tools/frobnicate"))

    assert response.status_code == 404
    assert error_of(response.json())["code"] == -32601
    assert_still_serving_http(http)


def test_handshake_era_methods_do_not_exist_in_the_modern_era(stdio_server):
    """ping and logging/setLevel were removed in 2026-07-28 (DIGEST §3.5)."""
    for id, method in enumerate(["ping", "logging/setLevel", "resources/subscribe"]):
        assert error_of(stdio_server.call(request(id, method)))["code"] == -32601
    assert_still_serving_stdio(stdio_server)


WRONG_PARAMS = {
    "tools/call name is a number": request(1, "tools/call", {"name": 123, "arguments": {}}),
    "tools/call without name": request(1, "tools/call", {"arguments": {}}),
    "unknown tool": request(1, "tools/call", {"name": "no-such-tool", "arguments": {}}),
    "params is an array": {**request(1, "tools/list"), "params": []},
    "cursor is a number": request(1, "tools/list", {"cursor": 5}),
    "cursor not issued by the server": request(1, "tools/list", {"cursor": "bm90LWEtY3Vyc29y"}),
    "prompt argument missing": request(1, "prompts/get", {"name": "review", "arguments": {}}),
    "unknown prompt": request(1, "prompts/get", {"name": "no-such-prompt"}),
    "completion ref is a string": request(
        1, "completion/complete", {"ref": "review", "argument": {"name": "language", "value": "p"}}
    ),
    "unknown log level": request(1, "tools/list", **{"io.modelcontextprotocol/logLevel": "loud"}),
}


@pytest.mark.parametrize("message", WRONG_PARAMS.values(), ids=WRONG_PARAMS.keys())
def test_stdio_params_of_the_wrong_shape_are_invalid_params(stdio_server, message):
    response = stdio_server.call(message)

    assert error_of(response)["code"] == -32602
    assert_still_serving_stdio(stdio_server)


# Over HTTP a tools/call without a name cannot carry the Mcp-Name header it requires,
# so it is a header mismatch (-32020) before it is anything else.
WRONG_PARAMS_HTTP = {k: v for k, v in WRONG_PARAMS.items() if k != "tools/call without name"}


@pytest.mark.parametrize("message", WRONG_PARAMS_HTTP.values(), ids=WRONG_PARAMS_HTTP.keys())
def test_http_params_of_the_wrong_shape_are_invalid_params(http, message):
    response = http.post(message)

    assert error_of(response.json())["code"] == -32602
    assert_still_serving_http(http)


BAD_ARGUMENTS = {
    "a string for an integer": ({"a": "x", "b": 2}, "Invalid arguments: Expected `int`, got `str` - at `$.a`"),
    "a missing argument": ({"a": 1}, "Invalid arguments: Object missing required field `b`"),
    "an unknown argument": ({"a": 1, "b": 2, "c": 3}, "Invalid arguments: Object contains unknown field `c`"),
    "an array for the object": ([1, 2], "Invalid arguments: expected an object"),
}


@pytest.mark.parametrize("arguments, text", BAD_ARGUMENTS.values(), ids=BAD_ARGUMENTS.keys())
def test_stdio_invalid_tool_arguments_are_a_tool_execution_error(stdio_server, arguments, text):
    """Input validation errors are isError results, so the model can correct itself
    (server/tools.mdx, Error Handling; DIGEST §15.3 notes the spec's ambiguity)."""
    response = stdio_server.call(request(1, "tools/call", {"name": "add", "arguments": arguments}))

    assert response["result"]["isError"] is True
    assert response["result"]["content"] == [{"type": "text", "text": text}]
    assert_still_serving_stdio(stdio_server)


def test_http_invalid_tool_arguments_are_a_tool_execution_error(http):
    response = http.post(request(1, "tools/call", {"name": "add", "arguments": {"a": "x", "b": 2}}))

    assert response.status_code == 200
    assert response.json()["result"]["isError"] is True
    assert_still_serving_http(http)


# -- the modern envelope ------------------------------------------------------------------------
def without_protocol_version(id: int) -> dict:
    message = request(id, "tools/list")
    del message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
    return message


def test_stdio_meta_without_protocol_version_is_invalid_params(stdio_server):
    response = stdio_server.call(without_protocol_version(1))

    assert error_of(response)["code"] == -32602
    assert "protocolVersion" in error_of(response)["message"]
    assert_still_serving_stdio(stdio_server)


def test_stdio_meta_without_client_capabilities_is_invalid_params(stdio_server):
    message = request(1, "tools/list")
    del message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]

    response = stdio_server.call(message)

    assert error_of(response)["code"] == -32602
    assert "clientCapabilities" in error_of(response)["message"]
    assert_still_serving_stdio(stdio_server)


def test_http_meta_without_protocol_version_is_invalid_params_with_status_400(http):
    response = http.post(
        without_protocol_version(1),
        headers={"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"},
    )

    assert response.status_code == 400
    assert error_of(response.json())["code"] == -32602
    assert_still_serving_http(http)


def unsupported_version(id: int) -> dict:
    return request(id, "tools/list", **{"io.modelcontextprotocol/protocolVersion": "1900-01-01"})


def assert_unsupported_version_error(error: dict) -> None:
    assert error["code"] == -32022
    assert error["data"]["requested"] == "1900-01-01"
    assert "2026-07-28" in error["data"]["supported"]


def test_stdio_an_unsupported_version_names_the_supported_ones(stdio_server):
    response = stdio_server.call(unsupported_version(1))

    assert_unsupported_version_error(error_of(response))
    assert_still_serving_stdio(stdio_server)


def test_http_an_unsupported_version_names_the_supported_ones_with_status_400(http):
    response = http.post(unsupported_version(1))  # the header says 1900-01-01 too

    assert response.status_code == 400
    assert_unsupported_version_error(error_of(response.json()))
    assert_still_serving_http(http)


MISMATCHES = {
    "MCP-Protocol-Version differs": {"mcp-protocol-version": "2025-11-25"},
    "MCP-Protocol-Version missing": {"mcp-protocol-version": None},
    "Mcp-Method differs": {"mcp-method": "tools/list"},
    "Mcp-Method missing": {"mcp-method": None},
    "Mcp-Name differs": {"mcp-name": "add"},
    "Mcp-Name missing": {"mcp-name": None},
    "Mcp-Name with bad base64": {"mcp-name": "=?base64?not base64!?="},
}


@pytest.mark.parametrize("headers", MISMATCHES.values(), ids=MISMATCHES.keys())
def test_http_headers_that_disagree_with_the_body_are_a_header_mismatch(http, headers):
    echo = request(1, "tools/call", {"name": "echo", "arguments": {"text": "x"}})

    response = http.post(echo, headers=headers)

    assert response.status_code == 400
    assert error_of(response.json())["code"] == -32020
    assert_still_serving_http(http)


def test_http_a_base64_encoded_mcp_name_that_agrees_is_accepted(http):
    echo = request(1, "tools/call", {"name": "echo", "arguments": {"text": "x"}})

    response = http.post(echo, headers={"mcp-name": "=?base64?ZWNobw==?="})  # "echo"

    assert response.json()["result"]["content"] == [{"type": "text", "text": "x"}]


# -- requestState -------------------------------------------------------------------------------
def tampered(state: str) -> str:
    """Flip one character of the signature: the payload still decodes, the MAC fails."""
    payload, mac = state.rsplit(".", 1)
    return payload + "." + ("A" if mac[0] != "A" else "B") + mac[1:]


def register(id: int, **mrtr) -> dict:
    return request(id, "tools/call", {"name": "register", "arguments": {}, **mrtr}, capabilities=ELICITING)


AN_ANSWER = {"name-question": {"action": "accept", "content": {"name": "Eve"}}}


def test_stdio_a_tampered_request_state_is_invalid_params(stdio_server):
    first = stdio_server.call(register(1))["result"]
    assert first["resultType"] == "input_required"
    (key,) = first["inputRequests"]
    answers = {key: {"action": "accept", "content": {"name": "Eve"}}}

    forged = stdio_server.call(register(2, inputResponses=answers, requestState=tampered(first["requestState"])))
    honest = stdio_server.call(register(3, inputResponses=answers, requestState=first["requestState"]))

    assert error_of(forged)["code"] == -32602
    assert honest["result"]["resultType"] == "input_required"  # the second question
    assert list(honest["result"]["inputRequests"].values())[0]["params"]["message"] == "How old are you, Eve?"


def test_stdio_a_request_state_replayed_on_another_request_is_invalid_params(stdio_server):
    first = stdio_server.call(register(1))["result"]

    replayed = stdio_server.call(
        request(
            2,
            "tools/call",
            {"name": "echo", "arguments": {"text": "x"}, "requestState": first["requestState"]},
            capabilities=ELICITING,
        )
    )

    assert error_of(replayed)["code"] == -32602
    assert_still_serving_stdio(stdio_server)


def test_stdio_a_request_state_that_is_not_ours_is_invalid_params(stdio_server):
    response = stdio_server.call(register(1, inputResponses=AN_ANSWER, requestState="not-a-state"))

    assert error_of(response)["code"] == -32602
    assert_still_serving_stdio(stdio_server)


def test_http_a_tampered_request_state_is_invalid_params(http):
    first = http.call(register(1))["result"]
    (key,) = first["inputRequests"]
    answers = {key: {"action": "accept", "content": {"name": "Eve"}}}

    forged = http.call(register(2, inputResponses=answers, requestState=tampered(first["requestState"])))

    # The HTTP status of an ordinary -32602 is not specified (DIGEST §15.2); only the code is.
    assert error_of(forged)["code"] == -32602
    assert_still_serving_http(http)


# -- oversized bodies -----------------------------------------------------------------------
def oversized_list_request() -> bytes:
    message = request(1, "tools/list")
    message["params"]["padding"] = "x" * (5 * 1024 * 1024)  # over the 4 MiB default limit
    return json.dumps(message).encode()


def test_http_a_body_over_the_limit_is_413(http):
    response = http.post(
        content=oversized_list_request(),
        headers={"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"},
    )

    assert response.status_code == 413
    assert error_of(response.json())["code"] == -32600
    assert_still_serving_http(http)


def test_http_a_chunked_body_over_the_limit_is_413(http):
    """Without Content-Length the limit is enforced while reading."""
    body = oversized_list_request()
    chunks = (body[i : i + 65536] for i in range(0, len(body), 65536))

    response = http.client.post(
        http.url,
        content=chunks,
        headers=http.headers_for(request(1, "tools/list")),
    )

    assert response.status_code == 413
    assert_still_serving_http(http)


# -- tools that fail ------------------------------------------------------------------------
def test_stdio_a_tool_that_raises_gets_a_generic_is_error_result(stdio_server):
    stdio_server.send(request(1, "tools/call", {"name": "boom", "arguments": {}}))
    response = stdio_server.recv_until(1)[-1]

    assert response["result"]["isError"] is True
    assert response["result"]["content"] == [
        {"type": "text", "text": "Error executing tool boom: internal error"}
    ]
    assert not any(b"secret detail" in line or b"kaboom" in line for line in stdio_server.stdout_raw)
    assert_still_serving_stdio(stdio_server)


def test_http_a_tool_that_raises_gets_a_generic_is_error_result(http):
    response = http.post(request(1, "tools/call", {"name": "boom", "arguments": {}}))

    assert response.status_code == 200
    assert response.json()["result"]["isError"] is True
    assert SECRET not in response.text and "kaboom" not in response.text
    assert_still_serving_http(http)


def test_stdio_a_resource_handler_that_raises_gets_a_generic_internal_error(stdio_server):
    # Not a tool: the dispatcher's own boundary answers -32603 "Internal error"; the
    # exception's text goes to the server's log (stderr), never to the client.
    stdio_server.send(request(1, "resources/read", {"uri": "sample://items/boom"}))
    response = stdio_server.recv_until(1)[-1]

    assert error_of(response) == {"code": -32603, "message": "Internal error"}
    assert not any(b"secret detail" in line or b"kaboom" in line for line in stdio_server.stdout_raw)
    wait_until(lambda: SECRET in stdio_server.stderr, "the exception in the server log")
    assert_still_serving_stdio(stdio_server)


def test_http_a_resource_handler_that_raises_gets_a_generic_internal_error(http):
    response = http.post(request(1, "resources/read", {"uri": "sample://items/boom"}))

    assert error_of(response.json()) == {"code": -32603, "message": "Internal error"}
    assert SECRET not in response.text and "kaboom" not in response.text
    assert_still_serving_http(http)


def test_stdio_a_tool_error_is_an_is_error_result_with_its_message(stdio_server):
    response = stdio_server.call(request(1, "tools/call", {"name": "refuse", "arguments": {"reason": "no"}}))

    assert response["result"]["isError"] is True
    assert response["result"]["content"] == [{"type": "text", "text": "refused: no"}]


# -- cancellation ---------------------------------------------------------------------------
def sleepy(id: int, marker) -> dict:
    return request(id, "tools/call", {"name": "sleepy", "arguments": {"seconds": 60, "marker": str(marker)}})


def test_stdio_a_cancelled_request_gets_no_response_and_its_handler_is_cancelled(stdio_server, tmp_path):
    marker = tmp_path / "cancelled"
    stdio_server.send(sleepy(1, marker))
    wait_until(lambda: (tmp_path / "cancelled.started").exists(), "the tool to start")

    stdio_server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "test"}})
    wait_until(marker.exists, "the tool to see its cancellation")
    stdio_server.send(request(2, "tools/list"))
    after = stdio_server.recv_until(2)

    assert marker.read_text() == "cancelled"
    assert [m.get("id") for m in after] == [2]  # nothing was ever sent for id 1
    assert "result" in after[-1]


def test_stdio_a_cancelled_handler_that_returns_anyway_sends_nothing(stdio_server, tmp_path):
    """After notifications/cancelled the server MUST NOT send further messages for
    the request, even when the handler catches the cancellation and returns."""
    marker = tmp_path / "cancelled"
    stdio_server.send(request(1, "tools/call", {"name": "stubborn", "arguments": {"marker": str(marker)}}))
    wait_until((tmp_path / "cancelled.started").exists, "the tool to start")

    stdio_server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    wait_until(marker.exists, "the tool to see its cancellation")
    stdio_server.send(request(2, "tools/list"))

    assert [m.get("id") for m in stdio_server.recv_until(2)] == [2]


def test_stdio_cancelling_an_unknown_or_finished_request_is_ignored(stdio_server):
    stdio_server.call(request(1, "tools/list"))

    for request_id in (1, 12345, "nope"):
        stdio_server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}})

    assert_still_serving_stdio(stdio_server)


def test_http_closing_the_connection_cancels_the_handler(http, http_server, tmp_path):
    """Streamable HTTP: a client disconnect IS the cancellation (DIGEST §7.2)."""
    marker = tmp_path / f"cancelled-{uuid.uuid4().hex}"
    message = sleepy(1, marker)
    body = json.dumps(message).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in http.headers_for(message).items())
    raw = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{http_server.port}\r\n{head}"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body

    with socket.create_connection(("127.0.0.1", http_server.port), timeout=10) as conn:
        conn.sendall(raw)
        wait_until(lambda: marker.with_name(marker.name + ".started").exists(), "the tool to start")
    # The socket is closed here, mid-request.

    wait_until(marker.exists, "the handler to be cancelled")
    assert marker.read_text() == "cancelled"
    assert_still_serving_http(http)
