"""`modelctx inspect` serves its page on loopback behind a token, and reaches any target.

Real inspector processes; plain HTTP requests as another page or program would send them.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.inspector_processes import running_inspector
from tests.support.paths import EXAMPLES, SERVERS
from tests.support.wire import serve_command

SERVER = SERVERS / "inspector_server.py"
WEATHER = EXAMPLES / "weather_server.py"


def _root(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _snapshot(url: str) -> dict[str, Any]:
    """The page's state once the inspector has connected (or failed to): the event
    stream's snapshot, with the status and lists that followed it."""
    state: dict[str, Any] = {}
    with httpx.stream("GET", url + "api/events", timeout=30) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[len("data: ") :])
            if event["type"] == "snapshot":
                state = event
            elif event["type"] in ("status", "lists"):
                state[event["type"]] = event[event["type"]]
            elif event["type"] == "message":
                state["log"].append(event["entry"])
            connected = state["status"]["state"] == "connected" and any(state["lists"].values())
            if connected or state["status"]["state"] == "failed":
                return state
    raise AssertionError(f"the event stream ended before the inspector connected: {state}")


def _wait_for_port(port: int) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after 15 s")


def test_requests_without_the_token_are_refused_with_403() -> None:
    with running_inspector("inspect", str(SERVER)) as url:
        root = _root(url)
        assert httpx.get(url, timeout=10).status_code == 200
        for path in ("/", "/api/events", "/static/app.js", "/not-the-token/", "/not-the-token/api/events"):
            refused = httpx.get(root + path, timeout=10)
            assert refused.status_code == 403, path
            assert "token" in refused.text
        assert httpx.post(root + "/api/call", json={"name": "fail"}, timeout=10).status_code == 403


def test_a_foreign_origin_or_host_is_refused() -> None:
    with running_inspector("inspect", str(SERVER)) as url:
        own_origin = _root(url)
        refused = httpx.post(url + "api/refresh", json={}, headers={"Origin": "https://evil.example"}, timeout=10)
        assert refused.status_code == 403
        assert "evil.example" in refused.text
        # DNS rebinding: a page on another name that resolves to 127.0.0.1.
        port = urlsplit(url).port
        rebound = httpx.get(url, headers={"Host": f"evil.example:{port}"}, timeout=10)
        assert rebound.status_code == 403
        _snapshot(url)
        allowed = httpx.post(url + "api/refresh", json={}, headers={"Origin": own_origin}, timeout=10)
        assert allowed.status_code == 200, allowed.text


BAD_BODIES: dict[str, bytes] = {
    "100,000 [": b"[" * 100_000,
    "an object 100,000 deep": b'{"a":' * 100_000,
    "not JSON": b"\xff\xfe",
    "NaN": b'{"name": "fail", "arguments": {"x": NaN}}',
    "a number no float holds": b'{"name": "fail", "arguments": {"x": 1e999}}',
    "a lone surrogate": b'{"name": "\\ud800", "uri": "\\ud800", "id": "\\ud800", "action": "accept"}',
    "an array": b"[1, 2]",
}
WRONG_TYPES: dict[str, list[dict[str, Any]]] = {
    "call": [{"name": 5}, {"name": "fail", "arguments": []}, {"name": "fail", "arguments": 0}, {"name": "fail", "callId": {}}],
    "read": [{"uri": ["inspector://readme"]}, {}],
    "prompt": [{"name": "p", "arguments": "x"}, {"name": "p", "arguments": {"a": {"b": "c"}}}, {"name": "p", "arguments": {"a": None}}],
    "elicitation": [{"id": ["x"], "action": "accept"}, {"id": "x", "action": "maybe"}, {"id": "x", "action": "accept", "content": [1]}],
}


def test_every_api_answers_a_bad_body_with_a_400_that_says_what_is_wrong() -> None:
    # 100,000 [ made json.loads raise RecursionError: a 500 with no word of why.
    with running_inspector("inspect", str(SERVER)) as url:
        _snapshot(url)
        for api in ("call", "read", "prompt", "elicitation", "reconnect", "refresh"):
            for what, body in BAD_BODIES.items():
                answer = httpx.post(
                    url + "api/" + api, content=body, headers={"content-type": "application/json"}, timeout=30
                )
                assert answer.status_code == 400, (api, what, answer.status_code, answer.text[:200])
                message = answer.json()["error"]["message"]
                assert "JSON" in message, (api, what, message)
        for api, bodies in WRONG_TYPES.items():
            for body in bodies:
                answer = httpx.post(url + "api/" + api, json=body, timeout=30)
                assert answer.status_code == 400, (api, body, answer.status_code, answer.text[:200])
                assert answer.json()["error"]["kind"] == "local", (api, body)
        deep = httpx.post(url + "api/call", content=b"[" * 100_000, headers={"content-type": "application/json"}, timeout=30)
        assert "nested too deeply" in deep.json()["error"]["message"]
        # The inspector goes on: its own call still runs.
        called = httpx.post(url + "api/call", json={"name": "fail"}, timeout=30)
        assert called.status_code == 200 and "result" in called.json(), called.text


def test_an_http_url_target_is_inspected_over_streamable_http() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(serve_command(WEATHER, "--http", "--port", str(port)), stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port)
        with running_inspector("inspect", f"http://127.0.0.1:{port}/mcp") as url:
            snapshot = _snapshot(url)
            assert snapshot["status"]["state"] == "connected", snapshot["status"]
            assert snapshot["status"]["serverInfo"]["name"] == "weather"
            assert {tool["name"] for tool in snapshot["lists"]["tools"]} == {"list_cities", "forecast"}
            called = httpx.post(url + "api/call", json={"name": "forecast", "arguments": {"city": "oslo"}}, timeout=30)
            assert called.json()["result"]["structuredContent"]["sky"] == "snow"
    finally:
        server.terminate()
        server.wait(15)


def test_a_stdio_command_line_is_inspected_and_jsonrpc_errors_keep_their_code() -> None:
    command = f"{sys.executable} {WEATHER}"
    with running_inspector("inspect", "--stdio", command) as url:
        snapshot = _snapshot(url)
        assert snapshot["status"]["state"] == "connected", snapshot["status"]
        methods = [entry["message"].get("method") for entry in snapshot["log"]]
        assert "tools/list" in methods
        missing = httpx.post(url + "api/read", json={"uri": "weather://nowhere"}, timeout=30).json()
        assert missing["error"]["kind"] == "jsonrpc"
        assert missing["error"]["code"] == -32602


def test_a_server_that_fails_to_start_is_reported_on_the_page(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('this server does not start')\n")
    with running_inspector("inspect", str(broken)) as url:
        status = _snapshot(url)["status"]
        assert status["state"] == "failed"
        assert "this server does not start" in status["error"]["message"]


def test_inspect_needs_exactly_one_target() -> None:
    neither = subprocess.run(
        [sys.executable, "-m", "modelctx.inspector", "inspect"], capture_output=True, text=True, timeout=30
    )
    assert neither.returncode == 2
    assert "TARGET or --stdio" in neither.stderr


def test_the_reference_everything_server_is_inspected_over_stdio() -> None:
    command = os.environ.get("MODELCTX_EVERYTHING_BIN")
    if not command:
        pytest.skip("@modelcontextprotocol/server-everything is not installed (MODELCTX_EVERYTHING_BIN)")
    with running_inspector("inspect", "--stdio", shlex.join([command, "stdio"])) as url:
        snapshot = _snapshot(url)
        assert snapshot["status"]["state"] == "connected", snapshot["status"]
        assert snapshot["status"]["era"].startswith("handshake")
        assert "echo" in {tool["name"] for tool in snapshot["lists"]["tools"]}
        echoed = httpx.post(url + "api/call", json={"name": "echo", "arguments": {"message": "hi"}}, timeout=30)
        assert "hi" in echoed.json()["result"]["content"][0]["text"]
