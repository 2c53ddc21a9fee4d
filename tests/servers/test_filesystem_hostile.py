"""The filesystem server given what an attacker would send: a regular expression that
backtracks without end, a tree holding a FIFO. The server must stay bounded and keep
answering everyone else.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from modelctx import Client
from modelctx.servers.filesystem import _regex_search, build_server
from modelctx.testing import connected
from tests.support.wire import async_test

BACKTRACKS = r"(a+)+$"  # on "aaa...ab": 2**n ways to split the a's, none matches


@async_test()
async def test_a_backtracking_regex_is_stopped_at_its_deadline_and_the_server_keeps_answering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_regex_search, "REGEX_DEADLINE_SECONDS", 1.0)
    (tmp_path / "bait.txt").write_text("a" * 27 + "b\n")  # seconds of backtracking in-process
    finished: list[str] = []

    async with connected(build_server([str(tmp_path)])) as client:

        async def search() -> str:
            result = await client.call_tool("search_file_contents", {"path": ".", "query": BACKTRACKS, "regex": True})
            finished.append("search")
            assert result.is_error
            return str(result.content[0].text)

        async def listing() -> None:
            await asyncio.sleep(0.2)  # the search is matching by now
            await client.call_tool("list_allowed_directories", {})
            finished.append("listing")

        why, _ = await asyncio.gather(search(), listing())

    assert "ran longer than 1 s and was stopped" in why and "(a+)+" in why
    assert finished == ["listing", "search"]  # the match never held up the other request


@async_test()
async def test_a_regex_search_still_finds_matches_and_skips_a_fifo(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("call Ana\ncall Bob now\n")
    os.mkfifo(tmp_path / "pipe.txt")

    async with connected(build_server([str(tmp_path)])) as client:
        result = await client.call_tool("search_file_contents", {"path": ".", "query": r"^call \w+$", "regex": True})

    found = result.structured_content
    assert [(m["line"], m["text"]) for m in found["matches"]] == [(1, "call Ana")]
    assert str(tmp_path / "pipe.txt") in found["skipped"]


def _server_with_at_most(memory: int, root: Path) -> list[str]:
    """The filesystem server on stdio, its address space capped at ``memory`` bytes."""
    start = (
        "import resource, runpy, sys;"
        f"resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}));"
        f"sys.argv = ['modelctx-filesystem', {str(root)!r}];"
        "runpy.run_module('modelctx.servers.filesystem', run_name='__main__')"
    )
    return [sys.executable, "-c", start]


@async_test()
async def test_head_and_tail_of_a_4_gib_file_with_no_newline_hold_at_most_the_read_bound(tmp_path: Path) -> None:
    with open(tmp_path / "sparse.bin", "wb") as sparse:
        sparse.truncate(4 * 1024**3)  # no newline anywhere: one 4 GiB line

    async with Client(_server_with_at_most(3 * 1024**3, tmp_path), timeout=60) as client:
        head = await client.call_tool("read_text_file", {"path": "sparse.bin", "head": 1})
        tail = await client.call_tool("read_text_file", {"path": "sparse.bin", "tail": 1})

    for refused in (head, tail):
        assert refused.is_error and "those lines are more than 4194304 bytes" in refused.content[0].text


@async_test()
async def test_read_multiple_files_returns_at_most_the_read_bound_in_all(tmp_path: Path) -> None:
    (tmp_path / "three_mib.txt").write_text("x" * 3 * 1024**2)
    (tmp_path / "small.txt").write_text("small")

    async with connected(build_server([str(tmp_path)])) as client:
        result = await client.call_tool("read_multiple_files", {"paths": ["three_mib.txt"] * 99 + ["small.txt"]})

    text = result.content[0].text
    assert len(text) < 4 * 1024**2 + 100 * 200  # one copy of the file, then a line for each refused read
    assert text.count("would return more than 4194304 bytes; read it in another call") == 98
    assert "small.txt:\nsmall\n" in text  # a file that still fits is read


# -- depth: paths and trees deeper than anything else on the machine can use ------------------
def _command(root: Path) -> list[str]:
    return [sys.executable, "-m", "modelctx.servers.filesystem", str(root)]


DEEP = "/".join(["a"] * 2000)  # 3,999 characters: under PATH_MAX, but 2,000 directories


@async_test(deadline=60)
async def test_a_path_2000_levels_deep_is_a_tool_error_naming_the_limit_for_every_tool(tmp_path: Path) -> None:
    async with Client(_command(tmp_path), timeout=30) as client:
        for tool, arguments in [
            ("create_directory", {"path": DEEP}),
            ("write_file", {"path": DEEP, "content": "x"}),
            ("read_text_file", {"path": DEEP}),
            ("list_directory", {"path": DEEP}),
            ("directory_tree", {"path": DEEP}),
            ("search_files", {"path": DEEP, "pattern": "*"}),
            ("get_file_info", {"path": DEEP}),
            ("move_file", {"source": "missing.txt", "destination": DEEP}),
        ]:
            result = await client.call_tool(tool, arguments)
            text = result.content[0].text
            assert result.is_error and "at most 256 directories deep" in text, (tool, text)
            assert len(text) < 1000  # the path is quoted by its ends
        at_the_limit = await client.call_tool("create_directory", {"path": "/".join(["a"] * 256)})
        long_name = await client.call_tool("get_file_info", {"path": "x" * 300})
        long_path = await client.call_tool("read_text_file", {"path": "a/" * 3000})

    assert not at_the_limit.is_error, at_the_limit.content[0].text
    assert long_name.is_error and "255 bytes a name" in long_name.content[0].text
    assert long_path.is_error and "give one of at most 4096" in long_path.content[0].text


def _chain(top: Path, depth: int) -> None:
    """``top/d/d/.../d``, ``depth`` directories, made by name under each one's parent
    (a path that long is more than the kernel resolves in one lookup)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)


def _unchain(top: Path) -> None:
    """Remove ``_chain``'s directories one level at a time from the top (no recursion)."""
    while (top / "d").is_dir():
        if (top / "d" / "d").is_dir():
            os.rename(top / "d" / "d", top / "next")
        os.rmdir(top / "d")
        if (top / "next").is_dir():
            os.rename(top / "next", top / "d")


@async_test(deadline=90)
async def test_a_tree_1100_levels_deep_made_by_a_local_process_is_walked_down_to_the_limit_and_no_further(
    tmp_path: Path,
) -> None:
    # On 177c6b3 the server did not start: the resource listing's os.walk hit the recursion limit.
    (tmp_path / "top.txt").write_text("needle\n")
    _chain(tmp_path, 1100)
    try:
        async with Client(_command(tmp_path), timeout=30) as client:
            listed = [resource.uri for resource in await client.resources()]
            tree = await client.call_tool("directory_tree", {"path": "."})
            shallow = await client.call_tool("directory_tree", {"path": ".", "maxDepth": 3})
            names = await client.call_tool("search_files", {"path": ".", "pattern": "*.txt"})
            contents = await client.call_tool("search_file_contents", {"path": ".", "query": "needle"})
    finally:
        _unchain(tmp_path)

    assert listed == [(tmp_path / "top.txt").as_uri()]
    assert tree.is_error and "more than 256 levels below its root" in tree.content[0].text
    assert "give maxDepth" in tree.content[0].text
    assert not shallow.is_error and shallow.content[0].text.count('"name": "d"') == 3
    assert names.content[0].text.startswith(str(tmp_path / "top.txt"))
    assert "not searched, more than 256 levels below the root" in names.content[0].text
    assert [match["path"] for match in contents.structured_content["matches"]] == [str(tmp_path / "top.txt")]
    assert contents.structured_content["skipped"] == [str(tmp_path.joinpath(*["d"] * 257))]
