"""``*/list`` answers served from the registry's cached, encoded items (issue 25).

The registry keeps each listed item encoded as JSON, once per shape a revision gives it,
and splices those bytes into the answer. These tests hold it to what an uncached list
would say: every change after a list is in the next one, each revision sees its own
shape on one connection, cursors still walk the pages, and middleware still reads and
changes the items as dicts. Over a real ``modelctx serve`` on stdio (raw JSON-RPC lines)
and the in-process client, which encodes and decodes like a transport.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from modelctx import Client, Server, ServerConfig
from tests.support.wire import DEADLINE, StdioServer, async_test

run = async_test(DEADLINE)

MODERN = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}

# A server whose tools change the tool set while it serves: grow adds one, shrink
# removes one, retitle replaces one with a new description.
CHANGING = textwrap.dedent(
    '''
    from modelctx import Server, ServerConfig

    server = Server("changing", config=ServerConfig(page_size=PAGE))


    def make(name: str, description: str) -> None:
        def tool(city: str) -> str:
            return city

        server.add_tool(tool, name=name, description=description, replace=True)


    for n in range(5):
        make(f"tool_{n}", f"tool number {n}")


    @server.tool(title="Grow", annotations={"readOnlyHint": False}, icons=[{"src": "https://example.com/g.png"}])
    def grow(name: str) -> dict:
        """Add a tool."""
        make(name, f"added {name}")
        return {"added": name}


    @server.tool
    def shrink(name: str) -> str:
        """Remove a tool."""
        server.remove_tool(name)
        return name


    @server.tool
    def retitle(name: str, description: str) -> str:
        """Replace a tool with another description."""
        make(name, description)
        return name
    '''
)


def start(start_stdio_server: Any, tmp_path: Path, page: int | None = None) -> StdioServer:
    path = tmp_path / "changing.py"
    path.write_text(CHANGING.replace("PAGE", repr(page)))
    return start_stdio_server(path)


class Lines:
    """Raw requests to one stdio server, modern (``_meta``) or in its handshake session."""

    def __init__(self, server: StdioServer) -> None:
        self.server = server
        self.next_id = 0

    def ask(self, method: str, params: dict[str, Any], *, modern: bool) -> dict[str, Any]:
        self.next_id += 1
        if modern:
            params = {**params, "_meta": MODERN}
        answer = self.server.call({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert "result" in answer, answer
        return answer["result"]

    def open(self, version: str) -> None:
        info = {"name": "t", "version": "0"}
        opened = self.ask("initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": info}, modern=False)
        assert opened["protocolVersion"] == version
        self.server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def tools(self, *, modern: bool) -> list[dict[str, Any]]:
        """Every listed tool, following the cursors."""
        listed: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        while True:
            page = self.ask("tools/list", params, modern=modern)
            listed += page["tools"]
            if "nextCursor" not in page:
                return listed
            params = {"cursor": page["nextCursor"]}

    def call(self, tool: str, **arguments: Any) -> None:
        result = self.ask("tools/call", {"name": tool, "arguments": arguments}, modern=True)
        assert not result.get("isError"), result


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [tool["name"] for tool in tools]


def test_a_tool_added_removed_or_replaced_after_a_list_shows_in_the_next_list(start_stdio_server, tmp_path):
    lines = Lines(start(start_stdio_server, tmp_path))
    lines.open("2025-03-26")
    for modern in (True, False):  # both shapes cached before the changes
        assert names(lines.tools(modern=modern))[:5] == [f"tool_{n}" for n in range(5)]

    lines.call("grow", name="late")
    lines.call("shrink", name="tool_1")
    lines.call("retitle", name="tool_3", description="now about rain")

    for modern in (True, False):
        tools = lines.tools(modern=modern)
        by_name = {tool["name"]: tool for tool in tools}
        assert names(tools) == ["tool_0", "tool_2", "tool_3", "tool_4", "grow", "shrink", "retitle", "late"]
        assert by_name["late"]["description"] == "added late"
        assert by_name["tool_3"]["description"] == "now about rain"


def test_each_revision_lists_its_own_shape_from_one_connection(start_stdio_server, tmp_path):
    """A 2024-11-05 session and modern requests share the process and its cache; each
    sees only the fields its schema has, before and after a change."""
    lines = Lines(start(start_stdio_server, tmp_path))
    lines.open("2024-11-05")
    for round in range(2):
        old = {tool["name"]: tool for tool in lines.tools(modern=False)}
        new = {tool["name"]: tool for tool in lines.tools(modern=True)}
        assert set(old["grow"]) == {"name", "description", "inputSchema"}
        assert new["grow"]["title"] == "Grow" and new["grow"]["annotations"] == {"readOnlyHint": False}
        assert new["grow"]["icons"] == [{"src": "https://example.com/g.png"}] and "outputSchema" in new["grow"]
        assert old["grow"]["inputSchema"] == new["grow"]["inputSchema"]
        assert all(set(tool) <= {"name", "description", "inputSchema"} for tool in old.values())
        if round == 0:
            lines.call("grow", name="second")
    assert "second" in old and "second" in new


def test_a_2025_03_26_session_lists_annotations_but_no_title_or_output_schema(start_stdio_server, tmp_path):
    lines = Lines(start(start_stdio_server, tmp_path))
    lines.open("2025-03-26")
    grow = {tool["name"]: tool for tool in lines.tools(modern=False)}["grow"]
    assert set(grow) == {"name", "description", "inputSchema", "annotations"}
    assert grow["annotations"] == {"readOnlyHint": False}


def test_cursors_walk_every_page_and_stay_right_after_the_tool_set_changes(start_stdio_server, tmp_path):
    lines = Lines(start(start_stdio_server, tmp_path, page=3))
    lines.open("2025-03-26")
    first = lines.ask("tools/list", {}, modern=True)
    assert names(first["tools"]) == ["tool_0", "tool_1", "tool_2"]
    second = lines.ask("tools/list", {"cursor": first["nextCursor"]}, modern=True)
    assert names(second["tools"]) == ["tool_3", "tool_4", "grow"]
    # A page of the old shape is cut from the same offsets.
    old_second = lines.ask("tools/list", {"cursor": first["nextCursor"]}, modern=False)
    assert names(old_second["tools"]) == ["tool_3", "tool_4", "grow"]
    assert set(old_second["tools"][2]) == {"name", "description", "inputSchema", "annotations"}

    lines.call("shrink", name="tool_0")
    again = lines.ask("tools/list", {"cursor": first["nextCursor"]}, modern=True)
    assert names(again["tools"]) == ["tool_4", "grow", "shrink"]
    last = lines.ask("tools/list", {"cursor": again["nextCursor"]}, modern=True)
    assert names(last["tools"]) == ["retitle"] and "nextCursor" not in last
    for modern in (True, False):
        assert names(lines.tools(modern=modern)) == ["tool_1", "tool_2", "tool_3", "tool_4", "grow", "shrink", "retitle"]


@run
async def test_middleware_reads_and_changes_the_listed_tools_as_dicts():
    seen: list[list[str]] = []

    async def hide_secret(call: Any, call_next: Any) -> Any:
        result = await call_next(call)
        if call.method == "tools/list":
            seen.append([tool["name"] for tool in result["tools"]])
            result["tools"] = [tool for tool in result["tools"] if tool["name"] != "secret"]
        return result

    server = Server("filtered", config=ServerConfig(middleware=[hide_secret]))
    for name in ("open", "secret"):
        server.add_tool(lambda: "x", name=name)
    async with Client(server, mode="2026-07-28", timeout=DEADLINE) as client:
        shown = await client.list_tools()
        shown_again = await client.list_tools()

    assert [tool.name for tool in shown.tools] == ["open"] == [tool.name for tool in shown_again.tools]
    assert seen == [["open", "secret"], ["open", "secret"]]  # the cached list itself is untouched


@run
async def test_a_mounted_servers_new_tool_is_in_the_parents_next_list():
    parent, child = Server("parent"), Server("child")
    child.add_tool(lambda: "a", name="first")
    parent.mount(child, prefix="kid")
    async with Client(parent, mode="2026-07-28", timeout=DEADLINE) as client:
        before = [tool.name for tool in (await client.list_tools()).tools]
        child.add_tool(lambda: "b", name="second")
        after = [tool.name for tool in (await client.list_tools()).tools]

    assert before == ["kid_first"]
    assert after == ["kid_first", "kid_second"]
