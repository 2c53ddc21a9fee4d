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
from conftest import async_test

from modelctx import Client
from modelctx.servers.filesystem import _regex_search, build_server
from modelctx.testing import connected

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
