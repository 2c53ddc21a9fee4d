"""The ``modelctx`` command, run as a real subprocess.

``-P`` keeps the current directory off ``sys.path``, as the installed ``modelctx`` console
script does (``python -m`` alone would add it and hide the module-name case).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

import modelctx
from tests.support.cli_run import SAMPLE_STDIO
from tests.support.wire import DEADLINE, SAMPLE_SERVER, free_port, request, stderr_lines, wait_until

SERVER_MODULE = '''
from modelctx import Server

server = Server("by-module")

@server.tool
def ping() -> str:
    return "pong"
'''


def modelctx_command(*args: str) -> list[str]:
    return [sys.executable, "-P", "-m", "modelctx", *args]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        modelctx_command(*args), cwd=cwd, capture_output=True, text=True, timeout=DEADLINE, check=False
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout == ""
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def test_version():
    result = run("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"modelctx {modelctx.__version__} (Python ")


def test_serve_on_a_directory_names_the_files_in_it(tmp_path):
    (tmp_path / "weather.py").write_text(SERVER_MODULE)
    assert_one_line_error(
        run("serve", str(tmp_path)),
        f"modelctx: {tmp_path} is a directory; name the file that holds the Server",
        f"modelctx serve {tmp_path / 'weather.py'}",
    )


def test_serve_on_a_module_that_does_not_exist(tmp_path):
    assert_one_line_error(
        run("serve", "no_such_weather", cwd=tmp_path),
        "modelctx: no file or module named 'no_such_weather'",
    )


def test_serve_on_a_missing_file(tmp_path):
    assert_one_line_error(run("serve", "weather.py", cwd=tmp_path), "modelctx: no such file: weather.py")
    assert_one_line_error(run("serve", "servers/weather", cwd=tmp_path), "no such file or directory")


def test_serve_on_a_file_without_a_server(tmp_path):
    (tmp_path / "empty.py").write_text("x = 1\n")
    assert_one_line_error(
        run("serve", "empty.py", cwd=tmp_path), "empty.py has no modelctx Server", 'Server("name")'
    )
    (tmp_path / "two.py").write_text(SERVER_MODULE)
    assert_one_line_error(run("serve", "two.py:nothing", cwd=tmp_path), "two.py has no attribute 'nothing'")


def test_a_module_that_imports_something_missing_keeps_its_traceback(tmp_path):
    (tmp_path / "broken.py").write_text("import no_such_dependency\n")
    result = run("serve", "broken", cwd=tmp_path)
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "No module named 'no_such_dependency'" in result.stderr


def test_serve_a_module_by_name_from_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "by_module.py").write_text(SERVER_MODULE)
    monkeypatch.chdir(tmp_path)
    process = subprocess.Popen(
        modelctx_command("serve", "by_module"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        message = request(1, "tools/call", {"name": "ping", "arguments": {}})
        out, err = process.communicate(json.dumps(message) + "\n", timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    response = json.loads(out.splitlines()[0])
    assert response["result"]["content"][0]["text"] == "pong"


def test_serve_http_prints_the_url_it_serves_on_stderr(tmp_path):
    port = free_port()
    process = subprocess.Popen(
        modelctx_command("serve", str(SAMPLE_SERVER), "--http", "--port", str(port)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = stderr_lines(process)
    try:
        first = lines.get(timeout=DEADLINE)
        url = f"http://127.0.0.1:{port}/mcp"
        assert first.strip() == f"modelctx: serving 'sample-server' on Streamable HTTP at {url}"
        response = post_until_up(url, request(1, "server/discover"))
        assert response["result"]["supportedVersions"]
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=DEADLINE)
    assert out == ""  # stdout stays free


def post_until_up(url: str, message: dict[str, Any]) -> dict[str, Any]:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": message["method"],
    }
    def attempt() -> dict[str, Any] | None:
        try:
            return httpx.post(url, json=message, headers=headers, timeout=DEADLINE).json()
        except httpx.TransportError:
            return None

    return wait_until(attempt, f"the server at {url}")


def test_a_bad_port_is_a_usage_error():
    result = run("serve", str(SAMPLE_SERVER), "--http", "--port", "0")
    assert result.returncode == 2 and "0 is not a port number (1-65535)" in result.stderr


def test_serve_http_takes_its_limits_from_the_command_line():
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    process = subprocess.Popen(
        modelctx_command(
            "serve", str(SAMPLE_SERVER), "--http", "--port", str(port),
            "--max-body", "300", "--max-sessions", "1", "--header-timeout", "1", "--body-timeout", "1",
        ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        post_until_up(url, request(1, "server/discover"))
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        with httpx.Client(timeout=DEADLINE) as http:
            too_large = http.post(url, content=b" " * 301, headers=headers)
            legacy = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
            initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": legacy}
            first = http.post(url, json=initialize, headers=headers).headers["mcp-session-id"]
            http.post(url, json=initialize, headers=headers)  # the cap is 1: the idle first goes
            ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            evicted = http.post(
                url, json=ping, headers={**headers, "mcp-session-id": first, "mcp-protocol-version": "2025-11-25"}
            )
        with socket.create_connection(("127.0.0.1", port)) as silent:
            silent.settimeout(DEADLINE)
            cut = read_until_closed(silent)  # the headers never come
        with socket.create_connection(("127.0.0.1", port)) as slow:
            slow.settimeout(DEADLINE)
            slow.sendall(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 100\r\n\r\n{")
            late = read_until_closed(slow)  # the body never comes
    finally:
        process.terminate()
        process.wait(timeout=DEADLINE)

    assert too_large.status_code == 413 and "the limit is 300 bytes" in too_large.text
    assert evicted.status_code == 404
    assert cut.startswith(b"HTTP/1.1 408 ") and b"within 1 seconds" in cut
    assert late.startswith(b"HTTP/1.1 408 ") and b"did not arrive within 1 seconds" in late


def read_until_closed(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_limit_of_zero_is_a_usage_error():
    result = run("serve", str(SAMPLE_SERVER), "--http", "--max-sessions", "0")
    assert result.returncode == 2 and "0 must be above zero" in result.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "1e400"])
def test_a_limit_that_is_not_a_finite_number_is_a_usage_error(value):
    result = run("serve", str(SAMPLE_SERVER), "--http", "--body-timeout", value)
    assert result.returncode == 2 and f"{value} is not a finite number" in result.stderr
    # A client command's deadline too: nan would be a request that never times out.
    result = run("tools", "--timeout", value, "--stdio", SAMPLE_STDIO)
    assert result.returncode == 2 and f"{value} is not a finite number" in result.stderr
