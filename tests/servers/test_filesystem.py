"""The reference filesystem server through real transports: its tools, its resources and
their change notifications, spoken to by our client on stdio and on Streamable HTTP
(``python -m modelctx.servers.filesystem ROOT [--http]``, started as a user starts it).
"""

from __future__ import annotations

import asyncio
import base64
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from modelctx import Client
from modelctx.client import ListChanged, ResourceUpdated
from modelctx.servers.filesystem import build_server
from tests.support.wire import free_port, wait_until

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
BIG = 5 * 1024 * 1024  # over the 4 MiB a single read returns


def fill(root: Path) -> None:
    (root / "notes").mkdir()
    (root / "notes" / "todo.md").write_text("# todo\nbuy milk\ncall Ana\nbuy bread\n")
    (root / "notes" / "deep" / "deeper").mkdir(parents=True)
    (root / "notes" / "deep" / "deeper" / "bottom.txt").write_text("bottom\n")
    (root / "logo.png").write_bytes(PNG)
    (root / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (root / "blob.bin").write_bytes(b"\x00\x01buy milk\x00")
    (root / "big.log").write_bytes(b"".join(b"line %07d\n" % n for n in range(BIG // 13)))


class Fs:
    def __init__(self, portal: BlockingPortal, client: Client, root: Path) -> None:
        self.portal = portal
        self.client = client
        self.root = root

    def run(self, fn: Any) -> Any:
        return self.portal.call(fn)

    def call(self, tool: str, **arguments: Any) -> Any:
        return self.run(lambda: self.client.call_tool(tool, arguments, timeout=20))

    def text(self, tool: str, **arguments: Any) -> str:
        result = self.call(tool, **arguments)
        assert result.is_error is not True, result.content[0].text
        return result.content[0].text

    def error(self, tool: str, **arguments: Any) -> str:
        result = self.call(tool, **arguments)
        assert result.is_error is True
        return result.content[0].text


def _listening(port: int, process: subprocess.Popen[bytes]) -> bool:
    assert process.poll() is None, "the filesystem server exited"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def server_command(root: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "modelctx.servers.filesystem", str(root), *options]


@pytest.fixture(scope="module", params=["stdio", "http"])
def fs(request, tmp_path_factory) -> Iterator[Fs]:
    root = tmp_path_factory.mktemp(f"fs-{request.param}")
    fill(root)
    process = None
    if request.param == "stdio":
        target: Any = server_command(root)
    else:
        port = free_port()
        process = subprocess.Popen(server_command(root, "--http", "--port", str(port)), stdin=subprocess.DEVNULL)
        wait_until(lambda: _listening(port, process), "the filesystem server on HTTP")
        target = f"http://127.0.0.1:{port}/mcp"
    try:
        with start_blocking_portal("asyncio") as portal:
            with portal.wrap_async_context_manager(Client(target, timeout=20)) as client:
                yield Fs(portal, client, root)
    finally:
        if process is not None:
            process.kill()
            process.wait(timeout=15)


# -- tools --------------------------------------------------------------------------------
def test_tools_carry_the_npm_names_and_hints_a_host_asks_first_by(fs):
    tools = {tool.name: tool for tool in fs.run(fs.client.tools)}

    readers = ["read_text_file", "read_file", "read_media_file", "read_multiple_files", "list_directory",
               "list_directory_with_sizes", "directory_tree", "search_files", "search_file_contents",
               "get_file_info", "list_allowed_directories"]
    for name in readers:
        assert tools[name].annotations.read_only_hint is True, name
    for name in ["write_file", "edit_file", "move_file"]:
        assert tools[name].annotations.destructive_hint is True, name
        assert tools[name].annotations.read_only_hint is False, name
    assert tools["write_file"].annotations.idempotent_hint is True
    assert tools["create_directory"].annotations.idempotent_hint is True
    assert tools["edit_file"].annotations.idempotent_hint is False
    assert tools["get_file_info"].output_schema["properties"]["size"] == {"type": "integer"}


def test_read_text_file_gives_head_tail_and_byte_ranges(fs):
    assert fs.text("read_text_file", path="notes/todo.md", head=2) == "# todo\nbuy milk\n"
    assert fs.text("read_text_file", path="notes/todo.md", tail=1) == "buy bread\n"
    assert fs.text("read_text_file", path="notes/todo.md", offset=7, length=8) == "buy milk"


def test_a_large_file_is_read_by_range_and_a_whole_read_says_how(fs):
    assert "give offset and length, or head/tail" in fs.error("read_text_file", path="big.log")
    last = fs.text("read_text_file", path="big.log", tail=1)
    assert last == f"line {BIG // 13 - 1:07}\n"
    assert fs.text("read_text_file", path="big.log", offset=13 * 1000, length=12) == "line 0001000"


def test_a_file_that_is_not_utf8_is_named_with_the_byte_and_the_tool_to_use(fs):
    text = fs.error("read_text_file", path="latin1.txt")
    assert "not UTF-8 text" in text
    assert "byte 3" in text
    assert "read_media_file" in text


def test_read_media_file_returns_an_image_in_base64_with_its_mime_type(fs):
    block = fs.call("read_media_file", path="logo.png").content[0]
    assert (block.type, block.mime_type) == ("image", "image/png")
    assert base64.b64decode(block.data) == PNG


def test_read_multiple_files_reports_a_failure_in_its_place(fs):
    text = fs.text("read_multiple_files", paths=["notes/todo.md", "missing.txt"])
    assert "notes/todo.md:\n# todo" in text
    assert "missing.txt: Error - " in text


def test_listings_show_sizes_and_a_tree_stops_at_its_depth(fs):
    listing = fs.text("list_directory", path=".")
    assert "[DIR] notes" in listing and "[FILE] logo.png" in listing
    sized = fs.text("list_directory_with_sizes", path=".", sortBy="size")
    assert sized.splitlines()[0].startswith("[FILE] big.log")
    tree = fs.text("directory_tree", path="notes", maxDepth=2)
    assert '"deeper"' in tree and "bottom.txt" not in tree


def test_search_by_glob_and_by_content_skips_binary_files(fs):
    assert fs.text("search_files", path=".", pattern="*.md") == str(fs.root / "notes" / "todo.md")
    found = fs.call("search_file_contents", path=".", query="buy", include="*").structured_content
    assert [(m["line"], m["text"]) for m in found["matches"]] == [(2, "buy milk"), (4, "buy bread")]
    assert str(fs.root / "blob.bin") in found["skipped"]
    regex = fs.call("search_file_contents", path="notes", query=r"^call \w+$", regex=True).structured_content
    assert [m["text"] for m in regex["matches"]] == ["call Ana"]
    assert "not valid" in fs.error("search_file_contents", path=".", query="(", regex=True)


def test_get_file_info_is_structured(fs):
    info = fs.call("get_file_info", path="notes/todo.md").structured_content
    assert (info["type"], info["size"], info["path"]) == ("file", 35, str(fs.root / "notes" / "todo.md"))


def test_edit_file_replaces_exactly_once_unless_replace_all_and_dry_run_writes_nothing(fs):
    fs.text("create_directory", path="work/a/b")
    fs.text("write_file", path="work/a/b/e.txt", content="x = 1\ny = 1\n")
    target = fs.root / "work" / "a" / "b" / "e.txt"

    twice = fs.error("edit_file", path=str(target), edits=[{"oldText": "= 1", "newText": "= 2"}])
    assert "occurs 2 times" in twice and "replaceAll" in twice
    missing = fs.error("edit_file", path=str(target), edits=[{"oldText": "x = 1", "newText": "x = 3"},
                                                              {"oldText": "nope", "newText": ""}])
    assert "edit 2" in missing and "nothing was changed" in missing
    assert target.read_text() == "x = 1\ny = 1\n"

    diff = fs.text("edit_file", path=str(target), edits=[{"oldText": "x = 1", "newText": "x = 9"}], dryRun=True)
    assert "-x = 1\n+x = 9\n" in diff
    assert target.read_text() == "x = 1\ny = 1\n"

    fs.text("edit_file", path=str(target), edits=[{"oldText": "= 1", "newText": "= 2", "replaceAll": True}])
    assert target.read_text() == "x = 2\ny = 2\n"


def test_move_file_renames_and_refuses_to_overwrite(fs):
    fs.text("write_file", path="m1.txt", content="one")
    fs.text("write_file", path="m2.txt", content="two")
    assert "already exists" in fs.error("move_file", source="m1.txt", destination="m2.txt")
    fs.text("move_file", source="m1.txt", destination="m3.txt")
    assert (fs.root / "m3.txt").read_text() == "one" and not (fs.root / "m1.txt").exists()


def test_writing_into_a_missing_directory_says_to_create_it(fs):
    assert "create_directory first" in fs.error("write_file", path="nowhere/x.txt", content="x")


# -- resources --------------------------------------------------------------------------------
def test_files_are_resources_with_mime_types_and_the_template_reads_any(fs):
    resources = {r.uri: r for r in fs.run(fs.client.resources)}
    todo = (fs.root / "notes" / "todo.md").as_uri()
    assert resources[(fs.root / "logo.png").as_uri()].mime_type == "image/png"
    assert resources[todo].mime_type == "text/markdown"
    templates = fs.run(fs.client.resource_templates)
    assert [t.uri_template for t in templates] == ["file:///{+path}"]

    read = fs.run(lambda: fs.client.read_resource(todo))
    assert read.contents[0]["text"].startswith("# todo")
    png = fs.run(lambda: fs.client.read_resource((fs.root / "logo.png").as_uri()))
    assert base64.b64decode(png.contents[0]["blob"]) == PNG


def test_the_template_reads_a_file_past_the_listing_bound_with_its_mime_type(tmp_path):
    (tmp_path / "a b").mkdir()
    (tmp_path / "a b" / "caf\u00e9 notes.md").write_text("# hi\n")
    (tmp_path / "first.txt").write_text("first")

    async def read() -> tuple[list[str], Any]:
        server = build_server([str(tmp_path)], max_listed=1)
        async with Client(server) as client:
            listed = [r.uri for r in await client.resources()]
            return listed, await client.read_resource((tmp_path / "a b" / "caf\u00e9 notes.md").as_uri())

    listed, read_back = asyncio.run(asyncio.wait_for(read(), 15))
    assert listed == [(tmp_path / "first.txt").as_uri()]
    assert read_back.contents[0]["text"] == "# hi\n"
    assert read_back.contents[0]["mimeType"] == "text/markdown"


@pytest.mark.parametrize("mode", ["2026-07-28", "handshake"])
def test_changes_reach_subscribers_as_updated_and_list_changed(tmp_path, mode):
    (tmp_path / "watched.txt").write_text("v1")
    uri = (tmp_path / "watched.txt").as_uri()

    async def scenario() -> list[Any]:
        events: list[Any] = []
        opened = asyncio.Event()
        async with Client(server_command(tmp_path), mode=mode, timeout=20) as client:
            stream = client.listen(resources=True, resource_uris=[uri], on_open=opened.set)

            async def consume() -> None:
                async for event in stream:
                    events.append(event)
                    if ListChanged("resources") in events and ResourceUpdated(uri) in events:
                        return

            task = asyncio.create_task(consume())
            await asyncio.wait_for(opened.wait(), 15)
            # The server watches from the moment it answers: one change each is enough.
            (tmp_path / "watched.txt").write_text("v2")
            (tmp_path / "appeared0.txt").write_text("new")
            await asyncio.wait_for(task, 15)
            listed = [r.uri for r in await client.resources()]
            assert (tmp_path / "appeared0.txt").as_uri() in listed
        return events

    events = asyncio.run(asyncio.wait_for(scenario(), 40))
    assert ResourceUpdated(uri) in events
    assert ListChanged("resources") in events


def test_resources_are_listed_page_by_page_and_bounded():
    async def scenario(root: Path) -> tuple[int, int]:
        server = build_server([str(root)], max_listed=150)
        pages, total, cursor = 0, 0, None
        async with Client(server) as client:
            while True:
                page = await client.list_resources(cursor)
                pages, total = pages + 1, total + len(page.resources)
                cursor = page.next_cursor if isinstance(page.next_cursor, str) else None
                if cursor is None:
                    return pages, total

    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        for n in range(300):
            Path(directory, f"f{n:03}.txt").write_text(str(n))
        assert asyncio.run(asyncio.wait_for(scenario(Path(directory)), 30)) == (2, 150)


def test_read_only_leaves_out_every_tool_that_writes(tmp_path):
    async def names() -> set[str]:
        async with Client(server_command(tmp_path, "--read-only"), timeout=20) as client:
            return {tool.name for tool in await client.tools()}

    offered = asyncio.run(asyncio.wait_for(names(), 30))
    assert "read_text_file" in offered
    assert offered.isdisjoint({"write_file", "edit_file", "move_file", "create_directory"})


def test_a_root_that_is_not_a_directory_stops_the_server_with_a_clear_message(tmp_path):
    done = subprocess.run(server_command(tmp_path / "missing"), capture_output=True, timeout=30, text=True)
    assert done.returncode == 1
    assert "not a directory" in done.stderr and "give existing directories" in done.stderr
