"""The filesystem server while a local process swaps a directory of the root for a symlink
out of it, atomically and without pause (``renameat2(RENAME_EXCHANGE)``), and a client
calls every tool on that directory: a real server process on stdio, a real racer process.

The tree::

    base/root/            the served directory
        sub/              a real directory: probe.txt ("probe inside")
        swap -> ../outside
    base/outside/         probe.txt (another size, the secret), OUTSIDE_MARKER.txt, bait.txt

The racer exchanges ``root/sub`` and ``root/swap`` in a loop, so ``sub`` is a directory
one moment and a symlink out the next. A server that checks a path and then uses it by
path loses that race: on 177c6b3, ``create_directory("sub/x")`` made 378 directories
outside in 5 s, and ``list_directory``, ``directory_tree``, ``search_files`` and
``get_file_info`` gave outside names and sizes hundreds of times. Every call must either
do its work inside or be refused; nothing outside is made, changed, named or described.
"""

from __future__ import annotations

import asyncio
import base64
import ctypes
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from modelctx import Client
from modelctx.errors import MCPError
from tests.support.wire import async_test

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "renameat2"),
    reason="the racer needs Linux's renameat2",
)

SECONDS = 6.0  # of calls per test, while the racer swaps
WORKERS = 4  # calls in flight at once
SECRET = "OUTSIDE SECRET"
MARKER = "OUTSIDE_MARKER"
OUTSIDE_PROBE = "probe " + SECRET + "." * 1000 + "\n"  # a size no file inside has

RACER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
first, second = (os.fsencode(path) for path in sys.argv[1:3])
print("racing", flush=True)
while True:
    if libc.renameat2(AT_FDCWD, first, AT_FDCWD, second, RENAME_EXCHANGE) != 0:
        raise SystemExit(os.strerror(ctypes.get_errno()))
"""


@dataclass
class Race:
    root: Path
    outside: Path
    tally: dict[str, Counter[str]] = field(default_factory=dict)

    def outside_state(self) -> dict[str, str | None]:
        return {
            str(path.relative_to(self.outside)): path.read_text() if path.is_file() else None
            for path in sorted(self.outside.rglob("*"))
        }

    def count(self, tool: str, outcome: str) -> None:
        self.tally.setdefault(tool, Counter())[outcome] += 1

    def leaks(self) -> dict[str, int]:
        return {tool: counts["leak"] for tool, counts in self.tally.items()}

    def assert_the_race_ran(self) -> None:
        """Both states of ``sub`` were met: calls did their work, and calls were refused."""
        total = sum(self.tally.values(), Counter())
        assert total["done"] > 0 and total["refused"] > 0, self.tally


@pytest.fixture
def race(tmp_path: Path) -> Iterator[Race]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "sub" / "probe.txt").write_text("probe inside\n")
    (outside / "probe.txt").write_text(OUTSIDE_PROBE)
    (outside / f"{MARKER}.txt").write_text(f"needle {SECRET}\n")
    (outside / "bait.txt").write_text(f"bait {SECRET}\n")
    (root / "swap").symlink_to(outside)
    racer = subprocess.Popen(
        [sys.executable, "-c", RACER, str(root / "sub"), str(root / "swap")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert racer.stdout is not None and racer.stdout.readline() == "racing\n"
        yield Race(root, outside)
        assert racer.poll() is None, "the racer stopped"
    finally:
        racer.kill()
        racer.wait(timeout=15)


def _text(result: Any) -> str:
    """Everything a result says: its text, its structured content, embedded blobs decoded."""
    parts = [json.dumps(result.structured_content or {})]
    for block in result.content:
        parts.append(getattr(block, "text", ""))
        resource = getattr(block, "resource", None)
        if isinstance(resource, dict) and "blob" in resource:
            parts.append(base64.b64decode(resource["blob"]).decode("utf-8", "replace"))
    return "".join(parts)


Call = Callable[[Client, int], Any]  # (client, call number) -> awaitable result


def tool_call(name: str, arguments: Callable[[int], dict[str, Any]]) -> Call:
    return lambda client, n: client.call_tool(name, arguments(n), timeout=30)


async def hammer(race: Race, calls: dict[str, Call], leaked: Callable[[str, str], bool]) -> None:
    """Call each of ``calls`` in turn from ``WORKERS`` tasks for ``SECONDS``, counting
    per tool what was done, refused, or leaked (``leaked(tool, text)``)."""
    command = [sys.executable, "-m", "modelctx.servers.filesystem", str(race.root)]
    async with Client(command, timeout=30) as client:
        deadline = time.monotonic() + SECONDS

        async def worker(start: int) -> None:
            n = start
            while time.monotonic() < deadline:
                for tool, call in calls.items():
                    n += WORKERS
                    try:
                        result = await call(client, n)
                    except MCPError as refused:  # a resource read is refused with an error
                        text, is_error = str(refused), True
                    else:
                        text = _text(result) if hasattr(result, "content") else json.dumps(result.contents)
                        is_error = getattr(result, "is_error", False) is True
                    race.count(tool, "refused" if is_error else "done")
                    if leaked(tool, text):
                        race.count(tool, "leak")

        await asyncio.gather(*(worker(start) for start in range(WORKERS)))


@async_test(deadline=90)
async def test_nothing_is_made_or_moved_outside_while_a_directory_is_swapped_for_a_symlink_out(race):
    before = race.outside_state()
    calls = {
        "create_directory": tool_call("create_directory", lambda n: {"path": f"sub/made{n}/deeper"}),
        "write_file": tool_call("write_file", lambda n: {"path": f"sub/written{n}.txt", "content": "w"}),
        "move_file": tool_call("move_file", lambda n: {"source": "sub/bait.txt", "destination": f"stolen{n}.txt"}),
        "edit_file": tool_call("edit_file", lambda n: {"path": "sub/probe.txt",
                                                       "edits": [{"oldText": "probe", "newText": "probe"}]}),
    }
    await hammer(race, calls, lambda tool, text: SECRET in text)

    assert race.outside_state() == before  # directories created outside: 0; nothing moved or changed
    assert not list(race.root.glob("stolen*"))
    assert race.leaks() == dict.fromkeys(calls, 0)
    race.assert_the_race_ran()


@async_test(deadline=90)
async def test_no_outside_name_is_listed_or_found_while_a_directory_is_swapped_for_a_symlink_out(race):
    calls = {
        "list_directory": tool_call("list_directory", lambda n: {"path": "sub"}),
        "list_directory_with_sizes": tool_call("list_directory_with_sizes", lambda n: {"path": "sub"}),
        "directory_tree": tool_call("directory_tree", lambda n: {"path": "sub"}),
        "search_files": tool_call("search_files", lambda n: {"path": "sub", "pattern": "*"}),
        "search_file_contents": tool_call("search_file_contents", lambda n: {"path": "sub", "query": "needle"}),
    }
    await hammer(race, calls, lambda tool, text: MARKER in text or SECRET in text)

    assert race.leaks() == dict.fromkeys(calls, 0)
    race.assert_the_race_ran()


@async_test(deadline=90)
async def test_no_outside_metadata_or_content_is_returned_while_a_directory_is_swapped_for_a_symlink_out(race):
    outside_size = f'"size": {len(OUTSIDE_PROBE)}'
    probe_uri = (race.root / "sub" / "probe.txt").as_uri()
    calls = {
        "get_file_info": tool_call("get_file_info", lambda n: {"path": "sub/probe.txt"}),
        "read_text_file": tool_call("read_text_file", lambda n: {"path": "sub/probe.txt"}),
        "read_multiple_files": tool_call("read_multiple_files", lambda n: {"paths": ["sub/probe.txt"]}),
        "read_media_file": tool_call("read_media_file", lambda n: {"path": "sub/probe.txt"}),
        "resources/read": lambda client, n: client.read_resource(probe_uri, timeout=30),
    }
    await hammer(race, calls, lambda tool, text: outside_size in text or SECRET in text)

    assert race.leaks() == dict.fromkeys(calls, 0)
    race.assert_the_race_ran()


CREATOR = """
import os, signal, sys
target = sys.argv[1]
overwritten = 0
def report(*_):
    print(overwritten, flush=True)
    raise SystemExit(0)
signal.signal(signal.SIGTERM, report)
print("creating", flush=True)
while True:
    try:
        fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:  # the client's move landed first: clear it and go again
        try:
            os.unlink(target)
        except FileNotFoundError:
            pass
        continue
    os.write(fd, b"made here")
    os.close(fd)
    try:
        with open(target, "rb") as file:
            if file.read() != b"made here":
                overwritten += 1
        os.unlink(target)
    except FileNotFoundError:
        pass
"""


@async_test(deadline=90)
async def test_move_file_never_replaces_a_file_another_process_creates_at_the_destination(tmp_path):
    # "Fails if the destination exists" held only between a check and the rename: a file
    # a local process created in that gap was replaced (and lost).
    root = tmp_path / "root"
    root.mkdir()
    creator = subprocess.Popen(
        [sys.executable, "-c", CREATOR, str(root / "dest.txt")], stdout=subprocess.PIPE, text=True
    )
    moved = refused = 0
    try:
        assert creator.stdout is not None and creator.stdout.readline() == "creating\n"
        command = [sys.executable, "-m", "modelctx.servers.filesystem", str(root)]
        async with Client(command, timeout=30) as client:
            deadline = time.monotonic() + SECONDS
            while time.monotonic() < deadline:
                await client.call_tool("write_file", {"path": "moving.txt", "content": "moved"}, timeout=30)
                result = await client.call_tool(
                    "move_file", {"source": "moving.txt", "destination": "dest.txt"}, timeout=30
                )
                if result.is_error:
                    assert "already exists" in _text(result), _text(result)
                    refused += 1
                else:
                    moved += 1
    finally:
        creator.terminate()
        out, _ = creator.communicate(timeout=15)
    assert moved > 0 and refused > 0, (moved, refused)  # both sides of the race were met
    assert int(out.strip().splitlines()[-1]) == 0  # files of the other process replaced
