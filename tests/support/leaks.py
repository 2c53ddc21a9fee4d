"""Leak checks for the fault tests: what a fault may not leave behind.

After a fault, nothing it touched may outlive it: no asyncio task, no file descriptor,
no child process, and nothing logged that says an error went unhandled. ``leak_free``
checks all four around a block of an in-process test; ``fd_count`` and ``child_pids``
read ``/proc`` for a server subprocess. Resources are given ``settle`` seconds to go
(closing is asynchronous), then what is left is named in the failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

SETTLE = 10.0  # seconds a fault's leftovers get to go away before they count as leaked

# What Python and asyncio print when an error went unhandled.
UNHANDLED = (
    "Traceback (most recent call last)",
    "exception was never retrieved",
    "Task was destroyed but it is pending",
    "Exception in callback",
    "Unhandled exception",
)


def unhandled(text: str) -> list[str]:
    """The lines of ``text`` (a log, a stderr) that report an unhandled error."""
    return [line for line in text.splitlines() if any(mark in line for mark in UNHANDLED)]


def fds(pid: int | str = "self") -> dict[str, str]:
    """The open file descriptors of a process: number -> what it points at."""
    folder = Path(f"/proc/{pid}/fd")
    found = {}
    for entry in os.listdir(folder):
        try:
            found[entry] = os.readlink(folder / entry)
        except OSError:  # closed while we looked (the listdir's own descriptor, for one)
            pass
    return found


def fd_count(pid: int | str = "self") -> int:
    return len(fds(pid))


def _stat(pid: str) -> tuple[int, str] | None:
    """(parent pid, state) of a process, None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[0]


def child_pids(parent: int | None = None) -> list[int]:
    """The processes whose parent is ``parent`` (this one by default), zombies included:
    a child nobody reaped is a leak too."""
    parent = os.getpid() if parent is None else parent
    return [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and (_stat(pid) or (0, ""))[0] == parent]


def alive(pid: int) -> bool:
    """Running: neither gone nor a zombie."""
    stat = _stat(str(pid))
    return stat is not None and stat[1] != "Z"


def describe_process(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        argv = "?"
    return f"{pid} ({argv.strip()[:120]})"


def settle(condition: Callable[[], bool], seconds: float = SETTLE) -> bool:
    """Poll ``condition`` for up to ``seconds`` (blocking: for synchronous tests)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


async def asettle(condition: Callable[[], bool], seconds: float = SETTLE) -> bool:
    """Poll ``condition`` for up to ``seconds`` without blocking the loop."""
    deadline = time.monotonic() + seconds
    while True:
        gc.collect()  # an abandoned task or transport is only reported when collected
        if condition():
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)


class LogWatch(logging.Handler):
    """Every record logged while installed, formatted with its traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @contextlib.contextmanager
    def installed(self) -> Iterator[LogWatch]:
        root = logging.getLogger()
        root.addHandler(self)
        try:
            yield self
        finally:
            root.removeHandler(self)


@contextlib.asynccontextmanager
async def leak_free(what: str, seconds: float = SETTLE) -> AsyncIterator[LogWatch]:
    """Around a fault in this process: after the block, every task, descriptor and child
    process made inside it is gone (within ``seconds``), and nothing logged reports an
    unhandled error. Yields the log watch, for tests that look at the log."""
    gc.collect()
    tasks = set(asyncio.all_tasks())
    before = fds()
    children = set(child_pids())
    loop = asyncio.get_running_loop()
    reported: list[str] = []
    loop.set_exception_handler(lambda _, context: reported.append(str(context.get("message"))))
    watch: LogWatch
    with LogWatch().installed() as watch:
        try:
            yield watch
        finally:

            def new_tasks() -> set[asyncio.Task[object]]:
                return {t for t in asyncio.all_tasks() if t not in tasks and not t.done()}

            def new_fds() -> dict[str, str]:
                now = fds()
                return {fd: target for fd, target in now.items() if before.get(fd) != target}

            def new_children() -> list[int]:
                return [pid for pid in child_pids() if pid not in children]

            await asettle(lambda: not new_tasks() and not new_fds() and not new_children(), seconds)
            loop.set_exception_handler(None)
    problems = []
    if left := new_tasks():
        problems.append("tasks still running: " + "; ".join(repr(t.get_coro()) for t in left))
    if left_fds := new_fds():
        problems.append(f"file descriptors still open: {left_fds}")
    if left_children := new_children():
        problems.append("child processes left: " + ", ".join(describe_process(p) for p in left_children))
    if reported:
        problems.append(f"the event loop reported: {reported}")
    if lines := unhandled(watch.text):
        problems.append(f"unhandled errors logged: {lines}")
    if problems:
        pytest.fail(f"{what} leaked: " + "\n".join(problems))
