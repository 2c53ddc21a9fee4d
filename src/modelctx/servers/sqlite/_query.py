"""Read-only queries, a page at a time.

A page ends at ``limit`` rows or when its rows would pass ``max_bytes`` of JSON,
whichever comes first; ``nextCursor`` then names where the next page starts. The
cursor is opaque to clients: the offset and a digest of the statement and its
parameters, so a cursor is refused for any other query. A later page runs the query
again and skips the rows already sent (a database that changed in between may shift
them: SQLite keeps no server-side cursor across calls).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._connections import FencedConnection, problem

__all__ = ["QUERY_OUTPUT_SCHEMA", "Limits", "QueryError", "check_params", "run_query"]

Param = str | int | float | None

#: The integers SQLite stores: signed 64-bit. JSON carries any integer; the sqlite3 module
#: raises OverflowError (not an sqlite3.Error) for one outside this range.
SQLITE_INT_MIN, SQLITE_INT_MAX = -(2**63), 2**63 - 1

QUERY_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "columns": {"type": "array", "items": {"type": "string"}, "description": "the result's column names"},
        "rows": {
            "type": "array",
            "items": {"type": "array"},
            "description": 'each row\'s values in column order; a BLOB is {"base64": "..."}',
        },
        "nextCursor": {"type": "string", "description": "pass it as cursor to get the next page"},
    },
    "required": ["columns", "rows"],
}


@dataclass(frozen=True)
class Limits:
    """How much one call may take: rows a page (at most), JSON bytes a page, seconds a statement."""

    max_rows: int = 1_000
    max_bytes: int = 512 * 1024
    timeout: float = 5.0


class QueryError(Exception):
    """The query was not run, or failed; the message says why and what to do."""


def _digest(sql: str, params: Sequence[Param]) -> str:
    return hashlib.sha256(json.dumps([sql, list(params)]).encode()).hexdigest()[:16]


def make_cursor(offset: int, sql: str, params: Sequence[Param]) -> str:
    raw = json.dumps({"offset": offset, "query": _digest(sql, params)}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def read_cursor(cursor: str, sql: str, params: Sequence[Param]) -> int:
    """The offset ``cursor`` names; ``QueryError`` if it is not one this query gave."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        offset, digest = decoded["offset"], decoded["query"]
    except (binascii.Error, ValueError, TypeError, KeyError):
        raise QueryError("cursor is not one this server gave; leave it out to start from the first page") from None
    if digest != _digest(sql, params) or not isinstance(offset, int) or offset < 0:
        raise QueryError("cursor belongs to another query; send the same sql and params it came with")
    return offset


def check_params(params: Sequence[Param]) -> None:
    """Raise ``QueryError`` naming the first parameter SQLite cannot bind as sent."""
    for index, value in enumerate(params):
        if isinstance(value, int) and not SQLITE_INT_MIN <= value <= SQLITE_INT_MAX:
            raise QueryError(
                f"params[{index}] is an integer outside SQLite's 64-bit range ({SQLITE_INT_MIN} to "
                f"{SQLITE_INT_MAX}); send it as a string, or as a float if an approximation will do"
            )


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode()}
    return value


def run_query(
    path: Path, sql: str, params: Sequence[Param], limit: int, cursor: str | None, limits: Limits
) -> dict[str, Any]:
    """One page of the rows ``sql`` selects (``columns``, ``rows``, maybe ``nextCursor``)."""
    if not 1 <= limit <= limits.max_rows:
        raise QueryError(f"limit must be between 1 and {limits.max_rows}; page through more rows with nextCursor")
    check_params(params)
    offset = read_cursor(cursor, sql, params) if cursor else 0
    with FencedConnection(path, read_only=True, timeout=limits.timeout) as connection:
        try:
            return _page(connection.db.execute(sql, list(params)), sql, params, offset, limit, limits)
        except sqlite3.Error as exc:
            raise QueryError(problem(exc, connection, timeout=limits.timeout, writing=False)) from None


def _page(
    rows: sqlite3.Cursor, sql: str, params: Sequence[Param], offset: int, limit: int, limits: Limits
) -> dict[str, Any]:
    columns = [column[0] for column in rows.description or ()]
    for _ in range(offset):
        if rows.fetchone() is None:
            break
    page: list[list[Any]] = []
    size = 0
    while len(page) < limit:
        row = rows.fetchone()
        if row is None:
            return {"columns": columns, "rows": page}
        values = [_json_value(value) for value in row]
        size += len(json.dumps(values))
        if size > limits.max_bytes:
            if not page:
                raise QueryError(
                    f"row {offset + 1} alone is larger than the {limits.max_bytes} bytes a result may hold; "
                    "select fewer or shorter columns (substr(), length())"
                )
            break
        page.append(values)
    more = rows.fetchone() is not None if len(page) == limit else True
    result: dict[str, Any] = {"columns": columns, "rows": page}
    if more:
        result["nextCursor"] = make_cursor(offset + len(page), sql, params)
    return result
