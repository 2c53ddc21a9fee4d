"""A model's regular expression, matched in a child process that is killed at a deadline.

Python's ``re`` backtracks: ``(a+)+$`` on forty ``a`` takes longer than anyone waits, and
the match holds the GIL, so run on a worker thread it would freeze the whole server (every
other request, ping and cancellation with it). The child process matches lines it is sent,
one file at a time; past ``deadline`` it is killed and the search is refused with a reason.
Literal queries never come here: an escaped pattern cannot backtrack.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from types import TracebackType

from ...errors import ToolError

__all__ = ["REGEX_DEADLINE_SECONDS", "RegexMatcher"]

REGEX_DEADLINE_SECONDS = 10.0  # for all the matching of one search

# The child: first line {"pattern", "flags"}; then, per file, a JSON list [limit, lines];
# it answers each with a JSON list of [line number, line] that match (at most limit).
_CHILD = """
import json, re, sys
setup = json.loads(sys.stdin.readline())
pattern = re.compile(setup["pattern"], setup["flags"])
for request in sys.stdin:
    limit, lines = json.loads(request)
    hits = []
    for number, line in enumerate(lines, 1):
        if len(hits) >= limit:
            break
        if pattern.search(line):
            hits.append([number, line])
    sys.stdout.write(json.dumps(hits) + "\\n")
    sys.stdout.flush()
"""


class RegexMatcher:
    """One child process for one search: ``matches(lines, limit)`` per file, in order."""

    def __init__(self, pattern: str, flags: int, deadline: float | None = None) -> None:
        self.pattern = pattern
        self.deadline = REGEX_DEADLINE_SECONDS if deadline is None else deadline
        self.started = time.monotonic()
        self.stopped = False
        self.child = subprocess.Popen(
            [sys.executable, "-I", "-c", _CHILD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
        )
        self.timer = threading.Timer(self.deadline, self._stop)
        self.timer.daemon = True
        self.timer.start()
        self._send({"pattern": pattern, "flags": flags})

    def _stop(self) -> None:
        self.stopped = True
        self.child.kill()

    def _send(self, value: object) -> None:
        assert self.child.stdin is not None
        try:
            self.child.stdin.write(json.dumps(value) + "\n")
            self.child.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._failure() from None

    def _failure(self) -> ToolError:
        if self.stopped:
            return ToolError(
                f"the regular expression {self.pattern!r} ran longer than {self.deadline:g} s and was stopped; "
                "simplify it (nested repeats such as (a+)+ or (a|a)* backtrack without end) or search a smaller path"
            )
        return ToolError(f"the regular expression {self.pattern!r} could not be run (its matcher ended)")

    def matches(self, lines: list[str], limit: int) -> list[tuple[int, str]]:
        """The (line number, line) pairs of ``lines`` that match, at most ``limit``."""
        self._send([limit, lines])
        assert self.child.stdout is not None
        answer = self.child.stdout.readline()
        if not answer:
            raise self._failure()
        return [(number, line) for number, line in json.loads(answer)]

    def close(self) -> None:
        self.timer.cancel()
        if self.child.poll() is None:
            self.child.kill()
        self.child.wait()
        for stream in (self.child.stdin, self.child.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

    def __enter__(self) -> RegexMatcher:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
