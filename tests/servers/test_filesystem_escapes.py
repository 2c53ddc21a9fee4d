"""Every way out of the filesystem server's roots, tried through a real stdio process.

The tree (built once for the module)::

    base/café/            the served directory (NFC name), given to the server as base/link
        inside.txt
        out_dir  -> ../outside          a symlink to a directory outside
        out_file -> ../outside/secret.txt
        dangling -> ../outside/new.txt  (does not exist yet)
        loop_a -> loop_b, loop_b -> loop_a
        kept/note.txt
        in_rel -> kept                  symlinks that stay inside: followed
        in_abs -> <real path of the root>/kept
    base/link  -> café                  the root as the user gave it: itself a symlink
    base/cafe\u0301/secret.txt          same name in NFD: another directory, outside
    base/CAFÉ/secret.txt                same name in capitals: another directory, outside
    base/outside/secret.txt

Each attempt must come back as a tool error (``isError``) that says why, with nothing
of the secret in it, and nothing created or changed outside the root.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from modelctx import Client
from modelctx.errors import MCPError

SECRET = "the secret outside the root"
NFC = "caf\u00e9"
NFD = "cafe\u0301"


class Tree:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / NFC
        self.link = base / "link"
        self.outside = base / "outside"

    def build(self) -> None:
        self.outside.mkdir()
        (self.outside / "secret.txt").write_text(SECRET)
        for sibling in (NFD, NFC.upper()):
            (self.base / sibling).mkdir()
            (self.base / sibling / "secret.txt").write_text(SECRET)
        self.root.mkdir()
        (self.root / "inside.txt").write_text("inside\n")
        (self.root / "out_dir").symlink_to("../outside")
        (self.root / "out_file").symlink_to("../outside/secret.txt")
        (self.root / "dangling").symlink_to("../outside/new.txt")
        (self.root / "loop_a").symlink_to("loop_b")
        (self.root / "loop_b").symlink_to("loop_a")
        (self.root / "kept").mkdir()
        (self.root / "kept" / "note.txt").write_text("kept\n")
        (self.root / "in_rel").symlink_to("kept")
        (self.root / "in_abs").symlink_to(os.path.realpath(self.root / "kept"))
        self.link.symlink_to(NFC)

    def outside_listing(self) -> dict[str, str]:
        return {
            str(path.relative_to(self.base)): path.read_text()
            for directory in (self.outside, self.base / NFD, self.base / NFC.upper())
            for path in sorted(directory.rglob("*"))
            if path.is_file()
        }


class Fs:
    """Our client on the server's stdio, called synchronously through a portal."""

    def __init__(self, portal: BlockingPortal, client: Client) -> None:
        self.portal = portal
        self.client = client

    def call(self, tool: str, **arguments: Any) -> Any:
        return self.portal.call(lambda: self.client.call_tool(tool, arguments, timeout=15))

    def refused(self, tool: str, **arguments: Any) -> str:
        result = self.call(tool, **arguments)
        text = "".join(getattr(block, "text", "") for block in result.content)
        assert result.is_error is True, f"{tool} {arguments} was not refused: {text}"
        assert SECRET not in text
        return text

    def read_resource(self, uri: str) -> Any:
        return self.portal.call(lambda: self.client.read_resource(uri, timeout=15))


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Tree:
    built = Tree(tmp_path_factory.mktemp("escapes"))
    built.build()
    return built


@pytest.fixture(scope="module")
def fs(tree) -> Iterator[Fs]:
    command = [sys.executable, "-m", "modelctx.servers.filesystem", str(tree.link)]
    with start_blocking_portal("asyncio") as portal:
        with portal.wrap_async_context_manager(Client(command, timeout=15)) as client:
            yield Fs(portal, client)


@pytest.fixture(autouse=True)
def nothing_changes_outside(tree) -> Iterator[None]:
    before = tree.outside_listing()
    yield
    assert tree.outside_listing() == before
    assert not (tree.outside / "new.txt").exists()


def test_a_path_inside_the_root_is_read_by_its_relative_its_given_and_its_real_name(fs, tree):
    for path in ("inside.txt", str(tree.link / "inside.txt"), str(tree.root / "inside.txt")):
        result = fs.call("read_text_file", path=path)
        assert result.is_error is not True
        assert result.content[0].text == "inside\n"


def test_a_symlink_that_stays_inside_the_root_is_followed_by_every_tool(fs, tree):
    kept = os.path.realpath(tree.root / "kept")
    for link in ("in_rel", "in_abs"):
        assert fs.call("read_text_file", path=f"{link}/note.txt").content[0].text == "kept\n"
        assert "[FILE] note.txt" in fs.call("list_directory", path=link).content[0].text
        info = fs.call("get_file_info", path=link).structured_content
        assert (info["path"], info["type"]) == (kept, "directory")
        assert fs.call("write_file", path=f"{link}/w.txt", content=link).is_error is not True
        assert fs.call("create_directory", path=f"{link}/made_{link}").is_error is not True
    assert (tree.root / "kept" / "w.txt").read_text() == "in_abs"
    assert (tree.root / "kept" / "made_in_rel").is_dir() and (tree.root / "kept" / "made_in_abs").is_dir()
    tree_text = fs.call("directory_tree", path=".").content[0].text
    assert '"name": "in_rel",\n    "type": "file"' in tree_text  # listed as itself, never entered


def test_dot_dot_is_refused_relative_or_absolute(fs, tree):
    assert "'..' is not allowed" in fs.refused("read_text_file", path="../outside/secret.txt")
    assert "'..' is not allowed" in fs.refused("read_text_file", path=f"{tree.link}/../outside/secret.txt")
    assert "'..' is not allowed" in fs.refused("list_directory", path="sub/../..")


def test_an_absolute_path_outside_every_root_is_refused(fs, tree):
    text = fs.refused("read_text_file", path=str(tree.outside / "secret.txt"))
    assert "outside the allowed directories" in text
    assert "outside the allowed directories" in fs.refused("read_text_file", path="/etc/passwd")


def test_a_symlink_to_a_directory_outside_is_refused(fs):
    assert "through a symlink" in fs.refused("read_text_file", path="out_dir/secret.txt")
    assert "through a symlink" in fs.refused("list_directory", path="out_dir")


def test_a_symlink_to_a_file_outside_is_refused(fs):
    assert "through a symlink" in fs.refused("read_text_file", path="out_file")
    assert "through a symlink" in fs.refused("get_file_info", path="out_file")
    assert "through a symlink" in fs.refused("read_media_file", path="out_file")


def test_a_symlink_loop_is_refused_as_a_loop(fs):
    assert "symlink loop" in fs.refused("read_text_file", path="loop_a")
    assert "symlink loop" in fs.refused("write_file", path="loop_b", content="x")


def test_a_nul_byte_is_refused(fs):
    assert "NUL byte" in fs.refused("read_text_file", path="inside.txt\x00../../outside/secret.txt")


def test_a_tilde_is_not_expanded(fs):
    assert "'~' is not expanded" in fs.refused("read_text_file", path="~/.bashrc")


def test_the_same_name_in_nfd_is_another_directory_and_outside(fs, tree):
    text = fs.refused("read_text_file", path=str(tree.base / NFD / "secret.txt"))
    assert "outside the allowed directories" in text


def test_the_same_name_in_capitals_is_another_directory_and_outside(fs, tree):
    text = fs.refused("read_text_file", path=str(tree.base / NFC.upper() / "secret.txt"))
    assert "outside the allowed directories" in text


def test_a_root_given_as_a_symlink_is_the_directory_it_pointed_to_at_start(fs, tree):
    moved = tree.base / "link.moved"
    tree.link.rename(moved)
    tree.link.symlink_to("outside")  # the root's name now leads outside
    try:
        text = fs.refused("read_text_file", path=str(tree.link / "secret.txt"))
        assert "no such file" in text
        assert fs.call("read_text_file", path=str(tree.root / "inside.txt")).content[0].text == "inside\n"
    finally:
        tree.link.unlink()
        moved.rename(tree.link)


def test_writing_through_a_dangling_symlink_to_outside_is_refused(fs):
    assert "through a symlink" in fs.refused("write_file", path="dangling", content="written")


def test_writing_a_new_file_in_a_symlinked_directory_outside_is_refused(fs):
    assert "through a symlink" in fs.refused("write_file", path="out_dir/new.txt", content="written")
    assert "through a symlink" in fs.refused("create_directory", path="out_dir/new_dir")


def test_editing_a_file_outside_through_a_symlink_is_refused(fs):
    edits = [{"oldText": "secret", "newText": "changed"}]
    assert "through a symlink" in fs.refused("edit_file", path="out_file", edits=edits)


def test_moving_out_of_the_root_or_from_outside_is_refused(fs, tree):
    (tree.root / "mine.txt").write_text("mine")
    assert "outside" in fs.refused("move_file", source="mine.txt", destination=str(tree.outside / "new.txt"))
    assert "through a symlink" in fs.refused("move_file", source="out_file", destination="stolen.txt")
    assert (tree.root / "mine.txt").read_text() == "mine"
    assert not (tree.root / "stolen.txt").exists()


def test_a_root_itself_cannot_be_moved_or_replaced(fs, tree):
    assert "outside" in fs.refused("move_file", source=str(tree.link), destination="inside_copy")
    assert "already exists" in fs.refused("move_file", source="inside.txt", destination=str(tree.link))
    assert (tree.root / "inside.txt").read_text() == "inside\n"


def test_searches_and_trees_do_not_follow_symlinks_out(fs):
    found = fs.call("search_file_contents", path=".", query="secret")
    assert found.structured_content["matches"] == []
    assert "secret.txt" not in fs.call("search_files", path=".", pattern="*.txt").content[0].text
    assert "secret.txt" not in fs.call("directory_tree", path=".").content[0].text
    assert "outside the allowed directories" in fs.refused("search_files", path="/", pattern="*")


def test_a_resource_uri_outside_the_root_is_refused(fs, tree):
    for uri in (
        (tree.outside / "secret.txt").as_uri(),
        (tree.root / "out_file").as_uri(),
        f"file://{tree.link}/../outside/secret.txt",
    ):
        with pytest.raises(MCPError) as refused:
            fs.read_resource(uri)
        assert SECRET not in str(refused.value)
        assert "refused" in str(refused.value)


def test_a_directory_swapped_for_a_symlink_after_the_check_is_caught_at_open(tree):
    # The race a check-then-open server loses: the path is checked while it is a real
    # directory, then a directory on it becomes a symlink out before the file is opened.
    from modelctx.errors import ToolError
    from modelctx.servers.filesystem._files import move, read_text, write_text
    from modelctx.servers.filesystem._paths import Roots

    swap = tree.root / "swap"
    (swap / "deeper").mkdir(parents=True)
    (tree.outside / "deeper").mkdir(exist_ok=True)
    (swap / "mine.txt").write_text("mine")
    roots = Roots([str(tree.root)])
    parent_swapped = [roots.locate("swap/secret.txt"), roots.locate("swap/new.txt")]
    moving = (roots.locate("swap/mine.txt"), roots.locate("moved.txt"))
    grandparent_swapped = [roots.locate("swap/deeper/secret.txt"), roots.locate("swap/deeper/new.txt")]
    os.rename(swap, tree.root / "swap.real")
    swap.symlink_to(tree.outside)
    (tree.outside / "deeper" / "secret.txt").write_text(SECRET)
    try:
        with pytest.raises(ToolError, match="replaced by a symlink"):
            read_text(parent_swapped[0])
        with pytest.raises(ToolError, match="replaced by a symlink"):
            write_text(parent_swapped[1], "written")
        with pytest.raises(ToolError, match="replaced by a symlink"):
            move(*moving)
        # A directory further up is met by the same walk from the root, before anything is opened.
        with pytest.raises(ToolError, match="replaced by a symlink"):
            read_text(grandparent_swapped[0])
        with pytest.raises(ToolError, match="replaced by a symlink"):
            write_text(grandparent_swapped[1], "written")
    finally:
        swap.unlink()
        (tree.outside / "deeper" / "secret.txt").unlink()
        (tree.outside / "deeper").rmdir()
