"""A server mounted under a path prefix of another ASGI application (Starlette's ``Mount``,
whose ``path`` keeps the prefix and names it in ``root_path``): the endpoint answers at the
prefix in both eras, and the HTTP+SSE transport beside it names its message URL under the
prefix, so an old client's POSTs come back to it. A real uvicorn process on loopback."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from modelctx import Client
from modelctx.transports._asgi import app_path, sent_path
from modelctx.transports.http_client import HttpClientTransport
from tests.support.paths import SERVERS
from tests.support.serve import free_port
from tests.support.wire import async_test


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--app-dir", str(SERVERS), "--port", str(port), "mounted_app:app"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 20
        while True:
            try:
                if httpx.get(base + "/", timeout=1).text == "the rest of the site":
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > end:
                proc.kill()
                pytest.fail(f"the mounted app did not start: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            time.sleep(0.05)
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("mode", ["auto", "handshake"])
@async_test()
async def test_a_server_mounted_under_a_prefix_answers_there_in_both_eras(site, mode):
    async with Client(f"{site}/api/mcp", mode=mode, timeout=10) as client:
        result = await client.call_tool("add", {"a": 2, "b": 40})
    assert result.structured_content == {"result": 42}


@async_test()
async def test_http_sse_under_a_prefix_names_its_message_url_under_the_prefix(site):
    async with httpx.AsyncClient(timeout=10) as http:
        async with http.stream("GET", f"{site}/api/sse") as stream:
            lines = stream.aiter_lines()
            event = [await anext(lines), await anext(lines)]
    assert event[0] == "event: endpoint"
    assert event[1].startswith("data: /api/messages/?session_id=")
    async with Client(HttpClientTransport(f"{site}/api/sse", transport="sse"), timeout=10) as client:
        result = await client.call_tool("add", {"a": 1, "b": 2})
    assert result.structured_content == {"result": 3}


@async_test()
async def test_the_app_outside_the_mount_is_not_the_servers(site):
    async with httpx.AsyncClient(timeout=10) as http:
        outside = await http.post(f"{site}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert outside.status_code == 404


@pytest.mark.parametrize(
    ("path", "root", "inside", "sent"),
    [
        ("/mcp", "", "/mcp", "/mcp"),  # served at the top
        ("/api/mcp", "/api", "/mcp", "/api/mcp"),  # the ASGI spec: path keeps the prefix
        ("/mcp", "/api", "/mcp", "/api/mcp"),  # older mounts took the prefix off path
        ("/api/sse/", "/api/", "/sse", "/api/sse"),  # trailing slashes are not significant
        ("/apiary/mcp", "/api", "/apiary/mcp", "/api/apiary/mcp"),  # a prefix is whole segments
        ("/api", "/api", "/", "/api/"),
    ],
)
def test_the_path_inside_the_app_and_the_path_the_client_sent(path, root, inside, sent):
    scope = {"type": "http", "path": path, "root_path": root}
    assert app_path(scope) == inside
    assert sent_path(scope) == sent
