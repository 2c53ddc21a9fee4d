"""The server's side of 2025-03-26 and 2024-11-05 (issue 21): negotiation, the era table, batches.

The old official clients themselves are in tests/interop/test_old_clients.py; here the same
rules are driven by raw JSON-RPC lines over a real ``modelctx serve`` on stdio (batches,
which no official Python client sends) and through the sans-IO table and shaper.
"""

from __future__ import annotations

import json

import pytest

from modelctx.protocol.connection import MAX_BATCH
from modelctx.protocol.versions import (
    HANDSHAKE_VERSIONS,
    LATEST,
    LEGACY_HANDSHAKE_VERSIONS,
    Feature,
    features,
    first_with,
    negotiate_handshake,
)
from modelctx.server._shape import needs_shape, shape, shape_initialize
from tests.fixtures.servers.sample_server import ITEM_IDS
from tests.support.paths import SERVERS
from tests.support.wire import StdioServer, wait_until

OLD, OLDEST = LEGACY_HANDSHAKE_VERSIONS  # 2025-03-26, 2024-11-05
NEWEST_HANDSHAKE = HANDSHAKE_VERSIONS[0]


def opened(start_stdio_server, version: str) -> StdioServer:
    server = start_stdio_server()
    answer = server.call(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        }
    )
    assert answer["result"]["protocolVersion"] == version
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return server


def call(id: int, name: str, arguments: dict) -> dict:
    return {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


# -- negotiation and the era table ---------------------------------------------------------
@pytest.mark.parametrize("version", LEGACY_HANDSHAKE_VERSIONS)
def test_initialize_echoes_an_old_revision_the_server_serves(version):
    assert negotiate_handshake(version) == version


def test_an_unknown_revision_is_still_offered_the_newest_handshake():
    assert negotiate_handshake("2024-01-01") == NEWEST_HANDSHAKE


VERSIONS_SERVER = SERVERS / "versions_server.py"


def initialize(version: str) -> dict:
    info = {"name": "t", "version": "0"}
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": info}
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}


def test_a_server_without_the_old_revisions_offers_its_newest_handshake_instead(start_stdio_server):
    server = start_stdio_server(VERSIONS_SERVER, env={"MODELCTX_TEST_VERSIONS": f"{LATEST},{NEWEST_HANDSHAKE}"})

    answer = server.call(initialize(OLDEST))

    assert answer["result"]["protocolVersion"] == NEWEST_HANDSHAKE


def test_a_server_speaking_no_handshake_revision_refuses_initialize_naming_what_it_speaks(start_stdio_server):
    server = start_stdio_server(VERSIONS_SERVER, env={"MODELCTX_TEST_VERSIONS": LATEST})

    answer = server.call(initialize(OLD))

    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"] == {"supported": [LATEST], "requested": OLD}
    assert LATEST in answer["error"]["message"]


def test_a_server_without_the_stateless_revision_refuses_its_requests_with_32022(start_stdio_server):
    server = start_stdio_server(VERSIONS_SERVER, env={"MODELCTX_TEST_VERSIONS": ",".join(LEGACY_HANDSHAKE_VERSIONS)})
    meta = {
        "io.modelcontextprotocol/protocolVersion": LATEST,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }

    answer = server.call({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
    opened = server.call(initialize(NEWEST_HANDSHAKE))

    assert answer["error"]["code"] == -32022
    assert answer["error"]["data"]["supported"] == list(LEGACY_HANDSHAKE_VERSIONS)
    assert opened["result"]["protocolVersion"] == OLD


def test_every_revision_lacking_a_shaped_feature_is_shaped():
    """The dispatcher asks ``needs_shape`` (one feature) before shaping: any revision that
    lacks any feature the shaper reads must lack that one too."""
    shaped = {
        Feature.STRUCTURED_OUTPUT, Feature.TITLES, Feature.RESOURCE_LINKS, Feature.META_ON_TYPES,
        Feature.AUDIO, Feature.TOOL_ANNOTATIONS, Feature.COMPLETIONS_CAPABILITY,
    }
    for version in (*HANDSHAKE_VERSIONS, *LEGACY_HANDSHAKE_VERSIONS, "2026-07-28"):
        has = features(version)
        assert needs_shape(has) == (not shaped <= has), version


def test_what_each_old_revision_lacks():
    oldest, old = features(OLDEST), features(OLD)
    for feature in (Feature.AUDIO, Feature.TOOL_ANNOTATIONS, Feature.COMPLETIONS_CAPABILITY, Feature.PROGRESS_MESSAGE):
        assert feature not in oldest and feature in old and feature in features(NEWEST_HANDSHAKE)
    for feature in (Feature.STRUCTURED_OUTPUT, Feature.ELICITATION, Feature.TITLES, Feature.RESOURCE_LINKS):
        assert feature not in old and feature in features(NEWEST_HANDSHAKE)
    assert [v for v in (*HANDSHAKE_VERSIONS, OLD, OLDEST) if Feature.BATCH in features(v)] == [OLD]
    assert first_with(Feature.ELICITATION) == HANDSHAKE_VERSIONS[-1]
    assert first_with(Feature.AUDIO) == OLD


def test_a_2025_06_18_result_is_left_as_it_is():
    result = {"content": [], "structuredContent": {"a": 1}}
    assert not needs_shape(features(HANDSHAKE_VERSIONS[-1]))
    shape("tools/call", result, features(HANDSHAKE_VERSIONS[-1]))  # even if asked
    assert result == {"content": [], "structuredContent": {"a": 1}}


def test_structured_content_without_content_becomes_its_json_text():
    result = {"content": [], "structuredContent": {"a": 1}}
    shape("tools/call", result, features(OLD))
    assert result == {"content": [{"type": "text", "text": '{"a": 1}'}]}


@pytest.mark.parametrize("version", LEGACY_HANDSHAKE_VERSIONS)
def test_initialize_declares_only_the_capabilities_the_revision_names(version):
    result = {
        "serverInfo": {"name": "s", "version": "1", "title": "S", "icons": []},
        "capabilities": {"tools": {}, "completions": {}, "extensions": {"io.x/y": {}}, "logging": {}},
    }
    shape_initialize(result, features(version))
    assert result["serverInfo"] == {"name": "s", "version": "1"}
    expected = {"tools", "logging"} | ({"completions"} if version == OLD else set())
    assert set(result["capabilities"]) == expected


# -- over stdio ----------------------------------------------------------------------------
def test_a_2025_03_26_session_answers_a_batch_with_one_array(start_stdio_server):
    server = opened(start_stdio_server, OLD)
    server.send_raw(
        json.dumps(
            [
                call(1, "add", {"a": 1, "b": 2}),
                {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
                {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": f"sample://items/{ITEM_IDS[0]}"}},
                {"jsonrpc": "2.0", "id": 3, "method": "no/such"},
                {"jsonrpc": "1.0", "id": 4, "method": "ping"},
            ]
        ).encode()
    )
    answers = server.recv()
    assert isinstance(answers, list)
    by_id = {answer["id"]: answer for answer in answers}
    assert set(by_id) == {1, 2, 3, 4}
    assert by_id[1]["result"]["content"] == [{"type": "text", "text": '{"result":3}'}]
    assert "structuredContent" not in by_id[1]["result"]  # shaped for 2025-03-26
    assert by_id[2]["result"]["contents"][0]["text"] == f"item {ITEM_IDS[0]}"
    assert by_id[3]["error"]["code"] == -32601
    assert by_id[4]["error"]["code"] == -32600
    # The session goes on as before, one message a line.
    assert server.call(call(5, "echo", {"text": "after"}))["result"]["content"][0]["text"] == "after"


def test_a_batch_of_notifications_only_is_not_answered(start_stdio_server):
    server = opened(start_stdio_server, OLD)
    server.send_raw(json.dumps([{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}]).encode())
    server.send(call(1, "echo", {"text": "next"}))
    assert server.recv()["result"]["content"][0]["text"] == "next"  # nothing came before it


def test_a_batch_larger_than_the_bound_is_refused_whole(start_stdio_server):
    server = opened(start_stdio_server, OLD)
    server.send_raw(json.dumps([call(i, "echo", {"text": "x"}) for i in range(1, MAX_BATCH + 2)]).encode())
    answer = server.recv()
    assert answer["error"]["code"] == -32600 and f"at most {MAX_BATCH}" in answer["error"]["message"]
    assert server.call(call(1, "echo", {"text": "ok"}))["result"]["content"][0]["text"] == "ok"


@pytest.mark.parametrize("version", [OLDEST, NEWEST_HANDSHAKE])
def test_other_revisions_refuse_a_batch_as_before(start_stdio_server, version):
    server = opened(start_stdio_server, version)
    server.send_raw(json.dumps([call(1, "echo", {"text": "x"})]).encode())
    answer = server.recv()
    assert answer["error"]["code"] == -32600 and "batches are not supported" in answer["error"]["message"]


def test_a_batch_before_initialize_is_refused(start_stdio_server):
    server = start_stdio_server()
    server.send_raw(json.dumps([call(1, "echo", {"text": "x"})]).encode())
    assert server.recv()["error"]["code"] == -32600


def test_initialize_inside_a_batch_is_refused_alone(start_stdio_server):
    server = opened(start_stdio_server, OLD)
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": OLD, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    server.send_raw(json.dumps([initialize, call(2, "echo", {"text": "ok"})]).encode())
    by_id = {answer["id"]: answer for answer in server.recv()}
    assert by_id[1]["error"]["code"] == -32600
    assert "initialize must not be part of a batch" in by_id[1]["error"]["message"]
    assert by_id[2]["result"]["content"][0]["text"] == "ok"


def test_a_cancelled_request_of_a_batch_is_left_out_of_its_answer(start_stdio_server, tmp_path):
    server = opened(start_stdio_server, OLD)
    marker = tmp_path / "m"
    server.send_raw(json.dumps([call(1, "sleepy", {"marker": str(marker)}), call(2, "add", {"a": 1, "b": 1})]).encode())
    wait_until(lambda: (tmp_path / "m.started").exists(), "sleepy to start")
    server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    answers = server.recv()
    assert [answer["id"] for answer in answers] == [2]
    assert marker.read_text() == "cancelled"

