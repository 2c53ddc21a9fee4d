"""``FileRoot``: a server that exposes files serves what is under its directory, and
nothing else, whatever path a client sends (security practices of issue 7).

Each way out is refused with ``PathRefused`` (-32602, naming the path as given): an
absolute path, a ``..`` segment, a NUL byte, a symlink that points out of the root, and
a swap between the check and the open. A symlink that stays inside is followed.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelctx.client import Client
from modelctx.errors import InvalidParams, PathRefused
from modelctx.server import FileRoot, Server

SECRET = b"the outside secret"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``root/`` with files, and beside it ``outside/secret``; symlinks both ways."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "a" / "b").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_bytes(SECRET)
    (root / "a" / "b" / "note.txt").write_text("inside")
    (root / "top.txt").write_text("top")
    (root / "link").symlink_to(outside)  # a directory symlink out of the root
    (root / "a" / "link").symlink_to(root / "a" / "b")  # in, and staying in
    (root / "a" / "b" / "link").symlink_to("../../../outside/secret")  # relative, out
    (root / "to_top").symlink_to("top.txt")
    (root / "abs_secret").symlink_to(outside / "secret")
    return root


ESCAPES = {
    "../outside/secret": "'..' is not allowed",
    "a/../../outside/secret": "'..' is not allowed",
    "..": "'..' is not allowed",
    "a/b/..": "'..' is not allowed",
    "..\\outside\\secret": "'..' is not allowed",
    "/etc/passwd": "absolute",
    "//etc/passwd": "absolute",
    "\\etc\\passwd": "absolute",
    "top.txt\x00.png": "NUL byte",
    "link/secret": "leads out of the served directory",
    "abs_secret": "leads out of the served directory",
    "a/b/link": "leads out of the served directory",
    "a/link/link": "leads out of the served directory",
}


@pytest.mark.parametrize("path", list(ESCAPES))
def test_every_way_out_of_the_root_is_refused(tree, path):
    root = FileRoot(tree)
    with pytest.raises(PathRefused, match=ESCAPES[path]) as refused:
        root.read_bytes(path)
    assert refused.value.data == {"path": path}
    assert str(tree) not in refused.value.message  # the root's place on disk is not told
    with pytest.raises(PathRefused):
        root.resolve(path)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("top.txt", "top"),
        ("a/b/note.txt", "inside"),
        ("a/link/note.txt", "inside"),
        ("to_top", "top"),
        ("./a//b/./note.txt", "inside"),
    ],
)
def test_paths_inside_the_root_are_read_symlinks_that_stay_inside_included(tree, path, text):
    assert FileRoot(tree).read_text(path) == text


def test_resolve_gives_the_real_path_under_the_root(tree):
    root = FileRoot(tree)
    assert root.resolve("a/link/note.txt") == tree.resolve() / "a" / "b" / "note.txt"
    assert root.resolve("not/yet/there") == tree.resolve() / "not" / "yet" / "there"


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("missing.txt", "no such file"),
        ("a", "not a regular file"),
        ("", "not a regular file"),
    ],
)
def test_what_is_not_a_regular_file_is_refused(tree, path, why):
    with pytest.raises(PathRefused, match=why):
        FileRoot(tree).read_bytes(path)


def test_a_fifo_is_refused_without_blocking_the_reader(tree):
    os.mkfifo(tree / "pipe")  # opening it for reading would wait for a writer
    with pytest.raises(PathRefused, match="not a regular file"):
        FileRoot(tree).read_bytes("pipe")


def test_a_file_larger_than_max_bytes_is_refused(tree):
    (tree / "big.bin").write_bytes(b"x" * 2000)
    with pytest.raises(PathRefused, match="larger than 1000 bytes"):
        FileRoot(tree, max_bytes=1000).read_bytes("big.bin")
    assert len(FileRoot(tree).read_bytes("big.bin", max_bytes=2000)) == 2000


def test_text_that_does_not_decode_is_refused(tree):
    (tree / "latin.txt").write_bytes("café".encode("latin-1"))
    with pytest.raises(PathRefused, match="not utf-8 text"):
        FileRoot(tree).read_text("latin.txt")


def test_a_root_that_is_not_a_directory_is_refused_at_once(tree):
    with pytest.raises(NotADirectoryError):
        FileRoot(tree / "top.txt")


# -- races: the tree changes between the check and the open -----------------------------------------
class Raced(FileRoot):
    """A root where ``swap`` runs right after the path was checked, before the open:
    what an attacker with write access to the served directory can do."""

    def __init__(self, directory: Path, swap) -> None:
        super().__init__(directory)
        self.swap = swap

    def resolve(self, relative: str) -> Path:
        checked = super().resolve(relative)
        self.swap()
        return checked


def test_a_file_swapped_for_a_symlink_after_the_check_is_not_followed(tree):
    def swap() -> None:
        (tree / "top.txt").unlink()
        (tree / "top.txt").symlink_to(tree.parent / "outside" / "secret")

    with pytest.raises(PathRefused, match="cannot be opened"):
        Raced(tree, swap).read_bytes("top.txt")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to see an open file's path")
def test_a_directory_swapped_for_a_symlink_after_the_check_is_caught_on_the_open_file(tree):
    outside = tree.parent / "outside"
    (outside / "note.txt").write_bytes(SECRET)

    def swap() -> None:
        os.rename(tree / "a" / "b", tree / "a" / "moved")
        (tree / "a" / "b").symlink_to(outside)

    with pytest.raises(PathRefused, match="leads out of the served directory"):
        Raced(tree, swap).read_bytes("a/b/note.txt")


# -- every path a client can send --------------------------------------------------------------------
SEGMENTS = st.sampled_from(["..", ".", "a", "b", "link", "/", "", "note.txt", "top.txt"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(SEGMENTS, max_size=8))
def test_every_resolved_path_stays_under_the_root(tree, parts):
    root = FileRoot(tree)
    path = "/".join(parts)
    real_root = tree.resolve()
    try:
        resolved = root.resolve(path)
    except PathRefused:
        resolved = None
    if resolved is not None:
        assert resolved == real_root or real_root in resolved.parents, path
    try:
        data = root.read_bytes(path)
    except PathRefused:
        return
    assert data != SECRET, path


# -- through MCP: a resource template over a FileRoot --------------------------------------------------
def test_a_resource_template_over_a_file_root_answers_an_escape_with_invalid_params(tree):
    server = Server("files")
    docs = FileRoot(tree)

    @server.resource("file:///docs/{+path}")
    def read_doc(path: str) -> str:
        return docs.read_text(path)

    async def main() -> None:
        async with Client(server, mode="2026-07-28", timeout=10) as client:
            found = await client.read_resource("file:///docs/a/b/note.txt")
            assert found.contents[0]["text"] == "inside"
            for uri in (
                "file:///docs/../outside/secret",
                "file:///docs/link/secret",
                "file:///docs/%2e%2e/outside/secret",
            ):
                with pytest.raises(InvalidParams) as refused:
                    await client.read_resource(uri)
                assert refused.value.remote and refused.value.code == -32602
                assert "outside secret" not in refused.value.message

    asyncio.run(asyncio.wait_for(main(), 30))
