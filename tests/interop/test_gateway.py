"""The gateway seen by others: the official ``mcp`` client (stdio and Streamable HTTP, each of
its modes) and the official conformance suite's tools scenarios, against
``modelctx gateway`` fronting real upstream server processes.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from anyio.from_thread import start_blocking_portal
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext

from tests.support.paths import CONFORMANCE, ROOT, SRC
from tests.support.wire import SAMPLE_SERVER, free_port

FIXTURE = CONFORMANCE / "everything_server.py"
MODES = ["auto", "legacy", "2026-07-28"]
TRANSPORTS = ["stdio", "http"]


def _write_config(path: Path, **servers: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def _upstream(path: Path, **settings: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "modelctx", "serve", str(path)], **settings}


class HttpGateway:
    """``modelctx gateway --http`` on a free loopback port, stopped by ``stop``."""

    def __init__(self, config: Path, *extra: str, deadline: float = 30.0) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "modelctx", "gateway", "--config", str(config), "--http", "--port", str(self.port), *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        end = time.monotonic() + deadline
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the gateway exited: {self.process.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if time.monotonic() > end:
                    self.stop()
                    raise RuntimeError(f"the gateway did not listen within {deadline}s") from None
                time.sleep(0.05)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


@pytest.fixture(scope="module")
def sample_config(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("gateway")
    return _write_config(
        folder / "mcp.json",
        sample=_upstream(SAMPLE_SERVER, approval={"default": "allow", "tools": {"register": "ask", "boom": "deny"}}),
    )


@pytest.fixture(scope="module")
def http_gateway(sample_config) -> Iterator[HttpGateway]:
    gateway = HttpGateway(sample_config)
    yield gateway
    gateway.stop()


class Person:
    """The official client's elicitation callback: approves forms with ``decision``."""

    def __init__(self) -> None:
        self.decision = "allow_once"
        self.asked: list[str] = []

    async def __call__(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        if self.decision == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"decision": self.decision})


@pytest.fixture(
    scope="module",
    params=[(t, m) for t in TRANSPORTS for m in MODES],
    ids=[f"{t}-{m}" for t in TRANSPORTS for m in MODES],
)
def official(request, sample_config, http_gateway) -> Iterator[tuple[Any, Any, Person]]:
    transport, mode = request.param
    target: Any
    if transport == "stdio":
        target = StdioServerParameters(
            command=sys.executable,
            args=["-m", "modelctx", "gateway", "--config", str(sample_config)],
            env={**os.environ, "MODELCTX_LOG_LEVEL": "CRITICAL"},
        )
    else:
        target = http_gateway.url
    person = Person()
    client = Client(target, mode=mode, elicitation_callback=person, read_timeout_seconds=30)
    with start_blocking_portal("asyncio") as portal:
        with portal.wrap_async_context_manager(client) as connected:
            yield portal, connected, person


def test_the_official_client_lists_the_namespaced_filtered_tools(official):
    portal, client, _ = official
    tools = {tool.name: tool for tool in portal.call(client.list_tools).tools}

    assert "sample_echo" in tools and "sample_add" in tools
    assert "sample_boom" not in tools  # denied: hidden
    assert tools["sample_add"].input_schema["required"] == ["a", "b"]
    assert tools["sample_echo"].description == "Echo the text back."


def test_the_official_client_calls_through_the_gateway(official):
    portal, client, _ = official
    added = portal.call(lambda: client.call_tool("sample_add", {"a": 2, "b": 40}))
    echoed = portal.call(lambda: client.call_tool("sample_echo", {"text": "héllo"}))
    refused = portal.call(lambda: client.call_tool("sample_refuse", {"reason": "Sunday"}))

    assert added.structured_content == {"result": 42}
    assert [block.text for block in echoed.content] == ["héllo"]
    assert refused.is_error is True and refused.content[0].text == "refused: Sunday"


def test_an_ask_tool_asks_the_official_client_and_a_decline_stops_it(official):
    portal, client, person = official
    person.decision = "allow_once"
    allowed = portal.call(lambda: client.call_tool("sample_register", {}))
    person.decision = "decline"
    declined = portal.call(lambda: client.call_tool("sample_register", {}))

    assert len(person.asked) >= 2
    assert "'register'" in person.asked[0]
    assert allowed.is_error is not True
    assert declined.is_error is True and "was not run" in declined.content[0].text


# -- the conformance suite's tools scenarios, against the gateway --------------------------------
TOOLS_SCENARIOS = {
    "2026-07-28": [
        "tools-list",
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-error",
        "tools-call-with-progress",
    ],
    "2025-11-25": [
        "tools-list",
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-with-logging",
        "tools-call-error",
        "tools-call-with-progress",
        "tools-call-sampling",
        "tools-call-elicitation",
    ],
}


def _suite() -> list[str]:
    explicit = os.environ.get("MODELCTX_CONFORMANCE_BIN")
    local = ROOT / ".tools" / "conf" / "node_modules" / ".bin" / "conformance"
    for candidate in (explicit, str(local)):
        if candidate and Path(candidate).exists():
            return [candidate]
    if os.environ.get("CI"):
        pytest.fail("the conformance suite is not installed; run scripts/test.sh")
    pytest.skip("the conformance suite is not installed; run scripts/test.sh")


@pytest.fixture(scope="module")
def fixture_gateway(tmp_path_factory) -> Iterator[HttpGateway]:
    """The gateway in front of the conformance fixture server (a stdio upstream), with its
    tools under their own names: the scenarios call them by name."""
    folder = tmp_path_factory.mktemp("conformance-gateway")
    config = _write_config(folder / "mcp.json", everything=_upstream(FIXTURE, approval="allow"))
    gateway = HttpGateway(config, "--bare-names")
    yield gateway
    gateway.stop()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("version", list(TOOLS_SCENARIOS))
def test_the_gateway_passes_the_conformance_tools_scenarios(version, fixture_gateway):
    suite = _suite()
    failed = []
    for scenario in TOOLS_SCENARIOS[version]:
        out = subprocess.run(
            [*suite, "server", "--url", fixture_gateway.url, "--scenario", scenario, "--spec-version", version],
            capture_output=True,
            text=True,
            timeout=120,
        )
        report = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
        passed = re.search(r"Passed: (\d+)/(\d+), (\d+) failed", report)
        if out.returncode != 0 or passed is None or passed.group(3) != "0" or passed.group(1) == "0":
            failed.append(f"{scenario}:\n{report[-1500:]}")

    assert not failed, "\n\n".join(failed)


def test_the_readme_gateway_runs_as_printed_with_the_official_client(tmp_path):
    """The README's `modelctx gateway --config examples/host.json`, reached by its official
    `mcp` client example run from the repository root, lists and calls the weather tools."""
    readme = (ROOT / "README.md").read_text("utf-8")
    section = readme[readme.index("\n### `modelctx gateway`\n") :]
    command = section.split("```\n", 1)[1].splitlines()[0].split("#")[0].split()
    assert command == ["modelctx", "gateway", "--config", "examples/host.json"]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert 'args=["gateway", "--config", "examples/host.json"]' in example
    (tmp_path / "client.py").write_text(example)
    # `modelctx` on PATH is this checkout's (the SDK passes only PATH and a few more to the gateway).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "modelctx").write_text(
        f'#!/bin/sh\nPYTHONPATH="{SRC}" exec "{sys.executable}" -m modelctx "$@"\n'
    )
    (bin_dir / "modelctx").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}

    run = subprocess.run(
        [sys.executable, str(tmp_path / "client.py")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )

    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == [
        "['weather_list_cities', 'weather_forecast']",
        "{'result': ['lisbon', 'oslo', 'paris']}",
    ], run.stderr


def _opens_an_sse_stream(base: str) -> int:
    import httpx

    with httpx.Client(timeout=httpx.Timeout(10.0, read=10.0)) as http, http.stream("GET", base + "/sse") as opened:
        if opened.status_code == 200:
            first = next(opened.iter_lines())
            assert first == "event: endpoint", first
        return opened.status_code


def test_the_gateway_serves_http_sse_beside_the_endpoint_and_no_sse_turns_it_off(sample_config, http_gateway):
    import httpx

    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }  # fmt: skip
    accept = {"accept": "application/json, text/event-stream"}
    assert _opens_an_sse_stream(f"http://127.0.0.1:{http_gateway.port}") == 200  # as `modelctx serve` by default
    gateway = HttpGateway(sample_config, "--no-sse")
    try:
        base = f"http://127.0.0.1:{gateway.port}"
        assert _opens_an_sse_stream(base) == 404
        assert httpx.post(base + "/messages/?session_id=" + "ab" * 16, json=initialize, timeout=10).status_code == 404
        served = httpx.post(gateway.url, json=initialize, headers=accept, timeout=10)
        assert served.status_code == 200 and served.json()["result"]["serverInfo"]["name"] == "modelctx-gateway"
    finally:
        gateway.stop()


def test_the_gateway_refuses_no_sse_without_http(sample_config):
    from tests.support.cli_run import modelctx

    refused = modelctx("gateway", "--config", str(sample_config), "--no-sse")

    assert refused.returncode != 0
    assert "--no-sse turns off an HTTP transport; add --http" in refused.stderr
