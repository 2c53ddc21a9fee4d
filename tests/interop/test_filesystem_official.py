"""The official MCP SDK client (mcp==2.3.0) against the filesystem server, as a real
subprocess on stdio and on Streamable HTTP, in the handshake era and in 2026-07-28."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters

from tests.servers.test_filesystem import _listening
from tests.support.wire import free_port, wait_until

CASES = [("stdio", "legacy"), ("stdio", "2026-07-28"), ("http", "auto"), ("http", "legacy")]


class Official:
    def __init__(self, portal: BlockingPortal, client: Client, root: Path) -> None:
        self.portal = portal
        self.client = client
        self.root = root

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.client, name)
        return lambda *args, **kwargs: self.portal.call(lambda: attribute(*args, **kwargs))


@pytest.fixture(scope="module", params=CASES, ids=[f"{t}-{m}" for t, m in CASES])
def official(request, tmp_path_factory) -> Iterator[Official]:
    transport, mode = request.param
    root = tmp_path_factory.mktemp(f"official-{transport}-{mode}")
    (root / "hello.txt").write_text("hello\nworld\n")
    (root / "outside.lnk").symlink_to("/etc/hostname")
    process = None
    args = ["-m", "modelctx.servers.filesystem", str(root)]
    if transport == "stdio":
        # The SDK gives the child a minimal environment; keep the import path this run uses.
        env = {"PYTHONPATH": os.pathsep.join(sys.path)}
        target: Any = StdioServerParameters(command=sys.executable, args=args, env=env)
    else:
        port = free_port()
        process = subprocess.Popen([sys.executable, *args, "--http", "--port", str(port)], stdin=subprocess.DEVNULL)
        wait_until(lambda: _listening(port, process), "the filesystem server on HTTP")
        target = f"http://127.0.0.1:{port}/mcp"
    try:
        with start_blocking_portal("asyncio") as portal:
            client = Client(target, mode=mode, read_timeout_seconds=30)
            with portal.wrap_async_context_manager(client) as connected:
                yield Official(portal, connected, root)
    finally:
        if process is not None:
            process.kill()
            process.wait(timeout=15)


def test_the_official_client_lists_the_tools_with_their_hints(official):
    tools = {tool.name: tool for tool in official.list_tools().tools}
    assert tools["read_text_file"].annotations.read_only_hint is True
    assert tools["edit_file"].annotations.destructive_hint is True
    assert tools["get_file_info"].output_schema is not None


def test_the_official_client_reads_edits_and_is_refused_outside(official):
    head = official.call_tool("read_text_file", {"path": "hello.txt", "head": 1})
    assert [(b.type, b.text) for b in head.content] == [("text", "hello\n")]

    diff = official.call_tool(
        "edit_file", {"path": "hello.txt", "edits": [{"oldText": "world", "newText": "there"}], "dryRun": True}
    )
    assert "+there" in diff.content[0].text
    assert (official.root / "hello.txt").read_text() == "hello\nworld\n"

    refused = official.call_tool("read_text_file", {"path": "outside.lnk"})
    assert refused.is_error is True
    assert "outside the allowed directories" in refused.content[0].text


def test_the_official_client_lists_and_reads_file_resources(official):
    uri = (official.root / "hello.txt").as_uri()
    assert uri in [str(r.uri) for r in official.list_resources().resources]
    contents = official.read_resource(uri).contents
    assert isinstance(contents[0], types.TextResourceContents)
    assert contents[0].text == "hello\nworld\n"
