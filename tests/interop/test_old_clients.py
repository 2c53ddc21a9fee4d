"""Real old official clients against ``modelctx serve``: the installed base (issue 21).

mcp 1.2.0 speaks 2024-11-05 and mcp 1.9.4 speaks 2025-03-26; each lives in its own venv
(they need ``pydantic<2.11`` and conflict with the current SDK), made by scripts/test.sh,
which exports MODELCTX_MCP_1_2_0_PYTHON and MODELCTX_MCP_1_9_4_PYTHON. Each runs
tests/fixtures/peers/old_client.py as a subprocess against tests/fixtures/servers/legacy_server.py over
stdio, (1.9.4) Streamable HTTP and the deprecated HTTP+SSE transport (``GET /sse``, both
versions), once per pair; the tests read what it saw. Without a venv the tests skip,
and under CI a skip is a failure (conftest.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import PEERS, SERVERS
from tests.support.wire import HttpServer, serve_command

PEER = PEERS / "old_client.py"
LEGACY_SERVER = SERVERS / "legacy_server.py"
CLIENTS = {
    "1.2.0": ("MODELCTX_MCP_1_2_0_PYTHON", "2024-11-05"),
    "1.9.4": ("MODELCTX_MCP_1_9_4_PYTHON", "2025-03-26"),
}
PAIRS = [("1.2.0", "stdio"), ("1.9.4", "stdio"), ("1.9.4", "http"), ("1.2.0", "sse"), ("1.9.4", "sse")]
# Fields the old SDK's own types lack although its revision's schema has them
# (schema/2024-11-05 and schema/2025-03-26): not ours to drop.
SDK_LAGS = {
    "1.2.0": {"initialize.instructions", "resources/list.resources[0].annotations"},
    "1.9.4": {"initialize.capabilities.completions"},
}


def old_python(version: str) -> str:
    variable = CLIENTS[version][0]
    path = os.environ.get(variable)
    if not path or not Path(path).exists():
        pytest.skip(f"mcp {version} is not installed in its own venv ({variable}; scripts/test.sh makes it)")
    return path


@pytest.fixture(scope="module", params=PAIRS, ids=[f"mcp{v}-{t}" for v, t in PAIRS])
def seen(request, tmp_path_factory) -> Any:
    version, transport = request.param
    python = old_python(version)
    directory = tmp_path_factory.mktemp(f"old-{version}-{transport}")
    marker = str(directory / "cancelled")
    # The old client must not import our interpreter's packages (the current mcp among
    # them); the server it starts gets our path back through MODELCTX_SERVER_PYTHONPATH.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env |= {"MODELCTX_SERVER_PYTHONPATH": os.pathsep.join(sys.path), "MODELCTX_LOG_LEVEL": "CRITICAL"}
    server = None
    if transport == "stdio":
        target = ["--", *serve_command(LEGACY_SERVER)]
    else:
        server = HttpServer(LEGACY_SERVER, directory / "server.log")
        # "sse": the deprecated HTTP+SSE transport, served beside /mcp by default.
        target = [server.url if transport == "http" else server.url.removesuffix("/mcp") + "/sse"]
    try:
        done = subprocess.run(
            [python, str(PEER), transport, marker, *target],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    finally:
        if server is not None:
            server.stop()
    assert done.returncode == 0, f"mcp {version} over {transport} failed:\n{done.stderr[-4000:]}"
    return version, json.loads(done.stdout)


def test_initialize_answers_the_clients_own_revision(seen):
    version, got = seen
    assert got["protocolVersion"] == CLIENTS[version][1]
    assert got["serverInfo"] == {"name": "legacy-server", "version": "2.0.0"}


def test_no_result_carries_a_field_the_clients_revision_lacks(seen):
    version, got = seen
    assert set(got["unknown"]) <= SDK_LAGS[version]


def test_tools_are_listed_without_title_output_schema_icons_or_meta(seen):
    version, got = seen
    add = got["tools"]["add"]
    expected = {"name", "description", "inputSchema"} | ({"annotations"} if version == "1.9.4" else set())
    assert set(add) == expected
    if version == "1.9.4":  # 2025-03-26 has tool annotations
        assert add["annotations"] == {"title": "Adder", "readOnlyHint": True}


def test_structured_content_is_dropped_and_its_text_kept(seen):
    _, got = seen
    assert got["call add"]["content"] == [{"type": "text", "text": '{"sum":5}'}]
    assert "structuredContent" not in got["call add"]


def test_a_resource_link_becomes_text_naming_it(seen):
    _, got = seen
    assert got["call link"]["content"][1] == {
        "type": "text",
        "text": "Resource greeting: legacy://greeting (a hello)",
    }


def test_audio_reaches_2025_03_26_and_is_named_in_text_for_2024_11_05(seen):
    version, got = seen
    (block,) = got["call sound"]["content"]
    if version == "1.9.4":
        assert block["type"] == "audio" and block["mimeType"] == "audio/wav"
    else:
        assert block["type"] == "text" and "audio/wav audio left out" in block["text"]


def test_progress_is_reported_with_a_message_only_from_2025_03_26(seen):
    version, got = seen
    assert got["call progress"]["content"][0]["text"] == "done after 2 steps"
    steps = [(p["progress"], p.get("message")) for p in got["progress"]]
    messages = ["step 1", "step 2"] if version == "1.9.4" else [None, None]
    assert steps == list(zip([1.0, 2.0], messages, strict=True))


def test_resources_and_templates_are_listed_and_read_without_later_fields(seen):
    _, got = seen
    assert got["resources"]["greeting"] == {
        "uri": "legacy://greeting",
        "name": "greeting",
        "description": "A fixed greeting.",
        "mimeType": "text/plain",
        "annotations": {"audience": ["user"], "priority": 0.5},  # no lastModified (2025-06-18)
    }
    assert "title" not in got["templates"]["item"]
    assert got["read"]["contents"] == [
        {"uri": "legacy://greeting", "mimeType": "text/plain", "text": "Hello, old client"}
    ]


def test_prompts_are_listed_and_got_without_titles(seen):
    _, got = seen
    assert set(got["prompts"]["review"]) == {"name", "description", "arguments"}
    assert got["prompt"]["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Please review:\nx = 1"}}
    ]
    assert got["completion"] == ["print(1)"]


def test_the_completions_capability_is_declared_from_2025_03_26_only(seen):
    version, got = seen
    assert ("completions" in got["capabilities"]) == (version == "1.9.4")


def test_elicit_on_an_old_session_fails_saying_the_revision_lacks_it(seen):
    version, got = seen
    assert got["elicit"]["code"] == -32600
    message = got["elicit"]["error"]
    assert f"revision {CLIENTS[version][1]} does not have" in message and "elicitation" in message


def test_a_cancelled_call_stops_its_handler(seen):
    _, got = seen
    assert got["cancelled"] is True
