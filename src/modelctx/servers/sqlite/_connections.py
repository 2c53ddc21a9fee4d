"""Connections to the database, each one fenced for the SQL a model sends through it.

Every user statement runs on a fresh connection (one per call, closed after it) with:

- an authorizer that refuses ``ATTACH``/``DETACH`` (no reaching other files), the
  ``load_extension`` and ``fts3_tokenizer`` functions (no native code, no pointers),
  and for read-only connections every ``PRAGMA`` (a pragma can turn ``query_only`` off or change the file);
- a progress handler that interrupts a statement running past its deadline;
- a length limit on every string and blob (``SQLITE_LIMIT_LENGTH``): ``randomblob(1e9)``
  or ``printf('%.*c', 1e9, 'x')`` fails at once instead of taking a gigabyte and, inside
  one VM instruction, running past the deadline;
- for reads, the file opened ``mode=ro`` *and* ``PRAGMA query_only``: SQLite itself
  refuses any write, whatever the statement says.

Python's ``sqlite3`` runs one statement per ``execute`` and refuses a second one
(``ProgrammingError``), which is how stacked statements are refused.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

__all__ = ["BUSY_TIMEOUT_SECONDS", "MAX_VALUE_BYTES", "FencedConnection", "open_read_only", "problem"]

BUSY_TIMEOUT_SECONDS = 5.0  # waiting for another writer's lock
_PROGRESS_EVERY = 1_000  # SQLite VM instructions between deadline checks
MAX_VALUE_BYTES = 16 * 1024 * 1024  # the largest string or blob a statement may make or read

# What the authorizer refuses, and why (the "why" goes to the model).
_REFUSED_ACTIONS = {
    sqlite3.SQLITE_ATTACH: "ATTACH (VACUUM uses it too) is not allowed on this server: it opens other database files",
    sqlite3.SQLITE_DETACH: "DETACH is not allowed on this server",
}
_REFUSED_FUNCTIONS = {
    "load_extension": "load_extension() is not allowed on this server: it loads native code",
    # Python's SQLite is often built with SQLITE_ENABLE_FTS3_TOKENIZER: one argument leaks a
    # native pointer, two register a tokenizer at any address (code execution).
    "fts3_tokenizer": "fts3_tokenizer() is not allowed on this server: it reads and sets native pointers",
}
_PRAGMA_REFUSED = (
    "PRAGMA {} is not allowed in query: a pragma can change the connection or the file; "
    "list_tables and describe_table show the schema"
)


Authorizer = Callable[[int, str | None, str | None, str | None, str | None], int]


def _authorizer(read_only: bool, refusals: list[str]) -> Authorizer:
    def authorize(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
        if action in _REFUSED_ACTIONS:
            refusals.append(_REFUSED_ACTIONS[action])
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _REFUSED_FUNCTIONS:
            refusals.append(_REFUSED_FUNCTIONS[(arg2 or "").lower()])
            return sqlite3.SQLITE_DENY
        if read_only and action == sqlite3.SQLITE_PRAGMA:
            refusals.append(_PRAGMA_REFUSED.format(arg1))
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    return authorize


class FencedConnection:
    """A connection for one call; ``refusals`` says what the authorizer refused and why."""

    def __init__(self, path: Path, *, read_only: bool, timeout: float) -> None:
        if read_only:
            self.db = open_read_only(path)
        else:
            self.db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
        self.refusals: list[str] = []
        self.deadline = time.monotonic() + timeout
        self.db.set_authorizer(_authorizer(read_only, self.refusals))
        self.db.set_progress_handler(self._past_deadline, _PROGRESS_EVERY)
        self.db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)

    def _past_deadline(self) -> int:
        return 1 if time.monotonic() > self.deadline else 0  # non-zero interrupts the statement

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> FencedConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_read_only(path: Path) -> sqlite3.Connection:
    """``path`` opened read-only (``mode=ro`` and ``PRAGMA query_only``), unfenced: for
    the server's own statements (the schema), never for a model's."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    db = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
    db.execute("PRAGMA query_only=ON")
    return db


def problem(exc: sqlite3.Error, connection: FencedConnection, *, timeout: float, writing: bool) -> str:
    """What went wrong with a statement, in words a model can act on."""
    text = str(exc)
    if isinstance(exc, sqlite3.ProgrammingError) and "one statement" in text:
        return "give exactly one SQL statement per call (more than one was found); send the others in their own calls"
    if connection.refusals:
        return connection.refusals[0]
    if text == "interrupted":
        return (
            f"the statement ran longer than {timeout:g} s and was stopped; narrow it "
            "(a WHERE clause, an index, fewer joins) or raise --timeout"
        )
    if "too big" in text:
        return (
            f"the statement makes or reads a string or blob over the {MAX_VALUE_BYTES} bytes this server "
            "allows; work on less of it (substr(), length(), smaller sizes)"
        )
    if not writing and "readonly" in text.replace("-", "").replace(" ", ""):
        return "query only reads; to change the database use the execute tool (the user confirms each statement)"
    return f"SQLite refused the statement: {text}"
