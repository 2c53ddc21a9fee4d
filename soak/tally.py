"""Counting every outcome of the soak run, and reading the servers' stderr afterwards.

Three buckets: ``ok`` (the expected result of a call, by kind), ``expected`` (an error a
fault was meant to provoke, by name) and ``unexpected`` (anything else: an exception,
a wrong result, a timeout, a 5xx, a traceback in a server's stderr). The run passes only
with zero unexpected outcomes; the first few of each are kept with their text.
"""

from __future__ import annotations

import collections
import re
from pathlib import Path
from typing import Any

#: Lines in a server's stderr that always mean a defect, traceback or not.
_BAD_LINES = re.compile(
    r"Task exception was never retrieved|was destroyed but it is pending|ResourceWarning|"
    r"Unclosed|Exception in ASGI application|Exception in callback"
)
_EXAMPLES_KEPT = 5


class Tally:
    """Counters of outcomes, and a few examples of each unexpected one."""

    def __init__(self) -> None:
        self.ok: collections.Counter[str] = collections.Counter()
        self.expected: collections.Counter[str] = collections.Counter()
        self.unexpected: collections.Counter[str] = collections.Counter()
        self.examples: dict[str, list[str]] = collections.defaultdict(list)
        self.info: collections.Counter[str] = collections.Counter()

    def good(self, kind: str) -> None:
        self.ok[kind] += 1

    def provoked(self, name: str) -> None:
        self.expected[name] += 1

    def bad(self, kind: str, detail: object) -> None:
        self.unexpected[kind] += 1
        if len(self.examples[kind]) < _EXAMPLES_KEPT:
            self.examples[kind].append(str(detail)[:2000])

    def note(self, name: str) -> None:
        """Something worth a count that is neither a result nor an error (a retry)."""
        self.info[name] += 1

    def summary(self) -> dict[str, Any]:
        return {
            "ok": dict(sorted(self.ok.items())),
            "ok_total": sum(self.ok.values()),
            "expected_errors": dict(sorted(self.expected.items())),
            "expected_total": sum(self.expected.values()),
            "unexpected_errors": dict(sorted(self.unexpected.items())),
            "unexpected_total": sum(self.unexpected.values()),
            "unexpected_examples": dict(self.examples),
            "notes": dict(sorted(self.info.items())),
        }


def scan_stderr(path: Path, tally: Tally, marker: str) -> None:
    """Count the tracebacks in one server's stderr file: those of the deliberate crash
    (their text holds ``marker``) are expected, any other is unexpected, as is any line
    naming a leaked task, an unclosed resource or an ASGI failure."""
    if not path.exists():
        return
    text = path.read_text(errors="replace")
    blocks = text.split("Traceback (most recent call last):")
    for block in blocks[1:]:
        # A traceback ends at its exception line: the first line not indented after it.
        end = _traceback_end(block)
        if marker in block[:end]:
            tally.provoked("server_traceback_of_deliberate_crash")
        else:
            tally.bad("server_traceback", f"{path.name}: Traceback (most recent call last):{block[:end]}")
    for line in text.splitlines():
        if _BAD_LINES.search(line):
            tally.bad("server_stderr_defect", f"{path.name}: {line}")


def _traceback_end(block: str) -> int:
    lines = block.split("\n")
    offset = 0
    for index, line in enumerate(lines):
        offset += len(line) + 1
        if index > 0 and line and not line.startswith((" ", "\t")) and not line.startswith("During handling"):
            return offset
    return len(block)
